// SPDX-License-Identifier: BSD-3-Clause
// Software RSS through a real port (net_ring, which has no hash): every received packet
// carries the Toeplitz hash of its addresses (and ports), and with several RX queues lands on
// the queue the redirection table names; a full spreading ring counts missed packets; stopping
// the port returns what waits in the rings to the pool.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "ws/net/packet_builder.hpp"
#include "ws/net/rss.hpp"
#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class SoftwareRssTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("software_rss_test", 32u << 20, {.name = "swrss", .count = 4096, .cache_size = 0});
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u) << "an mbuf was not returned"; }

  std::unique_ptr<Port> start(std::string_view device, std::uint16_t queues, const RssConfig& rss) {
    std::unique_ptr<Port> port = create(device);
    if (!port) return nullptr;
    PortConfig c;
    c.rx_queues = c.tx_queues = queues;
    c.rss = rss;
    auto ok = port->configure(c);
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    for (std::uint16_t q = 0; q < queues; ++q) {
      EXPECT_TRUE(port->setup_rx_queue(q, {.pool = pool_.get()}).has_value());
      EXPECT_TRUE(port->setup_tx_queue(q, {}).has_value());
    }
    ok = port->start();
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    return port;
  }

  // UDP/IPv4 packets of `flows` different source addresses and ports.
  std::vector<Mbuf*> packets(unsigned flows) {
    std::vector<Mbuf*> v;
    for (unsigned i = 0; i < flows; ++i) {
      FrameSpec s;
      s.src_ip = 0x0a000001 + i * 7;
      s.src_port = static_cast<std::uint16_t>(1000 + i);
      const BuiltFrame f = build_frame(s);
      Mbuf* m = pool_->alloc();
      EXPECT_NE(m, nullptr);
      std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
      v.push_back(m);
    }
    return v;
  }

  // The hash a NIC with the default key would give packet m (from its bytes).
  static std::uint32_t expected_hash(const Mbuf& m, std::uint32_t types) {
    const Toeplitz key;
    const std::uint8_t* ip = m.data() + 14;
    return types & rss_type::udp ? key.hash_ipv4(ip + 12, ip + 16, ip + 20, ip + 22) : key.hash_ipv4(ip + 12, ip + 16);
  }
};

TEST_F(SoftwareRssTest, SpreadsOverQueuesByTheRedirectionTable) {
  for (std::uint32_t types : {rss_type::ip, rss_type::ip | rss_type::udp}) {
    auto port = start("net_ring0", 4, {.types = types});
    ASSERT_NE(port, nullptr);
    EXPECT_TRUE(port->software_rss());
    auto sent = packets(200);
    ASSERT_EQ(port->tx_burst(0, sent.data(), 200), 200);  // loopback: TX queue 0 feeds RX queue 0
    std::map<std::uint16_t, unsigned> per_queue;
    Mbuf* got[64];
    // Queue 0 distributes: poll it first, then the others find their share in their rings.
    for (std::uint16_t q = 0; q < 4; ++q) {
      while (const std::uint16_t n = port->rx_burst(q, got, 64)) {
        for (std::uint16_t i = 0; i < n; ++i) {
          ASSERT_TRUE(got[i]->ol_flags & mbuf_flag::rx_rss_hash);
          const std::uint32_t h = expected_hash(*got[i], types);
          EXPECT_EQ(got[i]->rss_hash, h);
          EXPECT_EQ(q, (h & 127) % 4) << "the default table spreads entries round-robin";
        }
        per_queue[q] += n;
        mbuf_free_bulk(std::span<Mbuf* const>(got, n));
      }
    }
    unsigned total = 0;
    for (auto [q, n] : per_queue) {
      EXPECT_GT(n, 20u) << "queue " << q << " got few of 200 flows";
      total += n;
    }
    EXPECT_EQ(total, 200u);
    port->stop();
  }
}

TEST_F(SoftwareRssTest, UserTableAndSingleQueueHashOnly) {
  RssConfig rss{.types = rss_type::ip};
  rss.reta.assign(64, 2);  // every entry: queue 2
  auto port = start("net_ring0", 3, rss);
  ASSERT_NE(port, nullptr);
  auto sent = packets(50);
  ASSERT_EQ(port->tx_burst(0, sent.data(), 50), 50);
  Mbuf* got[64];
  EXPECT_EQ(port->rx_burst(0, got, 64), 0);
  EXPECT_EQ(port->rx_burst(1, got, 64), 0);
  const std::uint16_t n = port->rx_burst(2, got, 64);
  EXPECT_EQ(n, 50);
  mbuf_free_bulk(std::span<Mbuf* const>(got, n));
  port->stop();

  auto single = start("net_ring1", 1, {.types = rss_type::ip});
  ASSERT_NE(single, nullptr);
  sent = packets(10);
  ASSERT_EQ(single->tx_burst(0, sent.data(), 10), 10);
  ASSERT_EQ(single->rx_burst(0, got, 64), 10);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(got[i]->rss_hash, expected_hash(*got[i], rss_type::ip));
  mbuf_free_bulk(std::span<Mbuf* const>(got, 10));
  single->stop();
}

TEST_F(SoftwareRssTest, FullRingCountsMissedAndStopReturnsWaitingPackets) {
  RssConfig rss{.types = rss_type::ip};
  rss.reta.assign(128, 1);
  auto port = start("net_ring0,size=4096", 2, rss);
  ASSERT_NE(port, nullptr);
  Mbuf* got[64];
  unsigned fed = 0;
  for (int round = 0; round < 50; ++round) {  // queue 1 never polled: its ring (2048) fills
    auto sent = packets(64);
    ASSERT_EQ(port->tx_burst(0, sent.data(), 64), 64);
    fed += 64;
    EXPECT_EQ(port->rx_burst(0, got, 64), 0);
  }
  EXPECT_EQ(port->stats().imissed, fed - 2048);
  port->stop();  // the 2048 waiting are freed (TearDown checks the pool)
}

TEST_F(SoftwareRssTest, BadTableIsRefusedWithTheEntry) {
  auto made = registry_.create_port("net_ring0", env());
  ASSERT_TRUE(made.has_value());
  PortConfig c;
  c.rx_queues = c.tx_queues = 2;
  c.rss.types = rss_type::ip;
  c.rss.reta = {0, 1, 2, 0};
  auto ok = (*made)->configure(c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_NE(ok.error().message.find("entry 2 points at RX queue 2"), std::string::npos) << ok.error().message;
}

}  // namespace
}  // namespace ws
