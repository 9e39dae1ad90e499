// SPDX-License-Identifier: BSD-3-Clause
// line_pingpong: what one cache line costs to move between two CPUs, in TSC cycles and ns per
// one-way transfer. Two threads, pinned to the two CPUs given, take turns writing one counter in a
// shared line: each waits for the other's value, then writes its own, so each step is one line
// moving from one CPU's cache to the other's. A vhost/virtio pair moves lines the same way
// (descriptors, flags, headers), so this is the figure that sorts bench/vhost_pairs' runs into
// the host's modes (bench/README.md).
//   line_pingpong [CPU_A CPU_B] [STEPS]     (default 0 1, 2000000 steps)
// Prints one line: "line_pingpong cpus A,B steps N cycles/transfer C ns/transfer T".
//   line_pingpong --watch SECONDS [EVERY_MS] [STEPS]     (default 200 ms, 4000 steps)
// Samples the cost on CPUs 0 and 1 while something else runs there: every EVERY_MS both threads
// wake at the same instant under SCHED_FIFO (root), preempt whatever runs on the two CPUs, move
// the line STEPS times and sleep again; about a millisecond in the slow mode, so a pair of
// testpmds polling on those CPUs loses well under 1% of its time. Prints a line per sample:
// "sample MS cycles/transfer C" (MS since the start). The host can flip modes for a few seconds
// between two probes taken before and after a run; sampling during the run sees it.
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

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

// Waits for the odd (or even) steps from `from`, writes the next one, until `to`.
void player(Line& line, std::uint64_t from, std::uint64_t to) {
  for (std::uint64_t s = from; s < to; s += 2) {
    while (line.turn.load(std::memory_order_acquire) != s) ws::cpu_pause();
    line.turn.store(s + 1, std::memory_order_release);
  }
}

int measure_once(int argc, char** argv) {
  const int a = argc > 2 ? std::atoi(argv[1]) : 0;
  const int b = argc > 2 ? std::atoi(argv[2]) : 1;
  const std::uint64_t steps = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 2'000'000;
  Line line;
  std::atomic<bool> pinned{true};  // both threads may clear it
  std::thread other([&] {
    if (!pin(b)) pinned = false;
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

void sleep_until(const timespec& t) {
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) != 0) {
  }
}

timespec plus_ms(timespec t, long ms) {
  t.tv_nsec += ms * 1'000'000L;
  t.tv_sec += t.tv_nsec / 1'000'000'000L;
  t.tv_nsec %= 1'000'000'000L;
  return t;
}

// The two threads wake at the same instants. Each sample starts timing after a few steps, once
// both have woken: the first steps include one thread's wake-up.
constexpr std::uint64_t warmup_steps = 64;

int watch(double seconds, long every_ms, std::uint64_t steps) {
  const int samples = static_cast<int>(seconds * 1000.0 / static_cast<double>(every_ms));
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  start = plus_ms(start, 20);
  Line line;
  std::vector<double> cycles(static_cast<std::size_t>(samples), 0.0);
  std::atomic<bool> ok{true};  // both threads may clear it
  auto run = [&](int cpu, std::uint64_t parity) {
    sched_param prio{};
    prio.sched_priority = 1;
    if (!pin(cpu) || ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &prio) != 0) ok = false;
    for (int i = 0; i < samples; ++i) {
      sleep_until(plus_ms(start, every_ms * i));
      const std::uint64_t base = static_cast<std::uint64_t>(i) * (steps + warmup_steps);
      player(line, base + parity, base + warmup_steps);
      const std::uint64_t c0 = ws::rdtsc();
      player(line, base + warmup_steps + parity, base + warmup_steps + steps);
      if (parity == 0)
        cycles[static_cast<std::size_t>(i)] = static_cast<double>(ws::rdtsc() - c0) / static_cast<double>(steps);
    }
  };
  std::thread other([&] { run(1, 1); });
  run(0, 0);
  other.join();
  if (!ok) {
    std::fprintf(stderr, "line_pingpong: --watch needs CPUs 0 and 1 and SCHED_FIFO (run as root)\n");
    return 1;
  }
  for (int i = 0; i < samples; ++i)
    std::printf("sample %ld cycles/transfer %.1f\n", every_ms * i, cycles[static_cast<std::size_t>(i)]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--watch") == 0) {
    const double seconds = argc > 2 ? std::atof(argv[2]) : 0.0;
    const long every_ms = argc > 3 ? std::atol(argv[3]) : 200;
    const std::uint64_t steps = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 4000;
    if (seconds <= 0 || every_ms <= 0 || steps < 2 || steps % 2 != 0) {
      std::fprintf(stderr, "line_pingpong: --watch SECONDS [EVERY_MS] [STEPS]: positive numbers, STEPS even\n");
      return 1;
    }
    return watch(seconds, every_ms, steps);
  }
  return measure_once(argc, argv);
}
