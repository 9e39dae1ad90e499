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

}  // namespace

std::expected<std::uint16_t, GsoError> gso_segment(Mbuf* pkt, const GsoPools& pools, std::span<Mbuf*> out) noexcept {
  const bool tcp = (pkt->ol_flags & mbuf_flag::tx_tcp_seg) != 0;
  const bool udp = !tcp && (pkt->ol_flags & gso_flag::tx_udp_seg) != 0;
  const std::uint32_t l2 = pkt->l2_len, l3 = pkt->l3_len;
  const std::uint32_t l4 = udp ? std::uint32_t{sizeof(UdpHdr)} : pkt->l4_len;
  const std::uint32_t hdr_len = l2 + l3 + l4;
  const std::uint32_t mss = pkt->tso_segsz;
  if (out.empty()) return std::unexpected(GsoError::too_many_segments);
  if ((!tcp && !udp) || mss == 0 || pkt->pkt_len <= hdr_len + mss) {
    // Nothing to split; still honour the checksum requests that come with segmentation.
    if (tcp)
      pkt->ol_flags = (pkt->ol_flags & ~mbuf_flag::tx_tcp_seg & ~mbuf_flag::tx_l4_mask) | mbuf_flag::tx_tcp_cksum;
    if (udp) pkt->ol_flags = (pkt->ol_flags & ~gso_flag::tx_udp_seg & ~mbuf_flag::tx_l4_mask) | mbuf_flag::tx_udp_cksum;
    if ((tcp || udp) && (pkt->ol_flags & mbuf_flag::tx_ipv4)) pkt->ol_flags |= mbuf_flag::tx_ip_cksum;
    if (!apply_tx_checksums(*pkt)) return std::unexpected(GsoError::bad_headers);
    out[0] = pkt;
    return 1;
  }
  const bool ipv4 = (pkt->ol_flags & mbuf_flag::tx_ipv4) != 0;
  const bool ipv6 = (pkt->ol_flags & mbuf_flag::tx_ipv6) != 0;
  if (ipv4 == ipv6 || l3 < (ipv4 ? sizeof(Ipv4Hdr) : sizeof(Ipv6Hdr)) || (tcp && l4 < sizeof(TcpHdr)) ||
      hdr_len > pkt->data_len || hdr_len > 255)
    return std::unexpected(GsoError::bad_headers);
  const std::uint32_t payload = pkt->pkt_len - hdr_len;
  const std::uint32_t count = (payload + mss - 1) / mss;
  if (count > out.size() || count > 0xffff) return std::unexpected(GsoError::too_many_segments);

  const std::uint8_t* in = pkt->data();
  std::uint16_t ip_id = 0;
  std::uint32_t seq = 0;
  std::uint8_t flags = 0;
  if (ipv4) ip_id = from_be16(reinterpret_cast<const Ipv4Hdr*>(in + l2)->packet_id_be);
  if (tcp) {
    const auto* th = reinterpret_cast<const TcpHdr*>(in + l2 + l3);
    seq = from_be32(th->sent_seq_be);
    flags = th->tcp_flags;
  }
  const std::uint64_t keep_flags =
      pkt->ol_flags & ~(mbuf_flag::tx_tcp_seg | gso_flag::tx_udp_seg | mbuf_flag::tx_l4_mask | mbuf_flag::tx_ip_cksum |
                        mbuf_flag::indirect);
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint32_t len = std::min(mss, payload - i * mss);
    Mbuf* h = pools.header->alloc();
    std::uint8_t* hp = h ? h->append(static_cast<std::uint16_t>(hdr_len)) : nullptr;
    if (hp == nullptr || !attach_payload(*pools.indirect, h, pkt, hdr_len + i * mss, len)) {
      if (h) mbuf_free(h);
      mbuf_free_bulk(std::span<Mbuf* const>(out.data(), i));
      return std::unexpected(GsoError::no_mbufs);
    }
    std::memcpy(hp, in, hdr_len);
    h->port = pkt->port;
    h->packet_type = pkt->packet_type;
    h->tx_offload = pkt->tx_offload;
    h->tso_segsz = 0;
    h->vlan_tci = pkt->vlan_tci;
    h->vlan_tci_outer = pkt->vlan_tci_outer;
    if (ipv4) {
      auto* ip = reinterpret_cast<Ipv4Hdr*>(hp + l2);
      ip->total_length_be = to_be16(static_cast<std::uint16_t>(l3 + l4 + len));
      ip->packet_id_be = to_be16(static_cast<std::uint16_t>(ip_id + i));  // RFC 6864: a new id per datagram
    } else {
      auto* ip = reinterpret_cast<Ipv6Hdr*>(hp + l2);
      ip->payload_len_be = to_be16(static_cast<std::uint16_t>(l3 - sizeof(Ipv6Hdr) + l4 + len));
    }
    if (tcp) {
      auto* th = reinterpret_cast<TcpHdr*>(hp + l2 + l3);
      th->sent_seq_be = to_be32(seq + i * mss);  // RFC 9293 §3.4: sequence numbers count payload bytes
      std::uint8_t f = flags;
      if (i + 1 < count) f = static_cast<std::uint8_t>(f & ~(tcp_flag::fin | tcp_flag::psh));
      if (i > 0) f = static_cast<std::uint8_t>(f & ~0x80);  // CWR only on the first (RFC 3168 §6.1.2)
      th->tcp_flags = f;
    } else {
      auto* uh = reinterpret_cast<UdpHdr*>(hp + l2 + l3);
      uh->dgram_len_be = to_be16(static_cast<std::uint16_t>(sizeof(UdpHdr) + len));
    }
    h->ol_flags =
        keep_flags | (ipv4 ? mbuf_flag::tx_ip_cksum : 0) | (tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum);
    if (pools.sw_checksums) {
      apply_tx_checksums(*h);  // headers were checked above: cannot fail
    } else {
      set_pseudo_header_cksum(hp + l2, hp + l2 + l3, ipv4, tcp, l4 + len);
    }
    out[i] = h;
  }
  mbuf_free(pkt);  // the segments hold their own references to its buffers
  return static_cast<std::uint16_t>(count);
}

}  // namespace ws
