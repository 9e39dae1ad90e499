// SPDX-License-Identifier: BSD-3-Clause
// Packet-type classification: a bounds-checked walk over the header chain (see ptype.hpp).
#include "ws/net/ptype.hpp"

#include <cstring>

#include "ws/net/headers.hpp"

namespace ws {
namespace {

// A read cursor over the frame that refuses to read past its end.
struct Cursor {
  const std::uint8_t* base;
  std::size_t size;
  bool has(std::size_t off, std::size_t n) const noexcept { return off <= size && n <= size - off; }
  std::uint16_t be16(std::size_t off) const noexcept {
    return static_cast<std::uint16_t>((base[off] << 8) | base[off + 1]);
  }
};

// IPv4 at `off`; returns false when the header is unusable (then only L2 is reported).
[[gnu::always_inline]] inline bool walk_ipv4(const Cursor& c, std::size_t off, std::uint32_t& type,
                                             std::uint16_t& l3_len, std::uint8_t& proto, bool& fragment) noexcept {
  if (!c.has(off, sizeof(Ipv4Hdr))) return false;
  const std::uint8_t vihl = c.base[off];
  const std::size_t ihl_bytes = static_cast<std::size_t>(vihl & 0x0f) * 4;
  // RFC 791 §3.1: version 4, IHL at least 5 words, total length covers the header.
  if ((vihl >> 4) != 4 || ihl_bytes < sizeof(Ipv4Hdr) || !c.has(off, ihl_bytes)) return false;
  if (c.be16(off + 2) < ihl_bytes) return false;
  const std::uint16_t frag = c.be16(off + 6);
  fragment = (frag & (ipv4_flag_more_fragments | ipv4_fragment_offset_mask)) != 0;
  type = ihl_bytes == sizeof(Ipv4Hdr) ? ptype::l3_ipv4 : ptype::l3_ipv4_ext;
  l3_len = static_cast<std::uint16_t>(ihl_bytes);
  proto = c.base[off + 9];
  return true;
}

// IPv6 at `off` with its extension headers (RFC 8200 §4); l3_len covers them all.
[[gnu::always_inline]] inline bool walk_ipv6(const Cursor& c, std::size_t off, std::uint32_t& type,
                                             std::uint16_t& l3_len, std::uint8_t& proto, bool& fragment) noexcept {
  if (!c.has(off, sizeof(Ipv6Hdr)) || (c.base[off] >> 4) != 6) return false;
  std::uint8_t next = c.base[off + 6];
  std::size_t len = sizeof(Ipv6Hdr);
  bool ext = false;
  fragment = false;
  for (int i = 0; i < 8; ++i) {  // a bounded number of extension headers
    std::size_t ext_len;
    if (next == ip_proto_hopopts || next == ip_proto_ipv6_route || next == ip_proto_ipv6_dstopts) {
      if (!c.has(off + len, 2)) return false;
      ext_len = (static_cast<std::size_t>(c.base[off + len + 1]) + 1) * 8;
    } else if (next == ip_proto_ah) {
      if (!c.has(off + len, 2)) return false;
      ext_len = (static_cast<std::size_t>(c.base[off + len + 1]) + 2) * 4;  // RFC 4302 §2.2
    } else if (next == ip_proto_ipv6_frag) {
      if (!c.has(off + len, 8)) return false;
      // RFC 8200 §4.5: offset (13 bits) and M flag; an atomic fragment (both 0) is whole.
      if ((c.be16(off + len + 2) & 0xfff9) != 0) fragment = true;
      ext_len = 8;
    } else {
      break;
    }
    if (!c.has(off + len, ext_len)) return false;
    next = c.base[off + len];
    len += ext_len;
    ext = true;
  }
  if (len > 511) return false;  // Mbuf::l3_len holds 9 bits
  type = ext ? ptype::l3_ipv6_ext : ptype::l3_ipv6;
  l3_len = static_cast<std::uint16_t>(len);
  proto = next;
  return true;
}

// L4 type and header length at `off`; 0 length when the header does not fit or is malformed.
[[gnu::always_inline]] inline std::uint32_t walk_l4(const Cursor& c, std::size_t off, std::uint8_t proto, bool fragment,
                                                    std::uint16_t& l4_len) noexcept {
  l4_len = 0;
  if (fragment) return ptype::l4_frag;
  switch (proto) {
    case ip_proto_tcp: {
      if (!c.has(off, sizeof(TcpHdr))) return 0;
      const std::size_t len = static_cast<std::size_t>(c.base[off + 12] >> 4) * 4;
      if (len < sizeof(TcpHdr) || !c.has(off, len)) return 0;  // RFC 9293 §3.1: data offset >= 5
      l4_len = static_cast<std::uint16_t>(len);
      return ptype::l4_tcp;
    }
    case ip_proto_udp:
      if (!c.has(off, sizeof(UdpHdr))) return 0;
      l4_len = sizeof(UdpHdr);
      return ptype::l4_udp;
    case ip_proto_icmp:
    case ip_proto_icmpv6:
      if (!c.has(off, 4)) return 0;
      l4_len = c.has(off, sizeof(IcmpHdr)) ? sizeof(IcmpHdr) : 4;
      return ptype::l4_icmp;
    default:
      return ptype::l4_nonfrag;
  }
}

struct Layers {
  std::uint32_t l2 = 0, l3 = 0, l4 = 0;
  std::uint16_t l2_len = 0, l3_len = 0, l4_len = 0;
  std::uint8_t proto = 0;
  std::uint8_t vlans = 0;
  std::uint16_t tci0 = 0, tci1 = 0;  // scalars, not an array: a run-time index would keep them in memory
};

// Ethernet + tags + L3 + L4 starting at `off`.
[[gnu::always_inline]] inline Layers walk_frame(const Cursor& c, std::size_t off) noexcept {
  Layers r;
  if (!c.has(off, sizeof(EtherHdr))) return r;
  std::size_t l2 = sizeof(EtherHdr);
  std::uint16_t et = c.be16(off + 12);
  r.l2 = ptype::l2_ether;
  while ((et == ether_type_vlan || et == ether_type_qinq || et == ether_type_qinq_old) && r.vlans < 2) {
    if (!c.has(off + l2, sizeof(VlanHdr))) {
      r.l2_len = static_cast<std::uint16_t>(l2);
      return r;
    }
    if (r.vlans++ == 0)
      r.tci0 = c.be16(off + l2);
    else
      r.tci1 = c.be16(off + l2);
    et = c.be16(off + l2 + 2);
    l2 += sizeof(VlanHdr);
  }
  if (r.vlans) r.l2 = r.vlans == 1 ? ptype::l2_ether_vlan : ptype::l2_ether_qinq;
  r.l2_len = static_cast<std::uint16_t>(l2);
  bool fragment = false;
  const std::size_t l3_off = off + l2;
  if (et == ether_type_arp) {
    if (r.vlans == 0) r.l2 = ptype::l2_ether_arp;
    return r;
  }
  if (et == ether_type_ipv4) {
    if (!walk_ipv4(c, l3_off, r.l3, r.l3_len, r.proto, fragment)) return r;
  } else if (et == ether_type_ipv6) {
    if (!walk_ipv6(c, l3_off, r.l3, r.l3_len, r.proto, fragment)) return r;
  } else {
    return r;
  }
  r.l4 = walk_l4(c, l3_off + r.l3_len, r.proto, fragment, r.l4_len);
  return r;
}

// The whole walk, inlined into both entry points so that the per-layer results stay in
// registers (returned through memory they stalled store-to-load forwarding).
[[gnu::always_inline]] inline PacketInfo parse(std::span<const std::uint8_t> frame, bool parse_tunnel) noexcept {
  const Cursor c{frame.data(), frame.size()};
  PacketInfo info;
  const Layers outer = walk_frame(c, 0);
  info.packet_type = outer.l2 | outer.l3 | outer.l4;
  info.l2_len = outer.l2_len;
  info.l3_len = outer.l3_len;
  info.l4_len = outer.l4_len;
  info.l3_offset = outer.l2_len;
  info.l4_offset = static_cast<std::uint16_t>(outer.l2_len + outer.l3_len);
  info.l4_proto = outer.proto;
  info.vlan_count = outer.vlans;
  info.vlan_tci[0] = outer.tci0;
  info.vlan_tci[1] = outer.tci1;
  if (!parse_tunnel || outer.l4 != ptype::l4_udp) return info;
  // RFC 7348 §5: VXLAN is UDP to port 4789 with the I flag set.
  const std::size_t udp_off = info.l4_offset;
  const std::size_t vx_off = udp_off + sizeof(UdpHdr);
  if (c.be16(udp_off + 2) != vxlan_udp_port || !c.has(vx_off, sizeof(VxlanHdr)) || (c.base[vx_off] & 0x08) == 0)
    return info;
  const std::size_t inner_off = vx_off + sizeof(VxlanHdr);
  const Layers inner = walk_frame(c, inner_off);
  if (inner.l2 == 0) return info;
  info.packet_type |= ptype::tunnel_vxlan | (inner.vlans ? ptype::inner_l2_ether_vlan : ptype::inner_l2_ether);
  if (inner.l3 == ptype::l3_ipv4)
    info.packet_type |= ptype::inner_l3_ipv4;
  else if (inner.l3 == ptype::l3_ipv4_ext)
    info.packet_type |= ptype::inner_l3_ipv4_ext;
  else if (inner.l3 == ptype::l3_ipv6)
    info.packet_type |= ptype::inner_l3_ipv6;
  else if (inner.l3 == ptype::l3_ipv6_ext)
    info.packet_type |= ptype::inner_l3_ipv6_ext;
  info.packet_type |= inner.l4 << 16;  // l4_* << 16 == inner_l4_*
  info.outer_l2_len = outer.l2_len;
  info.outer_l3_len = outer.l3_len;
  info.l2_len = static_cast<std::uint16_t>(sizeof(UdpHdr) + sizeof(VxlanHdr) + inner.l2_len);
  info.l3_len = inner.l3_len;
  info.l4_len = inner.l4_len;
  info.l3_offset = static_cast<std::uint16_t>(inner_off + inner.l2_len);
  info.l4_offset = static_cast<std::uint16_t>(info.l3_offset + inner.l3_len);
  info.l4_proto = inner.proto;
  return info;
}

// Mirrors the bitfields of Mbuf::tx_offload (same declarations, so the same ABI layout; the
// tests read the fields back through Mbuf), to write them with one store.
struct OffloadWord {
  std::uint64_t l2_len : 7;
  std::uint64_t l3_len : 9;
  std::uint64_t l4_len : 8;
  std::uint64_t tso_segsz : 16;
  std::uint64_t outer_l3_len : 9;
  std::uint64_t outer_l2_len : 7;
  std::uint64_t : 8;
};
static_assert(sizeof(OffloadWord) == sizeof(std::uint64_t));

}  // namespace

PacketInfo parse_packet(std::span<const std::uint8_t> frame, bool parse_tunnel) noexcept {
  return parse(frame, parse_tunnel);
}

std::size_t copy_front(const Mbuf& m, std::span<std::uint8_t> out) noexcept {
  std::size_t done = 0;
  for (const Mbuf* s = &m; s && done < out.size(); s = s->next) {
    const std::size_t n = std::min<std::size_t>(s->data_len, out.size() - done);
    std::memcpy(out.data() + done, s->data(), n);
    done += n;
  }
  return done;
}

namespace {

[[gnu::always_inline]] inline void store_offloads(Mbuf& m, std::uint32_t type, std::uint16_t l2, std::uint16_t l3,
                                                  std::uint16_t l4, std::uint16_t outer_l2,
                                                  std::uint16_t outer_l3) noexcept {
  m.packet_type = type;
  // One store of the whole offload word (tso_segsz is cleared: a received packet has none).
  OffloadWord off{};
  off.l2_len = l2 & 0x7f;
  off.l3_len = l3 & 0x1ff;
  off.l4_len = l4 & 0xff;
  off.outer_l2_len = outer_l2 & 0x7f;
  off.outer_l3_len = outer_l3 & 0x1ff;
  std::memcpy(&m.tx_offload, &off, sizeof off);
}

}  // namespace

namespace {

[[gnu::always_inline]] inline void classify_outer_at(Mbuf& m, const Cursor& c) noexcept {
  const Layers r = walk_frame(c, 0);
  store_offloads(m, r.l2 | r.l3 | r.l4, r.l2_len, r.l3_len, r.l4_len, 0, 0);
}

// Headers split across segments: parsed from a copy. Out of line, so that the common case
// sets up no stack buffer.
[[gnu::noinline]] void classify_outer_chained(Mbuf& m, std::size_t want) noexcept {
  std::uint8_t buf[max_header_bytes];
  classify_outer_at(m, Cursor{buf, copy_front(m, std::span<std::uint8_t>(buf, want))});
}

}  // namespace

void classify_outer(Mbuf& m) noexcept {
  const std::size_t want = std::min<std::size_t>(m.pkt_len, max_header_bytes);
  if (m.data_len < want && m.next != nullptr) [[unlikely]] {
    classify_outer_chained(m, want);
    return;
  }
  classify_outer_at(m, Cursor{m.data(), m.data_len});
}

PacketInfo classify(Mbuf& m, bool parse_tunnel) noexcept {
  PacketInfo info;
  const std::size_t want = std::min<std::size_t>(m.pkt_len, max_header_bytes);
  if (m.data_len >= want || m.next == nullptr) {
    info = parse(std::span<const std::uint8_t>(m.data(), m.data_len), parse_tunnel);
  } else {
    std::uint8_t buf[max_header_bytes];
    const std::size_t n = copy_front(m, std::span<std::uint8_t>(buf, want));
    info = parse(std::span<const std::uint8_t>(buf, n), parse_tunnel);
  }
  store_offloads(m, info.packet_type, info.l2_len, info.l3_len, info.l4_len, info.outer_l2_len, info.outer_l3_len);
  return info;
}

}  // namespace ws
