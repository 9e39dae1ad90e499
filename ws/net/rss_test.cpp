// SPDX-License-Identifier: BSD-3-Clause
// Toeplitz RSS against Microsoft's published verification vectors ("Verifying the RSS Hash
// Calculation", also the 82599 datasheet §7.1.2.8.3), the table version against the bit-serial
// definition for random keys, the symmetric option, the redirection table and soft_rss().
#include "ws/net/rss.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>

#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"

namespace ws {
namespace {

struct V4Vector {
  const char* dst;
  std::uint16_t dst_port;
  const char* src;
  std::uint16_t src_port;
  std::uint32_t hash_2tuple, hash_4tuple;
};
constexpr V4Vector v4_vectors[] = {
    {"161.142.100.80", 1766, "66.9.149.187", 2794, 0x323e8fc2, 0x51ccc178},
    {"65.69.140.83", 4739, "199.92.111.2", 14230, 0xd718262a, 0xc626b0ea},
    {"12.22.207.184", 38024, "24.19.198.95", 12898, 0xd2d0a5de, 0x5c2b394a},
    {"209.142.163.6", 2217, "38.27.205.30", 48228, 0x82989176, 0xafc7327f},
    {"202.188.127.2", 1303, "153.39.163.191", 44251, 0x5d1809c5, 0x10e828a2},
};
constexpr V4Vector v6_vectors[] = {
    {"3ffe:2501:200:3::1", 1766, "3ffe:2501:200:1fff::7", 2794, 0x2cc18cd5, 0x40207d3d},
    {"ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0x0f0c461c, 0xdde51bbf},
    {"fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x4b61e985, 0x02d1feef},
};

TEST(Rss, MicrosoftIpv4Vectors) {
  const Toeplitz t;
  for (const auto& v : v4_vectors) {
    std::uint8_t src[4], dst[4];
    ASSERT_EQ(inet_pton(AF_INET, v.src, src), 1);
    ASSERT_EQ(inet_pton(AF_INET, v.dst, dst), 1);
    const std::uint16_t sp = to_be16(v.src_port), dp = to_be16(v.dst_port);
    EXPECT_EQ(t.hash_ipv4(src, dst), v.hash_2tuple) << v.src;
    EXPECT_EQ(
        t.hash_ipv4(src, dst, reinterpret_cast<const std::uint8_t*>(&sp), reinterpret_cast<const std::uint8_t*>(&dp)),
        v.hash_4tuple)
        << v.src;
    const std::uint8_t in[12] = {src[0],
                                 src[1],
                                 src[2],
                                 src[3],
                                 dst[0],
                                 dst[1],
                                 dst[2],
                                 dst[3],
                                 static_cast<std::uint8_t>(v.src_port >> 8),
                                 static_cast<std::uint8_t>(v.src_port),
                                 static_cast<std::uint8_t>(v.dst_port >> 8),
                                 static_cast<std::uint8_t>(v.dst_port)};
    EXPECT_EQ(toeplitz_reference(rss_default_key, in), v.hash_4tuple);
  }
}

TEST(Rss, MicrosoftIpv6Vectors) {
  const Toeplitz t;
  for (const auto& v : v6_vectors) {
    std::uint8_t src[16], dst[16];
    ASSERT_EQ(inet_pton(AF_INET6, v.src, src), 1);
    ASSERT_EQ(inet_pton(AF_INET6, v.dst, dst), 1);
    const std::uint16_t sp = to_be16(v.src_port), dp = to_be16(v.dst_port);
    EXPECT_EQ(t.hash_ipv6(src, dst), v.hash_2tuple) << v.src;
    EXPECT_EQ(
        t.hash_ipv6(src, dst, reinterpret_cast<const std::uint8_t*>(&sp), reinterpret_cast<const std::uint8_t*>(&dp)),
        v.hash_4tuple)
        << v.src;
  }
}

TEST(Rss, TableMatchesBitSerialForRandomKeys) {
  std::mt19937 rng(7);
  for (int k = 0; k < 20; ++k) {
    std::array<std::uint8_t, rss_key_bytes> key;
    for (auto& b : key) b = static_cast<std::uint8_t>(rng());
    const Toeplitz t(key);
    for (int i = 0; i < 100; ++i) {
      std::uint8_t in[rss_max_input_bytes];
      for (auto& b : in) b = static_cast<std::uint8_t>(rng());
      const std::size_t n = rng() % (rss_max_input_bytes + 1);
      EXPECT_EQ(t.hash(std::span<const std::uint8_t>(in, n)),
                toeplitz_reference(key, std::span<const std::uint8_t>(in, n)));
    }
  }
}

TEST(Rss, SymmetricHashesBothDirectionsAlike) {
  const Toeplitz sym(rss_default_key, true);
  const Toeplitz plain;
  std::mt19937 rng(8);
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    std::uint8_t a[16], b[16], pa[2], pb[2];
    for (auto& x : a) x = static_cast<std::uint8_t>(rng());
    for (auto& x : b) x = static_cast<std::uint8_t>(rng());
    pa[0] = static_cast<std::uint8_t>(rng()), pa[1] = static_cast<std::uint8_t>(rng());
    pb[0] = static_cast<std::uint8_t>(rng()), pb[1] = static_cast<std::uint8_t>(rng());
    if (i % 10 == 0) std::memcpy(b, a, 16);  // same address both ways: ports decide
    EXPECT_EQ(sym.hash_ipv4(a, b, pa, pb), sym.hash_ipv4(b, a, pb, pa));
    EXPECT_EQ(sym.hash_ipv6(a, b, pa, pb), sym.hash_ipv6(b, a, pb, pa));
    EXPECT_EQ(sym.hash_ipv6(a, b), sym.hash_ipv6(b, a));
    differ += plain.hash_ipv4(a, b, pa, pb) != plain.hash_ipv4(b, a, pb, pa);
  }
  EXPECT_GT(differ, 900) << "the plain hash is direction-dependent";
}

TEST(Rss, RetaSpreadsAndRefusesBadInput) {
  auto r = RssReta::create(4, 128);
  ASSERT_TRUE(r.has_value());
  for (std::uint32_t h = 0; h < 128; ++h) EXPECT_EQ(r->queue(h), h % 4);
  EXPECT_EQ(r->queue(0x12345601), 1);
  ASSERT_TRUE(r->set(1, 3).has_value());
  EXPECT_EQ(r->queue(129), 3);
  EXPECT_FALSE(r->set(128, 0).has_value());
  EXPECT_FALSE(r->set(0, 4).has_value());
  EXPECT_FALSE(RssReta::create(0).has_value());
  EXPECT_FALSE(RssReta::create(2, 100).has_value());
  EXPECT_FALSE(RssReta::create(2, 1024).has_value());
}

TEST(Rss, SoftRssOnPackets) {
  auto a = Arena::create({"rss_test", 4u << 20, HugePolicy::never});
  ASSERT_TRUE(a.has_value());
  auto pool = PktmbufPool::create(**a, {.name = "rss", .count = 16, .cache_size = 0});
  ASSERT_TRUE(pool.has_value());
  const Toeplitz t;
  // The first Microsoft vector as a TCP packet: 66.9.149.187:2794 -> 161.142.100.80:1766.
  FrameSpec s{.l4_proto = ip_proto_tcp};
  s.src_ip = 0x420995bb;
  s.dst_ip = 0xa18e6450;
  s.src_port = 2794;
  s.dst_port = 1766;
  const BuiltFrame f = build_frame(s);
  Mbuf* m = (*pool)->alloc();
  std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
  EXPECT_EQ(soft_rss(*m, t, rss_type::ip | rss_type::tcp), 0x51ccc178u);
  EXPECT_EQ(m->rss_hash, 0x51ccc178u);
  EXPECT_TRUE(m->ol_flags & mbuf_flag::rx_rss_hash);
  EXPECT_EQ(soft_rss(*m, t, rss_type::ip), 0x323e8fc2u) << "--rss-ip: addresses only";
  EXPECT_EQ(soft_rss(*m, t, rss_type::ip | rss_type::udp), 0x323e8fc2u) << "--rss-udp hashes TCP by addresses";
  mbuf_free(m);
  EXPECT_EQ((*pool)->in_use(), 0u);
}

}  // namespace
}  // namespace ws
