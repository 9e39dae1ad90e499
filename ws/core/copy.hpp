// SPDX-License-Identifier: BSD-3-Clause
// Inline copies: small arrays of trivially copyable elements (pointer bursts), in chunks of four
// (one 32-byte move for pointers) then the rest. For the sizes bursts have (8..512) it beats a
// call to memcpy, and same-width stores keep store-to-load forwarding working for readers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace ws {

/// Copies n elements from src to dst (which must not overlap), inline.
template <class T>
  requires std::is_trivially_copyable_v<T>
inline void copy_burst(T* dst, const T* src, std::uint32_t n) noexcept {
  std::uint32_t i = 0;
  for (; i + 4 <= n; i += 4) __builtin_memcpy(dst + i, src + i, 4 * sizeof(T));
  for (; i < n; ++i) dst[i] = src[i];
}

/// Copies n bytes, W <= n <= 2W, as two overlapping W-byte moves (inlined loads and stores).
template <std::size_t W>
inline void copy_overlapping(std::byte* d, const std::byte* s, std::size_t n) noexcept {
  std::byte a[W], b[W];
  __builtin_memcpy(a, s, W);
  __builtin_memcpy(b, s + n - W, W);
  __builtin_memcpy(d, a, W);
  __builtin_memcpy(d + n - W, b, W);
}

/// memcpy for the data path (packet bytes): up to 128 B inline, longer through memcpy. 64 B
/// frames never call libc (a call through the PLT cost more than the copy).
inline void copy_bytes(void* dst, const void* src, std::size_t n) noexcept {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  if (n > 128) {
    std::memcpy(d, s, n);
  } else if (n > 64) {
    copy_overlapping<64>(d, s, n);
  } else if (n > 32) {
    copy_overlapping<32>(d, s, n);
  } else if (n > 16) {
    copy_overlapping<16>(d, s, n);
  } else if (n >= 8) {
    copy_overlapping<8>(d, s, n);
  } else if (n >= 4) {
    copy_overlapping<4>(d, s, n);
  } else {
    for (std::size_t i = 0; i < n; ++i) d[i] = s[i];
  }
}

}  // namespace ws
