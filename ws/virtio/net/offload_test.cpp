// SPDX-License-Identifier: BSD-3-Clause
// Offloads through the virtio-net header: a packet whose TX checksum the sender left to its peer
// (NEEDS_CSUM) comes out of the receiver with the checksum a software computation gives; TSO
// requests become gso fields; what the peer did not accept is done in software or refused.
#include "ws/virtio/net/offload.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "ws/core/arena.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"

namespace ws::virtio {
namespace {

class NetOffloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"net_offload_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    auto p =
        PktmbufPool::create(*arena_, {.name = "net_offload", .count = 64, .cache_size = 0, .data_room_bytes = 4096});
    ASSERT_TRUE(p.has_value()) << p.error().message;
    pool_ = std::move(*p);
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u); }

  // A frame with correct checksums, its L4 checksum then spoiled, the request set as an
  // application asking for hardware checksums would (lengths from the parser).
  Mbuf* request(const FrameSpec& spec, std::uint64_t flags) {
    const BuiltFrame f = build_frame(spec);
    good_ = f.bytes;
    Mbuf* m = pool_->copy_in(f.bytes.data(), static_cast<std::uint32_t>(f.bytes.size()), 0);
    EXPECT_NE(m, nullptr);
    classify(*m);
    const std::uint32_t field = m->l2_len + m->l3_len + (spec.l4_proto == ip_proto_tcp ? 16u : 6u);
    m->data()[field] ^= 0x5a;
    m->ol_flags = flags | (spec.ipv6 ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4);
    return m;
  }
  bool same_as_good(const Mbuf& m) const {
    return m.data_len == good_.size() && std::memcmp(m.data(), good_.data(), good_.size()) == 0;
  }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
  std::vector<std::uint8_t> good_;
};

TEST_F(NetOffloadTest, NeedsCsumIsCompletedByTheReceiver) {
  const HdrOffloads peer{true, true, true};
  for (const bool ipv6 : {false, true})
    for (const std::uint8_t proto : {ip_proto_tcp, ip_proto_udp}) {
      SCOPED_TRACE(testing::Message() << "ipv6 " << ipv6 << " proto " << int{proto});
      Mbuf* m = request({.ipv6 = ipv6, .l4_proto = proto, .payload_bytes = 333},
                        proto == ip_proto_tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum);
      NetHdr h{};
      ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, peer));
      EXPECT_EQ(h.flags, NetHdr::f_needs_csum);
      EXPECT_EQ(h.csum_start, m->l2_len + m->l3_len);
      EXPECT_EQ(h.csum_offset, proto == ip_proto_tcp ? 16 : 6);
      EXPECT_EQ(h.gso_type, NetHdr::gso_none);
      NetHdr again{};
      ASSERT_TRUE(tx_offload_to_net_hdr(*m, again, peer));
      EXPECT_EQ(std::memcmp(&again, &h, sizeof h), 0) << "a retried packet gets the same header";
      EXPECT_FALSE(same_as_good(*m)) << "the field holds the pseudo-header sum, not the checksum";
      ASSERT_EQ(check_net_hdr(h, m->pkt_len), NetHdrCheck::ok);
      m->ol_flags = 0;
      rx_net_hdr_to_offload(h, *m);  // the peer's side
      EXPECT_TRUE(same_as_good(*m));
      EXPECT_NE(m->ol_flags & mbuf_flag::rx_l4_cksum_good, 0u);
      mbuf_free(m);
    }
}

TEST_F(NetOffloadTest, IpChecksumIsAlwaysSoftware) {
  Mbuf* m = request({.l4_proto = ip_proto_udp}, mbuf_flag::tx_ip_cksum | mbuf_flag::tx_udp_cksum);
  m->data()[m->l2_len + 10] ^= 0x11;  // spoil the IPv4 header checksum too
  NetHdr h{};
  ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, {true, false, false}));
  rx_net_hdr_to_offload(h, *m);
  EXPECT_TRUE(same_as_good(*m));
  mbuf_free(m);
}

TEST_F(NetOffloadTest, WithoutThePeersCsumTheSenderDoesItInSoftware) {
  Mbuf* m = request({.l4_proto = ip_proto_tcp, .payload_bytes = 100}, mbuf_flag::tx_tcp_cksum);
  NetHdr h{};
  ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, {}));
  EXPECT_EQ(h.flags, 0);
  EXPECT_TRUE(same_as_good(*m));
  mbuf_free(m);
}

TEST_F(NetOffloadTest, TsoBecomesGsoFieldsOrIsRefused) {
  Mbuf* m = request({.l4_proto = ip_proto_tcp, .payload_bytes = 3000}, mbuf_flag::tx_tcp_seg);
  m->tso_segsz = 1000;
  NetHdr h{};
  EXPECT_FALSE(tx_offload_to_net_hdr(*m, h, {true, false, true})) << "TCPv4 segmentation not accepted";
  ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, {true, true, false}));
  EXPECT_EQ(h.gso_type, NetHdr::gso_tcpv4);
  EXPECT_EQ(h.gso_size, 1000);
  EXPECT_EQ(h.hdr_len, 14 + 20 + 20);
  EXPECT_EQ(h.flags, NetHdr::f_needs_csum) << "segmentation implies the L4 checksum";
  m->ol_flags = 0;
  rx_net_hdr_to_offload(h, *m);
  EXPECT_TRUE(same_as_good(*m));
  EXPECT_NE(m->ol_flags & mbuf_flag::rx_lro, 0u);
  EXPECT_EQ(m->tso_segsz, 1000);
  mbuf_free(m);
}

TEST_F(NetOffloadTest, DataValidMarksTcpAndUdpGood) {
  const BuiltFrame f = build_frame({.l4_proto = ip_proto_udp});
  Mbuf* m = pool_->copy_in(f.bytes.data(), static_cast<std::uint32_t>(f.bytes.size()), 0);
  ASSERT_NE(m, nullptr);
  NetHdr h{};
  rx_net_hdr_to_offload(h, *m);
  EXPECT_EQ(m->ol_flags, 0u) << "an empty header says nothing";
  h.flags = NetHdr::f_data_valid;
  rx_net_hdr_to_offload(h, *m);
  EXPECT_EQ(m->ol_flags, mbuf_flag::rx_l4_cksum_good);
  mbuf_free(m);
}

// legacy-ol-flags=1: the received header's requests become TX requests on the mbuf, and the port
// the packet is forwarded to (here: the software fallback every port has) completes them.
TEST_F(NetOffloadTest, LegacyModeTurnsRequestsIntoTxFlags) {
  const HdrOffloads peer{true, true, true};
  for (const bool ipv6 : {false, true})
    for (const std::uint8_t proto : {ip_proto_tcp, ip_proto_udp}) {
      SCOPED_TRACE(testing::Message() << "ipv6 " << ipv6 << " proto " << int{proto});
      Mbuf* m = request({.ipv6 = ipv6, .l4_proto = proto, .payload_bytes = 333, .vlan_tags = 1},
                        proto == ip_proto_tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum);
      const std::uint16_t l2 = m->l2_len, l3 = m->l3_len;
      NetHdr h{};
      ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, peer));
      m->ol_flags = 0;
      m->tx_offload = 0;
      rx_net_hdr_to_legacy_offload(h, *m);  // the receiving backend, legacy mode
      EXPECT_EQ(m->ol_flags, (proto == ip_proto_tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum) |
                                 (ipv6 ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4));
      EXPECT_EQ(m->l2_len, l2) << "with the VLAN tag";
      EXPECT_EQ(m->l3_len, l3);
      EXPECT_FALSE(same_as_good(*m)) << "legacy mode leaves the checksum to the next port";
      ASSERT_TRUE(apply_tx_checksums(*m));  // the next port, in software
      EXPECT_TRUE(same_as_good(*m));
      mbuf_free(m);
    }
}

TEST_F(NetOffloadTest, LegacyModeTurnsGsoIntoTso) {
  Mbuf* m = request({.l4_proto = ip_proto_tcp, .payload_bytes = 3000, .tcp_option_words = 3}, mbuf_flag::tx_tcp_seg);
  m->tso_segsz = 1000;
  m->l4_len = 32;
  NetHdr h{};
  ASSERT_TRUE(tx_offload_to_net_hdr(*m, h, {true, true, true}));
  m->ol_flags = 0;
  m->tx_offload = 0;
  rx_net_hdr_to_legacy_offload(h, *m);
  EXPECT_EQ(m->ol_flags, mbuf_flag::tx_tcp_cksum | mbuf_flag::tx_tcp_seg | mbuf_flag::tx_ipv4);
  EXPECT_EQ(m->tso_segsz, 1000);
  EXPECT_EQ(m->l2_len, 14);
  EXPECT_EQ(m->l3_len, 20);
  EXPECT_EQ(m->l4_len, 32) << "from the TCP header's data offset";
  mbuf_free(m);
}

// As DPDK's vhost_dequeue_offload_legacy: a request that does not match the packet leaves
// l2_len, l3_len and ol_flags zero; an empty header leaves the mbuf alone.
TEST_F(NetOffloadTest, LegacyModeDropsRequestsThatDoNotMatch) {
  const BuiltFrame f = build_frame({.l4_proto = ip_proto_udp, .payload_bytes = 100});
  Mbuf* m = pool_->copy_in(f.bytes.data(), static_cast<std::uint32_t>(f.bytes.size()), 0);
  ASSERT_NE(m, nullptr);
  auto run = [&](NetHdr h) {
    m->ol_flags = mbuf_flag::rx_rss_hash;  // anything: the error path clears it all
    m->tx_offload = 0;
    rx_net_hdr_to_legacy_offload(h, *m);
    return m->ol_flags;
  };
  EXPECT_EQ(run({}), mbuf_flag::rx_rss_hash) << "an empty header says nothing";
  auto csum = [](std::uint16_t start, std::uint16_t offset) {
    NetHdr h{};
    h.flags = NetHdr::f_needs_csum;
    h.csum_start = start;
    h.csum_offset = offset;
    return h;
  };
  EXPECT_EQ(run(csum(14, 6)), 0u) << "csum_start not at the UDP header";
  EXPECT_EQ(m->l2_len + m->l3_len, 0);
  EXPECT_EQ(run(csum(34, 16)), 0u) << "a TCP checksum asked for on UDP";
  EXPECT_EQ(run(csum(34, 8)), 0u) << "no SCTP checksum request here";
  NetHdr udp_gso{};
  udp_gso.gso_type = NetHdr::gso_udp;
  udp_gso.gso_size = 100;
  EXPECT_EQ(run(udp_gso), 0u) << "no UDP segmentation request here";
  EXPECT_EQ(run(csum(34, 6)), mbuf_flag::rx_rss_hash | mbuf_flag::tx_udp_cksum | mbuf_flag::tx_ipv4);
  EXPECT_EQ(m->l2_len, 14);
  EXPECT_EQ(m->l3_len, 20);
  mbuf_free(m);
}

}  // namespace
}  // namespace ws::virtio
