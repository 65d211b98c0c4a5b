// What this x86-64 CPU and OS offer the tile kernels beyond what
// __builtin_cpu_supports reports. Compiled for the build's baseline, so
// that asking never runs an instruction the CPU may lack. False elsewhere.
#pragma once

namespace flashgen::cpu {

// AVX512_BF16 (vdpbf16ps) in CPUID.
bool cpu_has_bf16_dot();
// The vendor string is AMD's.
bool cpu_is_amd();
// AMX-TILE and AMX-BF16 in CPUID, the tile state enabled in XCR0, and the
// Linux permission to use it (arch_prctl, kernel 5.16+), asked on each call.
bool amx_usable();

}  // namespace flashgen::cpu
