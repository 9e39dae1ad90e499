// SPDX-License-Identifier: BSD-3-Clause
// The virtio-net driver's queues against a device simulated by writing its used ring. RX: a good
// packet comes out with the header stripped and its buffer is reposted (split rings: when a poll
// finds nothing, or once a quarter of the ring is missing); a length beyond the buffer posted (a
// device that wrote past what it was given) is counted, stops the queue, and every mbuf goes
// home; so does a mergeable packet of zero buffers or of more than the ring holds. TX: completed
// chains make room for a burst that needs more descriptors than are free, and after a burst is
// published, for the next one; a header pushed into the headroom zeroes num_buffers unless told
// to keep it.
#include "ws/virtio/net/queues.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ws/core/arena.hpp"

namespace ws::virtio {
namespace {

// Addresses are our pointers; notifications are counted.
struct TestHotPath {
  static inline int notified = 0;
  static std::uint64_t buffer_addr(const Mbuf* m) noexcept { return reinterpret_cast<std::uint64_t>(m->buf_addr); }
  static void notify(QueueCommon&) noexcept { ++notified; }
};

// A split ring of n entries in our memory, an arena and a pool: what both queues run on.
class QueueAgainstRing : public ::testing::Test {
 protected:
  static constexpr std::uint32_t n = 64;
  void SetUp() override {
    auto a = Arena::create({"net_queues_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a) << a.error().message;
    arena_ = std::move(*a);
    auto p = PktmbufPool::create(*arena_, {"pool", 256, 0});
    ASSERT_TRUE(p) << p.error().message;
    pool_ = std::move(*p);
    mem_.assign(ring_area_bytes(n) + 64, std::byte{0});
    auto* base =
        reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(mem_.data()) + 63) & ~std::uintptr_t{63});
    area_ = carve_ring_area(base, n);
    ring_ = SplitRing{n, reinterpret_cast<SplitDesc*>(area_.desc), reinterpret_cast<std::uint16_t*>(area_.driver),
                      reinterpret_cast<std::uint16_t*>(area_.device)};
  }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
  std::vector<std::byte> mem_;
  RingArea area_;
  SplitRing ring_;
  std::uint16_t used_ = 0;
};

class RxAgainstUsedRing : public QueueAgainstRing {
 protected:
  void SetUp() override {
    QueueAgainstRing::SetUp();
    if (HasFatalFailure()) return;
    rx_.pool = pool_.get();
    rx_.init(area_, false);
    ASSERT_EQ(rx_.fill(), n);
    ASSERT_EQ(*ring_.avail_idx(), n);
  }
  // The device: fills the next posted buffer with `len` bytes (header included) and returns it.
  void device_returns(std::uint32_t len) {
    const std::uint16_t head = ring_.avail_ring()[used_ % n];
    ring_.used_ring()[used_ % n] = {head, len};
    ++used_;
    __atomic_store_n(ring_.used_idx(), used_, __ATOMIC_RELEASE);
  }

  VirtioRx<TestHotPath, false, false, false, false> rx_;
};

TEST_F(RxAgainstUsedRing, GoodPacketComesOutWithoutItsHeaderAndTheBufferIsReposted) {
  device_returns(net_hdr_bytes + 60);
  Mbuf* pkts[8];
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 1);
  EXPECT_EQ(pkts[0]->pkt_len, 60u);
  EXPECT_EQ(*ring_.avail_idx(), n) << "a split ring reposts when a poll finds nothing, not before the burst returns";
  EXPECT_EQ(rx_.rx_burst(pkts + 1, 7), 0);
  EXPECT_EQ(*ring_.avail_idx(), n + 1) << "the buffer taken was replaced";
  mbuf_free(pkts[0]);
  EXPECT_FALSE(rx_.health.broken());
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

// A device that fills buffers as fast as we poll never lets a poll come up empty: a burst with
// packets reposts once more than a quarter of the ring is missing.
TEST_F(RxAgainstUsedRing, BusyPollsRepostOnceAQuarterOfTheRingIsMissing) {
  Mbuf* pkts[32];
  for (std::uint32_t i = 0; i < n / 4; ++i) device_returns(net_hdr_bytes + 60);
  ASSERT_EQ(rx_.rx_burst(pkts, 32), n / 4);
  EXPECT_EQ(*ring_.avail_idx(), n) << "a quarter missing: not yet";
  device_returns(net_hdr_bytes + 60);
  ASSERT_EQ(rx_.rx_burst(pkts + n / 4, 1), 1);
  EXPECT_EQ(*ring_.avail_idx(), n + n / 4 + 1) << "more than a quarter missing: all reposted";
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, n / 4 + 1));
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RxAgainstUsedRing, LengthBeyondTheBufferIsCountedAndStopsTheQueue) {
  device_returns(net_hdr_bytes + 60);
  device_returns(1u << 20);  // more than any buffer we posted
  device_returns(net_hdr_bytes + 60);
  Mbuf* pkts[8];
  const std::uint16_t got = rx_.rx_burst(pkts, 8);
  EXPECT_EQ(got, 2) << "the good packets around the bad one of this burst still come out";
  for (std::uint16_t i = 0; i < got; ++i) mbuf_free(pkts[i]);
  EXPECT_EQ(rx_.counters.errors.read(), 1u);
  EXPECT_TRUE(rx_.health.broken());
  EXPECT_EQ(rx_.health.first_error(), QueueError::used_bad_length);
  EXPECT_EQ(rx_.health.count(QueueError::used_bad_length), 1u);
  device_returns(net_hdr_bytes + 60);
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0) << "a stopped queue takes nothing more from the device";
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RxAgainstUsedRing, LengthShorterThanTheHeaderStopsTheQueue) {
  device_returns(net_hdr_bytes - 1);
  Mbuf* pkts[8];
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0);
  EXPECT_EQ(rx_.health.first_error(), QueueError::used_bad_length);
  EXPECT_EQ(queue_error_name(rx_.health.first_error()), "used_bad_length");
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

// MRG_RXBUF: the device says in the first buffer's header how many buffers the packet took.
class MergeableRxAgainstUsedRing : public QueueAgainstRing {
 protected:
  void SetUp() override {
    QueueAgainstRing::SetUp();
    if (HasFatalFailure()) return;
    rx_.pool = pool_.get();
    rx_.init(area_, false);
    ASSERT_EQ(rx_.fill(), n);
  }
  // The device: the next posted buffer, `len` bytes, its header saying `num_buffers`.
  void device_returns(std::uint32_t len, std::uint16_t num_buffers) {
    const std::uint16_t head = ring_.avail_ring()[used_ % n];
    const auto* d = &ring_.desc[head];
    std::uint8_t* hdr = reinterpret_cast<std::uint8_t*>(static_cast<std::uintptr_t>(d->addr));
    std::memcpy(hdr + offsetof(NetHdr, num_buffers), &num_buffers, sizeof num_buffers);
    ring_.used_ring()[used_ % n] = {head, len};
    ++used_;
    __atomic_store_n(ring_.used_idx(), used_, __ATOMIC_RELEASE);
  }

  VirtioRx<TestHotPath, false, false, true, false> rx_;
};

TEST_F(MergeableRxAgainstUsedRing, APacketOfThreeBuffersComesOutChained) {
  device_returns(net_hdr_bytes + 100, 3);
  device_returns(200, 0);  // later buffers' headers are packet data: not read
  device_returns(300, 0);
  Mbuf* pkts[8];
  ASSERT_EQ(rx_.rx_burst(pkts, 8), 1);
  EXPECT_EQ(pkts[0]->nb_segs, 3);
  EXPECT_EQ(pkts[0]->pkt_len, 600u);
  mbuf_free(pkts[0]);
  EXPECT_FALSE(rx_.health.broken());
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MergeableRxAgainstUsedRing, ZeroBuffersStopsTheQueue) {
  device_returns(net_hdr_bytes + 60, 0);
  Mbuf* pkts[8];
  EXPECT_EQ(rx_.rx_burst(pkts, 8), 0);
  EXPECT_TRUE(rx_.health.broken());
  EXPECT_EQ(rx_.health.first_error(), QueueError::used_bad_num_buffers);
  EXPECT_EQ(rx_.counters.errors.read(), 1u);
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

// A packet of more buffers than the ring holds can never be whole: collecting it would keep
// every buffer the ring is given from then on, and the pool runs dry for every other port.
TEST_F(MergeableRxAgainstUsedRing, MoreBuffersThanTheRingHoldsStopsTheQueue) {
  device_returns(net_hdr_bytes + 60, 65535);
  for (std::uint32_t i = 1; i < n; ++i) device_returns(100, 1);
  Mbuf* pkts[32];
  EXPECT_EQ(rx_.rx_burst(pkts, 32), 31) << "the buffers after the bad one are packets of their own";
  for (std::uint16_t i = 0; i < 31; ++i) mbuf_free(pkts[i]);
  EXPECT_TRUE(rx_.health.broken());
  EXPECT_EQ(rx_.health.first_error(), QueueError::used_bad_num_buffers);
  EXPECT_EQ(queue_error_detail(rx_.health.first_error(), rx_.health.first_detail()),
            "used_bad_num_buffers (num_buffers 65535)");
  EXPECT_EQ(rx_.rx_burst(pkts, 32), 0) << "a stopped queue takes nothing more from the device";
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MergeableRxAgainstUsedRing, AsManyBuffersAsTheRingHoldsIsAPacket) {
  device_returns(net_hdr_bytes + 60, n);
  for (std::uint32_t i = 1; i < n; ++i) device_returns(100, 0);
  Mbuf* pkts[64];
  ASSERT_EQ(rx_.rx_burst(pkts, 64), 1);
  EXPECT_EQ(pkts[0]->nb_segs, n);
  EXPECT_EQ(pkts[0]->pkt_len, 60u + 100u * (n - 1));
  mbuf_free(pkts[0]);
  EXPECT_FALSE(rx_.health.broken());
  rx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

// The TX queue against a device that completes everything it is given. A packet another owner
// also holds (refcount 2) cannot carry its header, so it takes two descriptors; the queue
// reclaims only when it runs short, and a burst whose packets need more descriptors than are
// free must still reclaim what the device finished rather than refuse packets.
class TxAgainstUsedRing : public QueueAgainstRing {
 protected:
  void SetUp() override {
    QueueAgainstRing::SetUp();
    if (HasFatalFailure()) return;
    tx_.zero_hdr = 0x1000;
    tx_.init(area_, false);
  }
  // `count` packets of 60 bytes; with `owners` 2, each also held by a second owner (the test).
  std::vector<Mbuf*> packets(std::uint32_t count, std::uint16_t owners = 1) {
    std::vector<Mbuf*> v;
    for (std::uint32_t i = 0; i < count; ++i) {
      Mbuf* m = pool_->alloc();
      if (m == nullptr) {
        ADD_FAILURE() << "pool empty";
        break;
      }
      m->data_len = 60;
      m->pkt_len = 60;
      m->refcnt.store(owners, std::memory_order_relaxed);
      v.push_back(m);
    }
    return v;
  }
  // The device: returns every chain made available so far.
  void device_completes_all() {
    const std::uint16_t avail = *ring_.avail_idx();
    for (; used_ != avail; ++used_) ring_.used_ring()[used_ % n] = {ring_.avail_ring()[used_ % n], 0};
    __atomic_store_n(ring_.used_idx(), used_, __ATOMIC_RELEASE);
  }

  VirtioTx<TestHotPath, false, false, false> tx_;
};

TEST_F(TxAgainstUsedRing, ReclaimsCompletedChainsWhenABurstNeedsMoreDescriptorsThanAreFree) {
  auto first = packets(24, 2);  // 48 descriptors: 16 stay free
  ASSERT_EQ(tx_.tx_burst(first.data(), 24), 24);
  device_completes_all();
  auto second = packets(16, 2);  // 32 descriptors needed, 16 free, 48 completed
  EXPECT_EQ(tx_.tx_burst(second.data(), 16), 16) << "completed chains must make room, not packets refused";
  EXPECT_EQ(tx_.counters.full.read(), 0u);
  EXPECT_EQ(tx_.counters.packets.read(), 40u);
  device_completes_all();
  tx_.release_mbufs();
  for (auto* v : {&first, &second})
    for (Mbuf* m : *v) mbuf_free(m);  // the second owner's reference
  EXPECT_EQ(pool_->in_use(), 0u);
}

// Once a burst is published, the queue frees what the device completed until a burst like it
// would fit again, so that the next burst finds room without waiting on that work.
TEST_F(TxAgainstUsedRing, AfterPublishingABurstRoomIsMadeForTheNext) {
  auto first = packets(n / 2);  // one descriptor each: half the ring
  ASSERT_EQ(tx_.tx_burst(first.data(), n / 2), n / 2);
  device_completes_all();
  auto second = packets(n / 2);
  ASSERT_EQ(tx_.tx_burst(second.data(), n / 2), n / 2);
  EXPECT_EQ(pool_->in_use(), n / 2) << "the first burst's mbufs were freed after the second was posted";
  EXPECT_EQ(tx_.engine.free_descs(), n / 2);
  device_completes_all();
  tx_.release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
}

// A packet we alone hold carries its header in its headroom. A header that asks for nothing is
// zero, num_buffers included (virtio 1.2 §5.1.6.2.1); with keep_num_buffers, num_buffers keeps
// what the buffer held (0xabab here, standing for what a device wrote on RX). Both the plain
// variant and the offload one.
class TxPushedHeader : public QueueAgainstRing {
 protected:
  template <bool Offload>
  void expect_header(bool keep) {
    VirtioTx<TestHotPath, false, false, Offload> tx;
    tx.keep_num_buffers = keep;
    tx.init(area_, false);
    Mbuf* m = pool_->alloc();
    ASSERT_NE(m, nullptr);
    m->data_len = m->pkt_len = 60;
    std::memset(m->data() - net_hdr_bytes, 0xab, net_hdr_bytes);
    ASSERT_EQ(tx.tx_burst(&m, 1), 1);
    const SplitDesc& d = ring_.desc[ring_.avail_ring()[0]];
    EXPECT_EQ(d.addr, reinterpret_cast<std::uint64_t>(m->data() - net_hdr_bytes)) << "one descriptor, header first";
    NetHdr h;
    std::memcpy(&h, m->data() - net_hdr_bytes, sizeof h);
    EXPECT_EQ(h.flags, 0);
    EXPECT_EQ(h.gso_type, NetHdr::gso_none);
    EXPECT_EQ(h.hdr_len | h.gso_size | h.csum_start | h.csum_offset, 0);
    EXPECT_EQ(h.num_buffers, keep ? 0xabab : 0) << "Offload " << Offload << ", keep_num_buffers " << keep;
    const std::uint16_t avail = *ring_.avail_idx();
    ring_.used_ring()[0] = {ring_.avail_ring()[0], 0};
    __atomic_store_n(ring_.used_idx(), avail, __ATOMIC_RELEASE);
    tx.release_mbufs();
    EXPECT_EQ(pool_->in_use(), 0u);
  }
};

TEST_F(TxPushedHeader, NumBuffersIsZeroedUnlessKeptOnRequest) {
  for (const bool keep : {false, true}) {
    std::memset(area_.desc, 0, ring_area_bytes(n));  // each queue starts on a fresh ring
    expect_header<false>(keep);
    std::memset(area_.desc, 0, ring_area_bytes(n));
    expect_header<true>(keep);
  }
}

}  // namespace
}  // namespace ws::virtio
