// SPDX-License-Identifier: BSD-3-Clause
// Packet-type classification over built frames of every supported shape, and robustness over
// truncated and malformed ones (every prefix of every frame; lying lengths; fragments).
#include "ws/net/ptype.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ws/net/packet_builder.hpp"

namespace ws {
namespace {

PacketInfo parse(const std::vector<std::uint8_t>& b) { return parse_packet(std::span<const std::uint8_t>(b)); }

TEST(Ptype, ClassifiesEveryShape) {
  struct Case {
    FrameSpec spec;
    std::uint32_t type;
  };
  const Case cases[] = {
      {{.l4_proto = ip_proto_udp}, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_udp},
      {{.l4_proto = ip_proto_tcp}, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_tcp},
      {{.l4_proto = ip_proto_icmp}, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_icmp},
      {{.l4_proto = 47}, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_nonfrag},
      {{.l4_proto = ip_proto_tcp, .ipv4_option_words = 3}, ptype::l2_ether | ptype::l3_ipv4_ext | ptype::l4_tcp},
      {{.l4_proto = ip_proto_udp, .vlan_tags = 1}, ptype::l2_ether_vlan | ptype::l3_ipv4 | ptype::l4_udp},
      {{.l4_proto = ip_proto_udp, .vlan_tags = 2}, ptype::l2_ether_qinq | ptype::l3_ipv4 | ptype::l4_udp},
      {{.ipv6 = true, .l4_proto = ip_proto_udp}, ptype::l2_ether | ptype::l3_ipv6 | ptype::l4_udp},
      {{.ipv6 = true, .l4_proto = ip_proto_tcp, .tcp_option_words = 3},
       ptype::l2_ether | ptype::l3_ipv6 | ptype::l4_tcp},
      {{.ipv6 = true, .l4_proto = ip_proto_icmpv6}, ptype::l2_ether | ptype::l3_ipv6 | ptype::l4_icmp},
      {{.ipv6 = true, .l4_proto = ip_proto_tcp, .ipv6_ext_headers = 2},
       ptype::l2_ether | ptype::l3_ipv6_ext | ptype::l4_tcp},
  };
  for (const auto& c : cases) {
    const BuiltFrame f = build_frame(c.spec);
    const PacketInfo info = parse(f.bytes);
    EXPECT_EQ(info.packet_type, c.type) << std::hex << c.type;
    EXPECT_EQ(info.l2_len, f.l2_len);
    EXPECT_EQ(info.l3_len, f.l3_len);
    EXPECT_EQ(info.l4_len, c.type & ptype::l4_mask ? (c.spec.l4_proto == 47 ? 0 : f.l4_len) : 0);
    EXPECT_EQ(info.vlan_count, c.spec.vlan_tags);
  }
}

TEST(Ptype, VlanTagsAreReported) {
  const BuiltFrame f = build_frame({.vlan_tags = 2});
  const PacketInfo info = parse(f.bytes);
  EXPECT_EQ(info.vlan_tci[0], 100);
  EXPECT_EQ(info.vlan_tci[1], 101);
  EXPECT_EQ(info.l2_len, 22);
}

TEST(Ptype, Arp) {
  std::vector<std::uint8_t> b(14 + sizeof(ArpHdr), 0);
  b[12] = 0x08;
  b[13] = 0x06;
  EXPECT_EQ(parse(b).packet_type, ptype::l2_ether_arp);
}

TEST(Ptype, FragmentsStopAtL3) {
  BuiltFrame f = build_frame({.l4_proto = ip_proto_udp});
  f.bytes[14 + 6] = 0x20;  // more fragments
  EXPECT_EQ(parse(f.bytes).packet_type, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_frag);
  f.bytes[14 + 6] = 0x00;
  f.bytes[14 + 7] = 0x10;  // a later fragment
  EXPECT_EQ(parse(f.bytes).packet_type & ptype::l4_mask, ptype::l4_frag);
  EXPECT_EQ(parse(f.bytes).l4_len, 0);
}

TEST(Ptype, MalformedIpv4StopsAtL2) {
  BuiltFrame f = build_frame({.l4_proto = ip_proto_tcp});
  auto bad = f.bytes;
  ASSERT_GT(bad.size(), 60u);
  bad[14] = 0x44;  // IHL 4 < 5
  EXPECT_EQ(parse(bad).packet_type, ptype::l2_ether);
  bad = f.bytes;
  bad[14] = 0x4f;  // IHL 15: 60 bytes of header, more than the frame carries before TCP... or after
  bad.resize(14 + 40);
  EXPECT_EQ(parse(bad).packet_type, ptype::l2_ether);
  bad = f.bytes;
  bad[16] = 0;
  bad[17] = 10;  // total length below the header length
  EXPECT_EQ(parse(bad).packet_type, ptype::l2_ether);
  bad = f.bytes;
  bad[14 + 20 + 12] = 0x30;  // TCP data offset 3 < 5
  EXPECT_EQ(parse(bad).packet_type, ptype::l2_ether | ptype::l3_ipv4);
}

TEST(Ptype, Vxlan) {
  const BuiltFrame inner = build_frame({.l4_proto = ip_proto_tcp, .vlan_tags = 1});
  FrameSpec outer{.l4_proto = ip_proto_udp};
  outer.payload_bytes = static_cast<std::uint32_t>(8 + inner.bytes.size());
  outer.dst_port = vxlan_udp_port;
  BuiltFrame f = build_frame(outer);
  const std::size_t vx = 14 + 20 + 8;
  const std::uint8_t vxlan[8] = {0x08, 0, 0, 0, 0, 0, 42, 0};
  std::memcpy(f.bytes.data() + vx, vxlan, 8);
  std::memcpy(f.bytes.data() + vx + 8, inner.bytes.data(), inner.bytes.size());
  const PacketInfo info = parse(f.bytes);
  EXPECT_EQ(info.packet_type, ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_udp | ptype::tunnel_vxlan |
                                  ptype::inner_l2_ether_vlan | ptype::inner_l3_ipv4 | ptype::inner_l4_tcp);
  EXPECT_EQ(info.outer_l2_len, 14);
  EXPECT_EQ(info.outer_l3_len, 20);
  EXPECT_EQ(info.l2_len, 8 + 8 + 18);
  EXPECT_EQ(info.l3_len, 20);
  EXPECT_EQ(info.l4_len, 20);
  EXPECT_EQ(info.l4_proto, ip_proto_tcp);
  // Without tunnel parsing, only the outer layers.
  EXPECT_EQ(parse_packet(std::span<const std::uint8_t>(f.bytes), false).packet_type,
            ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_udp);
}

// Every prefix of every shape, parsed from an exactly-sized heap copy, so that ASan flags any
// read past the end; the result never claims headers beyond the bytes given.
TEST(Ptype, EveryTruncationStaysInBounds) {
  std::vector<FrameSpec> specs = {{.l4_proto = ip_proto_tcp, .vlan_tags = 2, .ipv4_option_words = 2},
                                  {.ipv6 = true, .l4_proto = ip_proto_udp, .ipv6_ext_headers = 3},
                                  {.ipv6 = true, .l4_proto = ip_proto_icmpv6},
                                  {.l4_proto = ip_proto_icmp}};
  for (const auto& s : specs) {
    const BuiltFrame f = build_frame(s);
    for (std::size_t n = 0; n <= f.bytes.size(); ++n) {
      std::vector<std::uint8_t> cut(f.bytes.begin(), f.bytes.begin() + static_cast<std::ptrdiff_t>(n));
      cut.shrink_to_fit();
      const PacketInfo info = parse(cut);
      EXPECT_LE(std::size_t{info.l2_len} + info.l3_len + info.l4_len, n);
    }
  }
}

TEST(Ptype, RandomBytesStayInBounds) {
  std::mt19937 rng(5);
  const BuiltFrame base = build_frame({.ipv6 = true, .l4_proto = ip_proto_tcp, .ipv6_ext_headers = 2});
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> b = base.bytes;
    b.resize(rng() % (b.size() + 1));
    for (int k = 0; k < 4 && !b.empty(); ++k) b[rng() % b.size()] = static_cast<std::uint8_t>(rng());
    b.shrink_to_fit();
    const PacketInfo info = parse(b);
    EXPECT_LE(std::size_t{info.l4_offset} + info.l4_len, std::max<std::size_t>(b.size(), info.l4_offset));
  }
}

class PtypeMbufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"ptype_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    auto p = PktmbufPool::create(*arena_, {.name = "ptype", .count = 64, .cache_size = 0});
    ASSERT_TRUE(p.has_value()) << p.error().message;
    pool_ = std::move(*p);
  }
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
};

// Headers split over three segments are copied to a stack buffer and classified alike.
TEST_F(PtypeMbufTest, MultiSegmentHeaders) {
  const BuiltFrame f = build_frame({.ipv6 = true, .l4_proto = ip_proto_tcp, .ipv6_ext_headers = 1});
  Mbuf* head = nullptr;
  const std::size_t cuts[] = {10, 40, f.bytes.size()};
  std::size_t from = 0;
  for (std::size_t to : cuts) {
    Mbuf* m = pool_->alloc();
    ASSERT_NE(m, nullptr);
    std::memcpy(m->append(static_cast<std::uint16_t>(to - from)), f.bytes.data() + from, to - from);
    if (head)
      ASSERT_TRUE(head->chain(m));
    else
      head = m;
    from = to;
  }
  const PacketInfo info = classify(*head);
  EXPECT_EQ(head->packet_type, ptype::l2_ether | ptype::l3_ipv6_ext | ptype::l4_tcp);
  EXPECT_EQ(head->l2_len, 14u);
  EXPECT_EQ(head->l3_len, 48u);
  EXPECT_EQ(head->l4_len, 20u);
  EXPECT_EQ(info.l4_offset, 62);
  EXPECT_EQ(head->outer_l2_len, 0u);
  EXPECT_EQ(head->outer_l3_len, 0u);
  EXPECT_EQ(head->tso_segsz, 0u);
  const std::uint64_t word = head->tx_offload;
  head->tx_offload = ~0ULL;
  head->packet_type = 0;
  classify_outer(*head);
  EXPECT_EQ(head->tx_offload, word) << "classify_outer sets what classify sets";
  EXPECT_EQ(head->packet_type, ptype::l2_ether | ptype::l3_ipv6_ext | ptype::l4_tcp);
  mbuf_free(head);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// classify_outer_fast parses the common frame inline and hands every other to classify_outer:
// both set the same fields over frames of every shape, truncated at every length and with
// fragment bits, bad versions and lengths, each starting from garbage in the fields.
TEST_F(PtypeMbufTest, FastOuterClassifyMatchesTheWalk) {
  std::vector<FrameSpec> specs;
  for (std::uint8_t proto : {ip_proto_udp, ip_proto_tcp, ip_proto_icmp, std::uint8_t{47}})
    for (bool v6 : {false, true})
      for (std::uint8_t tags : {0, 1})
        for (std::uint8_t words : {0, 1})
          specs.push_back({.ipv6 = v6,
                           .l4_proto = proto,
                           .vlan_tags = tags,
                           .ipv4_option_words = words,
                           .tcp_option_words = words});
  std::mt19937 rng(7);
  std::size_t fast_frames = 0;
  for (const FrameSpec& spec : specs) {
    const BuiltFrame f = build_frame(spec);
    for (std::size_t len = 0; len <= f.bytes.size(); ++len) {
      std::vector<std::uint8_t> b(f.bytes.begin(), f.bytes.begin() + static_cast<std::ptrdiff_t>(len));
      if (len > 20 && rng() % 4 == 0) b[14 + rng() % 8] = static_cast<std::uint8_t>(rng());  // version, lengths, flags
      Mbuf* m = pool_->alloc();
      ASSERT_NE(m, nullptr);
      if (!b.empty()) std::memcpy(m->append(static_cast<std::uint16_t>(b.size())), b.data(), b.size());
      m->tx_offload = ~0ULL;
      m->packet_type = ~0u;
      classify_outer(*m);
      const std::uint64_t want_word = m->tx_offload;
      const std::uint32_t want_type = m->packet_type;
      m->tx_offload = rng();
      m->packet_type = static_cast<std::uint32_t>(rng());
      classify_outer_fast(*m);
      EXPECT_EQ(m->tx_offload, want_word) << "spec " << &spec - specs.data() << " length " << len;
      EXPECT_EQ(m->packet_type, want_type) << "spec " << &spec - specs.data() << " length " << len;
      fast_frames += want_type == (ptype::l2_ether | ptype::l3_ipv4 | ptype::l4_udp);
      mbuf_free(m);
    }
  }
  EXPECT_GT(fast_frames, 10u) << "the common frame was among those compared";
}

}  // namespace
}  // namespace ws
