// SPDX-License-Identifier: BSD-3-Clause
// Software TSO/GSO: header mbuf + indirect payload mbufs per segment (see gso.hpp).
#include "ws/net/gso.hpp"

#include <cstring>

#include "ws/net/checksum.hpp"
#include "ws/net/headers.hpp"

namespace ws {
namespace {

// An indirect mbuf over bytes [off, off + len) of segment `seg`'s data, as PktmbufPool::clone
// attaches one segment: the direct mbuf's reference count keeps the buffer alive.
Mbuf* attach_range(PktmbufPool& pool, Mbuf* seg, std::uint32_t off, std::uint32_t len) noexcept {
  Mbuf* mi = nullptr;
  if (!pool.raw_alloc_bulk(std::span<Mbuf*>(&mi, 1))) return nullptr;
  Mbuf* md = seg->is_indirect() ? seg->direct : seg;
  md->refcnt.fetch_add(1, std::memory_order_relaxed);  // as clone(): the holder's reference keeps it alive
  mi->buf_addr = seg->buf_addr;
  mi->buf_iova = seg->buf_iova;
  mi->buf_len = seg->buf_len;
  mi->data_off = static_cast<std::uint16_t>(seg->data_off + off);
  mi->data_len = static_cast<std::uint16_t>(len);
  mi->pkt_len = len;
  mi->direct = md;
  mi->next = nullptr;
  mi->nb_segs = 1;
  mi->port = seg->port;
  mi->ol_flags = mbuf_flag::indirect;
  mi->packet_type = 0;
  mi->tx_offload = 0;
  mi->vlan_tci = 0;
  mi->vlan_tci_outer = 0;
  return mi;
}

// Chain indirect mbufs covering payload bytes [from, from + len) of `pkt` (offsets in the whole
// packet) behind `head`. False when the pool runs dry (what was chained stays chained).
bool attach_payload(PktmbufPool& pool, Mbuf* head, Mbuf* pkt, std::uint32_t from, std::uint32_t len) noexcept {
  for (Mbuf* s = pkt; s && len; s = s->next) {
    if (from >= s->data_len) {
      from -= s->data_len;
      continue;
    }
    const std::uint32_t n = std::min<std::uint32_t>(s->data_len - from, len);
    Mbuf* mi = attach_range(pool, s, from, n);
    if (mi == nullptr || !head->chain(mi)) {
      if (mi) mbuf_free(mi);
      return false;
    }
    len -= n;
    from = 0;
  }
  return len == 0;
}

// What a NIC's L4 checksum offload expects in the checksum field: the pseudo-header sum.
void set_pseudo_header_cksum(const std::uint8_t* l3, std::uint8_t* l4, bool ipv4, bool tcp,
                             std::uint32_t l4_len) noexcept {
  const std::uint8_t proto = tcp ? ip_proto_tcp : ip_proto_udp;
  const std::uint16_t ph = ipv4 ? fold_sum(ipv4_pseudo_sum(*reinterpret_cast<const Ipv4Hdr*>(l3), l4_len))
                                : fold_sum(ipv6_pseudo_sum(*reinterpret_cast<const Ipv6Hdr*>(l3), l4_len, proto));
  std::memcpy(l4 + (tcp ? offsetof(TcpHdr, cksum) : offsetof(UdpHdr, dgram_cksum)), &ph, 2);
}

// What segmentation needs from the packet's headers and flags, worked out once.
struct GsoPlan {
  bool tcp = false, udp = false;  // which segmentation was asked for (neither: none)
  bool ipv4 = false, ipv6 = false;
  std::uint32_t l2 = 0, l3 = 0, l4 = 0;  // header lengths; l4 is the UDP header's for UDP
  std::uint32_t hdr_len = 0;             // all headers, copied in front of every segment
  std::uint32_t mss = 0;
  std::uint32_t payload = 0;  // bytes after the headers
  std::uint32_t count = 0;    // segments
  // The input's fields that change per segment.
  std::uint16_t ip_id = 0;
  std::uint32_t seq = 0;
  std::uint8_t tcp_flags = 0;
  std::uint64_t keep_flags = 0;  // the input's ol_flags every segment keeps
};

GsoPlan plan_segmentation(const Mbuf& pkt) noexcept {
  GsoPlan p;
  p.tcp = (pkt.ol_flags & mbuf_flag::tx_tcp_seg) != 0;
  p.udp = !p.tcp && (pkt.ol_flags & gso_flag::tx_udp_seg) != 0;
  p.l2 = pkt.l2_len;
  p.l3 = pkt.l3_len;
  p.l4 = p.udp ? std::uint32_t{sizeof(UdpHdr)} : pkt.l4_len;
  p.hdr_len = p.l2 + p.l3 + p.l4;
  p.mss = pkt.tso_segsz;
  p.ipv4 = (pkt.ol_flags & mbuf_flag::tx_ipv4) != 0;
  p.ipv6 = (pkt.ol_flags & mbuf_flag::tx_ipv6) != 0;
  return p;
}

bool needs_no_split(const GsoPlan& p, const Mbuf& pkt) noexcept {
  return (!p.tcp && !p.udp) || p.mss == 0 || pkt.pkt_len <= p.hdr_len + p.mss;
}

// A packet too short to split: still honour the checksum requests that come with segmentation.
std::expected<std::uint16_t, GsoError> send_whole(Mbuf* pkt, const GsoPlan& p, std::span<Mbuf*> out) noexcept {
  if (p.tcp)
    pkt->ol_flags = (pkt->ol_flags & ~mbuf_flag::tx_tcp_seg & ~mbuf_flag::tx_l4_mask) | mbuf_flag::tx_tcp_cksum;
  if (p.udp) pkt->ol_flags = (pkt->ol_flags & ~gso_flag::tx_udp_seg & ~mbuf_flag::tx_l4_mask) | mbuf_flag::tx_udp_cksum;
  if ((p.tcp || p.udp) && (pkt->ol_flags & mbuf_flag::tx_ipv4)) pkt->ol_flags |= mbuf_flag::tx_ip_cksum;
  if (!apply_tx_checksums(*pkt)) return std::unexpected(GsoError::bad_headers);
  out[0] = pkt;
  return 1;
}

bool headers_fit(const GsoPlan& p, const Mbuf& pkt) noexcept {
  return p.ipv4 != p.ipv6 && p.l3 >= (p.ipv4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr)) &&
         (!p.tcp || p.l4 >= sizeof(TcpHdr)) && p.hdr_len <= pkt.data_len && p.hdr_len <= 255;
}

// The input's IP id, TCP sequence number and flags, which each segment derives its own from,
// and the offload flags the segments keep.
void read_header_fields(GsoPlan& p, const Mbuf& pkt) noexcept {
  const std::uint8_t* in = pkt.data();
  if (p.ipv4) p.ip_id = from_be16(reinterpret_cast<const Ipv4Hdr*>(in + p.l2)->packet_id_be);
  if (p.tcp) {
    const auto* th = reinterpret_cast<const TcpHdr*>(in + p.l2 + p.l3);
    p.seq = from_be32(th->sent_seq_be);
    p.tcp_flags = th->tcp_flags;
  }
  p.keep_flags = pkt.ol_flags & ~(mbuf_flag::tx_tcp_seg | gso_flag::tx_udp_seg | mbuf_flag::tx_l4_mask |
                                  mbuf_flag::tx_ip_cksum | mbuf_flag::indirect);
}

// Segment i's headers (a copy of the input's at `hp`): lengths, IP id, sequence number, flags.
void rewrite_headers(std::uint8_t* hp, const GsoPlan& p, std::uint32_t i, std::uint32_t len) noexcept {
  if (p.ipv4) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(hp + p.l2);
    ip->total_length_be = to_be16(static_cast<std::uint16_t>(p.l3 + p.l4 + len));
    ip->packet_id_be = to_be16(static_cast<std::uint16_t>(p.ip_id + i));  // RFC 6864: a new id per datagram
  } else {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(hp + p.l2);
    ip->payload_len_be = to_be16(static_cast<std::uint16_t>(p.l3 - sizeof(Ipv6Hdr) + p.l4 + len));
  }
  if (p.tcp) {
    auto* th = reinterpret_cast<TcpHdr*>(hp + p.l2 + p.l3);
    th->sent_seq_be = to_be32(p.seq + i * p.mss);  // RFC 9293 §3.4: sequence numbers count payload bytes
    std::uint8_t f = p.tcp_flags;
    if (i + 1 < p.count) f = static_cast<std::uint8_t>(f & ~(tcp_flag::fin | tcp_flag::psh));
    if (i > 0) f = static_cast<std::uint8_t>(f & ~0x80);  // CWR only on the first (RFC 3168 §6.1.2)
    th->tcp_flags = f;
  } else {
    auto* uh = reinterpret_cast<UdpHdr*>(hp + p.l2 + p.l3);
    uh->dgram_len_be = to_be16(static_cast<std::uint16_t>(sizeof(UdpHdr) + len));
  }
}

// Segment i: a header mbuf from pools.header with the input's headers, rewritten, in front of
// indirect mbufs over its share of the payload. Null when a pool runs dry (nothing is left held).
Mbuf* make_segment(Mbuf* pkt, const GsoPlan& p, const GsoPools& pools, std::uint32_t i) noexcept {
  const std::uint32_t len = std::min(p.mss, p.payload - i * p.mss);
  Mbuf* h = pools.header->alloc();
  std::uint8_t* hp = h ? h->append(static_cast<std::uint16_t>(p.hdr_len)) : nullptr;
  if (hp == nullptr || !attach_payload(*pools.indirect, h, pkt, p.hdr_len + i * p.mss, len)) {
    if (h) mbuf_free(h);
    return nullptr;
  }
  std::memcpy(hp, pkt->data(), p.hdr_len);
  h->port = pkt->port;
  h->packet_type = pkt->packet_type;
  h->tx_offload = pkt->tx_offload;
  h->tso_segsz = 0;
  h->vlan_tci = pkt->vlan_tci;
  h->vlan_tci_outer = pkt->vlan_tci_outer;
  rewrite_headers(hp, p, i, len);
  h->ol_flags = p.keep_flags | (p.ipv4 ? mbuf_flag::tx_ip_cksum : 0) |
                (p.tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum);
  if (pools.sw_checksums) {
    apply_tx_checksums(*h);  // headers were checked before: cannot fail
  } else {
    set_pseudo_header_cksum(hp + p.l2, hp + p.l2 + p.l3, p.ipv4, p.tcp, p.l4 + len);
  }
  return h;
}

}  // namespace

std::expected<std::uint16_t, GsoError> gso_segment(Mbuf* pkt, const GsoPools& pools, std::span<Mbuf*> out) noexcept {
  GsoPlan p = plan_segmentation(*pkt);
  if (out.empty()) return std::unexpected(GsoError::too_many_segments);
  if (needs_no_split(p, *pkt)) return send_whole(pkt, p, out);
  if (!headers_fit(p, *pkt)) return std::unexpected(GsoError::bad_headers);
  p.payload = pkt->pkt_len - p.hdr_len;
  p.count = (p.payload + p.mss - 1) / p.mss;
  if (p.count > out.size() || p.count > 0xffff) return std::unexpected(GsoError::too_many_segments);
  read_header_fields(p, *pkt);
  for (std::uint32_t i = 0; i < p.count; ++i) {
    Mbuf* segment = make_segment(pkt, p, pools, i);
    if (segment == nullptr) {
      mbuf_free_bulk(std::span<Mbuf* const>(out.data(), i));
      return std::unexpected(GsoError::no_mbufs);
    }
    out[i] = segment;
  }
  mbuf_free(pkt);  // the segments hold their own references to its buffers
  return static_cast<std::uint16_t>(p.count);
}

}  // namespace ws
