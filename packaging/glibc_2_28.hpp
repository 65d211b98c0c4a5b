// Shared by the glibc 2.28 compatibility sources (glibc_2_28.cpp).
#pragma once

// Declares `old_<name>` as the GLIBC_<version> version of `name`: calls to
// old_<name> bind to that version, whatever newer one the linker sees.
#define FLASHGEN_OLD_VERSION(name, version) \
  __asm__(".symver old_" #name "," #name "@GLIBC_" version)
