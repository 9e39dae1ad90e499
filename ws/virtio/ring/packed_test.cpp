// SPDX-License-Identifier: BSD-3-Clause
// Packed virtqueue: driver and device engines against each other (chains across the ring end,
// wrap counters, in-order batches, indirect tables, event suppression), then hostile input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ws/virtio/ring/packed_device.hpp"
#include "ws/virtio/ring/packed_driver.hpp"
#include "ws/virtio/ring/test_memory.hpp"

namespace ws::virtio {
namespace {

using test::TestMemory;
constexpr std::uint16_t NX = desc_flag::next, WR = desc_flag::write, IND = desc_flag::indirect;
constexpr std::uint16_t AV = desc_flag::avail, US = desc_flag::used;

// InOrder: the driver's variant for a negotiated IN_ORDER.
template <bool InOrder>
struct PackedPairOf {
  TestMemory tm{1 << 20};
  PackedRing ring;
  QueueHealth dev_health, drv_health;
  PackedDevice<> dev;
  PackedDriver<std::uint32_t, InOrder> drv;
  std::byte* bufs;

  explicit PackedPairOf(std::uint32_t n = 256, bool indirect = true, bool event_idx = false) {
    ring.size = n;
    ring.desc = tm.alloc<PackedDesc>(packed_desc_bytes(n), 16);
    ring.driver_event = tm.alloc<EventSuppress>(4, 4);
    ring.device_event = tm.alloc<EventSuppress>(4, 4);
    EXPECT_TRUE(check_packed_ring(ring));
    bufs = tm.alloc(64 * 1024);
    dev.init(ring, &tm.mem(), &dev_health, indirect, event_idx, 0x8000);  // wrap counter 1
    drv.init(ring, &drv_health, event_idx);
  }
  std::uint64_t buf(std::size_t off) const { return tm.guest(bufs + off); }
  // Writes descriptor i as available for the first lap (wrap counter 1).
  void set(std::uint16_t i, std::uint64_t addr, std::uint32_t len, std::uint16_t id, std::uint16_t flags) {
    ring.desc[i] = PackedDesc{addr, len, id, static_cast<std::uint16_t>(flags | AV)};
  }
};

using PackedPair = PackedPairOf<false>;

TEST(PackedRingCheck, RefusesBadSizes) {
  PackedPair p;
  PackedRing r = p.ring;
  r.size = 0;
  EXPECT_FALSE(check_packed_ring(r));
  r.size = 40000;
  EXPECT_FALSE(check_packed_ring(r));
  r.size = 5;  // not a power of two: fine for packed
  EXPECT_TRUE(check_packed_ring(r));
}

template <bool InOrder>
void chains_cross_the_ring_end() {
  PackedPairOf<InOrder> p(7);  // odd size: chains of 2 straddle the end every other lap
  PackedDevice<>::ChainT c;
  std::uint32_t cookies[8], lens[8];
  for (std::uint32_t i = 0; i < 5000; ++i) {
    const Buffer b[2] = {{p.buf(0), 12, false}, {p.buf(12 + i % 100), 64, false}};
    ASSERT_TRUE(p.drv.post(b, 2, i));
    const Buffer w{p.buf(4096), 1500, true};
    ASSERT_TRUE(p.drv.post(&w, 1, i + 100000));
    p.drv.publish();
    ASSERT_EQ(p.dev.pop(c), Pop::chain) << i;
    ASSERT_EQ(c.segments, 2);
    EXPECT_EQ(c.seg[1].host, p.bufs + 12 + i % 100);
    EXPECT_EQ(c.ring_descs, 2);
    const auto first = c;
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    EXPECT_EQ(c.writable_bytes, 1500u);
    EXPECT_EQ(p.dev.pop(c), Pop::empty);
    if (InOrder && i % 2 == 0) {
      p.dev.push_used(c.id, 700, 3);  // §2.8.20: one used descriptor for the batch
    } else {
      p.dev.push_used(first.id, 0, first.ring_descs);
      p.dev.push_used(c.id, 700, c.ring_descs);
    }
    ASSERT_EQ(p.drv.reclaim(cookies, lens, 8), 2) << i;
    EXPECT_EQ(cookies[0], i);
    EXPECT_EQ(cookies[1], i + 100000);
    EXPECT_EQ(lens[1], 700u);
  }
  EXPECT_EQ(p.drv.free_descs(), 7u);
  EXPECT_FALSE(p.dev_health.broken());
  EXPECT_FALSE(p.drv_health.broken());
}

class PackedRoundTrip : public ::testing::TestWithParam<bool> {};  // in_order

TEST_P(PackedRoundTrip, ChainsCrossTheRingEndAndWrapCountersFlip) {
  GetParam() ? chains_cross_the_ring_end<true>() : chains_cross_the_ring_end<false>();
}

INSTANTIATE_TEST_SUITE_P(InOrder, PackedRoundTrip, ::testing::Bool());

TEST(Packed, UnpopRewindsAcrossTheRingEnd) {
  PackedPair p(5);
  const Buffer b[2] = {{p.buf(0), 64, true}, {p.buf(64), 64, true}};
  PackedDevice<>::ChainT c;
  std::uint32_t cookies[4];
  for (std::uint32_t i = 0; i < 2; ++i) {  // move to position 4 with wrap counter 1
    ASSERT_TRUE(p.drv.post(b, 2, i));
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    p.dev.push_used(c.id, 0, c.ring_descs);
    ASSERT_EQ(p.drv.reclaim(cookies, nullptr, 4), 1);
  }
  ASSERT_TRUE(p.drv.post(b, 2, 7));  // positions 4 and 0: straddles the end
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  const auto before = p.dev.last_avail_idx();
  EXPECT_EQ(before, 1) << "index 1, wrap counter flipped to 0";
  p.dev.unpop(c.ring_descs);
  EXPECT_EQ(p.dev.last_avail_idx(), 0x8004);
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  EXPECT_EQ(p.dev.last_avail_idx(), before);
}

TEST(Packed, InOrderBatchCutByTheBurstSizeResumes) {
  PackedPairOf<true> p(16);
  const Buffer b{p.buf(0), 64, false};
  PackedDevice<>::ChainT c;
  for (std::uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(p.drv.post(&b, 1, 20 + i));
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
  }
  p.dev.push_used(c.id, 64, 3);  // one used descriptor for the three chains
  std::uint32_t cookie = 0, len = 0;
  for (std::uint32_t i = 0; i < 3; ++i) {
    ASSERT_EQ(p.drv.reclaim(&cookie, &len, 1), 1) << i;
    EXPECT_EQ(cookie, 20 + i);
  }
  EXPECT_EQ(len, 64u);
  EXPECT_EQ(p.drv.reclaim(&cookie, &len, 1), 0);
  EXPECT_EQ(p.drv.outstanding(), 0u);
  EXPECT_FALSE(p.drv_health.broken());
}

TEST(Packed, OutOfOrderCompletionsReturnTheRightCookies) {
  PackedPair p(8);
  const Buffer b{p.buf(0), 64, false};
  for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(p.drv.post(&b, 1, 10 + i));
  PackedDevice<>::ChainT c[3];
  for (auto& x : c) ASSERT_EQ(p.dev.pop(x), Pop::chain);
  p.dev.push_used(c[2].id, 3, 1);
  p.dev.push_used(c[0].id, 1, 1);
  p.dev.push_used(c[1].id, 2, 1);
  std::uint32_t cookies[4], lens[4];
  ASSERT_EQ(p.drv.reclaim(cookies, lens, 4), 3);
  EXPECT_EQ(cookies[0], 12u);
  EXPECT_EQ(cookies[1], 10u);
  EXPECT_EQ(cookies[2], 11u);
}

// Free ids wait in a FIFO ring sized to a power of two, larger than a ring of 5. Lap after lap,
// with the device completing in a different order each time, every id the driver posts must be
// free (none outstanding twice) and every cookie must come back once.
TEST(Packed, OutOfOrderIdsStayUniqueOnARingOfNoPowerOfTwoSize) {
  PackedPair p(5);
  const Buffer b{p.buf(0), 64, false};
  std::uint32_t next = 0;
  for (std::uint32_t lap = 0; lap < 12; ++lap) {
    const std::uint32_t first = next;
    while (p.drv.post(&b, 1, next)) ++next;
    ASSERT_EQ(next - first, 5u) << lap;
    PackedDevice<>::ChainT c[5];
    bool seen[5] = {};
    for (auto& x : c) {
      ASSERT_EQ(p.dev.pop(x), Pop::chain);
      ASSERT_LT(x.id, 5) << lap;
      ASSERT_FALSE(seen[x.id]) << "id " << x.id << " posted twice, lap " << lap;
      seen[x.id] = true;
    }
    for (std::uint32_t k = 0; k < 5; ++k) {
      const auto& x = c[(2 * k + lap) % 5];
      p.dev.push_used(x.id, 1, x.ring_descs);
    }
    std::uint32_t cookies[6], lens[6];
    ASSERT_EQ(p.drv.reclaim(cookies, lens, 6), 5) << lap;
    std::sort(cookies, cookies + 5);
    for (std::uint32_t k = 0; k < 5; ++k) EXPECT_EQ(cookies[k], first + k) << lap;
  }
  EXPECT_FALSE(p.drv_health.broken());
}

// A burst posts through begin_posts()/add()/end_posts(), on a copy of the driver's state: the
// ring it writes, what the driver reclaims and what stays free must be what post() one chain at a
// time gives, across the ring's end, with chains of two descriptors and ids freed out of order.
TEST(Packed, ABurstPostedOnACopyOfTheStateWritesWhatPostsOneByOneWrite) {
  PackedPair one(7), burst(7);  // 7 slots: chains straddle the end, wrap counters flip mid-burst
  const Buffer b[4] = {
      {one.buf(0), 12, false}, {one.buf(64), 64, false}, {one.buf(128), 64, false}, {one.buf(192), 64, false}};
  std::uint32_t cookie = 0;
  for (std::uint32_t lap = 0; lap < 6; ++lap) {
    const std::uint16_t chains[3] = {1, 2, 1};
    for (std::uint16_t n : chains) ASSERT_TRUE(one.drv.post(b, n, cookie++));
    auto posts = burst.drv.begin_posts();
    cookie -= 3;
    for (std::uint16_t n : chains) ASSERT_TRUE(posts.add(b, n, cookie++));
    EXPECT_FALSE(posts.add(b, 4, 99)) << "3 descriptors free: a chain of 4 does not fit";
    burst.drv.end_posts(posts);
    ASSERT_EQ(burst.drv.free_descs(), one.drv.free_descs());
    ASSERT_EQ(std::memcmp(one.ring.desc, burst.ring.desc, packed_desc_bytes(7)), 0) << lap;
    // The device completes the three chains last first, on both rings alike.
    for (PackedPair* p : {&one, &burst}) {
      PackedDevice<>::ChainT c[3];
      for (auto& x : c) ASSERT_EQ(p->dev.pop(x), Pop::chain);
      for (int k = 2; k >= 0; --k) p->dev.push_used(c[k].id, 10 + k, c[k].ring_descs);
    }
    std::uint32_t got_one[4], got_burst[4], lens[4];
    ASSERT_EQ(one.drv.reclaim(got_one, lens, 4), 3);
    ASSERT_EQ(burst.drv.reclaim(got_burst, lens, 4), 3);
    EXPECT_EQ(std::memcmp(got_one, got_burst, sizeof got_one - sizeof got_one[3]), 0) << lap;
  }
  EXPECT_FALSE(burst.drv_health.broken());
}

TEST(Packed, StagedUsedIsInvisibleUntilFlushedOrFourCacheLinesAreFull) {
  PackedPair p(64);
  const Buffer b{p.buf(0), 64, true};
  PackedDevice<>::ChainT c;
  std::uint32_t cookies[32], lens[32];
  for (std::uint32_t i = 0; i < 18; ++i) ASSERT_TRUE(p.drv.post(&b, 1, i));
  auto stage = [&](std::uint32_t k) {
    for (std::uint32_t i = 0; i < k; ++i) {
      ASSERT_EQ(p.dev.pop(c), Pop::chain);
      p.dev.stage_used(c.id, 1, c.ring_descs);
    }
  };
  stage(15);
  // Nothing is written to the ring before the batch is published: the driver sees nothing.
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 0);
  stage(1);  // slot 15 ends the first 4 cache lines of descriptors: published without a flush
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 16);
  stage(2);
  EXPECT_EQ(p.drv.reclaim(cookies, lens, 32), 0);
  p.dev.flush_used();
  ASSERT_EQ(p.drv.reclaim(cookies, lens, 32), 2);
  EXPECT_EQ(cookies[0], 16u);
  EXPECT_EQ(cookies[1], 17u);
}

TEST(Packed, StagedUsedBatchesCrossTheRingEnd) {
  PackedPair p(7);  // not a whole number of cache lines
  const Buffer b{p.buf(0), 64, true};
  PackedDevice<>::ChainT c;
  std::uint32_t cookies[4], lens[4];
  for (std::uint32_t lap = 0; lap < 5; ++lap) {  // 3 chains per lap on 7 slots: batches straddle the end
    for (std::uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(p.drv.post(&b, 1, 10 * lap + i));
    for (std::uint32_t i = 0; i < 3; ++i) {
      ASSERT_EQ(p.dev.pop(c), Pop::chain);
      p.dev.stage_used(c.id, 5 + i, c.ring_descs);
    }
    p.dev.flush_used();
    ASSERT_EQ(p.drv.reclaim(cookies, lens, 4), 3) << lap;
    for (std::uint32_t i = 0; i < 3; ++i) {
      EXPECT_EQ(cookies[i], 10 * lap + i);
      EXPECT_EQ(lens[i], 5 + i);
    }
    p.dev.flush_used();  // nothing staged: no effect
  }
  EXPECT_FALSE(p.drv_health.broken());
}

TEST(Packed, PopBatchTakesCacheLinesOfOneDescriptorChainsAcrossTheRingEnd) {
  for (const std::uint32_t size : {12u, 14u}) {  // a whole number of cache lines, and not
    PackedPair p(size);
    PackedDevice<>::Single b[PackedDevice<>::batch];
    PackedDevice<>::ChainT c;
    std::uint32_t cookies[16], lens[16];
    std::uint32_t batches = 0, singles = 0;
    for (std::uint32_t lap = 0; lap < 20; ++lap) {
      for (std::uint32_t i = 0; i < 8; ++i) {
        const Buffer buf{p.buf(100 * i), 60 + i, false};
        ASSERT_TRUE(p.drv.post(&buf, 1, 100 * lap + i));
      }
      std::uint32_t taken = 0;
      while (taken < 8) {
        if (p.dev.pop_batch<false>(b, 12, 1500)) {
          for (std::uint32_t k = 0; k < PackedDevice<>::batch; ++k) {
            const std::uint32_t i = taken + k;
            EXPECT_EQ(b[k].host, p.bufs + 100 * i) << size << "/" << lap;
            EXPECT_EQ(b[k].len, 60 + i);
            p.dev.stage_used(b[k].id, 0, 1);
          }
          taken += PackedDevice<>::batch;
          ++batches;
        } else {
          // Not at a cache line's start, or the line crosses the ring's end: one at a time.
          ASSERT_EQ(p.dev.pop(c), Pop::chain) << size << "/" << lap;
          p.dev.stage_used(c.id, 0, c.ring_descs);
          ++taken;
          ++singles;
        }
      }
      p.dev.flush_used();
      ASSERT_EQ(p.drv.reclaim(cookies, lens, 16), 8);
      for (std::uint32_t i = 0; i < 8; ++i) EXPECT_EQ(cookies[i], 100 * lap + i);
    }
    EXPECT_GT(batches, 20u) << size;
    if (size == 12) {
      EXPECT_EQ(singles, 0u);
    }
    EXPECT_FALSE(p.dev_health.broken());
    EXPECT_FALSE(p.drv_health.broken());
  }
}

// pop_batch takes nothing unless the whole line is plain; pop() then walks it and refuses what
// is hostile.
TEST(Packed, PopBatchLeavesAnyUnusualLineToPop) {
  PackedDevice<>::Single b[PackedDevice<>::batch];
  PackedDevice<>::ChainT c;
  struct Case {
    const char* what;
    std::function<void(PackedPair&)> line;  // writes descriptors 0..3
    Pop then;                               // what pop() makes of descriptor 0
  };
  auto plain = [](PackedPair& p, std::uint16_t i) { p.set(i, p.buf(64 * i), 64, i, 0); };
  const Case cases[] = {
      {"three available",
       [&](PackedPair& p) {
         for (std::uint16_t i = 0; i < 3; ++i) plain(p, i);
       },
       Pop::chain},
      {"a two-descriptor chain",
       [&](PackedPair& p) {
         plain(p, 0);
         p.set(1, p.buf(64), 64, 1, NX);
         plain(p, 2);
         plain(p, 3);
       },
       Pop::chain},
      {"an indirect table",
       [&](PackedPair& p) {
         plain(p, 0);
         plain(p, 1);
         plain(p, 2);
         p.set(3, p.buf(0), 16, 3, IND);
       },
       Pop::chain},
      {"a writable buffer",
       [&](PackedPair& p) {
         plain(p, 0);
         plain(p, 1);
         p.set(2, p.buf(0), 64, 2, WR);
         plain(p, 3);
       },
       Pop::chain},
      {"a length below min",
       [&](PackedPair& p) {
         plain(p, 0);
         plain(p, 1);
         plain(p, 2);
         p.set(3, p.buf(0), 8, 3, 0);
       },
       Pop::chain},
      {"an address outside guest memory",
       [&](PackedPair& p) {
         p.set(0, 0xdead00000000ull, 64, 0, 0);
         for (std::uint16_t i = 1; i < 4; ++i) plain(p, i);
       },
       Pop::broken},
      {"an id beyond the ring",
       [&](PackedPair& p) {
         for (std::uint16_t i = 0; i < 3; ++i) plain(p, i);
         p.set(3, p.buf(0), 64, 999, 0);
       },
       Pop::chain},
  };
  for (const Case& k : cases) {
    PackedPair p(64);
    k.line(p);
    EXPECT_FALSE(p.dev.pop_batch<false>(b, 12, 1500)) << k.what;
    EXPECT_EQ(p.dev.pop(c), k.then) << k.what << ": the batch took nothing";
    EXPECT_FALSE(p.dev.pop_batch<false>(b, 12, 1500)) << k.what << ": not at a line's start";
  }
  PackedPair p(64);
  for (std::uint16_t i = 0; i < 4; ++i) plain(p, i);
  EXPECT_FALSE(p.dev.pop_batch<true>(b, 12, 1500)) << "readable buffers where writable ones are wanted";
  EXPECT_FALSE(p.dev.pop_batch<false>(b, 12, 63)) << "a length above max";
  ASSERT_TRUE(p.dev.pop_batch<false>(b, 12, 64));
  EXPECT_EQ(b[3].id, 3);
  EXPECT_EQ(p.dev.pop(c), Pop::empty);
}

TEST(Packed, IndirectTableAndGetVringBase) {
  PackedPair p(8);
  auto* t = p.tm.alloc<PackedDesc>(32, 16);
  t[0] = {p.buf(0), 12, 0, 0};
  t[1] = {p.buf(100), 900, 0, WR};
  p.set(0, p.tm.guest(t), 32, 5, IND);
  PackedDevice<>::ChainT c;
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  EXPECT_EQ(c.id, 5);
  EXPECT_EQ(c.readable, 1);
  EXPECT_EQ(c.segments, 2);
  EXPECT_EQ(c.writable_bytes, 900u);
  EXPECT_EQ(p.dev.last_avail_idx(), 0x8001) << "index 1, wrap counter 1 in bit 15";
}

TEST(Packed, EventSuppression) {
  PackedPair p(8, true, true);
  const Buffer b{p.buf(0), 64, false};
  p.dev.suppress_kicks(true);
  ASSERT_TRUE(p.drv.post(&b, 1, 1));
  EXPECT_FALSE(p.drv.publish());
  p.dev.suppress_kicks(false);
  EXPECT_TRUE(p.drv.publish());
  PackedDevice<>::ChainT c;
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  p.dev.push_used(c.id, 0, 1);
  p.ring.driver_event->flags = EventSuppress::desc;
  p.ring.driver_event->off_wrap = 0x8000 | 3;  // interrupt when used passes 3 (wrap 1)
  EXPECT_FALSE(p.dev.needs_notify());
  p.drv.suppress_interrupts(true);
  EXPECT_FALSE(p.dev.needs_notify());
  p.drv.suppress_interrupts(false);
  EXPECT_TRUE(p.dev.needs_notify());
}

struct Hostile {
  std::string name;
  QueueError expect;
  std::function<void(PackedPair&)> post;
};
class PackedHostile : public ::testing::TestWithParam<Hostile> {};

TEST_P(PackedHostile, IsRefusedCountedAndSticky) {
  PackedPair p(16);
  GetParam().post(p);
  PackedDevice<>::ChainT c;
  EXPECT_EQ(p.dev.pop(c), Pop::broken) << GetParam().name;
  EXPECT_EQ(p.dev_health.first_error(), GetParam().expect) << queue_error_name(p.dev_health.first_error());
  EXPECT_EQ(p.dev.pop(c), Pop::broken);
  EXPECT_EQ(p.dev_health.total(), 1u);
}

const Hostile packed_cases[] = {
    {"id_beyond_ring", QueueError::packed_bad_id, [](PackedPair& p) { p.set(0, p.buf(0), 64, 16, 0); }},
    {"id_in_last_descriptor_bad", QueueError::packed_bad_id,
     [](PackedPair& p) {
       p.set(1, p.buf(0), 64, 0xffff, 0);
       p.set(0, p.buf(0), 64, 0, NX);
     }},
    {"later_descriptor_not_available", QueueError::packed_bad_wrap,
     [](PackedPair& p) { p.set(0, p.buf(0), 64, 0, NX); }},
    {"later_descriptor_used_flags", QueueError::packed_bad_wrap,
     [](PackedPair& p) {
       p.ring.desc[1] = {p.buf(0), 64, 0, static_cast<std::uint16_t>(AV | US)};
       p.set(0, p.buf(0), 64, 0, NX);
     }},
    {"whole_ring_chained", QueueError::chain_loop,
     [](PackedPair& p) {
       for (std::uint16_t i = 0; i < 16; ++i) p.set(i, p.buf(0), 1, 0, NX);
     }},
    {"address_outside", QueueError::bad_address, [](PackedPair& p) { p.set(0, 0x10, 64, 0, 0); }},
    {"address_overflow", QueueError::bad_address, [](PackedPair& p) { p.set(0, ~0ull - 3, 8, 0, 0); }},
    {"indirect_bad_length", QueueError::indirect_bad_length, [](PackedPair& p) { p.set(0, p.buf(0), 24, 0, IND); }},
    {"indirect_larger_than_ring", QueueError::indirect_bad_length,
     [](PackedPair& p) { p.set(0, p.buf(0), 17 * 16, 0, IND); }},
    {"indirect_with_next", QueueError::indirect_with_next,
     [](PackedPair& p) {
       p.set(1, p.buf(0), 64, 0, 0);
       p.set(0, p.buf(0), 32, 0, IND | NX);
     }},
    {"next_inside_indirect_table", QueueError::indirect_with_next,
     [](PackedPair& p) {
       auto* t = p.tm.alloc<PackedDesc>(32, 16);
       t[0] = {p.buf(0), 12, 0, NX};
       t[1] = {p.buf(0), 12, 0, 0};
       p.set(0, p.tm.guest(t), 32, 0, IND);
     }},
    {"nested_indirect", QueueError::indirect_nested,
     [](PackedPair& p) {
       auto* t = p.tm.alloc<PackedDesc>(16, 16);
       t[0] = {p.tm.guest(t), 16, 0, IND};
       p.set(0, p.tm.guest(t), 16, 0, IND);
     }},
    {"readable_after_writable", QueueError::read_after_write,
     [](PackedPair& p) {
       p.set(1, p.buf(0), 64, 0, 0);
       p.set(0, p.buf(0), 64, 0, WR | NX);
     }},
};
INSTANTIATE_TEST_SUITE_P(Descriptors, PackedHostile, ::testing::ValuesIn(packed_cases),
                         [](const auto& param_info) { return param_info.param.name; });

// A driver that makes a slot we hold available again (it flips the slot's flags to the next
// lap's) must not make us take it twice: the used positions written for both would run past the
// ring. The ring sits against an inaccessible page, so a write past it crashes the test.
TEST(PackedOutstanding, ASlotMadeAvailableAgainIsRefusedAndNothingIsWrittenPastTheRing) {
  for (const std::uint32_t size : {1u, 256u}) {
    SCOPED_TRACE(size);
    TestMemory tm(1 << 16);
    test::GuardedBytes descs(packed_desc_bytes(size));
    EventSuppress events[2]{};
    PackedRing ring{size, descs.get<PackedDesc>(), &events[0], &events[1]};
    QueueHealth health;
    PackedDevice<> dev;
    dev.init(ring, &tm.mem(), &health, false, false, 0x8000);
    const std::uint64_t buf = tm.guest(tm.alloc(64));
    for (std::uint32_t i = 0; i < size; ++i) ring.desc[i] = {buf, 64, static_cast<std::uint16_t>(i), AV};
    PackedDevice<>::ChainT c;
    for (std::uint32_t i = 0; i < size; ++i) ASSERT_EQ(dev.pop(c), Pop::chain) << i;
    EXPECT_EQ(dev.taken(), size);
    ring.desc[0].flags = US;  // available again, for the second lap (wrap counter 0)
    EXPECT_EQ(dev.pop(c), Pop::broken);
    EXPECT_EQ(health.first_error(), QueueError::too_many_taken);
    // What the in-order dequeue did with two pops of the same slot: one used descriptor for
    // both. Refused: more than were taken.
    dev.stage_used(0, 0, static_cast<std::uint16_t>(size + 1));
    dev.flush_used();
    EXPECT_EQ(health.count(QueueError::too_many_taken), 2u);
    EXPECT_EQ(ring.desc[0].flags, US) << "nothing was written";
    // The chains we really hold still go back, once.
    dev.stage_used(static_cast<std::uint16_t>(size - 1), 0, static_cast<std::uint16_t>(size));
    dev.flush_used();
    EXPECT_EQ(ring.desc[0].flags, AV | US) << "used for the first lap";
    EXPECT_EQ(dev.taken(), 0u);
    dev.stage_used(0, 0, 1);
    dev.unpop(1);
    EXPECT_EQ(health.count(QueueError::too_many_taken), 4u) << "nothing more to return or give back";
  }
}

// unpop() rewinds one lap at most: giving back more than was taken is refused.
TEST(PackedOutstanding, UnpopOfMoreThanWasTakenIsRefused) {
  PackedPair p(8);
  PackedDevice<>::ChainT c;
  const Buffer b{p.buf(0), 64, true};
  ASSERT_TRUE(p.drv.post(&b, 1, 1));
  ASSERT_EQ(p.dev.pop(c), Pop::chain);
  const auto at = p.dev.last_avail_idx();
  p.dev.unpop(9);
  EXPECT_EQ(p.dev_health.first_error(), QueueError::too_many_taken);
  EXPECT_EQ(p.dev.last_avail_idx(), at) << "the position did not move";
}

TEST(PackedDriverSide, RefusesIdsItNeverPosted) {
  PackedPair p(8);
  const Buffer b{p.buf(0), 64, false};
  ASSERT_TRUE(p.drv.post(&b, 1, 1));
  p.ring.desc[0] = {0, 0, 6, static_cast<std::uint16_t>(AV | US)};  // used, id 6 never posted
  std::uint32_t cookies[2];
  EXPECT_EQ(p.drv.reclaim(cookies, nullptr, 2), 0);
  EXPECT_EQ(p.drv_health.first_error(), QueueError::used_bad_id);
}

// A device goes away mid-lap holding chains (virtio_user server=1, a backend restart): drain()
// hands back exactly what it held, and init() on the zeroed ring starts over for a new device
// given base 0x8000 (index 0, wrap counter 1).
template <bool InOrder>
void drain_then_init_starts_over() {
  PackedPairOf<InOrder> p(7);
  const Buffer b{p.buf(0), 64, false};
  PackedDevice<>::ChainT c;
  std::uint32_t cookies[8];
  for (std::uint32_t i = 0; i < 10; ++i) {  // past the ring end: both wrap counters flipped once
    ASSERT_TRUE(p.drv.post(&b, 1, i));
    ASSERT_EQ(p.dev.pop(c), Pop::chain);
    p.dev.push_used(c.id, 64, c.ring_descs);
    ASSERT_EQ(p.drv.reclaim(cookies, nullptr, 8), 1);
  }
  for (std::uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(p.drv.post(&b, 1, 100 + i));
  ASSERT_EQ(p.dev.pop(c), Pop::chain);  // the old device takes one, completes nothing, goes away
  std::uint32_t drained = 0, sum = 0;
  p.drv.drain([&](std::uint32_t cookie) {
    ++drained;
    sum += cookie;
  });
  EXPECT_EQ(drained, 5u);
  EXPECT_EQ(sum, 100u + 101 + 102 + 103 + 104);
  std::memset(p.ring.desc, 0, packed_desc_bytes(p.ring.size));
  *p.ring.driver_event = {};
  *p.ring.device_event = {};
  p.drv.init(p.ring, &p.drv_health, false);
  EXPECT_EQ(p.drv.outstanding(), 0u);
  EXPECT_EQ(p.drv.free_descs(), 7u);
  PackedDevice<> fresh;
  fresh.init(p.ring, &p.tm.mem(), &p.dev_health, true, false, 0x8000);
  EXPECT_EQ(fresh.pop(c), Pop::empty) << "a zeroed ring offers nothing";
  for (std::uint32_t i = 0; i < 20; ++i) {
    ASSERT_TRUE(p.drv.post(&b, 1, 200 + i));
    ASSERT_EQ(fresh.pop(c), Pop::chain) << i;
    fresh.push_used(c.id, 64, c.ring_descs);
    ASSERT_EQ(p.drv.reclaim(cookies, nullptr, 8), 1) << i;
    EXPECT_EQ(cookies[0], 200 + i);
  }
  EXPECT_EQ(p.drv.outstanding(), 0u);
  EXPECT_FALSE(p.dev_health.broken());
  EXPECT_FALSE(p.drv_health.broken());
}

class PackedDriverReset : public ::testing::TestWithParam<bool> {};  // in_order

TEST_P(PackedDriverReset, DrainThenInitStartsOverForANewDeviceAtBase0x8000) {
  GetParam() ? drain_then_init_starts_over<true>() : drain_then_init_starts_over<false>();
}

INSTANTIATE_TEST_SUITE_P(InOrder, PackedDriverReset, ::testing::Bool());

// A packed ring has no index in shared memory to resync from: available descriptors and stale
// ones of an earlier lap look alike, and an in-order device writes one used descriptor for a
// batch. So a restart starts where the base says, and a frontend whose rings ran on resets them
// first (DPDK's virtio_user does, and sends 0x8000). A base that disagrees with the ring costs
// the frontend its traffic and nothing more: the device takes only what the flags offer.
TEST(PackedRestart, StartsAtTheBaseAndTakesOnlyWhatTheFlagsOffer) {
  struct Case {
    std::uint16_t base;
    std::vector<std::uint16_t> ids;
  };
  const Case cases[] = {{0x8000, {0, 1, 2, 3}}, {0x8002, {2, 3}}, {0x0000, {}}, {0x8004, {}}};
  for (const Case& k : cases) {
    PackedPair p;
    for (std::uint16_t i = 0; i < 4; ++i) p.set(i, p.buf(64 * i), 64, i, 0);
    QueueHealth health;
    PackedDevice<> dev;
    dev.init(p.ring, &p.tm.mem(), &health, true, false, k.base);
    std::vector<std::uint16_t> ids;
    PackedDevice<>::ChainT c;
    while (dev.pop(c) == Pop::chain) ids.push_back(c.id);
    EXPECT_EQ(ids, k.ids) << std::hex << k.base;
    EXPECT_FALSE(health.broken()) << std::hex << k.base;
  }
}

}  // namespace
}  // namespace ws::virtio
