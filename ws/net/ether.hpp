// SPDX-License-Identifier: BSD-3-Clause
// Ethernet, IPv4 and UDP header layouts (network byte order in memory) and MAC addresses.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws {

/// A 48-bit Ethernet address.
struct MacAddress {
  std::array<std::uint8_t, 6> bytes{};                 ///< In transmission order.
  bool operator==(const MacAddress&) const = default;  ///< Same six bytes.
  std::string to_string() const;                       ///< "02:00:00:00:00:01"
  /// "02:00:00:00:00:01" (either case); errors name the text.
  static Result<MacAddress> parse(std::string_view text);
};

inline constexpr std::uint16_t ether_type_ipv4 = 0x0800;  ///< EtherType of IPv4.
inline constexpr std::uint16_t ether_type_arp = 0x0806;   ///< EtherType of ARP.
inline constexpr std::uint16_t ether_type_vlan = 0x8100;  ///< EtherType of an IEEE 802.1Q tag.
inline constexpr std::uint16_t ether_type_ipv6 = 0x86dd;  ///< EtherType of IPv6.

/// An Ethernet II header (IEEE 802.3).
struct EtherHdr {
  MacAddress dst;               ///< Destination address.
  MacAddress src;               ///< Source address.
  std::uint16_t ether_type_be;  ///< EtherType, network byte order.
};
static_assert(sizeof(EtherHdr) == 14);

/// An IPv4 header without options (RFC 791 §3.1); fields in network byte order.
struct __attribute__((packed)) Ipv4Hdr {
  std::uint8_t version_ihl;          ///< Version (4) in the high nibble, header length in 32-bit words in the low.
  std::uint8_t tos;                  ///< Type of service (DSCP and ECN).
  std::uint16_t total_length_be;     ///< Header and payload bytes.
  std::uint16_t packet_id_be;        ///< Identification, for reassembly.
  std::uint16_t fragment_offset_be;  ///< Flags (ipv4_flag_*) and fragment offset in 8-byte units.
  std::uint8_t ttl;                  ///< Time to live: hops left.
  std::uint8_t next_proto_id;        ///< Protocol of the payload (ip_proto_*).
  std::uint16_t hdr_checksum;        ///< Header checksum, as stored (RFC 1071 sum).
  std::uint32_t src_addr_be;         ///< Source address.
  std::uint32_t dst_addr_be;         ///< Destination address.
};
static_assert(sizeof(Ipv4Hdr) == 20);

/// A UDP header (RFC 768); fields in network byte order.
struct UdpHdr {
  std::uint16_t src_port_be;   ///< Source port.
  std::uint16_t dst_port_be;   ///< Destination port.
  std::uint16_t dgram_len_be;  ///< Header and payload bytes.
  std::uint16_t dgram_cksum;   ///< Checksum with the pseudo-header; 0: none.
};
static_assert(sizeof(UdpHdr) == 8);

inline constexpr std::uint8_t ip_proto_udp = 17;  ///< IP protocol number of UDP.

/// Host to network byte order, 16 bits.
constexpr std::uint16_t to_be16(std::uint16_t v) { return static_cast<std::uint16_t>((v << 8) | (v >> 8)); }
/// Host to network byte order, 32 bits.
constexpr std::uint32_t to_be32(std::uint32_t v) { return __builtin_bswap32(v); }
/// Network to host byte order, 16 bits.
constexpr std::uint16_t from_be16(std::uint16_t v) { return to_be16(v); }
/// Network to host byte order, 32 bits.
constexpr std::uint32_t from_be32(std::uint32_t v) { return to_be32(v); }

/// IPv4 header checksum (RFC 791) over ihl*4 bytes, checksum field taken as zero.
std::uint16_t ipv4_header_checksum(const Ipv4Hdr& hdr) noexcept;

}  // namespace ws
