// SPDX-License-Identifier: BSD-3-Clause
// CPU facts the hot path relies on: cache-line size, prefetch, the time-stamp counter.
#pragma once
#include <x86intrin.h>

#include <cstdint>

namespace ws {

/// Cache line size of every x86-64 CPU we run on; Mbuf and queue layouts are built on it.
inline constexpr std::size_t cache_line_bytes = 64;

/// Hint that `p` will be read soon; into all cache levels.
inline void prefetch0(const void* p) noexcept { __builtin_prefetch(p, 0, 3); }
/// Hint that `p` will be written soon.
inline void prefetch_w(const void* p) noexcept { __builtin_prefetch(p, 1, 3); }

/// Read the TSC. Invariant on every CPU we run on (constant_tsc, nonstop_tsc).
inline std::uint64_t rdtsc() noexcept { return __rdtsc(); }

/// Spin-wait hint for busy loops.
inline void cpu_pause() noexcept { _mm_pause(); }

/// TSC ticks per second, calibrated once against the monotonic clock (about 50 ms on first call).
/// Thread-safe.
std::uint64_t tsc_hz();

/// Runs a full memory barrier on every running thread of the process (membarrier(2), private
/// expedited): the control path's half of an asymmetric fence, whose hot-path half is a compiler
/// barrier (BurstGate, vhost's RingSlot). register_heavy_fence() registers the process once and is
/// false when the kernel cannot; heavy_fence() only after it returned true.
bool register_heavy_fence() noexcept;
/// A full memory barrier on every running thread of the process (after register_heavy_fence()).
void heavy_fence() noexcept;

}  // namespace ws
