// Lets a wheel built on a newer glibc (Debian 12: 2.36) run on glibc 2.28,
// the floor of manylinux_2_28, with no container of that age at hand.
//
// The linker binds each call to the newest version of a glibc symbol it sees.
// Calls that glibc 2.29-2.38 versioned anew are redirected here by
// -Wl,--wrap=<symbol> (cmake/glibc_2_28.cmake), for our objects and the
// static libstdc++ and libgcc alike, and go on to:
//   - the old version of the same function, which every glibc since still
//     exports (pthread_*, dl*: 2.34 moved them from libpthread/libdl into
//     libc; exp/log/log2: 2.29 dropped their error-handling wrappers;
//     stat & co.: before 2.33 they were __xstat & co.; strtol & co. and
//     sscanf, which 2.38's headers call as their C23 __isoc23_ versions
//     wherever _GNU_SOURCE is defined, as g++ always does),
//   - or, for what glibc 2.28 lacks, an equivalent built from what it has
//     (_dl_find_object, 2.35: from dl_iterate_phdr; arc4random, 2.36: from
//     getrandom; __libc_single_threaded, 2.32: "not known to be single-
//     threaded", which only costs libstdc++ an atomic operation).
// x86-64 only: the old versions named here are x86-64's (GLIBC_2.2.5).
#include "glibc_2_28.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cstdarg>
#include <cstddef>
#include <cstdint>

extern "C" {

// _STAT_VER of the pre-2.33 x86-64 stat interface.
constexpr int kStatVersion = 1;

int old___xstat(int, const char*, struct stat*);
int old___lxstat(int, const char*, struct stat*);
int old___fxstat64(int, int, struct stat64*);
FLASHGEN_OLD_VERSION(__xstat, "2.2.5");
FLASHGEN_OLD_VERSION(__lxstat, "2.2.5");
FLASHGEN_OLD_VERSION(__fxstat64, "2.2.5");
int __wrap_stat(const char* path, struct stat* buffer) {
  return old___xstat(kStatVersion, path, buffer);
}
int __wrap_lstat(const char* path, struct stat* buffer) {
  return old___lxstat(kStatVersion, path, buffer);
}
int __wrap_fstat64(int fd, struct stat64* buffer) {
  return old___fxstat64(kStatVersion, fd, buffer);
}

double old_exp(double);
double old_log(double);
double old_log2(double);
FLASHGEN_OLD_VERSION(exp, "2.2.5");
FLASHGEN_OLD_VERSION(log, "2.2.5");
FLASHGEN_OLD_VERSION(log2, "2.2.5");
double __wrap_exp(double x) { return old_exp(x); }
double __wrap_log(double x) { return old_log(x); }
double __wrap_log2(double x) { return old_log2(x); }

// C23's versions differ only in also reading "0b" binary literals, which
// nothing here writes.
long old_strtol(const char*, char**, int);
unsigned long old_strtoul(const char*, char**, int);
long long old_strtoll(const char*, char**, int);
unsigned long long old_strtoull(const char*, char**, int);
int old_vsscanf(const char*, const char*, va_list);
FLASHGEN_OLD_VERSION(strtol, "2.2.5");
FLASHGEN_OLD_VERSION(strtoul, "2.2.5");
FLASHGEN_OLD_VERSION(strtoll, "2.2.5");
FLASHGEN_OLD_VERSION(strtoull, "2.2.5");
FLASHGEN_OLD_VERSION(vsscanf, "2.2.5");
long __wrap___isoc23_strtol(const char* text, char** end, int base) {
  return old_strtol(text, end, base);
}
unsigned long __wrap___isoc23_strtoul(const char* text, char** end, int base) {
  return old_strtoul(text, end, base);
}
long long __wrap___isoc23_strtoll(const char* text, char** end, int base) {
  return old_strtoll(text, end, base);
}
unsigned long long __wrap___isoc23_strtoull(const char* text, char** end, int base) {
  return old_strtoull(text, end, base);
}
int __wrap___isoc23_vsscanf(const char* text, const char* format, va_list arguments) {
  return old_vsscanf(text, format, arguments);
}
int __wrap___isoc23_sscanf(const char* text, const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  const int read = old_vsscanf(text, format, arguments);
  va_end(arguments);
  return read;
}

int old_pthread_create(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
int old_pthread_detach(pthread_t);
int old_pthread_join(pthread_t, void**);
int old_pthread_once(pthread_once_t*, void (*)());
int old_pthread_key_create(pthread_key_t*, void (*)(void*));
int old___pthread_key_create(pthread_key_t*, void (*)(void*));
int old_pthread_key_delete(pthread_key_t);
void* old_pthread_getspecific(pthread_key_t);
int old_pthread_setspecific(pthread_key_t, const void*);
FLASHGEN_OLD_VERSION(pthread_create, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_detach, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_join, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_once, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_key_create, "2.2.5");
FLASHGEN_OLD_VERSION(__pthread_key_create, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_key_delete, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_getspecific, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_setspecific, "2.2.5");
int __wrap_pthread_create(pthread_t* thread, const pthread_attr_t* attributes,
                          void* (*start)(void*), void* argument) {
  return old_pthread_create(thread, attributes, start, argument);
}
int __wrap_pthread_detach(pthread_t thread) { return old_pthread_detach(thread); }
int __wrap_pthread_join(pthread_t thread, void** result) {
  return old_pthread_join(thread, result);
}
int __wrap_pthread_once(pthread_once_t* once, void (*function)()) {
  return old_pthread_once(once, function);
}
int __wrap_pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return old_pthread_key_create(key, destructor);
}
int __wrap___pthread_key_create(pthread_key_t* key, void (*destructor)(void*)) {
  return old___pthread_key_create(key, destructor);
}
int __wrap_pthread_key_delete(pthread_key_t key) { return old_pthread_key_delete(key); }
void* __wrap_pthread_getspecific(pthread_key_t key) { return old_pthread_getspecific(key); }
int __wrap_pthread_setspecific(pthread_key_t key, const void* value) {
  return old_pthread_setspecific(key, value);
}
// The static libstdc++'s floating-point std::from_chars takes a locale lock.
int old_pthread_rwlock_rdlock(pthread_rwlock_t*);
int old_pthread_rwlock_wrlock(pthread_rwlock_t*);
int old_pthread_rwlock_unlock(pthread_rwlock_t*);
FLASHGEN_OLD_VERSION(pthread_rwlock_rdlock, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_rwlock_wrlock, "2.2.5");
FLASHGEN_OLD_VERSION(pthread_rwlock_unlock, "2.2.5");
int __wrap_pthread_rwlock_rdlock(pthread_rwlock_t* lock) { return old_pthread_rwlock_rdlock(lock); }
int __wrap_pthread_rwlock_wrlock(pthread_rwlock_t* lock) { return old_pthread_rwlock_wrlock(lock); }
int __wrap_pthread_rwlock_unlock(pthread_rwlock_t* lock) { return old_pthread_rwlock_unlock(lock); }

void* old_dlopen(const char*, int);
void* old_dlsym(void*, const char*);
char* old_dlerror();
int old_dladdr1(const void*, Dl_info*, void**, int);
FLASHGEN_OLD_VERSION(dlopen, "2.2.5");
FLASHGEN_OLD_VERSION(dlsym, "2.2.5");
FLASHGEN_OLD_VERSION(dlerror, "2.2.5");
FLASHGEN_OLD_VERSION(dladdr1, "2.3.3");
void* __wrap_dlopen(const char* file, int mode) { return old_dlopen(file, mode); }
void* __wrap_dlsym(void* handle, const char* name) { return old_dlsym(handle, name); }
char* __wrap_dlerror() { return old_dlerror(); }
int __wrap_dladdr1(const void* address, Dl_info* info, void** extra, int flags) {
  return old_dladdr1(address, info, extra, flags);
}

char __wrap___libc_single_threaded = 0;

std::uint32_t __wrap_arc4random() {
  std::uint32_t value = 0;
  while (getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
  }
  return value;
}

// The unwinder (libgcc) asks which loaded object holds a code address and
// where that object's .eh_frame_hdr is (PT_GNU_EH_FRAME).
namespace {
struct FindObject {
  std::uintptr_t address;
  dl_find_object* result;
  bool found;
};

int find_object_in(dl_phdr_info* info, std::size_t, void* data) {
  auto* search = static_cast<FindObject*>(data);
  std::uintptr_t low = UINTPTR_MAX, high = 0;
  void* eh_frame = nullptr;
  bool inside = false;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    const std::uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD) {
      const std::uintptr_t end = start + segment.p_memsz;
      low = start < low ? start : low;
      high = end > high ? end : high;
      inside = inside || (search->address >= start && search->address < end);
    } else if (segment.p_type == PT_GNU_EH_FRAME) {
      eh_frame = reinterpret_cast<void*>(start);
    }
  }
  if (!inside) return 0;
  *search->result = dl_find_object{};
  search->result->dlfo_map_start = reinterpret_cast<void*>(low);
  search->result->dlfo_map_end = reinterpret_cast<void*>(high);
  search->result->dlfo_eh_frame = eh_frame;
  search->found = true;
  return 1;
}
}  // namespace

int __wrap__dl_find_object(void* address, dl_find_object* result) {
  FindObject search{reinterpret_cast<std::uintptr_t>(address), result, false};
  dl_iterate_phdr(&find_object_in, &search);
  return search.found ? 0 : -1;
}

}  // extern "C"
