// SPDX-License-Identifier: BSD-3-Clause
// Ring cost per element on one thread: enqueue_bulk + dequeue_bulk of 1, 8 and 32, single and
// multi sync; compare with DPDK's ring_perf_autotest "SP/SC bulk" and "MP/MC bulk" figures.
// This file also provides the benchmark main() for ws_core_bench.
#include <benchmark/benchmark.h>

#include <vector>

#include "ws/core/ring.hpp"

namespace ws {
namespace {

void ring_bulk(benchmark::State& state, Sync sync) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto r = Ring<void*>::create("bench", {1024, sync, sync});
  if (!r) {
    state.SkipWithError(r.error().message.c_str());
    return;
  }
  Ring<void*>& ring = **r;
  std::vector<void*> objs(n, &state), out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(ring.enqueue_bulk(objs));
    benchmark::DoNotOptimize(ring.dequeue_bulk(out));
    benchmark::ClobberMemory();
  }
  // Items are elements moved through the ring (each enqueued once and dequeued once).
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

void BM_RingSpScBulk(benchmark::State& state) { ring_bulk(state, Sync::single); }
void BM_RingMpMcBulk(benchmark::State& state) { ring_bulk(state, Sync::multi); }

BENCHMARK(BM_RingSpScBulk)->Arg(1)->Arg(8)->Arg(32);
BENCHMARK(BM_RingMpMcBulk)->Arg(1)->Arg(8)->Arg(32);

}  // namespace
}  // namespace ws

BENCHMARK_MAIN();
