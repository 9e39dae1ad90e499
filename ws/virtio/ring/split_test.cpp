// SPDX-License-Identifier: BSD-3-Clause
// Split virtqueue: the driver and device engines against each other (chains, indirect tables,
// index wrap, event suppression), then every kind of hostile descriptor the device must refuse.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ws/virtio/ring/split_device.hpp"
#include "ws/virtio/ring/split_driver.hpp"
#include "ws/virtio/ring/test_memory.hpp"

namespace ws::virtio {
namespace {

using test::TestMemory;

// InOrder: the driver's variant for a negotiated IN_ORDER.
template <bool InOrder>
struct SplitPairOf {
  static constexpr std::uint32_t n = 256;
  TestMemory tm{1 << 20};
  SplitRing ring;
  QueueHealth dev_health, drv_health;
  SplitDevice<> dev;
  SplitDriver<std::uint32_t, InOrder> drv;
  std::byte* bufs;

  explicit SplitPairOf(bool indirect = true, bool event_idx = false) {
    ring.size = n;
    ring.desc = tm.alloc<SplitDesc>(split_desc_bytes(n), 16);
    ring.avail = tm.alloc<std::uint16_t>(split_avail_bytes(n), 2);
    ring.used = tm.alloc<std::uint16_t>(split_used_bytes(n), 4);
    EXPECT_TRUE(check_split_ring(ring));
    bufs = tm.alloc(64 * 1024);
    dev.init(ring, &tm.mem(), &dev_health, indirect, event_idx);
    drv.init(ring, &drv_health, event_idx);
  }
  std::uint64_t buf(std::size_t off) const { return tm.guest(bufs + off); }
  // Raw access for hostile tests: descriptor i and "make head available".
  void set(std::uint16_t i, std::uint64_t addr, std::uint32_t len, std::uint16_t flags, std::uint16_t next) {
    ring.desc[i] = SplitDesc{addr, len, flags, next};
  }
  void offer(std::uint16_t head) {
    const std::uint16_t idx = *ring.avail_idx();
    ring.avail_ring()[idx % n] = head;
    *ring.avail_idx() = static_cast<std::uint16_t>(idx + 1);
  }
  // The driver posts `count` chains of one 64-byte writable buffer (cookies 0 to count - 1)
  // and publishes them.
  void post_writable_chains(std::uint32_t count) {
    const Buffer b{buf(0), 64, true};
    for (std::uint32_t i = 0; i < count; ++i) ASSERT_TRUE(drv.post(&b, 1, i));
    drv.publish();
  }
};

using SplitPair = SplitPairOf<false>;

TEST(SplitRingCheck, RefusesBadSizesAndAlignment) {
  SplitPair p;
  SplitRing r = p.ring;
  for (std::uint32_t bad : {0u, 3u, 100u, 65536u}) {
    r.size = bad;
    auto c = check_split_ring(r);
    ASSERT_FALSE(c) << bad;
    EXPECT_NE(c.error().message.find("power of two"), std::string::npos);
  }
  r = p.ring;
  r.desc = reinterpret_cast<SplitDesc*>(reinterpret_cast<std::byte*>(r.desc) + 8);
  EXPECT_FALSE(check_split_ring(r));
}

TEST(Split, StagedUsedIsInvisibleUntilFlushedOrTwoCacheLinesOfEntriesAreFull) {
  SplitPair p;
  ASSERT_NO_FATAL_FAILURE(p.post_writable_chains(18));
  DefaultChain c;
  std::uint32_t cookies[32], lens[32];
  auto stage = [&](std::uint32_t k) {
    for (std::uint32_t i = 0; i < k; ++i) {
      ASSERT_EQ(p.dev.pop(c), Pop::chain);
      p.dev.stage_used(c.id, 1);
    }
  };
  stage(15);
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 0);
  stage(1);  // the sixteenth entry: the used index goes out without a flush
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 16);
  stage(2);
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 0);
  p.dev.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, lens, 32), 2);
  EXPECT_EQ(cookies[0], 16u);
  EXPECT_EQ(cookies[1], 17u);
}

// Both driver variants: descriptors from the free list, and in table order (IN_ORDER).
template <bool InOrder>
void chains_round_trip() {
  SplitPairOf<InOrder> p;
  DefaultChain c;
  std::uint32_t got = 0, len = 0;
  for (std::uint32_t i = 0; i < 70000; ++i) {  // past the 16-bit index wrap
    std::memset(p.bufs, static_cast<int>(i & 0xff), 76);
    const Buffer b[2] = {{p.buf(0), 12, false}, {p.buf(12), 64, false}};
    ASSERT_TRUE(p.drv.post(b, 2, i));
    if (i % 3 == 0) {
      const Buffer w{p.buf(4096), 2048, true};
      ASSERT_TRUE(p.drv.post(&w, 1, i + 1000000));
    }
    p.drv.publish();
    for (;;) {
      const Pop r = p.dev.pop(c);
      if (r == Pop::empty) break;
      ASSERT_EQ(r, Pop::chain);
      if (c.readable == 2) {
        ASSERT_EQ(c.segments, 2);
        EXPECT_EQ(c.readable_bytes, 76u);
        EXPECT_EQ(c.seg[0].host, p.bufs);
        EXPECT_EQ(c.seg[1].host, p.bufs + 12);
        EXPECT_EQ(std::to_integer<std::uint32_t>(c.seg[1].host[63]), i & 0xff);
        p.dev.push_used(c.id, 0);
      } else {
        ASSERT_EQ(c.segments, 1);
        EXPECT_EQ(c.readable, 0);
        EXPECT_EQ(c.writable_bytes, 2048u);
        p.dev.push_used(c.id, 100);
      }
    }
    p.dev.flush_used();
    std::uint32_t cookies[4], lens[4];
    const std::uint16_t k = p.drv.reclaim(cookies, lens, 4);
    ASSERT_EQ(k, i % 3 == 0 ? 2 : 1);
    EXPECT_EQ(cookies[0], i);
    got += k;
    if (k == 2) {
      EXPECT_EQ(cookies[1], i + 1000000);
      EXPECT_EQ(lens[1], 100u);
      len += lens[1];
    }
  }
  EXPECT_EQ(p.drv.free_descs(), p.n);
  EXPECT_EQ(p.drv.outstanding(), 0);
  EXPECT_FALSE(p.dev_health.broken());
  EXPECT_FALSE(p.drv_health.broken());
  EXPECT_EQ(p.dev.last_avail_idx(), p.drv.avail_idx());
  // Every chain came back once: 70000 two-descriptor chains, and a writable one for every third.
  EXPECT_EQ(got, 70000u + 23334u);
  EXPECT_EQ(len, 23334u * 100u);
}

class SplitRoundTrip : public ::testing::TestWithParam<bool> {};

TEST_P(SplitRoundTrip, ChainsRoundTripThroughTheWrapOfEveryIndex) {
  GetParam() ? chains_round_trip<true>() : chains_round_trip<false>();
}

std::string driver_mode(const ::testing::TestParamInfo<bool>& mode) { return mode.param ? "InOrder" : "FreeList"; }
INSTANTIATE_TEST_SUITE_P(Split, SplitRoundTrip, ::testing::Bool(), driver_mode);

// IN_ORDER (virtio 1.2 §2.7.8.2): chains take the table in order, across its end; a device may
// write only the last used entry of a batch, so the driver reclaims by count, never by the ids
// it reads; the avail ring, the same after a lap, is not written again.
TEST(Split, InOrderDriverTakesTheTableInOrderAndReclaimsByCount) {
  SplitPairOf<true> p;
  constexpr std::uint16_t n = SplitPairOf<true>::n;
  const Buffer one{p.buf(0), 64, false};
  const Buffer two[2] = {{p.buf(0), 12, false}, {p.buf(12), 64, false}};
  ASSERT_TRUE(p.drv.post(&one, 1, 10));
  ASSERT_TRUE(p.drv.post(two, 2, 11));
  ASSERT_TRUE(p.drv.post(&one, 1, 12));
  p.drv.publish();
  EXPECT_EQ(p.ring.avail_ring()[0], 0);
  EXPECT_EQ(p.ring.avail_ring()[1], 1);
  EXPECT_EQ(p.ring.avail_ring()[2], 3);
  EXPECT_EQ(p.ring.desc[1].flags, desc_flag::next);
  EXPECT_EQ(p.ring.desc[1].next, 2);
  // The device used all three; as one that writes only a batch's last entry, the first two
  // entries hold garbage.
  DefaultChain c;
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    p.dev.push_used(c.id, 0);
  }
  p.dev.flush_used();
  p.ring.used_ring()[0] = {999, 7};
  p.ring.used_ring()[1] = {999, 7};
  std::uint32_t cookies[n], lens[n];
  ASSERT_EQ(p.drv.reclaim(cookies, nullptr, n), 3);
  EXPECT_EQ(cookies[0], 10u);
  EXPECT_EQ(cookies[1], 11u);
  EXPECT_EQ(cookies[2], 12u);
  EXPECT_FALSE(p.drv_health.broken());
  EXPECT_EQ(p.drv.free_descs(), n);

  // Up to the table's end; then a chain of two wraps: its head is the last descriptor.
  for (std::uint32_t i = 4; i < n - 1u; ++i) ASSERT_TRUE(p.drv.post(&one, 1, i));
  ASSERT_TRUE(p.drv.post(two, 2, 1000));
  p.drv.publish();
  EXPECT_EQ(p.ring.avail_ring()[(n - 2) % n], n - 1);
  EXPECT_EQ(p.ring.desc[n - 1].next, 0);
  std::uint32_t popped = 0;
  for (Pop r; (r = p.dev.pop(c)) == Pop::chain; ++popped) p.dev.push_used(c.id, 0);
  EXPECT_EQ(c.id, n - 1);
  EXPECT_EQ(c.segments, 2);
  EXPECT_EQ(c.seg[1].host, p.bufs + 12);
  p.dev.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, lens, n), popped);
  EXPECT_EQ(cookies[popped - 1], 1000u);

  // A full lap of one-descriptor chains: the next head is descriptor 1 (the wrapped chain took
  // n - 1 and 0), at avail slot n - 1.
  for (std::uint32_t i = 0; i < n; ++i) ASSERT_TRUE(p.drv.post(&one, 1, i)) << i;
  p.drv.publish();
  for (std::uint32_t i = 0; i < n; ++i) {
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    EXPECT_EQ(c.id, (i + 1) % n);
    p.dev.push_used(c.id, 64);
  }
  p.dev.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, lens, n), n);
  EXPECT_EQ(lens[0], 64u);
  EXPECT_EQ(p.ring.avail_ring()[(n - 1 + 0) % n], 1);
  EXPECT_FALSE(p.dev_health.broken());
  EXPECT_FALSE(p.drv_health.broken());
}

// The out-of-order driver frees chains first in, first out: while the device completes them in
// order, each lap posts the same ids at the same avail slots, so the avail ring is not written
// again (a store there would take its line back from the device). Completions out of order
// still come back whole.
TEST(Split, OutOfOrderDriverReusesAvailSlotsWhileCompletionsComeInOrder) {
  SplitPair p;
  constexpr std::uint32_t n = SplitPair::n;
  std::uint32_t cookies[n];
  DefaultChain c;
  auto lap = [&](std::uint32_t chains) {
    p.post_writable_chains(chains);
    for (std::uint32_t i = 0; i < chains; ++i) {
      ASSERT_EQ(p.dev.pop(c), Pop::chain);
      p.dev.push_used(c.id, 64);
    }
    p.dev.flush_used();
    ASSERT_EQ(p.drv.reclaim(cookies, nullptr, n), chains);
  };
  for (int k = 0; k < 8; ++k) lap(32);  // one lap of the ring in bursts of 32
  std::uint16_t first_lap[n];
  std::memcpy(first_lap, p.ring.avail_ring(), sizeof first_lap);
  for (std::uint32_t s = 0; s < n; ++s) EXPECT_EQ(first_lap[s], s);
  for (int k = 0; k < 8; ++k) lap(32);
  for (std::uint32_t s = 0; s < n; ++s) EXPECT_EQ(p.ring.avail_ring()[s], s) << "slot " << s << " changed";

  // Out of order: the device completes three chains last to first; all come back, and the ids
  // are posted again.
  p.post_writable_chains(3);
  DefaultChain got[3];
  for (auto& g : got) ASSERT_EQ(p.dev.pop(g), Pop::chain);
  for (int i = 2; i >= 0; --i) p.dev.push_used(got[i].id, 64);
  p.dev.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, nullptr, n), 3);
  EXPECT_EQ(cookies[0], 2u);
  EXPECT_EQ(cookies[2], 0u);
  EXPECT_EQ(p.drv.free_descs(), n);
  for (int k = 0; k < 9; ++k) lap(32);
  EXPECT_FALSE(p.drv_health.broken());
  EXPECT_FALSE(p.dev_health.broken());
}

// As the packed test of the same name: a burst posted through begin_posts()/add()/end_posts()
// writes the descriptor table and avail ring that post() one chain at a time writes, over laps of
// the ring, with chains of two descriptors and completions out of order.
TEST(Split, ABurstPostedOnACopyOfTheStateWritesWhatPostsOneByOneWrite) {
  SplitPair one, burst;
  constexpr std::uint32_t n = SplitPair::n;
  const Buffer b[3] = {{one.buf(0), 12, false}, {one.buf(64), 64, false}, {one.buf(128), 64, false}};
  std::uint32_t cookie = 0;
  for (std::uint32_t round = 0; round < 40; ++round) {  // 40 bursts of 20 descriptors: three laps
    const std::uint16_t chains[13] = {1, 2, 1, 1, 2, 2, 1, 1, 2, 1, 2, 1, 3};
    std::uint32_t descs = 0;
    for (std::uint16_t k : chains) {
      ASSERT_TRUE(one.drv.post(b, k, cookie++));
      descs += k;
    }
    auto posts = burst.drv.begin_posts();
    cookie -= 13;
    for (std::uint16_t k : chains) ASSERT_TRUE(posts.add(b, k, cookie++));
    burst.drv.end_posts(posts);
    one.drv.publish();
    burst.drv.publish();
    ASSERT_EQ(burst.drv.free_descs(), one.drv.free_descs());
    ASSERT_EQ(burst.drv.avail_idx(), one.drv.avail_idx());
    ASSERT_EQ(std::memcmp(one.ring.desc, burst.ring.desc, split_desc_bytes(n)), 0) << round;
    ASSERT_EQ(std::memcmp(one.ring.avail, burst.ring.avail, split_avail_bytes(n)), 0) << round;
    // Both devices complete the burst's chains last first.
    std::uint32_t got_one[13], got_burst[13];
    for (SplitPair* p : {&one, &burst}) {
      DefaultChain c[13];
      for (auto& x : c) ASSERT_EQ(p->dev.pop(x), Pop::chain);
      for (int k = 12; k >= 0; --k) p->dev.push_used(c[k].id, 64);
      p->dev.flush_used();
    }
    ASSERT_EQ(one.drv.reclaim(got_one, nullptr, 13), 13);
    ASSERT_EQ(burst.drv.reclaim(got_burst, nullptr, 13), 13);
    EXPECT_EQ(std::memcmp(got_one, got_burst, sizeof got_one), 0) << round;
    EXPECT_EQ(descs, 20u);
  }
  EXPECT_FALSE(burst.drv_health.broken());
}

TEST(Split, FullRingRefusesPostsUntilReclaimed) {
  SplitPair p;
  const Buffer b{p.buf(0), 64, false};
  for (std::uint32_t i = 0; i < SplitPair::n; ++i) ASSERT_TRUE(p.drv.post(&b, 1, i));
  EXPECT_FALSE(p.drv.post(&b, 1, 999));
  p.drv.publish();
  DefaultChain c;
  for (std::uint32_t i = 0; i < SplitPair::n; ++i) {
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    p.dev.push_used(c.id, 0);
  }
  EXPECT_EQ(p.dev.pop(c), Pop::empty);
  p.dev.flush_used();
  std::uint32_t cookies[SplitPair::n];
  EXPECT_EQ(p.drv.reclaim(cookies, nullptr, SplitPair::n), SplitPair::n);
  EXPECT_TRUE(p.drv.post(&b, 1, 999));
}

TEST(Split, UnpoppedChainsPopAgain) {
  SplitPair p;
  ASSERT_NO_FATAL_FAILURE(p.post_writable_chains(3));
  DefaultChain c;
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  const std::uint16_t second = c.id;
  p.dev.unpop(1);
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  EXPECT_EQ(c.id, second);
  EXPECT_EQ(p.dev.last_avail_idx(), 2);
}

TEST(Split, IndirectTableIsWalkedAsOneChain) {
  SplitPair p;
  auto* table = p.tm.alloc<SplitDesc>(3 * 16, 16);
  table[0] = {p.buf(0), 12, desc_flag::next, 2};
  table[2] = {p.buf(100), 50, desc_flag::next, 1};
  table[1] = {p.buf(200), 1000, desc_flag::write, 0};
  p.set(5, p.tm.guest(table), 48, desc_flag::indirect, 0);
  p.offer(5);
  DefaultChain c;
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  EXPECT_EQ(c.id, 5);
  EXPECT_EQ(c.segments, 3);
  EXPECT_EQ(c.readable, 2);
  EXPECT_EQ(c.readable_bytes, 62u);
  EXPECT_EQ(c.writable_bytes, 1000u);
  EXPECT_EQ(c.seg[1].host, p.bufs + 100);
}

TEST(Split, EventSuppressionAndEventIndex) {
  SplitPair p(true, true);
  const Buffer b{p.buf(0), 64, false};
  *p.ring.avail_event() = 0;  // device wants a kick when avail idx passes 0
  ASSERT_TRUE(p.drv.post(&b, 1, 1));
  EXPECT_TRUE(p.drv.publish());
  ASSERT_TRUE(p.drv.post(&b, 1, 2));
  EXPECT_FALSE(p.drv.publish()) << "event index 0 already passed";
  DefaultChain c;
  *p.ring.used_event() = 1;
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  p.dev.push_used(c.id, 0);
  p.dev.flush_used();
  EXPECT_FALSE(p.dev.needs_notify()) << "used idx 1 has not passed used_event 1";
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  p.dev.push_used(c.id, 0);
  p.dev.flush_used();
  EXPECT_TRUE(p.dev.needs_notify());

  SplitPair q;  // without EVENT_IDX: the flags decide
  q.dev.suppress_kicks(true);
  ASSERT_TRUE(q.drv.post(&b, 1, 1));
  EXPECT_FALSE(q.drv.publish());
  q.dev.suppress_kicks(false);
  EXPECT_TRUE(q.drv.publish());
  q.drv.suppress_interrupts(true);
  EXPECT_FALSE(q.dev.needs_notify());
  q.drv.suppress_interrupts(false);
  EXPECT_TRUE(q.dev.needs_notify());
}

// Each hostile case writes raw descriptors and expects one refusal reason.
struct Hostile {
  std::string name;
  QueueError expect;
  std::function<void(SplitPair&)> post;
  bool indirect = true;
};

class SplitHostile : public ::testing::TestWithParam<Hostile> {};

TEST_P(SplitHostile, IsRefusedCountedAndBreaksOnlyItsQueue) {
  const Hostile& h = GetParam();
  SplitPair p(h.indirect);
  SplitPair good;  // another queue on other memory keeps working
  h.post(p);
  DefaultChain c;
  EXPECT_EQ(p.dev.pop(c), Pop::broken) << h.name;
  EXPECT_TRUE(p.dev_health.broken());
  EXPECT_EQ(p.dev_health.first_error(), h.expect) << queue_error_name(p.dev_health.first_error());
  EXPECT_EQ(p.dev_health.count(h.expect), 1u);
  EXPECT_EQ(p.dev.pop(c), Pop::broken) << "sticky";
  EXPECT_EQ(p.dev_health.total(), 1u) << "a broken queue does no further work";
  const Buffer b{good.buf(0), 64, false};
  ASSERT_TRUE(good.drv.post(&b, 1, 7));
  good.drv.publish();
  EXPECT_EQ(good.dev.pop(c), Pop::chain);
  p.dev_health.reset();
  EXPECT_FALSE(p.dev_health.broken());
}

constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint16_t NX = desc_flag::next, WR = desc_flag::write, IND = desc_flag::indirect;

// An indirect table of `k` entries at a fresh spot, returned for filling.
SplitDesc* table(SplitPair& p, std::size_t k) { return p.tm.alloc<SplitDesc>(k * 16, 16); }

const Hostile hostile_cases[] = {
    {"head_beyond_ring", QueueError::head_out_of_range, [](SplitPair& p) { p.offer(SplitPair::n); }},
    {"head_max", QueueError::head_out_of_range, [](SplitPair& p) { p.offer(0xffff); }},
    {"next_beyond_ring", QueueError::next_out_of_range,
     [](SplitPair& p) {
       p.set(0, p.buf(0), 64, NX, SplitPair::n);
       p.offer(0);
     }},
    {"two_descriptor_loop", QueueError::too_many_segments,  // the segment bound comes first
     [](SplitPair& p) {
       p.set(0, p.buf(0), 64, NX, 1);
       p.set(1, p.buf(0), 64, NX, 0);
       p.offer(0);
     }},
    {"self_loop", QueueError::too_many_segments,
     [](SplitPair& p) {
       p.set(3, p.buf(0), 0, NX, 3);
       p.offer(3);
     }},
    {"address_outside_memory", QueueError::bad_address,
     [](SplitPair& p) {
       p.set(0, 0x1000, 64, 0, 0);
       p.offer(0);
     }},
    {"crosses_region_end", QueueError::bad_address,
     [](SplitPair& p) {
       p.set(0, p.tm.end() - 8, 64, 0, 0);
       p.offer(0);
     }},
    {"address_plus_length_overflows", QueueError::bad_address,
     [](SplitPair& p) {
       p.set(0, max64 - 4, 64, 0, 0);
       p.offer(0);
     }},
    {"zero_length_bogus_address", QueueError::bad_address,
     [](SplitPair& p) {
       p.set(0, 0xdead0000, 0, 0, 0);
       p.offer(0);
     }},
    {"readable_after_writable", QueueError::read_after_write,
     [](SplitPair& p) {
       p.set(0, p.buf(0), 64, WR | NX, 1);
       p.set(1, p.buf(64), 64, 0, 0);
       p.offer(0);
     }},
    {"too_many_segments", QueueError::too_many_segments,
     [](SplitPair& p) {
       for (std::uint16_t i = 0; i < default_max_segments + 1; ++i) p.set(i, p.buf(i), 1, NX, i + 1);
       p.set(default_max_segments + 1, p.buf(0), 1, 0, 0);
       p.offer(0);
     }},
    {"avail_index_jump", QueueError::avail_index_jump, [](SplitPair& p) { *p.ring.avail_idx() = SplitPair::n + 1; }},
    {"indirect_zero_length", QueueError::indirect_bad_length,
     [](SplitPair& p) {
       p.set(0, p.tm.guest(table(p, 1)), 0, IND, 0);
       p.offer(0);
     }},
    {"indirect_length_not_multiple_of_16", QueueError::indirect_bad_length,
     [](SplitPair& p) {
       p.set(0, p.tm.guest(table(p, 2)), 20, IND, 0);
       p.offer(0);
     }},
    {"indirect_larger_than_ring", QueueError::indirect_bad_length,
     [](SplitPair& p) {
       p.set(0, p.tm.guest(table(p, SplitPair::n + 1)), (SplitPair::n + 1) * 16, IND, 0);
       p.offer(0);
     }},
    {"indirect_table_outside_memory", QueueError::bad_address,
     [](SplitPair& p) {
       p.set(0, p.tm.end() - 16, 32, IND, 0);
       p.offer(0);
     }},
    {"indirect_misaligned", QueueError::bad_address,
     [](SplitPair& p) {
       auto* t = table(p, 3);
       p.set(0, p.tm.guest(t) + 4, 32, IND, 0);
       p.offer(0);
     }},
    {"indirect_nested", QueueError::indirect_nested,
     [](SplitPair& p) {
       auto* t = table(p, 2);
       t[0] = {p.buf(0), 64, NX, 1};
       t[1] = {p.tm.guest(t), 32, IND, 0};
       p.set(0, p.tm.guest(t), 32, IND, 0);
       p.offer(0);
     }},
    {"indirect_with_next", QueueError::indirect_with_next,
     [](SplitPair& p) {
       auto* t = table(p, 1);
       t[0] = {p.buf(0), 64, 0, 0};
       p.set(0, p.tm.guest(t), 16, IND | NX, 1);
       p.set(1, p.buf(0), 64, 0, 0);
       p.offer(0);
     }},
    {"indirect_without_feature", QueueError::indirect_disabled,
     [](SplitPair& p) {
       auto* t = table(p, 1);
       t[0] = {p.buf(0), 64, 0, 0};
       p.set(0, p.tm.guest(t), 16, IND, 0);
       p.offer(0);
     },
     false},
    {"indirect_loop", QueueError::chain_loop,
     [](SplitPair& p) {
       auto* t = table(p, 2);
       t[0] = {p.buf(0), 64, NX, 1};
       t[1] = {p.buf(0), 64, NX, 0};
       p.set(0, p.tm.guest(t), 32, IND, 0);
       p.offer(0);
     }},
    {"indirect_next_beyond_table", QueueError::next_out_of_range,
     [](SplitPair& p) {
       auto* t = table(p, 2);
       t[0] = {p.buf(0), 64, NX, 2};
       p.set(0, p.tm.guest(t), 32, IND, 0);
       p.offer(0);
     }},
    {"indirect_entry_bad_address", QueueError::bad_address,
     [](SplitPair& p) {
       auto* t = table(p, 1);
       t[0] = {max64 - 1, 64, 0, 0};
       p.set(0, p.tm.guest(t), 16, IND, 0);
       p.offer(0);
     }},
};

INSTANTIATE_TEST_SUITE_P(Descriptors, SplitHostile, ::testing::ValuesIn(hostile_cases),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(Split, LoopsAreBoundedByTheRingSizeWhateverTheSegmentLimit) {
  SplitPair p;
  QueueHealth health;
  SplitDevice<1024> dev;  // more segments than the ring has descriptors
  dev.init(p.ring, &p.tm.mem(), &health, true, false);
  p.set(0, p.buf(0), 64, NX, 1);
  p.set(1, p.buf(0), 64, NX, 0);
  p.offer(0);
  SplitDevice<1024>::ChainT c;
  EXPECT_EQ(dev.pop(c), Pop::broken);
  EXPECT_EQ(health.first_error(), QueueError::chain_loop);
}

TEST(SplitDriverSide, RefusesUsedIdsItNeverPostedAndIndexJumps) {
  SplitPair p;
  const Buffer b{p.buf(0), 64, false};
  ASSERT_TRUE(p.drv.post(&b, 1, 1));
  p.drv.publish();
  p.ring.used_ring()[0] = {7, 0};  // descriptor 7 was never posted
  *p.ring.used_idx() = 1;
  std::uint32_t cookies[4];
  EXPECT_EQ(p.drv.reclaim(cookies, nullptr, 4), 0);
  EXPECT_EQ(p.drv_health.first_error(), QueueError::used_bad_id);

  SplitPair q;
  ASSERT_TRUE(q.drv.post(&b, 1, 1));
  q.drv.publish();
  *q.ring.used_idx() = 2;  // more used than outstanding
  EXPECT_EQ(q.drv.reclaim(cookies, nullptr, 4), 0);
  EXPECT_EQ(q.drv_health.first_error(), QueueError::used_index_jump);
  EXPECT_EQ(queue_error_detail(q.drv_health.first_error(), q.drv_health.first_detail()),
            "used_index_jump (used idx 2 with 0 reclaimed)");
  EXPECT_EQ(q.drv.reclaim(cookies, nullptr, 4), 0) << "sticky";
}

// A backend replaced under a running ring (killed holding chains it took; the frontend sends
// base 0 again, as DPDK's virtio_user in server mode does): the new device resumes at the used
// index, takes again what the old one never returned, and the driver reclaims everything in
// order, with nothing lost or returned twice.
TEST(Split, ARestartResumesAtTheUsedIndexAndTakesAgainWhatWasNotReturned) {
  SplitPair p;
  const Buffer b{p.buf(0), 64, false};
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(p.drv.post(&b, 1, i));
  p.drv.publish();
  DefaultChain c;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(p.dev.pop(c), Pop::chain);
  for (std::uint16_t head = 0; head < 3; ++head) p.dev.push_used(head, 0);  // the old backend dies holding 2
  p.dev.flush_used();
  std::uint32_t cookies[8];
  ASSERT_EQ(p.drv.reclaim(cookies, nullptr, 8), 3);
  for (std::uint32_t i = 5; i < 7; ++i) ASSERT_TRUE(p.drv.post(&b, 1, i));  // the frontend runs on
  p.drv.publish();

  QueueHealth health;
  SplitDevice<> again;
  EXPECT_EQ(again.init(p.ring, &p.tm.mem(), &health, true, false), 3);
  std::uint16_t heads[4];
  for (auto& h : heads) {
    ASSERT_EQ(again.pop(c), Pop::chain);
    h = c.id;
  }
  EXPECT_EQ(again.pop(c), Pop::empty);
  for (const std::uint16_t h : heads) again.push_used(h, 0);
  again.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, nullptr, 8), 4);
  EXPECT_EQ(std::vector<std::uint32_t>(cookies, cookies + 4), (std::vector<std::uint32_t>{3, 4, 5, 6}));
  EXPECT_FALSE(health.broken());
  EXPECT_EQ(again.last_avail_idx(), 7) << "GET_VRING_BASE answers from where the ring resumed";
}

// The same across the 16-bit wrap of both indices, with the ring as full as a driver can make it.
TEST(Split, ARestartResumesAcrossTheIndexWrap) {
  SplitPair p;
  const std::uint16_t used = 0xff80;
  *p.ring.used_idx() = used;
  *p.ring.avail_idx() = used;
  for (std::uint16_t i = 0; i < SplitPair::n; ++i) {
    p.set(i, p.buf(0), 64, 0, 0);
    p.offer(i);
  }
  QueueHealth health;
  SplitDevice<> dev;
  ASSERT_EQ(dev.init(p.ring, &p.tm.mem(), &health, true, false), used);
  DefaultChain c;
  for (std::uint16_t i = 0; i < SplitPair::n; ++i) {
    ASSERT_EQ(dev.pop(c), Pop::chain) << i;
    EXPECT_EQ(c.id, i);
    dev.push_used(c.id, 0);
  }
  EXPECT_EQ(dev.pop(c), Pop::empty);
  dev.flush_used();
  EXPECT_EQ(*p.ring.used_idx(), static_cast<std::uint16_t>(used + SplitPair::n));
  EXPECT_FALSE(health.broken());
}

// What no restart can produce is still refused: the resync takes the used index as given (a
// frontend writes it as freely as the base), and bounds the avail index from it. The base the
// frontend sends plays no part, so claiming one next to the avail index gains nothing.
TEST(Split, ARestartFromAUsedIndexNoDriverCouldHaveIsStillAJump) {
  struct Case {
    const char* name;
    std::uint16_t used, avail;
    const char* detail;
  };
  const Case cases[] = {
      {"more outstanding than the ring holds", 1000, 1000 + SplitPair::n + 1,
       "avail_index_jump (avail idx 1257 with 1000 taken)"},
      {"used index far behind (a base next to avail claimed)", 5000 - 300, 5000,
       "avail_index_jump (avail idx 5000 with 4700 taken)"},
      {"used index ahead of the avail index", 100, 50, "avail_index_jump (avail idx 50 with 100 taken)"},
  };
  for (const Case& k : cases) {
    SplitPair p;
    for (std::uint16_t i = 0; i < SplitPair::n; ++i) p.set(i, p.buf(0), 64, 0, 0);
    *p.ring.used_idx() = k.used;
    *p.ring.avail_idx() = k.avail;
    QueueHealth health;
    SplitDevice<> dev;
    EXPECT_EQ(dev.init(p.ring, &p.tm.mem(), &health, true, false), k.used) << k.name;
    DefaultChain c;
    EXPECT_EQ(dev.pop(c), Pop::broken) << k.name;
    EXPECT_EQ(queue_error_detail(health.first_error(), health.first_detail()), k.detail) << k.name;
  }
}

// The first error keeps what was seen: the log line of a broken ring says which index jumped.
TEST(Split, AnIndexJumpIsReportedWithTheIndices) {
  SplitPair p;
  const Buffer b{p.buf(0), 64, false};
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(p.drv.post(&b, 1, i));
  p.drv.publish();
  DefaultChain c;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(p.dev.pop(c), Pop::chain);
  *p.ring.avail_idx() = 2;  // behind what was taken
  EXPECT_EQ(p.dev.pop(c), Pop::broken);
  EXPECT_EQ(queue_error_detail(p.dev_health.first_error(), p.dev_health.first_detail()),
            "avail_index_jump (avail idx 2 with 3 taken)");
  EXPECT_EQ(queue_error_detail(QueueError::bad_address, 0), "bad_address");
}

}  // namespace
// Chains taken and not yet returned count against the ring: a driver that announces more than
// the ring holds beyond them (it re-offers heads we hold) breaks the ring.
TEST(Split, MoreAvailableThanTheRingHoldsBeyondWhatWeHoldIsAJump) {
  SplitPair p;
  for (std::uint16_t i = 0; i < SplitPair::n; ++i) {
    p.set(i, p.buf(0), 64, 0, 0);
    p.offer(i);
  }
  DefaultChain c;
  for (std::uint32_t i = 0; i < SplitPair::n; ++i) ASSERT_EQ(p.dev.pop(c), Pop::chain) << i;
  p.dev.stage_used(0, 0);  // one returned: room for exactly one more
  p.offer(0);
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  p.offer(1);  // a head we still hold, offered again
  EXPECT_EQ(p.dev.pop(c), Pop::broken);
  EXPECT_EQ(p.dev_health.first_error(), QueueError::avail_index_jump);
}

}  // namespace ws::virtio
