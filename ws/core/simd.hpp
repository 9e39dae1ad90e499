// SPDX-License-Identifier: BSD-3-Clause
// SIMD levels chosen at run time. The library is compiled for one baseline (x86-64-v2: SSE4.2,
// POPCNT, as DPDK's generic build) so that one binary runs on every x86-64 server and in QEMU's
// TCG guests; the code that gains from wider vectors is compiled again for AVX2 and AVX-512 (the
// WS_TARGET_* attributes) and picked once, from CPUID, when it is set up: a port's burst
// function when the port starts, a forwarding loop when forwarding starts, a checksum or lookup
// kernel when the level is set. Nothing tests the level per packet.
//
// DPDK's EAL option --force-max-simd-bitwidth (rte_vect_set_max_simd_bitwidth) caps the level.
#pragma once
#include <cstdint>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws {

/// The instruction sets a dispatched function is built for, narrowest first. The numbers are the
/// vector widths DPDK's --force-max-simd-bitwidth names.
enum class SimdLevel : std::uint8_t {
  scalar,  ///< 64 bits: no explicit vector code (the baseline build, scalar kernels)
  sse,     ///< 128 bits: the baseline build, x86-64-v2 (SSE4.2, POPCNT)
  avx2,    ///< 256 bits: x86-64-v3 (AVX2, BMI1/2, FMA, LZCNT, MOVBE)
  avx512,  ///< 512 bits: x86-64-v4 (AVX-512 F, BW, CD, DQ, VL)
};
/// How many levels there are (tables indexed by SimdLevel).
inline constexpr int simd_level_count = 4;

/// 64, 128, 256 or 512.
unsigned simd_bits(SimdLevel level) noexcept;
/// "scalar", "sse4.2", "avx2", "avx512".
std::string_view simd_name(SimdLevel level) noexcept;
/// The widest level this CPU and its kernel run (CPUID, and XCR0 for the vector state).
SimdLevel cpu_simd_level() noexcept;
/// The level dispatch uses now: the CPU's unless capped. Read on the control path only.
SimdLevel simd_level() noexcept;

/// DPDK's --force-max-simd-bitwidth: 64, 128, 256 or 512 picks that level; a larger power of two
/// (up to 32768, as DPDK takes) leaves the CPU's. A level this CPU lacks is refused, naming what
/// it lacks, rather than run as a narrower one. Control path: call before ports start (a started
/// port keeps the burst functions it started with).
Result<void> set_max_simd_bitwidth(unsigned bits);
/// The same by level (tests run every dispatched function at every level the CPU has).
Result<void> set_simd_level(SimdLevel level);

/// A module's choice of kernels for a level (raw checksum sums, ...). Called once when it is
/// registered and again whenever the level changes, on the control thread.
using SimdHook = void (*)(SimdLevel level) noexcept;
/// Registers `hook` (at static initialisation is fine) and calls it with the current level.
void on_simd_level(SimdHook hook) noexcept;

}  // namespace ws

// Function attributes for the AVX2 and AVX-512 builds of a function. They name instruction sets,
// not an -march, so that GCC and clang inline the baseline helpers such a function calls (a
// callee may be inlined into a caller whose instruction sets include its own, and only with the
// same -march). x86-64-v3 and x86-64-v4 as the psABI defines them.
#define WS_TARGET_AVX2 gnu::target("avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,popcnt,sse4.2,xsave")
#define WS_TARGET_AVX512                                                             \
  gnu::target(                                                                       \
      "avx,avx2,bmi,bmi2,f16c,fma,lzcnt,movbe,popcnt,sse4.2,xsave,avx512f,avx512bw," \
      "avx512cd,avx512dq,avx512vl")
