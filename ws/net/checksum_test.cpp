// SPDX-License-Identifier: BSD-3-Clause
// Checksums: the vectorised sums against the scalar reference over random buffers of every
// length and alignment; IPv4 header and TCP/UDP checksums against known and built packets;
// RFC 1624 incremental updates; RX verification flags; software TX checksums over chains.
#include "ws/net/checksum.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"
#include "ws/testing/simd_levels.hpp"

namespace ws {
namespace {

std::vector<std::uint8_t> random_bytes(std::mt19937& rng, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

// Frame spec i of a mix that alternates IPv4 and IPv6 and, every two frames, UDP and TCP, with
// 1 to max_payload payload bytes drawn from rng.
FrameSpec mixed_frame(int i, std::mt19937& rng, std::uint32_t max_payload) {
  FrameSpec s;
  s.ipv6 = i % 2;
  s.l4_proto = (i / 2) % 2 ? ip_proto_tcp : ip_proto_udp;
  s.payload_bytes = 1 + rng() % max_payload;
  s.seed = rng();
  return s;
}

// Every level this CPU has (ws/core/simd.hpp): raw_sum_for(level), and raw_sum_best and the
// inline raw_sum once the level is set, against the scalar reference.
TEST(Checksum, VectorSumsMatchTheReference) {
  std::mt19937 rng(1);
  for (SimdLevel level : testing::cpu_simd_levels()) {
    testing::ScopedSimdLevel scope(level);
    const RawSumFn sum = raw_sum_for(level);
    EXPECT_EQ(raw_sum_best, sum) << simd_name(level);
    for (std::size_t len = 0; len < 2100; len += (len < 300 ? 1 : 37)) {
      for (std::size_t align = 0; align < 4; ++align) {
        auto buf = random_bytes(rng, len + align);
        const std::uint8_t* p = buf.data() + align;
        const std::uint32_t seed = rng() & 0xffff;
        const std::uint16_t ref = fold_sum(raw_sum_scalar(p, len, seed));
        EXPECT_EQ(fold_sum(raw_sum(p, len, seed)), ref) << simd_name(level) << " " << len;
        EXPECT_EQ(fold_sum(sum(p, len, seed)), ref) << simd_name(level) << " " << len;
      }
    }
    // All-ones data: the worst case for carries.
    std::vector<std::uint8_t> ff(65535, 0xff);
    std::vector<std::uint8_t> zero(65535, 0);
    EXPECT_EQ(fold_sum(sum(ff.data(), ff.size(), 0)), fold_sum(raw_sum_scalar(ff.data(), ff.size())))
        << simd_name(level);
    EXPECT_EQ(fold_sum(sum(zero.data(), zero.size(), 0)), 0) << simd_name(level);
  }
  EXPECT_EQ(raw_sum_for(SimdLevel::scalar), &raw_sum_scalar);
  EXPECT_EQ(raw_sum_for(SimdLevel::sse), &raw_sum_scalar);
  if (cpu_simd_level() >= SimdLevel::avx2) EXPECT_EQ(raw_sum_for(SimdLevel::avx2), &raw_sum_avx2);
  RecordProperty("impl", raw_sum_impl_name());
}

// RFC 1071 §3's worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (big-endian view).
TEST(Checksum, Rfc1071Example) {
  const std::uint8_t b[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  const std::uint16_t s = fold_sum(raw_sum(b, sizeof b));
  EXPECT_EQ(from_be16(s), 0xddf2);
}

// A captured IPv4 header (Wikipedia's example, checksum b861).
TEST(Checksum, KnownIpv4Header) {
  const std::uint8_t h[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                            0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  Ipv4Hdr ip;
  std::memcpy(&ip, h, sizeof ip);
  EXPECT_EQ(from_be16(ipv4_cksum(ip)), 0xb861);
  EXPECT_EQ(ipv4_cksum(ip), ipv4_header_checksum(ip));
}

TEST(Checksum, L4OverBuiltPackets) {
  std::mt19937 rng(2);
  for (int i = 0; i < 400; ++i) {
    FrameSpec s;
    s.ipv6 = i % 2;
    s.l4_proto = (i / 2) % 2 ? ip_proto_tcp : ip_proto_udp;
    s.payload_bytes = rng() % 1500;
    s.ipv4_option_words = s.ipv6 ? 0 : static_cast<std::uint8_t>(rng() % 3);
    s.seed = rng();
    s.src_ip = rng();
    BuiltFrame f = build_frame(s);
    std::uint8_t* l3 = f.bytes.data() + f.l2_len;
    std::uint8_t* l4 = l3 + f.l3_len;
    const std::uint32_t l4_len = static_cast<std::uint32_t>(f.bytes.size()) - f.l2_len - f.l3_len;
    const std::size_t field = s.l4_proto == ip_proto_tcp ? 16 : 6;
    std::uint16_t stored;
    std::memcpy(&stored, l4 + field, 2);
    std::memset(l4 + field, 0, 2);
    const std::uint16_t c = s.ipv6 ? ipv6_l4_cksum(*reinterpret_cast<Ipv6Hdr*>(l3), l4, l4_len, s.l4_proto)
                                   : ipv4_l4_cksum(*reinterpret_cast<Ipv4Hdr*>(l3), l4, l4_len);
    EXPECT_EQ(c, stored);
    if (!s.ipv6) {
      const auto& ip = *reinterpret_cast<Ipv4Hdr*>(l3);
      EXPECT_EQ(ipv4_cksum(ip), ip.hdr_checksum);
    }
  }
}

// RFC 1624: updating a field incrementally gives what a full recomputation gives.
TEST(Checksum, IncrementalUpdate) {
  std::mt19937 rng(3);
  for (int i = 0; i < 10000; ++i) {
    FrameSpec s;
    s.src_ip = rng();
    s.dst_ip = rng();
    s.ip_id = static_cast<std::uint16_t>(rng());
    BuiltFrame f = build_frame(s);
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.bytes.data() + 14);
    const std::uint32_t old_addr = ip->dst_addr_be;
    const std::uint32_t new_addr = i % 7 == 0 ? 0 : rng();
    ip->dst_addr_be = new_addr;
    EXPECT_EQ(cksum_update32(ip->hdr_checksum, old_addr, new_addr), ipv4_cksum(*ip));
    ip->hdr_checksum = ipv4_cksum(*ip);
    std::uint16_t old_word;  // TTL and protocol: the 16-bit word at offset 8
    std::memcpy(&old_word, &ip->ttl, 2);
    ip->ttl = static_cast<std::uint8_t>(rng());
    std::uint16_t new_word;
    std::memcpy(&new_word, &ip->ttl, 2);
    EXPECT_EQ(cksum_update16(ip->hdr_checksum, old_word, new_word), ipv4_cksum(*ip));
  }
}

class ChecksumMbufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"cksum_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    auto p = PktmbufPool::create(*arena_, {.name = "cksum", .count = 64, .cache_size = 0});
    ASSERT_TRUE(p.has_value()) << p.error().message;
    pool_ = std::move(*p);
  }
  // `bytes` split into segments at the given cut points.
  Mbuf* packet(const std::vector<std::uint8_t>& bytes, std::vector<std::size_t> cuts) {
    cuts.push_back(bytes.size());
    Mbuf* head = nullptr;
    std::size_t from = 0;
    for (std::size_t to : cuts) {
      Mbuf* m = pool_->alloc();
      std::memcpy(m->append(static_cast<std::uint16_t>(to - from)), bytes.data() + from, to - from);
      if (head)
        head->chain(m);
      else
        head = m;
      from = to;
    }
    return head;
  }
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
};

TEST_F(ChecksumMbufTest, VerifySetsGoodAndBadFlags) {
  std::mt19937 rng(4);
  for (int i = 0; i < 200; ++i) {
    const FrameSpec s = mixed_frame(i, rng, 1400);
    BuiltFrame f = build_frame(s);
    const bool corrupt = i % 3 == 0;
    if (corrupt) f.bytes.back() ^= 0x5a;
    const std::size_t cut1 = 70 + rng() % (f.bytes.size() - 69);  // headers in the first segment
    Mbuf* m = cut1 < f.bytes.size() ? packet(f.bytes, {cut1}) : packet(f.bytes, {});
    classify(*m);
    const CksumStatus st = verify_checksums(*m);
    EXPECT_EQ(st.ip_checked, !s.ipv6);
    if (!s.ipv6) {
      EXPECT_TRUE(st.ip_good);
      EXPECT_TRUE(m->ol_flags & mbuf_flag::rx_ip_cksum_good);
    }
    EXPECT_TRUE(st.l4_checked);
    EXPECT_EQ(st.l4_good, !corrupt) << i;
    EXPECT_TRUE(m->ol_flags & (corrupt ? mbuf_flag::rx_l4_cksum_bad : mbuf_flag::rx_l4_cksum_good));
    mbuf_free(m);
  }
  EXPECT_EQ(pool_->in_use(), 0u);
}

// Software TX checksums over a chain with an odd split recompute what the builder wrote.
TEST_F(ChecksumMbufTest, TxChecksumsOverChains) {
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    const FrameSpec s = mixed_frame(i, rng, 3000);
    const BuiltFrame f = build_frame(s);
    auto zeroed = f.bytes;
    const std::size_t l4 = f.l2_len + f.l3_len;
    std::memset(zeroed.data() + l4 + (s.l4_proto == ip_proto_tcp ? 16 : 6), 0, 2);
    if (!s.ipv6) std::memset(zeroed.data() + f.l2_len + 10, 0, 2);
    std::vector<std::size_t> cuts;
    for (std::size_t c = l4 + 20 + rng() % 7; c < zeroed.size(); c += 1 + rng() % 1500) cuts.push_back(c);
    Mbuf* m = packet(zeroed, cuts);
    m->l2_len = f.l2_len;
    m->l3_len = f.l3_len;
    m->ol_flags = (s.ipv6 ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum) |
                  (s.l4_proto == ip_proto_tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum);
    ASSERT_TRUE(apply_tx_checksums(*m));
    std::vector<std::uint8_t> got(m->pkt_len);
    copy_front(*m, got);
    EXPECT_EQ(got, f.bytes) << i;
    EXPECT_EQ(m->ol_flags & (mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask), 0u);
    mbuf_free(m);
  }
  EXPECT_EQ(pool_->in_use(), 0u);
}

}  // namespace
}  // namespace ws
