// SPDX-License-Identifier: BSD-3-Clause
// net_ring through the driver registry: loopback, peer pairs (TX of one is RX of the other),
// named rings, a full ring, size validation, pairing errors, and release_mbufs().
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ws/port/xstats.hpp"
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

// The names dpdk-testpmd 22.11 prints for `show port xstats` of a net_ring (or net_null, net_pcap,
// net_af_packet, net_tap, net_af_xdp) port with one queue each: rte_ethdev's generic ones, the
// per-queue ones filled in (RTE_ETH_DEV_AUTOFILL_QUEUE_XSTATS); ours follow them.
TEST_F(RingPortTest, XstatsStartWithDpdksGenericNames) {
  auto port = create("net_ring0,count_bytes=1");
  ASSERT_TRUE(port);
  start(*port, 2);
  const std::vector<std::string> dpdk = {
      "rx_good_packets",  "tx_good_packets", "rx_good_bytes", "tx_good_bytes",
      "rx_missed_errors", "rx_errors",       "tx_errors",     "rx_mbuf_allocation_errors",
      "rx_q0_packets",    "rx_q0_bytes",     "rx_q0_errors",  "rx_q1_packets",
      "rx_q1_bytes",      "rx_q1_errors",    "tx_q0_packets", "tx_q0_bytes",
      "tx_q1_packets",    "tx_q1_bytes"};
  auto a = packets(3, 100);
  ASSERT_EQ(port->tx_burst(1, a.data(), 3), 3);
  const auto x = port->xstats();
  ASSERT_GE(x.size(), dpdk.size());
  for (std::size_t i = 0; i < dpdk.size(); ++i) EXPECT_EQ(x[i].name, dpdk[i]) << i;
  EXPECT_EQ(x[15].value, 0u);    // tx_q0_packets
  EXPECT_EQ(x[16].value, 3u);    // tx_q1_packets
  EXPECT_EQ(x[17].value, 300u);  // tx_q1_bytes
  std::vector<Mbuf*> got(4);
  ASSERT_EQ(port->rx_burst(1, got.data(), 4), 3);
  mbuf_free_bulk(std::span<Mbuf* const>(got.data(), 3));
}

// The size bins and multicast/broadcast counts DPDK's virtio PMD and vhost library keep, at the
// bins' edges, one burst at a time; null entries (TX drops) count for nothing.
TEST_F(RingPortTest, PacketClassCountersBinAsDpdk) {
  EXPECT_EQ(PacketClassCounters::bin(0), 0u);
  EXPECT_EQ(PacketClassCounters::bin(63), 0u);
  EXPECT_EQ(PacketClassCounters::bin(64), 1u);
  EXPECT_EQ(PacketClassCounters::bin(65), 2u);
  EXPECT_EQ(PacketClassCounters::bin(127), 2u);
  EXPECT_EQ(PacketClassCounters::bin(128), 3u);
  EXPECT_EQ(PacketClassCounters::bin(255), 3u);
  EXPECT_EQ(PacketClassCounters::bin(256), 4u);
  EXPECT_EQ(PacketClassCounters::bin(511), 4u);
  EXPECT_EQ(PacketClassCounters::bin(512), 5u);
  EXPECT_EQ(PacketClassCounters::bin(1023), 5u);
  EXPECT_EQ(PacketClassCounters::bin(1024), 6u);
  EXPECT_EQ(PacketClassCounters::bin(1518), 6u);
  EXPECT_EQ(PacketClassCounters::bin(1519), 7u);
  EXPECT_EQ(PacketClassCounters::bin(9000), 7u);

  const std::uint16_t lens[] = {60, 64, 65, 128, 300, 600, 1200, 1519};
  std::vector<Mbuf*> pkts;
  for (std::size_t i = 0; i < std::size(lens); ++i) {
    auto one = packets(1, lens[i]);
    std::uint8_t* d = one[0]->data<std::uint8_t>();
    const std::uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const std::uint8_t mcast[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
    const std::uint8_t ucast[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02};
    const std::uint8_t almost[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xfe};  // multicast, not broadcast
    std::memcpy(d, i % 4 == 0 ? ucast : i % 4 == 1 ? bcast : i % 4 == 2 ? mcast : almost, 6);
    pkts.push_back(one[0]);
  }
  pkts.insert(pkts.begin() + 3, nullptr);
  PacketClassCounters c;
  EXPECT_EQ(c.count(pkts.data(), static_cast<std::uint32_t>(pkts.size())), std::size(lens));
  EXPECT_EQ(c.count(pkts.data(), 2), 2u);  // a second burst adds up
  std::vector<XStat> x;
  c.append_xstats(x, "tx_q3_");
  const std::vector<std::pair<std::string, std::uint64_t>> want = {
      {"tx_q3_multicast_packets", 4},    {"tx_q3_broadcast_packets", 3},     {"tx_q3_undersize_packets", 2},
      {"tx_q3_size_64_packets", 2},      {"tx_q3_size_65_127_packets", 1},   {"tx_q3_size_128_255_packets", 1},
      {"tx_q3_size_256_511_packets", 1}, {"tx_q3_size_512_1023_packets", 1}, {"tx_q3_size_1024_1518_packets", 1},
      {"tx_q3_size_1519_max_packets", 1}};
  ASSERT_EQ(x.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(x[i].name, want[i].first);
    EXPECT_EQ(x[i].value, want[i].second) << want[i].first;
  }
  pkts.erase(pkts.begin() + 3);
  mbuf_free_bulk(pkts);
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
