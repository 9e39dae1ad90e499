// SPDX-License-Identifier: BSD-3-Clause
// net_vhost hot-path pieces on their own: the inline copy against memcpy, the RX queue's mbuf
// stash (nothing lost, a dry pool gives what it has), and what the ring lock lets in.
#include "ws/drivers/vhost/vhost_rxtx.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/drivers/vhost/vhost_queues.hpp"
#include "ws/virtio/ring/packed_driver.hpp"
#include "ws/virtio/ring/split_driver.hpp"
#include "ws/virtio/ring/test_memory.hpp"

namespace ws::vhost_pmd {
namespace {

TEST(CopyBytes, EveryLengthAndOffsetMatchesMemcpy) {
  std::array<std::byte, 400> src{}, dst{}, want{};
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>(i * 7 + 1);
  for (std::size_t len = 0; len <= 300; ++len)
    for (std::size_t off : {0u, 1u, 5u, 12u}) {
      dst.fill(std::byte{0xee});
      want.fill(std::byte{0xee});
      copy_bytes(dst.data() + off, src.data() + 3, len);
      std::memcpy(want.data() + off, src.data() + 3, len);
      ASSERT_EQ(dst, want) << "len " << len << " offset " << off;
    }
}

// A packed ring in `tm`: our backend's side (a RingSlot, at base 0x8000) and an in-order driver
// posting to it.
struct PackedRingPair {
  virtio::PackedRing ring;
  std::unique_ptr<RingSlot> slot = std::make_unique<RingSlot>();
  virtio::QueueHealth driver_health;
  virtio::PackedDriver<std::uint32_t, true> driver;

  PackedRingPair(virtio::test::TestMemory& tm, std::uint16_t size) {
    ring.size = size;
    ring.desc = tm.alloc<virtio::PackedDesc>(virtio::packed_desc_bytes(size), 16);
    ring.driver_event = tm.alloc<virtio::EventSuppress>(4, 4);
    ring.device_event = tm.alloc<virtio::EventSuppress>(4, 4);
    slot->packed.init(ring, &tm.mem(), &slot->health, false, false, 0x8000);
    driver.init(ring, &driver_health, false);
  }
};

class StashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"vhost_rxtx_test", 4u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    PktmbufPool::Options o;
    o.count = 100;
    o.cache_size = 0;
    auto p = PktmbufPool::create(*arena_, o);
    ASSERT_TRUE(p.has_value()) << p.error().message;
    pool_ = std::move(*p);
  }
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
};

TEST_F(StashTest, RefillsInBulkHandsOutFreshMbufsAndReturnsEverything) {
  {
    MbufStash stash(pool_.get());
    EXPECT_EQ(stash.ensure(4), 32);  // at least a 32-mbuf bulk
    EXPECT_EQ(pool_->in_use(), 32u);
    Mbuf* m = stash.take();
    EXPECT_EQ(m->data_len, 0);
    EXPECT_EQ(m->nb_segs, 1);
    stash.put_back(m);
    EXPECT_EQ(stash.ensure(32), 32);  // enough on hand: no allocation
    EXPECT_EQ(pool_->in_use(), 32u);
    EXPECT_EQ(stash.ensure(90), 90);  // a dry-ish pool: 58 more asked, bulks halve until they fit
    EXPECT_LE(pool_->in_use(), 100u);
    EXPECT_LT(stash.ensure(200), 200);  // dry: what the pool had
    stash.release();
    EXPECT_EQ(pool_->in_use(), 0u);
    stash.ensure(10);
  }  // destruction returns the rest
  EXPECT_EQ(pool_->in_use(), 0u);
}

// Packed in-order TX ring, packets of three descriptors each (header, two data halves): every
// burst's chains come back at the end of that burst, as one used descriptor naming the last
// chain. A driver may keep far fewer chains outstanding than its ring holds (dpdk-testpmd posts
// 512 on a 1024-descriptor ring) and must never wait for a later burst to get them back.
TEST_F(StashTest, InOrderTxRingGetsEveryBurstBackAsOneUsedDescriptor) {
  constexpr std::uint16_t ring_size = 1024, burst = 32, descs_per_packet = 3;
  virtio::test::TestMemory tm(1 << 20);
  PackedRingPair pair(tm, ring_size);
  auto& [ring, slot, driver_health, driver] = pair;
  std::byte* data = tm.alloc(virtio::net_hdr_bytes + 64);  // every packet: zero header, 64 B frame
  MbufStash stash(pool_.get());
  RxQueueCounters counters;
  std::uint32_t cookies[burst + 1];
  std::uint32_t lens[burst + 1];
  for (int round = 0; round < 50; ++round) {  // 4800 descriptors: the ring wraps four times
    for (std::uint16_t i = 0; i < burst; ++i) {
      const virtio::Buffer b[descs_per_packet] = {{tm.guest(data), virtio::net_hdr_bytes, false},
                                                  {tm.guest(data + virtio::net_hdr_bytes), 32, false},
                                                  {tm.guest(data + virtio::net_hdr_bytes + 32), 32, false}};
      ASSERT_TRUE(driver.post(b, descs_per_packet, round * burst + i));
    }
    const std::vector<virtio::PackedDesc> before(ring.desc, ring.desc + ring_size);
    Mbuf* pkts[burst];
    ASSERT_EQ((dequeue<true, true, HdrIn::ignore, false>(*slot, stash, counters, pkts, burst)), burst)
        << "round " << round;
    for (Mbuf* m : pkts) EXPECT_EQ(m->pkt_len, 64u);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, burst));
    int written = 0;
    for (std::uint16_t i = 0; i < ring_size; ++i)
      written += std::memcmp(&before[i], &ring.desc[i], sizeof before[i]) != 0;
    EXPECT_EQ(written, 1) << "round " << round << ": one used descriptor for the burst";
    ASSERT_EQ(driver.reclaim(cookies, lens, burst + 1), burst) << "round " << round << ": the burst is back";
    EXPECT_EQ(cookies[0], std::uint32_t(round * burst));
    EXPECT_EQ(cookies[burst - 1], std::uint32_t(round * burst + burst - 1));
    EXPECT_EQ(driver.outstanding(), 0u);
  }
  EXPECT_FALSE(slot->health.broken());
  EXPECT_FALSE(driver_health.broken());
  EXPECT_EQ(counters.packets.read(), 50u * burst);
}

// linear-buffer=1: a packet larger than one mbuf is dropped and counted, its chain still goes
// back used; the default chains it across mbufs. Either way the packets around it come through.
TEST_F(StashTest, LinearBufferDropsWhatDoesNotFitOneMbuf) {
  constexpr std::uint16_t ring_size = 64;
  constexpr std::uint32_t big = 3000;  // more than one mbuf's room
  virtio::test::TestMemory tm(1 << 20);
  std::byte* small_pkt = tm.alloc(virtio::net_hdr_bytes + 64);
  std::byte* big_pkt = tm.alloc(virtio::net_hdr_bytes + big);
  for (const bool linear : {true, false}) {
    SCOPED_TRACE(linear ? "linear-buffer=1" : "linear-buffer=0");
    PackedRingPair pair(tm, ring_size);
    auto& [ring, slot, driver_health, driver] = pair;
    MbufStash stash(pool_.get());
    RxQueueCounters counters;
    ASSERT_GT(stash.ensure(1), 0);
    ASSERT_GT(big, stash.top()->tailroom());
    const virtio::Buffer small_buf[] = {{tm.guest(small_pkt), virtio::net_hdr_bytes + 64, false}};
    const virtio::Buffer big_buf[] = {{tm.guest(big_pkt), virtio::net_hdr_bytes + big, false}};
    ASSERT_TRUE(driver.post(small_buf, 1, 0));
    ASSERT_TRUE(driver.post(big_buf, 1, 1));
    ASSERT_TRUE(driver.post(small_buf, 1, 2));
    Mbuf* pkts[8];
    const auto fn = linear ? &dequeue<true, true, HdrIn::ignore, true> : &dequeue<true, true, HdrIn::ignore, false>;
    const std::uint16_t got = fn(*slot, stash, counters, pkts, 8);
    if (linear) {
      ASSERT_EQ(got, 2);
      EXPECT_EQ(pkts[0]->pkt_len, 64u);
      EXPECT_EQ(pkts[1]->pkt_len, 64u);
      EXPECT_EQ(slot->counters.not_linear.read(), 1u);
      EXPECT_EQ(counters.errors.read(), 1u);
    } else {
      ASSERT_EQ(got, 3);
      EXPECT_EQ(pkts[1]->pkt_len, big);
      EXPECT_GT(pkts[1]->nb_segs, 1) << "chained across mbufs";
      EXPECT_EQ(slot->counters.not_linear.read(), 0u);
      EXPECT_EQ(counters.errors.read(), 0u);
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, got));
    std::uint32_t cookies[4], lens[4];
    EXPECT_EQ(driver.reclaim(cookies, lens, 4), 3u) << "the dropped packet's chain is back too";
    EXPECT_FALSE(slot->health.broken());
  }
}

// MRG_RXBUF with a Linux guest: its mergeable RX buffers may be as small as 1518 bytes, so a
// 64 KiB packet (a TSO packet forwarded whole from another guest) spans up to 44 chains. We used to
// stop at 17 and drop it (too_small). All its chains come back used, with num_buffers = 44 in
// the first, and the packet's bytes across them in order.
TEST_F(StashTest, MergeablePacketOf64KiBIntoLinuxSizedBuffers) {
  constexpr std::uint16_t ring_size = 64;
  constexpr std::uint32_t buf_len = 1518, frame = 65000;
  constexpr std::uint16_t chains = (frame + virtio::net_hdr_bytes + buf_len - 1) / buf_len;  // 43
  virtio::test::TestMemory tm(1 << 20);
  std::byte* bufs = tm.alloc(std::size_t{ring_size} * buf_len);
  PackedRingPair pair(tm, ring_size);
  auto& [ring, slot, driver_health, driver] = pair;
  for (std::uint16_t i = 0; i < ring_size; ++i) {
    const virtio::Buffer b{tm.guest(bufs + std::size_t{i} * buf_len), buf_len, true};
    ASSERT_TRUE(driver.post(&b, 1, i));
  }
  // The packet: a chain of mbufs holding bytes 0, 1, 2, ... (mod 251).
  Mbuf* m = nullptr;
  std::uint32_t filled = 0;
  while (filled < frame) {
    Mbuf* seg = pool_->alloc();
    ASSERT_NE(seg, nullptr);
    const std::uint16_t n = static_cast<std::uint16_t>(std::min<std::uint32_t>(seg->tailroom(), frame - filled));
    std::uint8_t* d = seg->append(n);
    for (std::uint16_t k = 0; k < n; ++k) d[k] = static_cast<std::uint8_t>((filled + k) % 251);
    filled += n;
    if (m == nullptr) {
      m = seg;
    } else {
      ASSERT_TRUE(m->chain(seg));
    }
  }
  TxQueueCounters counters;
  ASSERT_EQ((enqueue<true, true, false>(*slot, counters, &m, 1)), 1);
  EXPECT_EQ(slot->counters.too_small.read(), 0u);
  EXPECT_EQ(counters.errors.read(), 0u);
  EXPECT_EQ(counters.packets.read(), 1u);
  std::uint32_t cookies[ring_size], lens[ring_size];
  ASSERT_EQ(driver.reclaim(cookies, lens, ring_size), chains);
  virtio::NetHdr hdr;
  std::memcpy(&hdr, bufs, sizeof hdr);
  EXPECT_EQ(hdr.num_buffers, chains);
  std::uint32_t at = 0, total = 0;
  for (std::uint16_t c = 0; c < chains; ++c) {
    EXPECT_EQ(cookies[c], c);
    total += lens[c];
    for (std::uint32_t k = c == 0 ? virtio::net_hdr_bytes : 0; k < lens[c]; ++k, ++at)
      ASSERT_EQ(std::to_integer<std::uint8_t>(bufs[std::size_t{c} * buf_len + k]), at % 251) << "byte " << at;
  }
  EXPECT_EQ(total, frame + virtio::net_hdr_bytes);
  EXPECT_EQ(at, frame);
  EXPECT_FALSE(slot->health.broken());
  EXPECT_FALSE(driver_health.broken());
}

// A frontend that offers tiny RX buffers cannot make one packet take more than
// max_merged_chains of them: a packet that needs one more is dropped (too_small) and every chain
// it took goes back, so the next packet, which needs exactly max_merged_chains, gets them, from
// the first. The bound is 64: a 64 KiB packet in Linux's smallest mergeable buffers takes 44.
TEST_F(StashTest, AMergeablePacketSpansAtMost64Chains) {
  static_assert(max_merged_chains == 64);
  constexpr std::uint16_t ring_size = 128;
  constexpr std::uint32_t buf_len = 100;
  constexpr std::uint32_t fits = max_merged_chains * buf_len - virtio::net_hdr_bytes;  // 6388 bytes
  virtio::test::TestMemory tm(1 << 20);
  std::byte* bufs = tm.alloc(std::size_t{ring_size} * buf_len);
  PackedRingPair pair(tm, ring_size);
  auto& [ring, slot, driver_health, driver] = pair;
  for (std::uint16_t i = 0; i < ring_size; ++i) {
    const virtio::Buffer b{tm.guest(bufs + std::size_t{i} * buf_len), buf_len, true};
    ASSERT_TRUE(driver.post(&b, 1, i));
  }
  auto packet = [&](std::uint32_t len) {
    Mbuf* m = nullptr;
    for (std::uint32_t filled = 0; filled < len;) {
      Mbuf* seg = pool_->alloc();
      if (seg == nullptr) return m;
      const auto n = static_cast<std::uint16_t>(std::min<std::uint32_t>(seg->tailroom(), len - filled));
      std::memset(seg->append(n), 0x5a, n);
      filled += n;
      if (m == nullptr) {
        m = seg;
      } else if (!m->chain(seg)) {
        mbuf_free(seg);
      }
    }
    return m;
  };
  Mbuf* pkts[2] = {packet(fits + 1), packet(fits)};
  ASSERT_NE(pkts[0], nullptr);
  ASSERT_NE(pkts[1], nullptr);
  ASSERT_EQ(pkts[0]->pkt_len, fits + 1);
  ASSERT_EQ(pkts[1]->pkt_len, fits);
  TxQueueCounters counters;
  ASSERT_EQ((enqueue<true, true, false>(*slot, counters, pkts, 2)), 2) << "one dropped, one sent";
  EXPECT_EQ(slot->counters.too_small.read(), 1u);
  EXPECT_EQ(counters.errors.read(), 1u);
  EXPECT_EQ(counters.packets.read(), 1u);
  std::uint32_t cookies[ring_size], lens[ring_size];
  ASSERT_EQ(driver.reclaim(cookies, lens, ring_size), max_merged_chains) << "the sent packet's chains only";
  for (std::uint16_t c = 0; c < max_merged_chains; ++c) {
    EXPECT_EQ(cookies[c], c) << "the dropped packet's chains were given back, in order";
    EXPECT_EQ(lens[c], buf_len);
  }
  virtio::NetHdr hdr;
  std::memcpy(&hdr, bufs, sizeof hdr);
  EXPECT_EQ(hdr.num_buffers, max_merged_chains);
  EXPECT_FALSE(slot->health.broken()) << "tiny buffers cost packets, not the ring";
  EXPECT_EQ(pool_->in_use(), 0u);
}

// The packed fast paths take several cache lines of descriptors before copying the first packet.
// A line that does not fit them (a chain of two descriptors, a chained mbuf) ends that run; the
// packets in and after it come one by one until the next line's start, where the fast path takes
// over again. Every packet arrives once, whole and in order, and every buffer comes back used.
TEST_F(StashTest, PackedFastPathsTakeSeveralLinesAndKeepEveryPacketInOrder) {
  constexpr std::uint16_t ring_size = 64, burst = 32, frame = 64, chained = 13;
  virtio::test::TestMemory tm(1 << 20);
  std::byte* frames = tm.alloc(std::size_t{burst} * (virtio::net_hdr_bytes + frame));
  for (std::uint16_t i = 0; i < burst; ++i) {
    std::byte* f = frames + std::size_t{i} * (virtio::net_hdr_bytes + frame);
    std::memset(f, 0, virtio::net_hdr_bytes);
    std::memset(f + virtio::net_hdr_bytes, i + 1, frame);
  }
  auto check_dequeue = [&](auto fn, const char* what) {
    SCOPED_TRACE(what);
    PackedRingPair pair(tm, ring_size);
    auto& [ring, slot, driver_health, driver] = pair;
    for (std::uint16_t i = 0; i < burst; ++i) {
      const std::uint64_t at = tm.guest(frames + std::size_t{i} * (virtio::net_hdr_bytes + frame));
      if (i == chained) {  // descriptors 13 and 14: the fourth line is not plain
        const virtio::Buffer b[2] = {{at, virtio::net_hdr_bytes + 20, false},
                                     {at + virtio::net_hdr_bytes + 20, frame - 20, false}};
        ASSERT_TRUE(driver.post(b, 2, i));
      } else {
        const virtio::Buffer b{at, virtio::net_hdr_bytes + frame, false};
        ASSERT_TRUE(driver.post(&b, 1, i));
      }
    }
    MbufStash stash(pool_.get());
    RxQueueCounters counters;
    Mbuf* pkts[burst];
    ASSERT_EQ(fn(*slot, stash, counters, pkts, burst), burst);
    for (std::uint16_t i = 0; i < burst; ++i) {
      ASSERT_EQ(pkts[i]->pkt_len, frame) << "packet " << i;
      const std::uint8_t* d = pkts[i]->data<std::uint8_t>();
      EXPECT_TRUE(d[0] == i + 1 && d[frame - 1] == i + 1) << "packet " << i << " out of place";
    }
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, burst));
    std::uint32_t cookies[burst + 1], lens[burst + 1];
    ASSERT_EQ(driver.reclaim(cookies, lens, burst + 1), burst);
    for (std::uint16_t i = 0; i < burst; ++i) EXPECT_EQ(cookies[i], i);
    EXPECT_FALSE(slot->health.broken());
  };
  check_dequeue(&dequeue<true, false, HdrIn::ignore, false>, "dequeue, used descriptor per chain");
  check_dequeue(&dequeue<true, true, HdrIn::ignore, false>, "dequeue, in order");

  // Enqueue: packet 6 is two mbufs, so the second line goes one by one.
  constexpr std::uint32_t buf_len = 256;
  std::byte* bufs = tm.alloc(std::size_t{ring_size} * buf_len);
  PackedRingPair pair(tm, ring_size);
  auto& [ring, slot, driver_health, driver] = pair;
  for (std::uint16_t i = 0; i < 40; ++i) {
    const virtio::Buffer b{tm.guest(bufs + std::size_t{i} * buf_len), buf_len, true};
    ASSERT_TRUE(driver.post(&b, 1, i));
  }
  Mbuf* pkts[burst];
  for (std::uint16_t i = 0; i < burst; ++i) {
    pkts[i] = pool_->alloc();
    ASSERT_NE(pkts[i], nullptr);
    const std::uint16_t first = i == 6 ? frame / 2 : frame;
    std::memset(pkts[i]->append(first), i + 1, first);
    if (i == 6) {
      Mbuf* tail = pool_->alloc();
      ASSERT_NE(tail, nullptr);
      std::memset(tail->append(frame / 2), i + 1, frame / 2);
      ASSERT_TRUE(pkts[i]->chain(tail));
    }
  }
  TxQueueCounters counters;
  ASSERT_EQ((enqueue<true, true, false>(*slot, counters, pkts, burst)), burst);
  EXPECT_EQ(counters.packets.read(), burst);
  std::uint32_t cookies[burst + 1], lens[burst + 1];
  ASSERT_EQ(driver.reclaim(cookies, lens, burst + 1), burst);
  for (std::uint16_t i = 0; i < burst; ++i) {
    EXPECT_EQ(cookies[i], i);
    EXPECT_EQ(lens[i], virtio::net_hdr_bytes + frame) << "buffer " << i;
    const std::byte* b = bufs + std::size_t{i} * buf_len;
    virtio::NetHdr hdr;
    std::memcpy(&hdr, b, sizeof hdr);
    EXPECT_EQ(hdr.num_buffers, 1);
    for (std::uint16_t k = 0; k < frame; ++k)
      ASSERT_EQ(std::to_integer<int>(b[virtio::net_hdr_bytes + k]), i + 1) << "buffer " << i << " byte " << k;
  }
  EXPECT_FALSE(slot->health.broken());
  EXPECT_EQ(pool_->in_use(), 0u) << "the sent mbufs were freed";
}

// A frontend that keeps every descriptor available for both laps at once, flipping each one's
// flags back and forth while our bursts run: we take a slot, wrap, and find it available again.
// Without a bound, an in-order dequeue burst (one used descriptor for all its chains) or a
// mergeable packet (up to max_merged_chains) summed more descriptors than the ring holds, and the used
// position ran past the ring. Each ring sits against an inaccessible page: a write past it
// crashes the test. No mbuf may be lost either.
TEST_F(StashTest, AFrontendFlippingFlagsWhileWeRunCannotMakeUsWritePastTheRing) {
  constexpr std::uint32_t size = 16;          // fewer slots than a burst takes
  constexpr std::uint32_t rx_buf_bytes = 90;  // a 1500-byte packet needs 17 of them (mergeable)
  virtio::test::TestMemory tm(1 << 20);
  std::byte* frame = tm.alloc(virtio::net_hdr_bytes + 64);
  std::byte* rx_bufs = tm.alloc(size * rx_buf_bytes);
  struct GuardedRing {
    virtio::test::GuardedBytes descs{virtio::packed_desc_bytes(size)};
    virtio::EventSuppress events[2]{};
    virtio::PackedRing ring{size, descs.get<virtio::PackedDesc>(), &events[0], &events[1]};
    std::unique_ptr<RingSlot> slot = std::make_unique<RingSlot>();
  };
  GuardedRing tx, rx;  // the frontend's TX ring (we dequeue) and RX ring (we enqueue)
  constexpr std::uint16_t av = virtio::desc_flag::avail, us = virtio::desc_flag::used, wr = virtio::desc_flag::write;
  auto fresh = [&](GuardedRing& g) {  // what a frontend that starts over gives us
    for (std::uint32_t i = 0; i < size; ++i) {
      const auto id = static_cast<std::uint16_t>(i);
      g.ring.desc[i] = &g == &tx ? virtio::PackedDesc{tm.guest(frame), virtio::net_hdr_bytes + 64, id, av}
                                 : virtio::PackedDesc{tm.guest(rx_bufs + i * rx_buf_bytes), rx_buf_bytes, id,
                                                      static_cast<std::uint16_t>(av | wr)};
    }
    g.events[0].flags = virtio::EventSuppress::disable;  // no interrupts wanted
    g.slot->health.reset();
    g.slot->packed.init(g.ring, &tm.mem(), &g.slot->health, false, false, 0x8000);
  };
  fresh(tx);
  fresh(rx);
  std::atomic<bool> stop{false};
  std::thread frontend([&] {
    for (std::uint32_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
      for (GuardedRing* g : {&tx, &rx})
        for (std::uint32_t i = 0; i < size; ++i) {
          const std::uint16_t keep = g == &rx ? wr : 0;
          __atomic_store_n(&g->ring.desc[i].flags, static_cast<std::uint16_t>(keep | (n % 2 ? av : us)),
                           __ATOMIC_RELEASE);
        }
      for (int k = 0; k < 100; ++k) cpu_pause();  // each lap's flags stay a moment
    }
  });
  MbufStash stash(pool_.get());
  RxQueueCounters rx_counters;
  TxQueueCounters tx_counters;
  std::uint64_t bursts = 0, restarts = 0;
  // Until both cases were met, 30 s at most. The threads' timing decides when: usually within
  // 2 s, but beside two busy loops 5 s missed the in-order case in 7 runs of 20 (it took up to
  // 24 s). It seems to need the two threads taking turns on one CPU: with each pinned to a CPU
  // of its own it never came in 30 s.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end && (tx.slot->health.count(virtio::QueueError::too_many_taken) < 3 ||
                                                    rx.slot->health.count(virtio::QueueError::too_many_taken) < 3)) {
    Mbuf* pkts[32];
    const std::uint16_t got = dequeue<true, true, HdrIn::ignore, false>(*tx.slot, stash, rx_counters, pkts, 32);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts, got));
    // Large packets for the RX ring, each spanning many of its small buffers.
    std::uint16_t big = 0;
    for (; big < 4; ++big) {
      pkts[big] = pool_->alloc();
      if (pkts[big] == nullptr) break;
      pkts[big]->data_len = 1500;
      pkts[big]->pkt_len = 1500;
    }
    const std::uint16_t sent = enqueue<true, true, false>(*rx.slot, tx_counters, pkts, big);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts + sent, big - sent));
    ++bursts;
    for (GuardedRing* g : {&tx, &rx}) {
      EXPECT_LE(g->slot->packed.taken(), size);
      if (g->slot->health.broken()) {
        ++restarts;
        fresh(*g);
      }
    }
  }
  stop = true;
  frontend.join();
  stash.release();
  EXPECT_EQ(pool_->in_use(), 0u) << "every mbuf is back";
  std::printf("%llu bursts, %llu ring restarts; too_many_taken: TX ring %llu, RX ring %llu\n",
              static_cast<unsigned long long>(bursts), static_cast<unsigned long long>(restarts),
              static_cast<unsigned long long>(tx.slot->health.count(virtio::QueueError::too_many_taken)),
              static_cast<unsigned long long>(rx.slot->health.count(virtio::QueueError::too_many_taken)));
  EXPECT_GT(tx.slot->health.count(virtio::QueueError::too_many_taken), 0u) << "the in-order case was not reached";
  EXPECT_GT(rx.slot->health.count(virtio::QueueError::too_many_taken), 0u) << "the mergeable case was not reached";
}

// A header already as it must be is not stored again (DPDK's vhost does the same): the line
// stays clean in the frontend's cache. Proven on a read-only page, where a store would fault.
TEST(NetHeader, StoredOnlyWhereItDiffers) {
  const long page = ::sysconf(_SC_PAGESIZE);
  void* mem =
      ::mmap(nullptr, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* dst = static_cast<std::byte*>(mem);
  virtio::NetHdr hdr{};
  std::memset(dst, 0xff, virtio::net_hdr_bytes);
  write_net_hdr<false>(dst, hdr, 1);  // differs: stored
  virtio::NetHdr got;
  std::memcpy(&got, dst, sizeof got);
  EXPECT_EQ(got.flags, 0);
  EXPECT_EQ(got.gso_type, 0);
  EXPECT_EQ(got.csum_offset, 0);
  EXPECT_EQ(got.num_buffers, 1);
  ASSERT_EQ(::mprotect(mem, static_cast<std::size_t>(page), PROT_READ), 0);
  write_net_hdr<false>(dst, hdr, 1);  // the same: no store (one would fault here)
  ASSERT_EQ(::mprotect(mem, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE), 0);
  write_net_hdr<false>(dst, hdr, 0);  // num_buffers differs: stored
  std::memcpy(&got, dst, sizeof got);
  EXPECT_EQ(got.num_buffers, 0);
  ::munmap(mem, static_cast<std::size_t>(page));
}

// The ring lock is a BurstGate (its handshake with a polling thread is tested in ws/core); the
// slot adds SET_VRING_ENABLE and the variant: a ring is entered only when started, enabled, and
// by the burst function of the variant it was started with.
TEST(RingSlot, EnteredOnlyWhenStartedEnabledAndOfTheVariant) {
  auto slot = std::make_unique<RingSlot>();
  constexpr std::uint8_t v = rx_variant<true, true, HdrIn::ignore, false>;
  slot->variant = v;
  EXPECT_FALSE(slot->enter(v)) << "a ring not started yet";
  slot->start();
  EXPECT_FALSE(slot->enter(v)) << "started but not enabled";
  slot->enabled.store(true, std::memory_order_relaxed);
  ASSERT_TRUE(slot->enter(v));
  slot->leave();
  EXPECT_FALSE(slot->enter(rx_variant<true, false, HdrIn::ignore, false>))
      << "the function of another variant, loaded from the table before the ring restarted";
  slot->stop();  // returns at once: nobody is inside
  EXPECT_FALSE(slot->enter(v)) << "stopped";
}

// A burst through what the port's table holds: the stopped functions until the ring starts (TX
// counts what it did not take as `full`), then the variant; a function of an earlier start does
// nothing.
TEST(VhostQueues, StoppedAndStaleFunctionsTakeNothing) {
  auto slot = std::make_unique<RingSlot>();
  TxQ txq;
  txq.slot = slot.get();
  Mbuf* pkts[4] = {};
  EXPECT_EQ(published_tx(*slot)(&txq, pkts, 4), 0);
  EXPECT_EQ(txq.counters.full.read(), 4u);
  slot->variant = tx_variant<true, false, false>;
  slot->burst.store(&tx_burst<true, false, false>);
  slot->start();
  slot->enabled.store(true, std::memory_order_relaxed);
  EXPECT_EQ((tx_burst<false, false, false>(&txq, pkts, 4)), 0) << "another variant's function";
  EXPECT_EQ(txq.counters.full.read(), 8u);
  slot->stop();
  EXPECT_EQ((tx_burst<true, false, false>(&txq, pkts, 4)), 0) << "the ring's own, stopped";
  EXPECT_EQ(txq.counters.full.read(), 12u);
  slot->burst.store(nullptr);  // as stop_slot() leaves it
  RxQ rxq;
  rxq.slot = slot.get();
  EXPECT_EQ(published_rx(*slot)(&rxq, pkts, 4), 0);
}

}  // namespace
}  // namespace ws::vhost_pmd
