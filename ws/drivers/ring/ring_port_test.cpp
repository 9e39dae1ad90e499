// SPDX-License-Identifier: BSD-3-Clause
// net_ring through the driver registry: loopback, peer pairs (TX of one is RX of the other),
// named rings, a full ring, size validation, pairing errors, and release_mbufs().
#include <gtest/gtest.h>

#include <vector>

#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class RingPortTest : public testing::PortFixture {
 protected:
  void SetUp() override { open_arena_and_pool("ring_port_test", 4u << 20, {.count = 128, .cache_size = 0}); }

  static void start(Port& port, std::uint16_t queues = 1) {
    ASSERT_TRUE(port.configure({queues, queues}).has_value());
    for (std::uint16_t q = 0; q < queues; ++q) {
      auto rx = port.setup_rx_queue(q, {});
      ASSERT_TRUE(rx.has_value()) << rx.error().message;
      ASSERT_TRUE(port.setup_tx_queue(q, {}).has_value());
    }
    auto ok = port.start();
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
  }

  // n fresh packets of `len` bytes.
  std::vector<Mbuf*> packets(std::size_t n, std::uint16_t len) {
    std::vector<Mbuf*> v(n);
    EXPECT_TRUE(pool_->alloc_bulk(v));
    for (Mbuf* m : v) m->append(len);
    return v;
  }
};

TEST_F(RingPortTest, LoopbackReturnsWhatWasSentInOrder) {
  auto port = create("net_ring0,count_bytes=1");
  ASSERT_TRUE(port);
  start(*port);
  auto sent = packets(10, 64);
  ASSERT_EQ(port->tx_burst(0, sent.data(), 10), 10);
  std::vector<Mbuf*> got(16);
  ASSERT_EQ(port->rx_burst(0, got.data(), 16), 10);
  got.resize(10);
  EXPECT_EQ(got, sent) << "no copies: the same mbufs, in order";
  EXPECT_EQ(port->rx_burst(0, got.data(), 10), 0);
  const PortStats s = port->stats();
  EXPECT_EQ(s.opackets, 10u);
  EXPECT_EQ(s.obytes, 640u);
  EXPECT_EQ(s.ipackets, 10u);
  EXPECT_EQ(s.ibytes, 640u);
  mbuf_free_bulk(got);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RingPortTest, BytesAreCountedOnlyWhenAsked) {
  // As DPDK's ring PMD: pointer rings do not read the packets unless count_bytes=1.
  auto port = create("net_ring0");
  ASSERT_TRUE(port);
  start(*port);
  auto sent = packets(4, 64);
  ASSERT_EQ(port->tx_burst(0, sent.data(), 4), 4);
  std::vector<Mbuf*> got(4);
  ASSERT_EQ(port->rx_burst(0, got.data(), 4), 4);
  const PortStats s = port->stats();
  EXPECT_EQ(s.opackets, 4u);
  EXPECT_EQ(s.ipackets, 4u);
  EXPECT_EQ(s.obytes, 0u);
  EXPECT_EQ(s.ibytes, 0u);
  EXPECT_FALSE(create_error("net_ring1,count_bytes=2").empty());
  mbuf_free_bulk(got);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RingPortTest, PeersCrossTheirRings) {
  auto p0 = create("net_ring0,count_bytes=1");
  auto p1 = create("net_ring1,peer=net_ring0,count_bytes=1");
  ASSERT_TRUE(p0 && p1);
  start(*p0);
  start(*p1);
  std::vector<Mbuf*> got(8);

  auto a = packets(3, 60);
  ASSERT_EQ(p1->tx_burst(0, a.data(), 3), 3);
  EXPECT_EQ(p1->rx_burst(0, got.data(), 8), 0) << "a paired port does not loop back";
  ASSERT_EQ(p0->rx_burst(0, got.data(), 8), 3);
  EXPECT_EQ(std::vector<Mbuf*>(got.begin(), got.begin() + 3), a);

  auto b = packets(2, 70);
  ASSERT_EQ(p0->tx_burst(0, b.data(), 2), 2);
  EXPECT_EQ(p0->rx_burst(0, got.data(), 8), 0);
  ASSERT_EQ(p1->rx_burst(0, got.data(), 8), 2);
  EXPECT_EQ(std::vector<Mbuf*>(got.begin(), got.begin() + 2), b);
  EXPECT_EQ(p1->stats().ibytes, 140u);
  EXPECT_EQ(p0->stats().obytes, 140u);

  mbuf_free_bulk(a);
  mbuf_free_bulk(b);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RingPortTest, PeersWithSeveralQueuesPairQueueByQueue) {
  auto p0 = create("net_ring0");
  auto p1 = create("net_ring1,peer=net_ring0");
  ASSERT_TRUE(p0 && p1);
  start(*p0, 2);
  start(*p1, 2);
  auto a = packets(1, 10);
  auto b = packets(1, 20);
  ASSERT_EQ(p0->tx_burst(1, a.data(), 1), 1);
  ASSERT_EQ(p0->tx_burst(0, b.data(), 1), 1);
  Mbuf* got = nullptr;
  ASSERT_EQ(p1->rx_burst(1, &got, 1), 1);
  EXPECT_EQ(got, a[0]);
  ASSERT_EQ(p1->rx_burst(0, &got, 1), 1);
  EXPECT_EQ(got, b[0]);
  mbuf_free(a[0]);
  mbuf_free(b[0]);
}

TEST_F(RingPortTest, NamedRingsConnectPorts) {
  auto tx = create("net_ring4,tx_ring=link_a,rx_ring=link_b");
  auto rx = create("net_ring5,rx_ring=link_a,tx_ring=link_b");
  ASSERT_TRUE(tx && rx);
  start(*tx);
  start(*rx);
  auto a = packets(4, 60);
  ASSERT_EQ(tx->tx_burst(0, a.data(), 4), 4);
  std::vector<Mbuf*> got(8);
  ASSERT_EQ(rx->rx_burst(0, got.data(), 8), 4);
  ASSERT_EQ(rx->tx_burst(0, got.data(), 4), 4);
  ASSERT_EQ(tx->rx_burst(0, got.data(), 8), 4);
  got.resize(4);
  EXPECT_EQ(got, a);
  mbuf_free_bulk(got);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RingPortTest, FullRingTakesWhatFitsAndCountsTheRest) {
  auto port = create("net_ring0,size=4,count_bytes=1");
  ASSERT_TRUE(port);
  start(*port);
  auto a = packets(6, 100);
  EXPECT_EQ(port->tx_burst(0, a.data(), 6), 4);
  const PortStats s = port->stats();
  EXPECT_EQ(s.opackets, 4u);
  EXPECT_EQ(s.obytes, 400u) << "bytes of what was refused do not count";
  std::int64_t full = -1;
  for (const auto& x : port->xstats())
    if (x.name == "tx_q0_ring_full") full = static_cast<std::int64_t>(x.value);
  EXPECT_EQ(full, 2);
  std::vector<Mbuf*> got(8);
  ASSERT_EQ(port->rx_burst(0, got.data(), 8), 4);
  mbuf_free_bulk(std::span<Mbuf* const>(got.data(), 4));
  mbuf_free_bulk(std::span<Mbuf* const>(a).subspan(4));  // the caller still owns the refused ones
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(RingPortTest, SizeMustBeAPowerOfTwo) {
  std::string e = create_error("net_ring0,size=1000");
  EXPECT_NE(e.find("device 'net_ring0'"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'size'"), std::string::npos) << e;
  EXPECT_NE(e.find("power of two"), std::string::npos) << e;
  e = create_error("net_ring0,size=1");
  EXPECT_NE(e.find("key 'size'"), std::string::npos) << e;
  e = create_error("net_ring0,size=0x20000000");
  EXPECT_NE(e.find("key 'size'"), std::string::npos) << e;
  auto ok = create("net_ring0,size=0x40");
  EXPECT_TRUE(ok);
}

TEST_F(RingPortTest, BadKeysAndPairingErrors) {
  std::string e = create_error("net_ring0,peers=net_ring1");
  EXPECT_NE(e.find("device 'net_ring0'"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'peers'"), std::string::npos) << e;
  EXPECT_NE(e.find("size, peer, rx_ring, tx_ring"), std::string::npos) << e;

  e = create_error("net_ring0,peer=net_ring0");
  EXPECT_NE(e.find("key 'peer'"), std::string::npos) << e;
  EXPECT_NE(e.find("itself"), std::string::npos) << e;

  e = create_error("net_ring2,peer=net_ring3,rx_ring=x");
  EXPECT_NE(e.find("device 'net_ring2'"), std::string::npos) << e;
  EXPECT_NE(e.find("exclude each other"), std::string::npos) << e;
  // The refused device must not have left a pairing behind.
  EXPECT_TRUE(create("net_ring3,peer=net_ring2"));

  ASSERT_TRUE(create("net_ring1,peer=net_ring0"));
  e = create_error("net_ring4,peer=net_ring0");
  EXPECT_NE(e.find("device 'net_ring4'"), std::string::npos) << e;
  EXPECT_NE(e.find("already paired"), std::string::npos) << e;
}

TEST_F(RingPortTest, ReleaseMbufsReturnsWhatTheRingsHold) {
  auto port = create("net_ring0");
  ASSERT_TRUE(port);
  start(*port, 2);
  auto a = packets(10, 64);
  ASSERT_EQ(port->tx_burst(0, a.data(), 6), 6);
  ASSERT_EQ(port->tx_burst(1, a.data() + 6, 4), 4);
  EXPECT_EQ(pool_->in_use(), 10u);
  port->stop();
  port->release_mbufs();
  EXPECT_EQ(pool_->in_use(), 0u);
  // Restarted, the port has nothing left to receive.
  ASSERT_TRUE(port->start().has_value());
  std::vector<Mbuf*> got(16);
  EXPECT_EQ(port->rx_burst(0, got.data(), 16), 0);
  EXPECT_EQ(port->rx_burst(1, got.data(), 16), 0);
}

TEST_F(RingPortTest, RingsOutliveAStopOfOneSide) {
  auto p0 = create("net_ring0");
  auto p1 = create("net_ring1,peer=net_ring0");
  ASSERT_TRUE(p0 && p1);
  start(*p0);
  start(*p1);
  auto a = packets(2, 64);
  ASSERT_EQ(p0->tx_burst(0, a.data(), 2), 2);
  p1->stop();
  ASSERT_TRUE(p1->start().has_value());
  std::vector<Mbuf*> got(4);
  ASSERT_EQ(p1->rx_burst(0, got.data(), 4), 2);
  mbuf_free_bulk(std::span<Mbuf* const>(got.data(), 2));
  EXPECT_EQ(pool_->in_use(), 0u);
}

}  // namespace
}  // namespace ws
