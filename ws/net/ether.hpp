// SPDX-License-Identifier: BSD-3-Clause
// Ethernet, IPv4 and UDP header layouts (network byte order in memory) and MAC addresses.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws {

struct MacAddress {
  std::array<std::uint8_t, 6> bytes{};
  bool operator==(const MacAddress&) const = default;
  std::string to_string() const;  // "02:00:00:00:00:01"
  static Result<MacAddress> parse(std::string_view text);
};

inline constexpr std::uint16_t ether_type_ipv4 = 0x0800;
inline constexpr std::uint16_t ether_type_arp = 0x0806;
inline constexpr std::uint16_t ether_type_vlan = 0x8100;
inline constexpr std::uint16_t ether_type_ipv6 = 0x86dd;

struct EtherHdr {
  MacAddress dst;
  MacAddress src;
  std::uint16_t ether_type_be;
};
static_assert(sizeof(EtherHdr) == 14);

struct __attribute__((packed)) Ipv4Hdr {
  std::uint8_t version_ihl;
  std::uint8_t tos;
  std::uint16_t total_length_be;
  std::uint16_t packet_id_be;
  std::uint16_t fragment_offset_be;
  std::uint8_t ttl;
  std::uint8_t next_proto_id;
  std::uint16_t hdr_checksum;
  std::uint32_t src_addr_be;
  std::uint32_t dst_addr_be;
};
static_assert(sizeof(Ipv4Hdr) == 20);

struct UdpHdr {
  std::uint16_t src_port_be;
  std::uint16_t dst_port_be;
  std::uint16_t dgram_len_be;
  std::uint16_t dgram_cksum;
};
static_assert(sizeof(UdpHdr) == 8);

inline constexpr std::uint8_t ip_proto_udp = 17;

constexpr std::uint16_t to_be16(std::uint16_t v) { return static_cast<std::uint16_t>((v << 8) | (v >> 8)); }
constexpr std::uint32_t to_be32(std::uint32_t v) { return __builtin_bswap32(v); }
constexpr std::uint16_t from_be16(std::uint16_t v) { return to_be16(v); }
constexpr std::uint32_t from_be32(std::uint32_t v) { return to_be32(v); }

// IPv4 header checksum (RFC 791) over ihl*4 bytes, checksum field taken as zero.
std::uint16_t ipv4_header_checksum(const Ipv4Hdr& hdr) noexcept;

}  // namespace ws
