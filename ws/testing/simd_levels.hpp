// SPDX-License-Identifier: BSD-3-Clause
// Tests of dispatched functions run them at every SIMD level this CPU has and compare each
// result with the baseline's; a level above the CPU's is never run (it cannot be, honestly).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "ws/core/simd.hpp"

namespace ws::testing {

/// scalar, sse, and up to the CPU's widest.
inline std::vector<SimdLevel> cpu_simd_levels() {
  std::vector<SimdLevel> out;
  for (int l = 0; l <= static_cast<int>(cpu_simd_level()); ++l) out.push_back(static_cast<SimdLevel>(l));
  return out;
}

/// Sets the dispatch level for a scope; puts the previous one back at its end.
class ScopedSimdLevel {
 public:
  explicit ScopedSimdLevel(SimdLevel level) : previous_(simd_level()) {
    auto ok = set_simd_level(level);
    EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
  }
  ~ScopedSimdLevel() { (void)set_simd_level(previous_); }
  ScopedSimdLevel(const ScopedSimdLevel&) = delete;
  ScopedSimdLevel& operator=(const ScopedSimdLevel&) = delete;

 private:
  SimdLevel previous_;
};

}  // namespace ws::testing
