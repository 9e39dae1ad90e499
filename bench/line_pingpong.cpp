// SPDX-License-Identifier: BSD-3-Clause
// line_pingpong: what one cache line costs to move between two CPUs, in TSC cycles and ns per
// one-way transfer. Two threads, pinned to the two CPUs given, take turns writing one counter in a
// shared line: each waits for the other's value, then writes its own, so each step is one line
// moving from one CPU's cache to the other's. A vhost/virtio pair moves lines the same way
// (descriptors, flags, headers), so this is the figure that sorts bench/vhost_pairs' runs into
// the host's modes (bench/README.md).
//   line_pingpong [CPU_A CPU_B] [STEPS]     (default 0 1, 2000000 steps)
// Prints one line: "line_pingpong cpus A,B steps N cycles/transfer C ns/transfer T".
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "ws/core/cpu.hpp"

namespace {

struct alignas(64) Line {
  std::atomic<std::uint64_t> turn{0};
};

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) == 0;
}

// Waits for the odd (or even) steps, writes the next one, until `steps`.
void player(Line& line, std::uint64_t first, std::uint64_t steps) {
  for (std::uint64_t s = first; s < steps; s += 2) {
    while (line.turn.load(std::memory_order_acquire) != s) ws::cpu_pause();
    line.turn.store(s + 1, std::memory_order_release);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int a = argc > 2 ? std::atoi(argv[1]) : 0;
  const int b = argc > 2 ? std::atoi(argv[2]) : 1;
  const std::uint64_t steps = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 2'000'000;
  Line line;
  bool pinned = true;
  std::thread other([&] {
    pinned = pin(b) && pinned;
    player(line, 1, steps);
  });
  if (!pin(a)) pinned = false;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t c0 = ws::rdtsc();
  player(line, 0, steps);
  other.join();
  const std::uint64_t c1 = ws::rdtsc();
  const auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  if (!pinned) {
    std::fprintf(stderr, "line_pingpong: cannot pin to CPUs %d and %d\n", a, b);
    return 1;
  }
  std::printf("line_pingpong cpus %d,%d steps %llu cycles/transfer %.1f ns/transfer %.1f\n", a, b,
              static_cast<unsigned long long>(steps), static_cast<double>(c1 - c0) / static_cast<double>(steps),
              ns / static_cast<double>(steps));
  return 0;
}
