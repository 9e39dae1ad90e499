// SPDX-License-Identifier: BSD-3-Clause
// Ring: creation limits, FIFO order, burst (all-or-part) vs bulk (all-or-none), wrap-around,
// full/empty, and short multi-threaded stress runs that must also pass under TSan.
#include "ws/core/ring.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <thread>
#include <vector>

namespace ws {
namespace {

using U64Ring = Ring<std::uint64_t>;

std::unique_ptr<U64Ring> make_ring(std::uint32_t size, Sync producer, Sync consumer) {
  auto r = U64Ring::create("test", {size, producer, consumer});
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? std::move(*r) : nullptr;
}

std::vector<std::uint64_t> iota_vec(std::size_t n, std::uint64_t first) {
  std::vector<std::uint64_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(RingCreate, RefusesSizesThatAreNotPowersOfTwoInRange) {
  for (std::uint32_t bad : {0u, 1u, 3u, 1000u, ring_size_max * 2}) {
    auto r = U64Ring::create("bad", {bad, Sync::single, Sync::single});
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.error().message.find("ring 'bad'"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("power of two"), std::string::npos) << r.error().message;
  }
  for (std::uint32_t good : {2u, 4u, 1024u}) {
    auto r = U64Ring::create("good", {good, Sync::multi, Sync::multi});
    ASSERT_TRUE(r.has_value()) << good;
    EXPECT_EQ((*r)->capacity(), good);
    EXPECT_TRUE((*r)->empty());
  }
}

// Every behaviour below must hold whatever the producer and consumer sync modes are.
class RingModes : public ::testing::TestWithParam<std::pair<Sync, Sync>> {
 protected:
  std::unique_ptr<U64Ring> make(std::uint32_t size) { return make_ring(size, GetParam().first, GetParam().second); }
};

TEST_P(RingModes, SingleElementsComeOutInOrder) {
  auto r = make(8);
  for (std::uint64_t i = 0; i < 5; ++i) ASSERT_TRUE(r->enqueue(i * 10));
  EXPECT_EQ(r->count(), 5u);
  EXPECT_EQ(r->free_count(), 3u);
  EXPECT_FALSE(r->empty());
  for (std::uint64_t i = 0; i < 5; ++i) {
    std::uint64_t v = 999;
    ASSERT_TRUE(r->dequeue(v));
    EXPECT_EQ(v, i * 10);
  }
  std::uint64_t v = 777;
  EXPECT_FALSE(r->dequeue(v));
  EXPECT_EQ(v, 777u) << "a failed dequeue must not write";
  EXPECT_TRUE(r->empty());
}

TEST_P(RingModes, HoldsExactlyItsSizeThenRefuses) {
  auto r = make(16);
  const auto in = iota_vec(16, 100);
  EXPECT_EQ(r->enqueue_bulk(in), 16u);
  EXPECT_EQ(r->count(), 16u);
  EXPECT_EQ(r->free_count(), 0u);
  EXPECT_FALSE(r->enqueue(1));
  const std::uint64_t one = 1;
  EXPECT_EQ(r->enqueue_burst(std::span(&one, 1)), 0u);

  std::vector<std::uint64_t> out(16);
  EXPECT_EQ(r->dequeue_bulk(out), 16u);
  EXPECT_EQ(out, in);
  EXPECT_TRUE(r->empty());
  EXPECT_EQ(r->dequeue_burst(out), 0u);
  EXPECT_EQ(r->dequeue_bulk(std::span(out).first(1)), 0u);
}

TEST_P(RingModes, BurstMovesWhatFitsBulkMovesAllOrNothing) {
  auto r = make(8);
  ASSERT_EQ(r->enqueue_bulk(iota_vec(5, 0)), 5u);

  // 3 free: bulk of 4 moves nothing, burst of 4 moves 3.
  EXPECT_EQ(r->enqueue_bulk(iota_vec(4, 5)), 0u);
  EXPECT_EQ(r->count(), 5u);
  EXPECT_EQ(r->enqueue_burst(iota_vec(4, 5)), 3u);
  EXPECT_EQ(r->count(), 8u);

  // 8 held: bulk of 9 takes nothing and leaves `out` alone, burst of 9 takes 8.
  std::vector<std::uint64_t> out(9, 4242);
  EXPECT_EQ(r->dequeue_bulk(out), 0u);
  EXPECT_EQ(out, std::vector<std::uint64_t>(9, 4242));
  EXPECT_EQ(r->count(), 8u);
  EXPECT_EQ(r->dequeue_burst(out), 8u);
  out.resize(8);
  EXPECT_EQ(out, iota_vec(8, 0));

  // Zero-length calls move nothing and change nothing.
  EXPECT_EQ(r->enqueue_bulk(std::span<const std::uint64_t>{}), 0u);
  EXPECT_EQ(r->enqueue_burst(std::span<const std::uint64_t>{}), 0u);
  EXPECT_EQ(r->dequeue_burst(std::span<std::uint64_t>{}), 0u);
  EXPECT_TRUE(r->empty());
}

TEST_P(RingModes, WrapsAroundTheEndOfTheSlotArray) {
  // 1..7 in and out per round on an 8-slot ring: copy starts drift through every slot, so the
  // copies split across the end of the array in every possible place.
  auto r = make(8);
  std::uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 64; ++round) {
    const std::uint32_t n = 1 + static_cast<std::uint32_t>(round % 7);  // 1..7
    ASSERT_EQ(r->enqueue_bulk(iota_vec(n, next_in)), n);
    next_in += n;
    std::vector<std::uint64_t> out(n);
    ASSERT_EQ(r->dequeue_bulk(out), n);
    ASSERT_EQ(out, iota_vec(n, next_out)) << "round " << round;
    next_out += n;
  }
  // Fill while the indices sit mid-array: the full ring wraps too.
  ASSERT_EQ(r->enqueue_bulk(iota_vec(8, next_in)), 8u);
  std::vector<std::uint64_t> out(8);
  ASSERT_EQ(r->dequeue_burst(out), 8u);
  EXPECT_EQ(out, iota_vec(8, next_in));
}

INSTANTIATE_TEST_SUITE_P(AllSyncModes, RingModes,
                         ::testing::Values(std::pair{Sync::single, Sync::single}, std::pair{Sync::multi, Sync::multi},
                                           std::pair{Sync::single, Sync::multi}, std::pair{Sync::multi, Sync::single}),
                         [](const auto& param_info) {
                           auto s = [](Sync x) { return x == Sync::single ? std::string("S") : std::string("M"); };
                           return s(param_info.param.first) + "P" + s(param_info.param.second) + "C";
                         });

TEST(Ring, CopiesWideElements) {
  struct Wide {
    std::uint64_t a, b, c;
  };
  auto r = Ring<Wide>::create("wide", {4, Sync::single, Sync::single});
  ASSERT_TRUE(r.has_value());
  for (std::uint64_t round = 0; round < 5; ++round) {  // wraps the 4 slots
    const Wide in[3] = {{round, 1, 2}, {round, 3, 4}, {round, 5, 6}};
    ASSERT_EQ((*r)->enqueue_bulk(in), 3u);
    Wide out[3] = {};
    ASSERT_EQ((*r)->dequeue_bulk(out), 3u);
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(out[i].a, round);
      EXPECT_EQ(out[i].b, in[i].b);
      EXPECT_EQ(out[i].c, in[i].c);
    }
  }
}

// ---- stress: every element arrives exactly once, in order per producer ----

constexpr int producer_shift = 48;

// Producer `p` sends p<<48 | 0..count-1 in bursts and bulks of varying sizes.
void produce(U64Ring& r, std::uint64_t p, std::uint64_t count) {
  std::uint64_t seq = 0;
  std::uint32_t n = 1;
  std::vector<std::uint64_t> buf(32);
  while (seq < count) {
    n = n % 31 + 1;  // 1..31
    const auto want = static_cast<std::uint32_t>(std::min<std::uint64_t>(n, count - seq));
    for (std::uint32_t i = 0; i < want; ++i) buf[i] = (p << producer_shift) | (seq + i);
    const auto span = std::span<const std::uint64_t>(buf.data(), want);
    const std::uint32_t sent = (seq & 1) ? r.enqueue_bulk(span) : r.enqueue_burst(span);
    if (sent == 0) std::this_thread::yield();  // 2 shared CPUs: let the consumer run
    seq += sent;
  }
}

struct Received {
  std::vector<std::uint64_t> values;
  bool count_in_range = true;
};

void consume(U64Ring& r, std::atomic<std::uint64_t>& remaining, Received& got) {
  std::vector<std::uint64_t> buf(32);
  std::uint32_t n = 1;
  while (remaining.load(std::memory_order_relaxed) > 0) {
    n = n % 31 + 1;
    const auto span = std::span<std::uint64_t>(buf.data(), n);
    const std::uint32_t k = (n & 1) ? r.dequeue_bulk(span) : r.dequeue_burst(span);
    if (k == 0) {
      std::this_thread::yield();
      continue;
    }
    got.values.insert(got.values.end(), buf.begin(), buf.begin() + k);
    remaining.fetch_sub(k, std::memory_order_relaxed);
    if (r.count() > r.capacity()) got.count_in_range = false;
  }
}

// Within what one consumer received, each producer's sequence numbers must increase.
void expect_ordered_per_producer(const Received& got, unsigned producers) {
  EXPECT_TRUE(got.count_in_range) << "count() went beyond capacity()";
  std::vector<std::int64_t> last(producers, -1);
  for (std::uint64_t v : got.values) {
    const auto p = static_cast<unsigned>(v >> producer_shift);
    const auto seq = static_cast<std::int64_t>(v & ((1ULL << producer_shift) - 1));
    ASSERT_LT(p, producers);
    ASSERT_GT(seq, last[p]) << "producer " << p << " out of order";
    last[p] = seq;
  }
}

// Every (producer, seq) pair was received exactly once, by some consumer.
void expect_each_exactly_once(const std::vector<Received>& all, unsigned producers, std::uint64_t per_producer) {
  std::vector<std::vector<std::uint8_t>> seen(producers, std::vector<std::uint8_t>(per_producer, 0));
  for (const auto& got : all) {
    for (std::uint64_t v : got.values) {
      const auto p = v >> producer_shift;
      const auto seq = v & ((1ULL << producer_shift) - 1);
      ASSERT_LT(p, producers);
      ASSERT_LT(seq, per_producer);
      ASSERT_EQ(seen[p][seq]++, 0) << "duplicate " << p << "/" << seq;
    }
  }
  for (unsigned p = 0; p < producers; ++p)
    for (std::uint64_t s = 0; s < per_producer; ++s) ASSERT_EQ(seen[p][s], 1) << "lost " << p << "/" << s;
}

void run_stress(Sync sync, unsigned producers, unsigned consumers, std::uint64_t per_producer) {
  // A small ring keeps it full and empty often, so both the waits and the wrap-around run.
  auto r = make_ring(64, sync, sync);
  ASSERT_TRUE(r);
  std::atomic<std::uint64_t> remaining{producers * per_producer};
  std::vector<Received> got(consumers);
  {
    std::vector<std::jthread> threads;
    for (unsigned c = 0; c < consumers; ++c) threads.emplace_back([&, c] { consume(*r, remaining, got[c]); });
    for (unsigned p = 0; p < producers; ++p) threads.emplace_back([&, p] { produce(*r, p, per_producer); });
  }
  EXPECT_TRUE(r->empty());
  for (const auto& g : got) expect_ordered_per_producer(g, producers);
  expect_each_exactly_once(got, producers, per_producer);
}

TEST(RingStress, OneProducerOneConsumerSingleSync) { run_stress(Sync::single, 1, 1, 500'000); }

TEST(RingStress, TwoProducersTwoConsumersMultiSync) { run_stress(Sync::multi, 2, 2, 250'000); }

}  // namespace
}  // namespace ws
