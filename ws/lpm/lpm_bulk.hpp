// SPDX-License-Identifier: BSD-3-Clause
// Lpm4's bulk lookup functions (private): portable, AVX2 and AVX-512 ones, picked at run time.
#pragma once
#include "ws/core/simd.hpp"
#include "ws/lpm/lpm.hpp"

namespace ws {

struct LpmBulk {
  // The widest version `level` allows (ws/core/simd.hpp).
  static Lpm4::BulkFn pick(SimdLevel level) noexcept;
  // Portable: every first-level load of a chunk before any second-level one.
  static void portable(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out, std::size_t n) noexcept;
  // AVX2: eight first-level loads per gather, a masked gather for the lanes that need a group.
  static void avx2(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out, std::size_t n) noexcept;
  // AVX-512: sixteen at a time, as avx2.
  static void avx512(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out, std::size_t n) noexcept;
};

}  // namespace ws
