// SPDX-License-Identifier: BSD-3-Clause
// Inline copy of small arrays of trivially copyable elements (pointer bursts): chunks of four
// (one 32-byte move for pointers) then the rest. For the sizes bursts have (8..512) it beats a
// call to memcpy, and same-width stores keep store-to-load forwarding working for readers.
#pragma once
#include <cstdint>
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

}  // namespace ws
