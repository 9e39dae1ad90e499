// SPDX-License-Identifier: BSD-3-Clause
// Software RX offloads through a real port (net_ring, whose device does neither): VLAN strip
// moves the tag into vlan_tci, the VLAN filter drops tagged packets of other VLANs and counts
// them as RX errors, and an offload the port lacks is refused with DPDK's message.
#include <gtest/gtest.h>

#include <vector>

#include "ws/net/packet_builder.hpp"
#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class SoftwareRxTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("software_rx_test", 32u << 20, {.name = "swrx", .count = 1024, .cache_size = 0});
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u) << "an mbuf was not returned"; }

  std::unique_ptr<Port> start(std::string_view device, std::uint64_t rx_offloads,
                              std::initializer_list<std::uint16_t> vlans = {}) {
    std::unique_ptr<Port> port = create(device);
    if (!port) return nullptr;
    auto ok = port->configure({.rx_offloads = rx_offloads});
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    for (std::uint16_t v : vlans) EXPECT_TRUE(port->set_vlan_filter(v, true).has_value());
    EXPECT_TRUE(port->setup_rx_queue(0, {.pool = pool_.get()}).has_value());
    EXPECT_TRUE(port->setup_tx_queue(0, {}).has_value());
    ok = port->start();
    EXPECT_TRUE(ok.has_value()) << (ok ? "" : ok.error().message);
    return port;
  }

  // A UDP/IPv4 frame with one 802.1Q tag of `vid` (untagged for vid < 0).
  Mbuf* frame(int vid) {
    FrameSpec s;
    if (vid >= 0) {
      s.vlan_tags = 1;
      s.vlan_tci = static_cast<std::uint16_t>(vid);
    }
    const BuiltFrame f = build_frame(s);
    Mbuf* m = pool_->alloc();
    std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
    return m;
  }
};

TEST_F(SoftwareRxTest, StripMovesTheTagIntoVlanTci) {
  auto port = start("net_ring0", rx_offload::vlan_strip);
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->software_rx_offloads(), rx_offload::vlan_strip);
  Mbuf* sent[2] = {frame(100), frame(-1)};
  const std::uint16_t tagged_len = sent[0]->pkt_len;
  ASSERT_EQ(port->tx_burst(0, sent, 2), 2);
  Mbuf* got[4];
  ASSERT_EQ(port->rx_burst(0, got, 4), 2);
  EXPECT_TRUE(got[0]->ol_flags & mbuf_flag::rx_vlan_stripped);
  EXPECT_EQ(got[0]->vlan_tci, 100);
  EXPECT_EQ(got[0]->pkt_len, tagged_len - 4u);
  EXPECT_EQ((got[0]->data()[12] << 8) | got[0]->data()[13], ether_type_ipv4);
  EXPECT_FALSE(got[1]->ol_flags & mbuf_flag::rx_vlan);
  mbuf_free_bulk(std::span<Mbuf* const>(got, 2));
  port->stop();
}

TEST_F(SoftwareRxTest, FilterDropsOtherVlansAndCountsThem) {
  auto port = start("net_ring0", rx_offload::vlan_filter, {100, 4095});
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->vlan_filter_ids(), (std::vector<std::uint16_t>{100, 4095}));
  Mbuf* sent[4] = {frame(100), frame(200), frame(-1), frame(4095)};
  ASSERT_EQ(port->tx_burst(0, sent, 4), 4);
  Mbuf* got[8];
  const std::uint16_t n = port->rx_burst(0, got, 8);
  ASSERT_EQ(n, 3);  // VLAN 200 dropped; untagged packets pass, as with a NIC's filter
  EXPECT_FALSE(got[0]->ol_flags & mbuf_flag::rx_vlan_stripped);  // filter only: the tag stays
  EXPECT_EQ(port->stats().ierrors, 1u);
  mbuf_free_bulk(std::span<Mbuf* const>(got, n));
  // Ids change while the port runs, as a NIC's table does.
  ASSERT_TRUE(port->set_vlan_filter(200, true).has_value());
  ASSERT_TRUE(port->set_vlan_filter(100, false).has_value());
  Mbuf* again[2] = {frame(100), frame(200)};
  ASSERT_EQ(port->tx_burst(0, again, 2), 2);
  ASSERT_EQ(port->rx_burst(0, got, 8), 1);
  EXPECT_EQ(((got[0]->data()[14] << 8) | got[0]->data()[15]) & 0xfff, 200);
  mbuf_free(got[0]);
  EXPECT_EQ(port->stats().ierrors, 2u);
  port->stop();
  EXPECT_FALSE(port->set_vlan_filter(4096, true).has_value());
}

TEST_F(SoftwareRxTest, NoRxOffloadLeavesTheDriversBurst) {
  auto port = start("net_ring0", 0);
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->software_rx_offloads(), 0u);
  port->stop();
}

TEST_F(SoftwareRxTest, MissingOffloadAndMtuAreRefusedWithDpdksMessage) {
  std::unique_ptr<Port> port = create("net_ring0");
  ASSERT_NE(port, nullptr);
  auto r = port->configure({.rx_offloads = rx_offload::scatter});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message,
            "Ethdev port_id=0 requested Rx offloads 0x2000 doesn't match Rx offloads capabilities 0x201 in "
            "rte_eth_dev_configure()");
  r = port->configure({.mtu = 60});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "Ethdev port_id=0 MTU (60) < device min MTU (68)");
  EXPECT_TRUE(port->configure({.mtu = 9000}).has_value());
  EXPECT_EQ(port->config().mtu, 9000);
}

}  // namespace
}  // namespace ws
