// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: a virtio-net header and packet from a hostile peer, and mbuf offload requests
// with lying lengths, through net_offload. ASan catches any access outside the packet; the
// header we build must point inside the packet; no mbuf may leak.
//
// Input: 12-byte NetHdr | selector byte | l2_len | l3_len | l4_len | tso_segsz (2) | packet.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ws/core/arena.hpp"
#include "ws/net/checksum.hpp"
#include "ws/virtio/net/offload.hpp"

namespace {

ws::PktmbufPool& pool() {
  static std::unique_ptr<ws::Arena> arena = [] {
    auto a = ws::Arena::create({"net_offload_fuzz", 8u << 20, ws::HugePolicy::never});
    if (!a) std::abort();
    return std::move(*a);
  }();
  // Small segments: packets over 512 bytes become chains, headers may straddle segments.
  static std::unique_ptr<ws::PktmbufPool> p = [] {
    auto q = ws::PktmbufPool::create(
        *arena, {.name = "net_offload_fuzz", .count = 512, .cache_size = 0, .data_room_bytes = 512});
    if (!q) std::abort();
    return std::move(*q);
  }();
  return *p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ws;
  using namespace ws::virtio;
  constexpr std::size_t prefix = sizeof(NetHdr) + 6;
  if (size < prefix || size - prefix > 65535) return 0;
  NetHdr in;
  std::memcpy(&in, data, sizeof in);
  const std::uint8_t* p = data + sizeof in;
  const std::uint8_t sel = p[0];
  const auto pkt_len = static_cast<std::uint32_t>(size - prefix);

  // RX: a peer's header applied to the packet behind it, once validated as the drivers do.
  if (Mbuf* m = pool().copy_in(data + prefix, pkt_len, 0)) {
    if (check_net_hdr(in, m->pkt_len) == NetHdrCheck::ok) rx_net_hdr_to_offload(in, *m);
    mbuf_free(m);
  }
  // RX in legacy mode: the requests it sets must describe headers inside the first segment, and
  // the next port's software fallback must cope with them.
  if (Mbuf* m = pool().copy_in(data + prefix, pkt_len, 0)) {
    if (check_net_hdr(in, m->pkt_len) == NetHdrCheck::ok) {
      rx_net_hdr_to_legacy_offload(in, *m);
      const std::uint64_t l4 = m->ol_flags & mbuf_flag::tx_l4_mask;
      const std::uint32_t l4_off = m->l2_len + m->l3_len;
      if (l4 != 0 && l4_off + (l4 == mbuf_flag::tx_tcp_cksum ? 20u : 8u) > m->data_len) std::abort();
      if ((m->ol_flags & mbuf_flag::tx_tcp_seg) && (m->tso_segsz == 0 || l4_off + m->l4_len > m->data_len))
        std::abort();
      if ((m->ol_flags & mbuf_flag::tx_tcp_seg) == 0) (void)apply_tx_checksums(*m);
    }
    mbuf_free(m);
  }
  // TX: requests with whatever lengths the input says.
  if (Mbuf* m = pool().copy_in(data + prefix, pkt_len, 0)) {
    m->l2_len = p[1] & 0x7f;
    m->l3_len = p[2];
    m->l4_len = p[3];
    m->tso_segsz = static_cast<std::uint16_t>(p[4] | p[5] << 8);
    std::uint64_t f = 0;
    if (sel & 1) f |= mbuf_flag::tx_ip_cksum;
    if (sel & 2) f |= mbuf_flag::tx_tcp_cksum;
    if (sel & 4) f |= mbuf_flag::tx_udp_cksum;
    if (sel & 8) f |= mbuf_flag::tx_tcp_seg;
    f |= (sel & 16) ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4;
    m->ol_flags = f;
    const HdrOffloads peer{(sel & 32) != 0, (sel & 64) != 0, (sel & 128) != 0};
    NetHdr out{};
    if (tx_offload_to_net_hdr(*m, out, peer)) {
      if (check_net_hdr(out, m->pkt_len) != NetHdrCheck::ok) std::abort();  // we never send a bad header
      if ((out.flags & NetHdr::f_needs_csum) && out.csum_start + out.csum_offset + 2u > m->data_len) std::abort();
    }
    mbuf_free(m);
  }
  if (pool().in_use() != 0) std::abort();
  return 0;
}
