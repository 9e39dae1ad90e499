// SPDX-License-Identifier: BSD-3-Clause
// Bulk lookups. A burst's lookups are independent; what limits them is the latency of the
// first-level loads (64 MiB of table: most miss the caches for random addresses). A gather
// issues eight or sixteen of them at once, before any is used, and the rare second-level loads
// follow in one masked gather instead of a branch per address that would discard the loads
// after it when mispredicted. When every address of a gather falls in one /24, one load does.
#include "ws/lpm/lpm_bulk.hpp"

#include <immintrin.h>

namespace ws {

void LpmBulk::portable(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out, std::size_t n) noexcept {
  constexpr std::size_t chunk = 32;
  const std::uint32_t* tbl24 = t.tbl24_;
  const std::uint32_t* tbl8 = t.tbl8_;
  for (std::size_t base = 0; base < n; base += chunk) {
    const std::size_t m = n - base < chunk ? n - base : chunk;
    std::uint32_t ext = 0;  // OR of every entry: one test for the whole chunk
    for (std::size_t i = 0; i < m; ++i) {
      out[base + i] = tbl24[addrs[base + i] >> 8];
      ext |= out[base + i];
    }
    if (ext & Lpm4::ext_flag) {
      for (std::size_t i = 0; i < m; ++i) {
        const std::uint32_t e = out[base + i];
        if (e & Lpm4::ext_flag) out[base + i] = tbl8[((e & Lpm4::value_mask) << 8) | (addrs[base + i] & 0xff)];
      }
    }
    for (std::size_t i = 0; i < m; ++i) out[base + i] &= Lpm4::value_mask;
  }
}

[[gnu::target("avx2")]] void LpmBulk::avx2(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out,
                                           std::size_t n) noexcept {
  const auto* tbl24 = reinterpret_cast<const int*>(t.tbl24_);
  const auto* tbl8 = reinterpret_cast<const int*>(t.tbl8_);
  const __m256i value_mask = _mm256_set1_epi32(static_cast<int>(Lpm4::value_mask));
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(addrs + i));
    const __m256i index24 = _mm256_srli_epi32(a, 8);
    const std::uint32_t first = addrs[i] >> 8;
    __m256i e;
    // Eight addresses in one /24: one load serves them all (see avx512).
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi32(index24, _mm256_set1_epi32(static_cast<int>(first)))) == -1)
      e = _mm256_set1_epi32(static_cast<int>(t.tbl24_[first]));
    else
      e = _mm256_i32gather_epi32(tbl24, index24, 4);
    // ext_flag is the sign bit: the lanes whose entry points to a group.
    if (_mm256_movemask_ps(_mm256_castsi256_ps(e)) != 0) [[unlikely]] {
      const __m256i index =
          _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(e, value_mask), 8), _mm256_and_si256(a, low_byte));
      e = _mm256_mask_i32gather_epi32(e, tbl8, index, e, 4);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_and_si256(e, value_mask));
  }
  if (i < n) portable(t, addrs + i, out + i, n - i);
}

// GCC 12's AVX-512 gather intrinsics trip this on their own "undefined" source operand.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifndef __clang__
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
[[gnu::target("avx512f")]] void LpmBulk::avx512(const Lpm4& t, const std::uint32_t* addrs, std::uint32_t* out,
                                                std::size_t n) noexcept {
  const auto* tbl24 = reinterpret_cast<const int*>(t.tbl24_);
  const auto* tbl8 = reinterpret_cast<const int*>(t.tbl8_);
  const __m512i value_mask = _mm512_set1_epi32(static_cast<int>(Lpm4::value_mask));
  const __m512i low_byte = _mm512_set1_epi32(0xff);
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i a = _mm512_loadu_si512(addrs + i);
    const __m512i index24 = _mm512_srli_epi32(a, 8);
    __m512i e;
    // Sixteen addresses in one /24 (a burst of one flow, sequential addresses): one load serves
    // them all, where a gather would load the same entry sixteen times.
    const std::uint32_t first = addrs[i] >> 8;
    if (_mm512_cmpeq_epi32_mask(index24, _mm512_set1_epi32(static_cast<int>(first))) == 0xffff)
      e = _mm512_set1_epi32(static_cast<int>(t.tbl24_[first]));
    else
      e = _mm512_i32gather_epi32(index24, tbl24, 4);
    const __mmask16 ext = _mm512_cmplt_epi32_mask(e, _mm512_setzero_si512());  // ext_flag: the sign bit
    if (ext != 0) [[unlikely]] {
      const __m512i index =
          _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(e, value_mask), 8), _mm512_and_si512(a, low_byte));
      e = _mm512_mask_i32gather_epi32(e, ext, index, tbl8, 4);
    }
    _mm512_storeu_si512(out + i, _mm512_and_si512(e, value_mask));
  }
  if (i < n) portable(t, addrs + i, out + i, n - i);
}

#pragma GCC diagnostic pop

Lpm4::BulkFn LpmBulk::pick(SimdLevel level) noexcept {
  if (level >= SimdLevel::avx512) return &LpmBulk::avx512;
  if (level >= SimdLevel::avx2) return &LpmBulk::avx2;
  return &LpmBulk::portable;
}

}  // namespace ws
