// SPDX-License-Identifier: BSD-3-Clause
// Mempool cost per object on one thread: get_bulk + put_bulk of 32, through the lcore cache
// (lcore 0) and straight on the ring (no lcore); compare with DPDK's mempool_perf_autotest.
#include <benchmark/benchmark.h>

#include <vector>

#include "ws/core/mempool.hpp"

namespace ws {
namespace {

void mempool_bulk(benchmark::State& state, unsigned lcore) {
  constexpr std::size_t bulk = 32;
  auto arena = Arena::create({"mempool_bench", 16u << 20, HugePolicy::never});
  if (!arena) {
    state.SkipWithError(arena.error().message.c_str());
    return;
  }
  auto pool = Mempool::create(**arena, {"bench", 8192, 64, 256});
  if (!pool) {
    state.SkipWithError(pool.error().message.c_str());
    return;
  }
  set_lcore_id(lcore);
  std::vector<void*> objs(bulk);
  for (auto _ : state) {
    if (!(*pool)->get_bulk(objs)) [[unlikely]] {
      state.SkipWithError("get_bulk failed");
      break;
    }
    benchmark::DoNotOptimize(objs.data());
    (*pool)->put_bulk(objs);
    benchmark::ClobberMemory();
  }
  set_lcore_id(no_lcore);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * bulk));
}

void BM_MempoolBulk32Cache(benchmark::State& state) { mempool_bulk(state, 0); }
void BM_MempoolBulk32NoCache(benchmark::State& state) { mempool_bulk(state, no_lcore); }

BENCHMARK(BM_MempoolBulk32Cache);
BENCHMARK(BM_MempoolBulk32NoCache);

}  // namespace
}  // namespace ws
