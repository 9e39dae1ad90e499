// SPDX-License-Identifier: BSD-3-Clause
// MAC address text forms (good and bad inputs) and the IPv4 header checksum against known
// captures.
#include "ws/net/ether.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

namespace ws {
namespace {

TEST(MacAddress, ParsesAndPrints) {
  auto m = MacAddress::parse("02:00:00:00:00:01");
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->bytes, (std::array<std::uint8_t, 6>{0x02, 0, 0, 0, 0, 0x01}));
  EXPECT_EQ(m->to_string(), "02:00:00:00:00:01");

  auto mixed = MacAddress::parse("aa:BB:cC:Dd:ee:FF");
  ASSERT_TRUE(mixed.has_value());
  EXPECT_EQ(mixed->bytes, (std::array<std::uint8_t, 6>{0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}));
  EXPECT_EQ(mixed->to_string(), "AA:BB:CC:DD:EE:FF") << "printed as DPDK's testpmd prints it";

  auto dashes = MacAddress::parse("02-11-22-33-44-55");
  ASSERT_TRUE(dashes.has_value());
  EXPECT_EQ(dashes->to_string(), "02:11:22:33:44:55");
  EXPECT_EQ(MacAddress{}.to_string(), "00:00:00:00:00:00");
}

TEST(MacAddress, RoundTripsEveryByteValue) {
  for (unsigned v = 0; v < 256; ++v) {
    const auto b = static_cast<std::uint8_t>(v);
    const MacAddress m{{b, static_cast<std::uint8_t>(b ^ 0xff), b, 0, b, 1}};
    auto back = MacAddress::parse(m.to_string());
    ASSERT_TRUE(back.has_value()) << m.to_string();
    EXPECT_EQ(*back, m);
  }
}

TEST(MacAddress, RefusesBadInputs) {
  for (std::string_view bad :
       {"", "02:00:00:00:00", "02:00:00:00:00:", "02:00:00:00:00:01:", "02:00:00:00:00:01:02", "02:00:00:00:00:0g",
        "2:0:0:0:0:1", "020000000001", "02:00:00:00:00:01 ", " 02:00:00:00:00:01", "02.00.00.00.00.01",
        "+2:00:00:00:00:01", "-2:00:00:00:00:01", "0x:00:00:00:00:01", "02:00:00:00:00:1", "zz:zz:zz:zz:zz:zz"}) {
    auto m = MacAddress::parse(bad);
    ASSERT_FALSE(m.has_value()) << "'" << bad << "' should not parse";
    EXPECT_NE(m.error().message.find(fmt::format("MAC address '{}'", bad)), std::string::npos) << m.error().message;
  }
}

// Builds an Ipv4Hdr from the hex of a capture (checksum bytes included as captured).
Ipv4Hdr header_from(const std::array<std::uint8_t, 20>& bytes) {
  Ipv4Hdr h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

// The checksum as it reads on the wire (big-endian).
std::uint16_t wire_checksum(std::uint16_t stored) {
  std::uint8_t b[2];
  std::memcpy(b, &stored, 2);
  return static_cast<std::uint16_t>(b[0] << 8 | b[1]);
}

TEST(Ipv4Checksum, MatchesKnownHeaders) {
  // 4500 0073 0000 4000 4011 b861 c0a8 0001 c0a8 00c7: UDP 192.168.0.1 -> 192.168.0.199.
  const Ipv4Hdr udp = header_from({0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                                   0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7});
  EXPECT_EQ(wire_checksum(ipv4_header_checksum(udp)), 0xb861) << "the stored checksum field must be ignored";
  EXPECT_EQ(ipv4_header_checksum(udp), udp.hdr_checksum) << "the result is stored as is";
  Ipv4Hdr zeroed = udp;
  zeroed.hdr_checksum = 0;
  EXPECT_EQ(wire_checksum(ipv4_header_checksum(zeroed)), 0xb861);

  // 4500 0030 4422 4000 8006 442e 8c7c 19ac ae24 1e2b: TCP 140.124.25.172 -> 174.36.30.43.
  const Ipv4Hdr tcp = header_from({0x45, 0x00, 0x00, 0x30, 0x44, 0x22, 0x40, 0x00, 0x80, 0x06,
                                   0x44, 0x2e, 0x8c, 0x7c, 0x19, 0xac, 0xae, 0x24, 0x1e, 0x2b});
  EXPECT_EQ(wire_checksum(ipv4_header_checksum(tcp)), 0x442e);
}

TEST(Ipv4Checksum, BuiltHeaderVerifiesAndCoversOptions) {
  Ipv4Hdr h{};
  h.version_ihl = 0x45;
  h.total_length_be = to_be16(115);
  h.fragment_offset_be = to_be16(0x4000);
  h.ttl = 64;
  h.next_proto_id = ip_proto_udp;
  h.src_addr_be = to_be32(0xc0a80001);
  h.dst_addr_be = to_be32(0xc0a800c7);
  h.hdr_checksum = ipv4_header_checksum(h);
  EXPECT_EQ(from_be16(h.hdr_checksum), 0xb861);

  // With options (ihl 6) the extra word counts: 24 bytes summed, one's complement.
  alignas(4) std::uint8_t buf[24] = {};
  std::memcpy(buf, &h, sizeof h);
  buf[0] = 0x46;
  buf[20] = 0x01;  // four NOP options: 0x0101 0x0101 join the sum
  buf[21] = 0x01;
  buf[22] = 0x01;
  buf[23] = 0x01;
  const std::uint16_t c = ipv4_header_checksum(*reinterpret_cast<const Ipv4Hdr*>(buf));
  // Reference: sum the 12 words (checksum word as zero), fold, complement.
  std::uint32_t sum = 0;
  for (int i = 0; i < 24; i += 2)
    if (i != 10) sum += static_cast<std::uint32_t>(buf[i] << 8 | buf[i + 1]);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(wire_checksum(c), static_cast<std::uint16_t>(~sum));
  EXPECT_NE(wire_checksum(c), 0xb861) << "the option word must change the sum";
}

TEST(ByteOrder, SwapsAsNetworkOrder) {
  EXPECT_EQ(to_be16(0x0800), 0x0008);
  EXPECT_EQ(from_be16(to_be16(0x86dd)), 0x86dd);
  EXPECT_EQ(to_be32(0x01020304), 0x04030201u);
  EXPECT_EQ(from_be32(to_be32(0xc0a80001)), 0xc0a80001u);
  static_assert(to_be16(ether_type_ipv4) == 0x0008);
}

}  // namespace
}  // namespace ws
