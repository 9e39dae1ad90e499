// SPDX-License-Identifier: BSD-3-Clause
// Protocol header layouts beyond ether.hpp (VLAN, ARP, IPv6, TCP, ICMP, VXLAN), in network byte
// order in memory. Every layout is packed and static_asserted against its RFC size.
#pragma once
#include <cstdint>

#include "ws/net/ether.hpp"

namespace ws {

inline constexpr std::uint16_t ether_type_qinq = 0x88a8;      ///< IEEE 802.1ad service tag
inline constexpr std::uint16_t ether_type_qinq_old = 0x9100;  ///< pre-standard QinQ
inline constexpr std::uint8_t ip_proto_hopopts = 0;           ///< RFC 8200 §4.3
inline constexpr std::uint8_t ip_proto_icmp = 1;              ///< ICMP (RFC 792)
inline constexpr std::uint8_t ip_proto_tcp = 6;               ///< TCP (RFC 9293)
inline constexpr std::uint8_t ip_proto_ipv6_route = 43;       ///< RFC 8200 §4.4
inline constexpr std::uint8_t ip_proto_ipv6_frag = 44;        ///< RFC 8200 §4.5
inline constexpr std::uint8_t ip_proto_esp = 50;              ///< IPsec ESP (RFC 4303)
inline constexpr std::uint8_t ip_proto_ah = 51;               ///< RFC 4302: length in 4-byte units
inline constexpr std::uint8_t ip_proto_icmpv6 = 58;           ///< ICMPv6 (RFC 4443)
inline constexpr std::uint8_t ip_proto_ipv6_none = 59;        ///< No next header (RFC 8200 §4.7)
inline constexpr std::uint8_t ip_proto_ipv6_dstopts = 60;     ///< RFC 8200 §4.6
inline constexpr std::uint16_t vxlan_udp_port = 4789;         ///< RFC 7348 §5

/// IEEE 802.1Q tag as it follows the MAC addresses: TCI then the inner EtherType.
struct __attribute__((packed)) VlanHdr {
  std::uint16_t tci_be;         ///< Priority (3 bits), drop eligible (1), VLAN id (12).
  std::uint16_t ether_type_be;  ///< EtherType of what follows.
};
static_assert(sizeof(VlanHdr) == 4);

/// RFC 826 for Ethernet/IPv4.
struct __attribute__((packed)) ArpHdr {
  std::uint16_t hw_type_be;     ///< Hardware type: 1 for Ethernet.
  std::uint16_t proto_type_be;  ///< Protocol type: ether_type_ipv4.
  std::uint8_t hw_len;          ///< Hardware address length: 6.
  std::uint8_t proto_len;       ///< Protocol address length: 4.
  std::uint16_t opcode_be;      ///< 1 request, 2 reply.
  std::uint8_t sender_mac[6];   ///< Sender hardware address.
  std::uint32_t sender_ip_be;   ///< Sender protocol address.
  std::uint8_t target_mac[6];   ///< Target hardware address.
  std::uint32_t target_ip_be;   ///< Target protocol address.
};
static_assert(sizeof(ArpHdr) == 28);

/// RFC 8200 §3.
struct __attribute__((packed)) Ipv6Hdr {
  std::uint32_t vtc_flow_be;     ///< version 4 bits, traffic class 8, flow label 20
  std::uint16_t payload_len_be;  ///< Bytes after this header (extension headers included).
  std::uint8_t next_header;      ///< Type of the next header (ip_proto_*).
  std::uint8_t hop_limit;        ///< Hops left.
  std::uint8_t src_addr[16];     ///< Source address.
  std::uint8_t dst_addr[16];     ///< Destination address.
};
static_assert(sizeof(Ipv6Hdr) == 40);

/// RFC 8200 §4: the common start of hop-by-hop, routing, destination options (length in 8-byte
/// units, not counting the first 8) and fragment headers (always 8 bytes).
struct __attribute__((packed)) Ipv6ExtHdr {
  std::uint8_t next_header;  ///< Type of the next header.
  std::uint8_t length;       ///< Length in 8-byte units beyond the first 8 (0 for fragments).
};

/// RFC 9293 §3.1.
struct __attribute__((packed)) TcpHdr {
  std::uint16_t src_port_be;  ///< Source port.
  std::uint16_t dst_port_be;  ///< Destination port.
  std::uint32_t sent_seq_be;  ///< Sequence number.
  std::uint32_t recv_ack_be;  ///< Acknowledgment number.
  std::uint8_t data_off;      ///< upper 4 bits: header length in 32-bit words
  std::uint8_t tcp_flags;     ///< tcp_flag::* bits.
  std::uint16_t rx_win_be;    ///< Window.
  std::uint16_t cksum;        ///< Checksum with the pseudo-header.
  std::uint16_t tcp_urp_be;   ///< Urgent pointer.
};
static_assert(sizeof(TcpHdr) == 20);

/// TcpHdr::tcp_flags bits (RFC 9293 §3.1).
namespace tcp_flag {
inline constexpr std::uint8_t fin = 0x01;  ///< No more data from the sender.
inline constexpr std::uint8_t syn = 0x02;  ///< Synchronize sequence numbers.
inline constexpr std::uint8_t rst = 0x04;  ///< Reset the connection.
inline constexpr std::uint8_t psh = 0x08;  ///< Push.
inline constexpr std::uint8_t ack = 0x10;  ///< The acknowledgment field is significant.
inline constexpr std::uint8_t urg = 0x20;  ///< The urgent pointer is significant.
}  // namespace tcp_flag

/// RFC 792 / RFC 4443 common header.
struct __attribute__((packed)) IcmpHdr {
  std::uint8_t type;       ///< Message type (8 echo request, 0 echo reply for ICMP).
  std::uint8_t code;       ///< Subtype.
  std::uint16_t cksum;     ///< Checksum (ICMPv6: with the pseudo-header).
  std::uint16_t ident_be;  ///< Echo identifier.
  std::uint16_t seq_be;    ///< Echo sequence number.
};
static_assert(sizeof(IcmpHdr) == 8);

/// RFC 7348 §5.
struct __attribute__((packed)) VxlanHdr {
  std::uint32_t flags_be;  ///< 0x08000000: VNI valid
  std::uint32_t vni_be;    ///< VNI in the upper 24 bits
};
static_assert(sizeof(VxlanHdr) == 8);

inline constexpr std::uint16_t ipv4_flag_more_fragments = 0x2000;   ///< RFC 791 §3.1
inline constexpr std::uint16_t ipv4_flag_dont_fragment = 0x4000;    ///< RFC 791 §3.1
inline constexpr std::uint16_t ipv4_fragment_offset_mask = 0x1fff;  ///< Offset bits of fragment_offset_be.

}  // namespace ws
