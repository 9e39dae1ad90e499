// SPDX-License-Identifier: BSD-3-Clause
// A small seeded generator (splitmix64) for tests and benchmarks that build random rule sets and
// packets: the same seed gives the same sequence on every machine, unlike std:: distributions.
#pragma once
#include <cstdint>

namespace ws::testing {

struct Rng {
  std::uint64_t s;
  std::uint64_t next() {  // splitmix64
    std::uint64_t z = (s += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
  bool chance(std::uint32_t percent) { return below(100) < percent; }
};

}  // namespace ws::testing
