// Offloads through the virtio-net header: a packet whose TX checksum the sender left to its peer
// (NEEDS_CSUM) comes out of the receiver with the checksum a software computation gives; TSO
// requests become gso fields; what the peer did not accept is done in software or refused.
#include "ws/virtio/net_offload.hpp"

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
    auto p = PktmbufPool::create(*arena_, {.name = "net_offload", .count = 64, .cache_size = 0, .data_room_bytes = 4096});
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

}  // namespace
}  // namespace ws::virtio
