// The part of glibc_2_28.cpp that only an executable needs: its entry point.
//
// crt1.o of glibc 2.34+ calls __libc_start_main@GLIBC_2.34 and passes no
// constructor runner, since that version runs the program's constructors
// itself. The old version (GLIBC_2.2.5) runs only what it is given as
// `init` (crt1.o of glibc < 2.34 passed __libc_csu_init), so this wrapper
// gives it one that runs .init_array, as the new version does. DT_INIT and
// .preinit_array are the dynamic loader's in both.
#include "glibc_2_28.hpp"

extern "C" {

using MainFunction = int (*)(int, char**, char**);
using VoidFunction = void (*)();

int old___libc_start_main(MainFunction, int, char**, MainFunction, VoidFunction, VoidFunction,
                          void*);
FLASHGEN_OLD_VERSION(__libc_start_main, "2.2.5");

// Bounds of the executable's .init_array, defined by the linker.
using Constructor = void (*)(int, char**, char**);
extern Constructor __init_array_start[] __attribute__((visibility("hidden")));
extern Constructor __init_array_end[] __attribute__((visibility("hidden")));

static int run_constructors(int argc, char** argv, char** environment) {
  for (Constructor* constructor = __init_array_start; constructor != __init_array_end;
       ++constructor)
    (*constructor)(argc, argv, environment);
  return 0;
}

int __wrap___libc_start_main(MainFunction main, int argc, char** argv, MainFunction /*init*/,
                             VoidFunction fini, VoidFunction rtld_fini, void* stack_end) {
  return old___libc_start_main(main, argc, argv, &run_constructors, fini, rtld_fini, stack_end);
}

}  // extern "C"
