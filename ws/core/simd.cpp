// SPDX-License-Identifier: BSD-3-Clause
// The CPU's SIMD level, the cap on it, and the modules' hooks that pick kernels for it.
#include "ws/core/simd.hpp"

#include <array>
#include <bit>
#include <mutex>
#include <vector>

namespace ws {
namespace {

SimdLevel detect() noexcept {
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the kernel saves the vector state (XCR0), so a
  // feature the OS has not enabled counts as absent.
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                  __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl");
  if (v4) return SimdLevel::avx512;
  if (v3) return SimdLevel::avx2;
  return SimdLevel::sse;
}

struct State {
  std::mutex mutex;
  SimdLevel cpu = detect();
  SimdLevel current = cpu;
  std::vector<SimdHook> hooks;
};

// Function-local: hooks register from other translation units' static initialisers.
State& state() {
  static State s;
  return s;
}

// What a CPU below `level` lacks, for the refusal.
std::string_view missing(SimdLevel level) noexcept {
  switch (level) {
    case SimdLevel::avx512:
      return "AVX-512 F, BW, CD, DQ and VL (x86-64-v4)";
    case SimdLevel::avx2:
      return "AVX2, BMI1, BMI2, FMA, F16C and MOVBE (x86-64-v3)";
    default:
      return "SSE4.2 and POPCNT (x86-64-v2)";
  }
}

}  // namespace

unsigned simd_bits(SimdLevel level) noexcept { return 64u << static_cast<unsigned>(level); }

std::string_view simd_name(SimdLevel level) noexcept {
  static constexpr std::array<std::string_view, simd_level_count> names = {"scalar", "sse4.2", "avx2", "avx512"};
  return names[static_cast<std::size_t>(level)];
}

SimdLevel cpu_simd_level() noexcept { return state().cpu; }

SimdLevel simd_level() noexcept {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.current;
}

Result<void> set_simd_level(SimdLevel level) {
  State& s = state();
  if (level > s.cpu)
    return fail("SIMD level {} ({} bits) is not available: this CPU's widest is {} ({} bits); it lacks {}",
                simd_name(level), simd_bits(level), simd_name(s.cpu), simd_bits(s.cpu), missing(level));
  std::vector<SimdHook> hooks;
  {
    std::lock_guard lock(s.mutex);
    s.current = level;
    hooks = s.hooks;
  }
  for (SimdHook h : hooks) h(level);
  return {};
}

Result<void> set_max_simd_bitwidth(unsigned bits) {
  // DPDK takes a power of two from 64 (RTE_VECT_SIMD_DISABLED) to 32768 (RTE_VECT_SIMD_MAX).
  if (bits < 64 || bits > 32768 || (bits & (bits - 1)) != 0)
    return fail(
        "--force-max-simd-bitwidth {}: expected 64, 128, 256 or 512 (a power of two from 64 to 32768; "
        "above 512 means no cap)",
        bits);
  if (bits > 512) return set_simd_level(cpu_simd_level());
  const auto level = static_cast<SimdLevel>(std::countr_zero(bits) - 6);
  if (auto ok = set_simd_level(level); !ok)
    return with_context(ok.error(), fmt::format("--force-max-simd-bitwidth {}", bits));
  return {};
}

void on_simd_level(SimdHook hook) noexcept {
  State& s = state();
  SimdLevel level;
  {
    std::lock_guard lock(s.mutex);
    s.hooks.push_back(hook);
    level = s.current;
  }
  hook(level);
}

}  // namespace ws
