#include "cpu/cpu_probes.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace flashgen::cpu {

bool cpu_has_bf16_dot() {
  unsigned eax, ebx, ecx, edx;
  // CPUID.(EAX=7, ECX=1):EAX bit 5 = AVX512_BF16.
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax >> 5 & 1);
}

bool cpu_is_amd() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "AuthenticAMD") == 0;
}

bool amx_usable() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  if ((edx & (kAmxBf16 | kAmxTile)) != (kAmxBf16 | kAmxTile)) return false;
  constexpr unsigned kOsXsave = 1u << 27;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & kOsXsave)) return false;
  unsigned xcr0_low, xcr0_high;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  constexpr unsigned kTileConfigAndData = 3u << 17;
  if ((xcr0_low & kTileConfigAndData) != kTileConfigAndData) return false;
  constexpr long kArchRequestComponentPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileDataComponent = 18;                   // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kArchRequestComponentPermission, kTileDataComponent) == 0;
}

}  // namespace flashgen::cpu

#else

namespace flashgen::cpu {
bool cpu_has_bf16_dot() { return false; }
bool cpu_is_amd() { return false; }
bool amx_usable() { return false; }
}  // namespace flashgen::cpu

#endif
