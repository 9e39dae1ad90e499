// SPDX-License-Identifier: BSD-3-Clause
// Building test and benchmark frames: Ethernet (+ VLAN tags) / IPv4 or IPv6 / TCP, UDP or ICMP
// with a payload, correct lengths and checksums. Control path (allocates); not for the hot path.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "ws/net/checksum.hpp"
#include "ws/net/headers.hpp"

namespace ws {

struct FrameSpec {
  bool ipv6 = false;
  std::uint8_t l4_proto = ip_proto_udp;  // tcp, udp, icmp/icmpv6, or anything else (raw payload)
  std::uint32_t payload_bytes = 18;
  std::uint8_t vlan_tags = 0;          // 0, 1 or 2
  std::uint16_t vlan_tci = 100;        // the outer tag's TCI; an inner one carries the next value
  std::uint8_t ipv4_option_words = 0;  // IPv4 options (NOPs), in 4-byte words
  std::uint8_t ipv6_ext_headers = 0;   // destination-options headers of 8 bytes each
  std::uint8_t tcp_option_words = 0;
  std::uint32_t src_ip = 0xc0a80001, dst_ip = 0xc0a80002;  // host order
  std::uint16_t src_port = 1234, dst_port = 5678;
  std::uint32_t tcp_seq = 1000;
  std::uint8_t tcp_flags = tcp_flag::ack | tcp_flag::psh;
  std::uint16_t ip_id = 1;
  std::uint32_t seed = 1;  // payload bytes derive from it
};

struct BuiltFrame {
  std::vector<std::uint8_t> bytes;
  std::uint16_t l2_len = 0, l3_len = 0, l4_len = 0;
};

namespace detail {

// Appends `n` bytes at `p` to the frame.
inline void put_bytes(BuiltFrame& f, const void* p, std::size_t n) {
  const std::size_t at = f.bytes.size();
  f.bytes.resize(at + n);
  std::memcpy(f.bytes.data() + at, p, n);
}

// Ethernet: the MAC addresses, the VLAN tags asked for, the EtherType.
inline void put_l2(BuiltFrame& f, const FrameSpec& s) {
  const std::uint8_t macs[12] = {0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1};
  put_bytes(f, macs, 12);
  for (unsigned t = 0; t < s.vlan_tags; ++t) {
    const std::uint16_t tpid = to_be16(t == 0 && s.vlan_tags == 2 ? ether_type_qinq : ether_type_vlan);
    const std::uint16_t tci = to_be16(static_cast<std::uint16_t>(s.vlan_tci + t));
    put_bytes(f, &tpid, 2);
    put_bytes(f, &tci, 2);
  }
  const std::uint16_t et = to_be16(s.ipv6 ? ether_type_ipv6 : ether_type_ipv4);
  put_bytes(f, &et, 2);
}

// The L4 header's length: TCP with its options, 8 for UDP and ICMP, 0 for a raw payload.
inline std::uint32_t l4_header_bytes(const FrameSpec& s) {
  return s.l4_proto == ip_proto_tcp                                       ? 20u + 4u * s.tcp_option_words
         : s.l4_proto == ip_proto_udp                                     ? 8u
         : (s.l4_proto == ip_proto_icmp || s.l4_proto == ip_proto_icmpv6) ? 8u
                                                                          : 0u;
}

// IPv4 with NOP options, checksum left for later; l4_total is the L4 header plus payload.
inline void put_ipv4(BuiltFrame& f, const FrameSpec& s, std::uint32_t l4_total) {
  Ipv4Hdr ip{};
  ip.version_ihl = static_cast<std::uint8_t>(0x45 + s.ipv4_option_words);
  ip.total_length_be = to_be16(static_cast<std::uint16_t>(20 + 4 * s.ipv4_option_words + l4_total));
  ip.packet_id_be = to_be16(s.ip_id);
  ip.ttl = 64;
  ip.next_proto_id = s.l4_proto;
  ip.src_addr_be = to_be32(s.src_ip);
  ip.dst_addr_be = to_be32(s.dst_ip);
  put_bytes(f, &ip, sizeof ip);
  for (unsigned i = 0; i < 4u * s.ipv4_option_words; ++i) f.bytes.push_back(1);  // NOP options
}

// IPv6 followed by the destination-options headers asked for.
inline void put_ipv6(BuiltFrame& f, const FrameSpec& s, std::uint32_t l4_total) {
  Ipv6Hdr ip{};
  ip.vtc_flow_be = to_be32(6u << 28);
  ip.payload_len_be = to_be16(static_cast<std::uint16_t>(8 * s.ipv6_ext_headers + l4_total));
  ip.next_header = s.ipv6_ext_headers ? ip_proto_ipv6_dstopts : s.l4_proto;
  ip.hop_limit = 64;
  for (int i = 0; i < 16; ++i) {
    ip.src_addr[i] = static_cast<std::uint8_t>(0x20 + i + s.src_ip);
    ip.dst_addr[i] = static_cast<std::uint8_t>(0x40 + i + s.dst_ip);
  }
  put_bytes(f, &ip, sizeof ip);
  for (unsigned e = 0; e < s.ipv6_ext_headers; ++e) {
    const std::uint8_t ext[8] = {
        static_cast<std::uint8_t>(e + 1 < s.ipv6_ext_headers ? ip_proto_ipv6_dstopts : s.l4_proto),
        0,
        1,
        4,
        0,
        0,
        0,
        0};  // PadN option filling the header
    put_bytes(f, ext, 8);
  }
}

// The TCP, UDP or ICMP header (none for another protocol), checksum left for later.
inline void put_l4(BuiltFrame& f, const FrameSpec& s, std::uint32_t l4_hdr, std::uint32_t l4_total) {
  if (s.l4_proto == ip_proto_tcp) {
    TcpHdr th{};
    th.src_port_be = to_be16(s.src_port);
    th.dst_port_be = to_be16(s.dst_port);
    th.sent_seq_be = to_be32(s.tcp_seq);
    th.recv_ack_be = to_be32(1);
    th.data_off = static_cast<std::uint8_t>((5 + s.tcp_option_words) << 4);
    th.tcp_flags = s.tcp_flags;
    th.rx_win_be = to_be16(65535);
    put_bytes(f, &th, sizeof th);
    for (unsigned i = 0; i < 4u * s.tcp_option_words; ++i) f.bytes.push_back(1);
  } else if (s.l4_proto == ip_proto_udp) {
    UdpHdr uh{to_be16(s.src_port), to_be16(s.dst_port), to_be16(static_cast<std::uint16_t>(l4_total)), 0};
    put_bytes(f, &uh, sizeof uh);
  } else if (l4_hdr) {
    const IcmpHdr ih{static_cast<std::uint8_t>(s.ipv6 ? 128 : 8), 0, 0, to_be16(1), to_be16(1)};
    put_bytes(f, &ih, sizeof ih);
  }
}

// Payload bytes from a linear congruential generator seeded by s.seed.
inline void put_payload(BuiltFrame& f, const FrameSpec& s) {
  std::uint32_t x = s.seed * 2654435761u + 1;
  for (std::uint32_t i = 0; i < s.payload_bytes; ++i) {
    x = x * 1103515245u + 12345u;
    f.bytes.push_back(static_cast<std::uint8_t>(x >> 16));
  }
}

// The IPv4 header and L4 checksums, computed with the scalar reference.
inline void fill_checksums(BuiltFrame& f, const FrameSpec& s, std::size_t l3_off, std::size_t l4_off,
                           std::uint32_t l4_hdr, std::uint32_t l4_total) {
  std::uint8_t* p = f.bytes.data();
  if (!s.ipv6) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(p + l3_off);
    ip->hdr_checksum = static_cast<std::uint16_t>(~fold_sum(raw_sum_scalar(ip, f.l3_len)));
  }
  const std::size_t cks_off = s.l4_proto == ip_proto_tcp ? 16 : s.l4_proto == ip_proto_udp ? 6 : 2;
  if (l4_hdr) {
    std::uint64_t sum = raw_sum_scalar(p + l4_off, l4_total);
    if (!s.ipv6) {
      if (s.l4_proto != ip_proto_icmp) sum += ipv4_pseudo_sum(*reinterpret_cast<Ipv4Hdr*>(p + l3_off), l4_total);
    } else {
      sum += ipv6_pseudo_sum(*reinterpret_cast<Ipv6Hdr*>(p + l3_off), l4_total, s.l4_proto);
    }
    std::uint16_t c = static_cast<std::uint16_t>(~fold_sum(sum));
    if (c == 0 && s.l4_proto == ip_proto_udp) c = 0xffff;
    std::memcpy(p + l4_off + cks_off, &c, 2);
  }
}

}  // namespace detail

inline BuiltFrame build_frame(const FrameSpec& s) {
  BuiltFrame f;
  f.bytes.reserve(128 + s.payload_bytes);
  detail::put_l2(f, s);
  f.l2_len = static_cast<std::uint16_t>(f.bytes.size());
  const std::size_t l3_off = f.bytes.size();
  const std::uint32_t l4_hdr = detail::l4_header_bytes(s);
  const std::uint32_t l4_total = l4_hdr + s.payload_bytes;
  if (!s.ipv6) {
    detail::put_ipv4(f, s, l4_total);
  } else {
    detail::put_ipv6(f, s, l4_total);
  }
  f.l3_len = static_cast<std::uint16_t>(f.bytes.size() - l3_off);
  const std::size_t l4_off = f.bytes.size();
  detail::put_l4(f, s, l4_hdr, l4_total);
  f.l4_len = static_cast<std::uint16_t>(l4_hdr);
  detail::put_payload(f, s);
  detail::fill_checksums(f, s, l3_off, l4_off, l4_hdr, l4_total);
  return f;
}

}  // namespace ws
