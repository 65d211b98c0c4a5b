# flashgen_glibc_2_28(<target>): the target runs on glibc 2.28 and newer
# (manylinux_2_28) though built on a newer glibc. Calls that glibc 2.29-2.38
# versioned anew are redirected with --wrap to packaging/glibc_2_28.cpp,
# which binds them to their old versions or builds them from older calls.
# For the wheel only (pyproject.toml sets FLASHGEN_GLIBC_2_28): a program
# built for this machine alone needs none of it. x86-64 Linux with glibc.
set(FLASHGEN_GLIBC_2_28_WRAPPED
    stat lstat fstat64 exp log log2
    pthread_create pthread_detach pthread_join pthread_once pthread_key_create
    __pthread_key_create pthread_key_delete pthread_getspecific pthread_setspecific
    pthread_rwlock_rdlock pthread_rwlock_wrlock pthread_rwlock_unlock
    dlopen dlsym dlerror dladdr1 __libc_single_threaded arc4random _dl_find_object
    __isoc23_strtol __isoc23_strtoul __isoc23_strtoll __isoc23_strtoull
    __isoc23_sscanf __isoc23_vsscanf)

function(flashgen_glibc_2_28 target)
  if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
    message(FATAL_ERROR "FLASHGEN_GLIBC_2_28 knows x86-64's glibc symbol versions only")
  endif()
  set(wrapped ${FLASHGEN_GLIBC_2_28_WRAPPED})
  target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/packaging/glibc_2_28.cpp)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/packaging/glibc_2_28_executable.cpp)
    list(APPEND wrapped __libc_start_main)
  endif()
  list(TRANSFORM wrapped PREPEND "LINKER:--wrap=")
  target_link_options(${target} PRIVATE ${wrapped})
  # Before glibc 2.34 the pthread and dl functions live in libpthread.so.0 and
  # libdl.so.2: depend on them by name, so an old system loads them.
  target_link_libraries(${target} PRIVATE -Wl,--no-as-needed -l:libpthread.so.0 -l:libdl.so.2
                                          -Wl,--as-needed)
endfunction()
