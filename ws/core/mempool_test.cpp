// SPDX-License-Identifier: BSD-3-Clause
// Mempool: get/put with and without the per-lcore cache, cache refill and flush (1.5x the cache
// size), exhaustion (all-or-none, nothing lost), in_use accounting, owns(), and a two-lcore
// stress run that hands objects between threads (also run under TSan).
#include "ws/core/mempool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace ws {
namespace {

class MempoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"mempool_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
  }
  // gtest runs every test on the main thread: leave it as no lcore for the next test.
  void TearDown() override { set_lcore_id(no_lcore); }

  std::unique_ptr<Mempool> make(std::uint32_t count, std::uint32_t cache, std::uint32_t object_bytes = 64) {
    auto p = Mempool::create(*arena_, {"pool", count, object_bytes, cache});
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return p ? std::move(*p) : nullptr;
  }

  std::unique_ptr<Arena> arena_;
};

TEST_F(MempoolTest, CreateRefusesBadOptions) {
  auto expect_error = [&](MempoolOptions o, std::string_view needle) {
    auto p = Mempool::create(*arena_, o);
    ASSERT_FALSE(p.has_value()) << needle;
    EXPECT_NE(p.error().message.find(needle), std::string::npos) << p.error().message;
    EXPECT_NE(p.error().message.find("mempool 'bad'"), std::string::npos) << p.error().message;
  };
  expect_error({"bad", 0, 64, 0}, "count must be > 0");
  expect_error({"bad", 8, 0, 0}, "size must be > 0");
  expect_error({"bad", 1024, 64, mempool_cache_max + 1}, "over the maximum");
  expect_error({"bad", 8, 64, 16}, "larger than the pool");
  // More than the arena holds: the arena's error names the pool.
  auto p = Mempool::create(*arena_, {"huge", 1u << 20, 64, 0});
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("mempool 'huge'"), std::string::npos) << p.error().message;
}

TEST_F(MempoolTest, RoundsObjectsToCacheLinesAndRunsInitOnce) {
  std::vector<std::uint32_t> seen;
  auto p = Mempool::create(*arena_, {"init", 10, 100, 0}, [&](void* obj, std::uint32_t i) {
    seen.push_back(i);
    *static_cast<std::uint32_t*>(obj) = i + 1000;
  });
  ASSERT_TRUE(p.has_value()) << p.error().message;
  Mempool& pool = **p;
  EXPECT_EQ(pool.object_bytes(), 128u);
  EXPECT_EQ(pool.count(), 10u);
  EXPECT_EQ(seen, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  for (std::uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(*static_cast<std::uint32_t*>(pool.object(i)), i + 1000);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.object(i)) % cache_line_bytes, 0u);
  }
}

TEST_F(MempoolTest, PoolOfOneObject) {
  auto pool = make(1, 0);
  ASSERT_TRUE(pool);
  void* only = pool->get();
  ASSERT_NE(only, nullptr);
  EXPECT_EQ(only, pool->object(0));
  EXPECT_EQ(pool->get(), nullptr);
  pool->put(only);
  EXPECT_EQ(pool->in_use(), 0u);
}

TEST_F(MempoolTest, OwnsOnlyTheStartOfItsObjects) {
  auto pool = make(4, 0);
  ASSERT_TRUE(pool);
  auto other = make(4, 0);
  ASSERT_TRUE(other);
  for (std::uint32_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(pool->owns(pool->object(i)));
    EXPECT_FALSE(pool->owns(static_cast<std::byte*>(pool->object(i)) + 1));
    EXPECT_FALSE(other->owns(pool->object(i)));
  }
  EXPECT_FALSE(pool->owns(static_cast<std::byte*>(pool->object(0)) - 64));
  EXPECT_FALSE(pool->owns(static_cast<std::byte*>(pool->object(3)) + pool->object_bytes()));
  EXPECT_FALSE(pool->owns(nullptr));
}

// Gets every object, in bulks of `bulk`, until the pool refuses; checks the refusal.
std::vector<void*> drain(Mempool& pool, std::uint32_t bulk) {
  std::vector<void*> all;
  std::vector<void*> buf(bulk);
  while (pool.get_bulk(buf)) all.insert(all.end(), buf.begin(), buf.end());
  // A failed get_bulk hands out nothing and leaves the output alone.
  std::vector<void*> sentinel(bulk, reinterpret_cast<void*>(0x1));
  EXPECT_FALSE(pool.get_bulk(sentinel));
  EXPECT_TRUE(std::all_of(sentinel.begin(), sentinel.end(), [](void* p) { return p == reinterpret_cast<void*>(0x1); }));
  return all;
}

void expect_distinct_and_owned(const Mempool& pool, const std::vector<void*>& objs) {
  const std::set<void*> unique(objs.begin(), objs.end());
  EXPECT_EQ(unique.size(), objs.size()) << "an object was handed out twice";
  for (void* o : objs) EXPECT_TRUE(pool.owns(o));
}

TEST_F(MempoolTest, WithoutCacheGetAndPutGoThroughTheRing) {
  set_lcore_id(no_lcore);
  auto pool = make(64, 32);  // has a cache, but a non-lcore thread never uses it
  ASSERT_TRUE(pool);
  void* a = pool->get();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(pool->in_use(), 1u);
  EXPECT_EQ(pool->available(), 63u);
  pool->put(a);
  EXPECT_EQ(pool->in_use(), 0u);

  auto all = drain(*pool, 5);  // 64 = 12 * 5 + 4: the last 4 stay, all-or-none
  EXPECT_EQ(all.size(), 60u);
  EXPECT_EQ(pool->in_use(), 60u);
  std::vector<void*> rest(4);
  ASSERT_TRUE(pool->get_bulk(rest));
  EXPECT_EQ(pool->get(), nullptr);
  all.insert(all.end(), rest.begin(), rest.end());
  EXPECT_EQ(pool->in_use(), 64u);
  expect_distinct_and_owned(*pool, all);

  pool->put_bulk(all);
  EXPECT_EQ(pool->in_use(), 0u);
  EXPECT_EQ(drain(*pool, 64).size(), 64u) << "every object came back to the ring";
}

TEST_F(MempoolTest, CacheSizeZeroBehavesLikeNoCache) {
  set_lcore_id(0);
  auto pool = make(16, 0);
  ASSERT_TRUE(pool);
  auto all = drain(*pool, 4);
  EXPECT_EQ(all.size(), 16u);
  expect_distinct_and_owned(*pool, all);
  pool->put_bulk(all);
  EXPECT_EQ(pool->in_use(), 0u);
  set_lcore_id(no_lcore);  // the ring alone must hold them all
  EXPECT_EQ(drain(*pool, 16).size(), 16u);
}

TEST_F(MempoolTest, CacheRefillsToCacheSizePlusRequest) {
  set_lcore_id(0);
  auto pool = make(64, 16);
  ASSERT_TRUE(pool);
  void* first = pool->get();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(pool->in_use(), 1u);  // the 16 cached objects count as available

  // The refill took 1 + 16 from the ring: a non-lcore thread sees 47 there, not 48.
  set_lcore_id(no_lcore);
  std::vector<void*> ring_objs(48);
  EXPECT_FALSE(pool->get_bulk(ring_objs));
  ring_objs.resize(47);
  ASSERT_TRUE(pool->get_bulk(ring_objs));
  EXPECT_EQ(std::count(ring_objs.begin(), ring_objs.end(), first), 0);
  pool->put_bulk(ring_objs);

  // The cache is LIFO: what lcore 0 returns is what it gets next.
  set_lcore_id(0);
  pool->put(first);
  EXPECT_EQ(pool->get(), first);
  pool->put(first);
  EXPECT_EQ(pool->in_use(), 0u);
}

TEST_F(MempoolTest, CacheFlushesToTheRingBeyondOneAndAHalfCacheSizes) {
  set_lcore_id(0);
  auto pool = make(64, 16);  // flush threshold 24
  ASSERT_TRUE(pool);
  std::vector<void*> all(64);
  ASSERT_TRUE(pool->get_bulk(all));  // 64 + 16 are not there: only the 64 missing come from the ring
  EXPECT_EQ(pool->in_use(), 64u);

  auto put8 = [&](std::size_t at) { pool->put_bulk(std::span<void* const>(all).subspan(at, 8)); };
  put8(0);
  put8(8);
  put8(16);  // 24 cached: at the threshold, not over it
  EXPECT_EQ(pool->in_use(), 40u);
  set_lcore_id(no_lcore);
  EXPECT_EQ(pool->get(), nullptr) << "nothing may have reached the ring yet";

  set_lcore_id(0);
  put8(24);  // 24 + 8 > 24: the 24 cached go to the ring, the 8 just returned stay
  EXPECT_EQ(pool->in_use(), 32u);
  set_lcore_id(no_lcore);
  std::vector<void*> from_ring(25);
  EXPECT_FALSE(pool->get_bulk(from_ring));
  from_ring.resize(24);
  ASSERT_TRUE(pool->get_bulk(from_ring));
  EXPECT_EQ(std::set<void*>(from_ring.begin(), from_ring.end()), std::set<void*>(all.begin(), all.begin() + 24));
  pool->put_bulk(from_ring);

  // A put larger than the threshold bypasses the cache.
  set_lcore_id(0);
  pool->put_bulk(std::span<void* const>(all).subspan(32, 32));
  set_lcore_id(no_lcore);
  std::vector<void*> rest(56);
  ASSERT_TRUE(pool->get_bulk(rest)) << "24 + 32 objects should be in the ring";
  pool->put_bulk(rest);
  EXPECT_EQ(pool->in_use(), 0u);
}

// As DPDK: a burst larger than the cache size (up to mempool_cache_max) still goes through the
// cache, so io forwarding at burst 256 with a cache of 250 gets back the burst it just freed
// instead of taking the ring every time.
TEST_F(MempoolTest, BurstsLargerThanTheCacheSizeAreServedFromTheCache) {
  set_lcore_id(0);
  auto pool = make(1024, 16);  // flush threshold 24
  ASSERT_TRUE(pool);
  std::vector<void*> burst(20);
  ASSERT_TRUE(pool->get_bulk(burst));  // refill: 20 + 16 from the ring, 16 stay cached
  EXPECT_EQ(pool->in_use(), 20u);
  const std::set<void*> freed(burst.begin(), burst.end());
  pool->put_bulk(burst);  // 16 + 20 > 24: the 16 go to the ring, these 20 stay
  ASSERT_TRUE(pool->get_bulk(burst));
  EXPECT_EQ(std::set<void*>(burst.begin(), burst.end()), freed) << "the burst did not come from the cache";
  pool->put_bulk(burst);
  EXPECT_EQ(pool->in_use(), 0u);
  // Near exhaustion the refill takes only what is missing: 60 of 64, then the last 4.
  auto small = make(64, 16);
  ASSERT_TRUE(small);
  std::vector<void*> most(60), last(4);
  ASSERT_TRUE(small->get_bulk(most));
  ASSERT_TRUE(small->get_bulk(last));
  EXPECT_EQ(small->get(), nullptr);
  EXPECT_EQ(small->in_use(), 64u);
  small->put_bulk(most);
  small->put_bulk(last);
  EXPECT_EQ(small->in_use(), 0u);
}

TEST_F(MempoolTest, ExhaustionWithCacheIsAllOrNoneAndLosesNothing) {
  set_lcore_id(0);
  auto pool = make(64, 16);
  ASSERT_TRUE(pool);
  auto all = drain(*pool, 8);
  EXPECT_EQ(all.size(), 64u);
  EXPECT_EQ(pool->in_use(), 64u);
  EXPECT_EQ(pool->available(), 0u);
  expect_distinct_and_owned(*pool, all);
  pool->put_bulk(std::span<void* const>(all).first(8));
  EXPECT_EQ(pool->in_use(), 56u);
  std::vector<void*> nine(9);
  EXPECT_FALSE(pool->get_bulk(nine));  // 8 available
  EXPECT_EQ(pool->in_use(), 56u);
  pool->put_bulk(std::span<void* const>(all).subspan(8));
  EXPECT_EQ(pool->in_use(), 0u);

  pool->flush_caches();
  set_lcore_id(no_lcore);
  auto again = drain(*pool, 64);
  EXPECT_EQ(again.size(), 64u) << "flush_caches must return every cached object to the ring";
  pool->put_bulk(again);
}

TEST_F(MempoolTest, EachLcoreHasItsOwnCache) {
  auto pool = make(64, 8);
  ASSERT_TRUE(pool);
  set_lcore_id(0);
  void* a = pool->get();
  pool->put(a);  // now cached by lcore 0
  set_lcore_id(1);
  std::vector<void*> got(8);
  ASSERT_TRUE(pool->get_bulk(got));
  EXPECT_EQ(std::count(got.begin(), got.end(), a), 0) << "lcore 1 took an object from lcore 0's cache";
  pool->put_bulk(got);
  set_lcore_id(0);
  EXPECT_EQ(pool->get(), a);
  pool->put(a);
  EXPECT_EQ(pool->in_use(), 0u);
}

// Two lcores share one pool: lcore 0 gets objects, stamps them and hands some to lcore 1 over a
// ring; lcore 1 checks the stamp and returns them through its own cache. Every object must be
// held by at most one thread at a time, and everything must come back.
TEST_F(MempoolTest, TwoLcoresStress) {
  constexpr std::uint32_t count = 512;
  auto pool = make(count, 32);
  ASSERT_TRUE(pool);
  std::vector<std::atomic<bool>> held(count);
  auto index_of = [&](void* o) {
    return static_cast<std::uint32_t>((static_cast<std::byte*>(o) - static_cast<std::byte*>(pool->object(0))) /
                                      pool->object_bytes());
  };
  auto handoff = Ring<void*>::create("handoff", {256, Sync::single, Sync::single});
  ASSERT_TRUE(handoff.has_value());
  std::atomic<bool> done{false};
  std::atomic<bool> double_handout{false}, bad_stamp{false};
  constexpr int rounds = 60'000;

  std::jthread producer([&] {
    set_lcore_id(0);
    std::vector<void*> buf(32);
    for (int i = 0; i < rounds; ++i) {
      const auto n = static_cast<std::size_t>(1 + i % 32);
      auto span = std::span<void*>(buf.data(), n);
      if (!pool->get_bulk(span)) {
        std::this_thread::yield();
        continue;
      }
      for (void* o : span) {
        const std::uint32_t idx = index_of(o);
        if (held[idx].exchange(true, std::memory_order_relaxed)) double_handout = true;
        *static_cast<std::uint64_t*>(o) = idx * 7ULL + 1;  // plain write: TSan checks the hand-offs
      }
      // Keep half, hand the other half to lcore 1.
      const std::size_t keep = n / 2;
      for (std::size_t k = 0; k < keep; ++k) held[index_of(span[k])].store(false, std::memory_order_relaxed);
      pool->put_bulk(span.first(keep));
      auto rest = std::span<void* const>(span.subspan(keep));
      while (!rest.empty()) {
        const auto sent = (*handoff)->enqueue_burst(rest);
        rest = rest.subspan(sent);
        if (sent == 0) std::this_thread::yield();
      }
    }
    done = true;
  });
  std::jthread consumer([&] {
    set_lcore_id(1);
    std::vector<void*> buf(32);
    for (;;) {
      const bool finished = done.load();
      const auto n = (*handoff)->dequeue_burst(buf);
      for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint32_t idx = index_of(buf[k]);
        if (*static_cast<std::uint64_t*>(buf[k]) != idx * 7ULL + 1) bad_stamp = true;
        held[idx].store(false, std::memory_order_relaxed);
      }
      pool->put_bulk(std::span<void* const>(buf.data(), n));
      if (n == 0) {
        if (finished) break;
        std::this_thread::yield();
      }
    }
  });
  producer.join();
  consumer.join();
  EXPECT_FALSE(double_handout.load());
  EXPECT_FALSE(bad_stamp.load());
  EXPECT_EQ(pool->in_use(), 0u);
  pool->flush_caches();
  set_lcore_id(no_lcore);
  EXPECT_EQ(drain(*pool, count).size(), count);
}

}  // namespace
}  // namespace ws
