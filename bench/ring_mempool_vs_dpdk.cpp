// SPDX-License-Identifier: BSD-3-Clause
// Ring and mempool cost per element, ours against Debian's DPDK, in one process and one thread:
// the single-lcore "bulk enq/dequeue" loop of DPDK's ring_perf_autotest and a get_bulk/put_bulk
// loop, alternating the two sides over several rounds. Prints the median cycles/element.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#pragma GCC diagnostic pop

#include "ws/core/arena.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/mempool.hpp"
#include "ws/core/ring.hpp"

namespace {

constexpr unsigned ring_size = 4096;            // as ring_perf_autotest (RING_SIZE)
constexpr unsigned ring_iterations = 1u << 23;  // as ring_perf_autotest (iter_shift 23)
constexpr unsigned max_bulk = 32;
constexpr unsigned pool_iterations = 1u << 21;
constexpr unsigned pool_count = 8191;         // 2^13 - 1: the pool's ring is exactly 2^13
constexpr unsigned pool_object_bytes = 2048;  // as mempool_perf_autotest
constexpr unsigned pool_cache = 250;

// Sizes are read through volatile so that neither side's loop is specialised for a constant,
// as ring_perf_autotest does.
const volatile unsigned ring_bulk_sizes[] = {8, 32};
const volatile unsigned pool_bulk = 32;

// Runs `body` `iterations` times; returns the TSC cycles taken.
template <class Body>
[[gnu::noinline]] std::uint64_t time_loop(unsigned iterations, Body body) {
  const std::uint64_t start = ws::rdtsc();
  for (unsigned i = 0; i < iterations; ++i) body();
  return ws::rdtsc() - start;
}

// One operation timed on both sides: each function runs the loop once and returns its cycles.
struct Case {
  std::string name;
  std::uint64_t elements;  // elements moved per loop (iterations x bulk)
  std::function<std::uint64_t()> dpdk;
  std::function<std::uint64_t()> ours;
};

// Everything both sides operate on; lives for the whole run.
struct Subjects {
  rte_ring* dpdk_spsc = nullptr;
  rte_ring* dpdk_mpmc = nullptr;
  rte_mempool* dpdk_pool_cached = nullptr;
  rte_mempool* dpdk_pool_uncached = nullptr;
  std::unique_ptr<ws::Ring<void*>> ours_spsc;
  std::unique_ptr<ws::Ring<void*>> ours_mpmc;
  std::unique_ptr<ws::Arena> arena;
  std::unique_ptr<ws::Mempool> ours_pool_cached;
  std::unique_ptr<ws::Mempool> ours_pool_uncached;
  // ring_perf_autotest enqueues the same table it dequeues to, cache-aligned (rte_zmalloc).
  alignas(ws::cache_line_bytes) std::array<void*, max_bulk> burst{};
  std::uint64_t pool_failures = 0;
};

[[noreturn]] void die(std::string_view what) {
  fmt::print(stderr, "ring_mempool_vs_dpdk: {}\n", what);
  std::exit(1);
}

std::string dpdk_error(std::string_view what) { return fmt::format("{}: {}", what, rte_strerror(rte_errno)); }

void init_eal() {
  const char* args[] = {
      "ring_mempool_vs_dpdk", "-l", "0", "--no-huge", "-m", "256", "--no-pci", "--file-prefix=wsringbench",
      "--log-level=error"};
  std::vector<char*> argv;
  for (const char* a : args) argv.push_back(const_cast<char*>(a));
  if (rte_eal_init(static_cast<int>(argv.size()), argv.data()) < 0) die(dpdk_error("rte_eal_init"));
}

void create_rings(Subjects& s) {
  s.dpdk_spsc = rte_ring_create("wsbench_spsc", ring_size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
  s.dpdk_mpmc = rte_ring_create("wsbench_mpmc", ring_size, SOCKET_ID_ANY, 0);
  if (s.dpdk_spsc == nullptr || s.dpdk_mpmc == nullptr) die(dpdk_error("rte_ring_create"));
  auto spsc = ws::Ring<void*>::create("spsc", {ring_size, ws::Sync::single, ws::Sync::single});
  auto mpmc = ws::Ring<void*>::create("mpmc", {ring_size, ws::Sync::multi, ws::Sync::multi});
  if (!spsc) die(spsc.error().message);
  if (!mpmc) die(mpmc.error().message);
  s.ours_spsc = std::move(*spsc);
  s.ours_mpmc = std::move(*mpmc);
}

std::unique_ptr<ws::Mempool> create_ours_pool(ws::Arena& arena, std::string name, unsigned cache) {
  auto pool = ws::Mempool::create(arena, {std::move(name), pool_count, pool_object_bytes, cache});
  if (!pool) die(pool.error().message);
  return std::move(*pool);
}

void create_pools(Subjects& s) {
  s.dpdk_pool_cached = rte_mempool_create("wsbench_cached", pool_count, pool_object_bytes, pool_cache, 0, nullptr,
                                          nullptr, nullptr, nullptr, SOCKET_ID_ANY, 0);
  s.dpdk_pool_uncached = rte_mempool_create("wsbench_uncached", pool_count, pool_object_bytes, 0, 0, nullptr, nullptr,
                                            nullptr, nullptr, SOCKET_ID_ANY, 0);
  if (s.dpdk_pool_cached == nullptr || s.dpdk_pool_uncached == nullptr) die(dpdk_error("rte_mempool_create"));
  const std::size_t bytes = 2 * std::size_t{pool_count} * pool_object_bytes + (8u << 20);
  auto arena = ws::Arena::create({"wsringbench", bytes, ws::HugePolicy::never});
  if (!arena) die(arena.error().message);
  s.arena = std::move(*arena);
  s.ours_pool_cached = create_ours_pool(*s.arena, "cached", pool_cache);
  s.ours_pool_uncached = create_ours_pool(*s.arena, "uncached", 0);
}

// ring_perf_autotest's test_bulk_enqueue_dequeue: enqueue n, dequeue n, on one lcore.
Case ring_case(Subjects& s, bool single, unsigned size_index) {
  const unsigned n = ring_bulk_sizes[size_index];
  void** burst = s.burst.data();
  Case c{fmt::format("ring {} bulk {} enq+deq", single ? "SP/SC" : "MP/MC", n),
         std::uint64_t{ring_iterations} * n,
         {},
         {}};
  if (single) {
    rte_ring* r = s.dpdk_spsc;
    c.dpdk = [r, burst, n] {
      return time_loop(ring_iterations, [&] {
        rte_ring_sp_enqueue_bulk(r, burst, n, nullptr);
        rte_ring_sc_dequeue_bulk(r, burst, n, nullptr);
      });
    };
  } else {
    rte_ring* r = s.dpdk_mpmc;
    c.dpdk = [r, burst, n] {
      return time_loop(ring_iterations, [&] {
        rte_ring_mp_enqueue_bulk(r, burst, n, nullptr);
        rte_ring_mc_dequeue_bulk(r, burst, n, nullptr);
      });
    };
  }
  ws::Ring<void*>* ours = single ? s.ours_spsc.get() : s.ours_mpmc.get();
  c.ours = [ours, burst, n] {
    return time_loop(ring_iterations, [&] {
      ours->enqueue_bulk(std::span<void* const>(burst, n));
      ours->dequeue_bulk(std::span<void*>(burst, n));
    });
  };
  return c;
}

// Get n objects and put them back, through the lcore cache (cached) or straight to the ring.
Case pool_case(Subjects& s, bool cached) {
  const unsigned n = pool_bulk;
  void** objs = s.burst.data();
  std::uint64_t* failures = &s.pool_failures;
  Case c{fmt::format("mempool get+put bulk {}, {}", n, cached ? "cache 250" : "no cache"),
         std::uint64_t{pool_iterations} * n,
         {},
         {}};
  rte_mempool* mp = cached ? s.dpdk_pool_cached : s.dpdk_pool_uncached;
  c.dpdk = [mp, objs, n, failures] {
    return time_loop(pool_iterations, [&] {
      if (rte_mempool_get_bulk(mp, objs, n) != 0) [[unlikely]] {
        ++*failures;
        return;
      }
      rte_mempool_put_bulk(mp, objs, n);
    });
  };
  ws::Mempool* pool = cached ? s.ours_pool_cached.get() : s.ours_pool_uncached.get();
  c.ours = [pool, objs, n, failures, cached] {
    // DPDK's main thread is lcore 0 (its cache is used when the pool has one); ours likewise.
    ws::set_lcore_id(cached ? 0 : ws::no_lcore);
    return time_loop(pool_iterations, [&] {
      if (!pool->get_bulk(std::span<void*>(objs, n))) [[unlikely]] {
        ++*failures;
        return;
      }
      pool->put_bulk(std::span<void* const>(objs, n));
    });
  };
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

struct Rounds {
  std::vector<double> dpdk, ours, ratio;  // cycles per element per round; dpdk/ours per round
};

// Both sides' rings really move n elements per call (the timed loops ignore the counts, as
// ring_perf_autotest does).
void check_rings(Subjects& s) {
  void** b = s.burst.data();
  for (unsigned n : {8u, 32u}) {
    const bool ok = rte_ring_sp_enqueue_bulk(s.dpdk_spsc, b, n, nullptr) == n &&
                    rte_ring_sc_dequeue_bulk(s.dpdk_spsc, b, n, nullptr) == n &&
                    rte_ring_mp_enqueue_bulk(s.dpdk_mpmc, b, n, nullptr) == n &&
                    rte_ring_mc_dequeue_bulk(s.dpdk_mpmc, b, n, nullptr) == n &&
                    s.ours_spsc->enqueue_bulk(std::span<void* const>(b, n)) == n &&
                    s.ours_spsc->dequeue_bulk(std::span<void*>(b, n)) == n &&
                    s.ours_mpmc->enqueue_bulk(std::span<void* const>(b, n)) == n &&
                    s.ours_mpmc->dequeue_bulk(std::span<void*>(b, n)) == n;
    if (!ok) die(fmt::format("a ring did not move {} elements", n));
  }
}

// Alternates the sides: DPDK first in even rounds, ours first in odd rounds.
std::vector<Rounds> run_rounds(std::vector<Case>& cases, unsigned rounds) {
  std::vector<Rounds> results(cases.size());
  for (auto& c : cases) {  // warm-up: page in both sides' memory, train the predictors
    c.dpdk();
    c.ours();
  }
  for (unsigned round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      Case& c = cases[i];
      const auto per_elem = [&](const std::function<std::uint64_t()>& f) {
        return static_cast<double>(f()) / static_cast<double>(c.elements);
      };
      double d = 0, o = 0;
      if (round % 2 == 0) {
        d = per_elem(c.dpdk);
        o = per_elem(c.ours);
      } else {
        o = per_elem(c.ours);
        d = per_elem(c.dpdk);
      }
      results[i].dpdk.push_back(d);
      results[i].ours.push_back(o);
      results[i].ratio.push_back(d / o);
    }
  }
  return results;
}

void print_table(const std::vector<Case>& cases, const std::vector<Rounds>& results, unsigned rounds) {
  const double ns_per_cycle = 1e9 / static_cast<double>(ws::tsc_hz());
  fmt::print("TSC {} Hz (ws::tsc_hz); {} rounds, median per round; ratio = DPDK/ours, > 1: ours faster\n\n",
             ws::tsc_hz(), rounds);
  fmt::print("{:<36} {:>14} {:>14} {:>12} {:>12} {:>9}\n", "operation", "DPDK cyc/elem", "ours cyc/elem",
             "DPDK ns/elem", "ours ns/elem", "ratio");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const double d = median(results[i].dpdk);
    const double o = median(results[i].ours);
    fmt::print("{:<36} {:>14.2f} {:>14.2f} {:>12.3f} {:>12.3f} {:>9.2f}\n", cases[i].name, d, o, d * ns_per_cycle,
               o * ns_per_cycle, median(results[i].ratio));
  }
}

struct Options {
  unsigned rounds = 7;
  bool verbose = false;  // print every round
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      o.rounds = std::max(1u, static_cast<unsigned>(std::strtoul(argv[++i], nullptr, 10)));
    } else if (arg == "--verbose") {
      o.verbose = true;
    } else {
      fmt::print(stderr, "usage: {} [--rounds N (default 7)] [--verbose]\n", argv[0]);
      std::exit(arg == "-h" || arg == "--help" ? 0 : 2);
    }
  }
  return o;
}

void print_rounds(const std::vector<Case>& cases, const std::vector<Rounds>& results) {
  fmt::print("\ncycles/elem per round (DPDK / ours):\n");
  for (std::size_t i = 0; i < cases.size(); ++i) {
    fmt::print("{:<36}", cases[i].name);
    for (std::size_t r = 0; r < results[i].dpdk.size(); ++r)
      fmt::print(" {:.2f}/{:.2f}", results[i].dpdk[r], results[i].ours[r]);
    fmt::print("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  init_eal();  // pins this thread to CPU 0 as lcore 0; ours runs on the same thread
  Subjects s;
  create_rings(s);
  create_pools(s);
  check_rings(s);
  std::vector<Case> cases;
  for (bool single : {true, false})
    for (unsigned size_index = 0; size_index < 2; ++size_index) cases.push_back(ring_case(s, single, size_index));
  cases.push_back(pool_case(s, true));
  cases.push_back(pool_case(s, false));
  const auto results = run_rounds(cases, options.rounds);
  print_table(cases, results, options.rounds);
  if (options.verbose) print_rounds(cases, results);
  if (s.pool_failures != 0) fmt::print("warning: {} mempool get_bulk calls failed\n", s.pool_failures);
  rte_mempool_free(s.dpdk_pool_cached);
  rte_mempool_free(s.dpdk_pool_uncached);
  rte_ring_free(s.dpdk_spsc);
  rte_ring_free(s.dpdk_mpmc);
  rte_eal_cleanup();
  return s.pool_failures == 0 ? 0 : 1;
}
