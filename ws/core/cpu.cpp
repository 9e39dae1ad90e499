// SPDX-License-Identifier: BSD-3-Clause
// TSC calibration against CLOCK_MONOTONIC_RAW; the process-wide fence (membarrier(2)).
#include "ws/core/cpu.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

namespace ws {
namespace {

std::uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t calibrate() {
  const std::uint64_t ns0 = monotonic_ns();
  const std::uint64_t t0 = rdtsc();
  timespec pause{0, 50'000'000};
  nanosleep(&pause, nullptr);
  const std::uint64_t ns1 = monotonic_ns();
  const std::uint64_t t1 = rdtsc();
  const double hz = static_cast<double>(t1 - t0) * 1e9 / static_cast<double>(ns1 - ns0);
  // Round to 1 MHz as DPDK does: the rest is calibration noise.
  return static_cast<std::uint64_t>(hz / 1e6 + 0.5) * 1'000'000ULL;
}

}  // namespace

std::uint64_t tsc_hz() {
  static const std::uint64_t hz = calibrate();
  return hz;
}

bool register_heavy_fence() noexcept {
  static const bool registered = [] {
    const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return registered;
}

void heavy_fence() noexcept {
  if (::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) std::abort();  // registered above
}

}  // namespace ws
