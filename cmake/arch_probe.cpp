// SPDX-License-Identifier: BSD-3-Clause
// Compiled at configure time with the build's real flags (cmake/arch_check.cmake): the
// baseline, and the AVX2 and AVX-512 attributes the dispatched functions carry. A flag that
// makes the compiler reject this (an -march or -m flag whose feature set the compiler warns
// about, with -Werror) fails the configuration, naming the flag, instead of the first source.
#include <immintrin.h>

#include "ws/core/simd.hpp"

int baseline(const int* p) { return p[0] + p[1]; }

[[WS_TARGET_AVX2]] int avx2(const void* p) {
  return _mm256_movemask_epi8(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
}

[[WS_TARGET_AVX512]] int avx512(const void* p) {
  return static_cast<int>(_mm512_cmpeq_epi32_mask(_mm512_loadu_si512(p), _mm512_setzero_si512()));
}
