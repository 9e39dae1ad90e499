// TSC calibration against CLOCK_MONOTONIC_RAW.
#include "ws/core/cpu.hpp"

#include <time.h>

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

}  // namespace ws
