// SPDX-License-Identifier: BSD-3-Clause
// TX offloads done in software, for ports whose device cannot do them: VLAN insertion and the
// IPv4/TCP/UDP checksums an mbuf's ol_flags request. (Segmentation changes the packet count and
// has its own call, gso_segment.) A port's tx_burst can run this per packet before sending.
#pragma once
#include "ws/net/checksum.hpp"
#include "ws/net/vlan.hpp"

namespace ws {

// Fulfil and clear m's tx_vlan / tx_ip_cksum / tx_tcp_cksum / tx_udp_cksum requests. False when
// one could not be met (no headroom for the tag, headers outside the first segment); the packet
// is then best dropped and counted. No allocation; touches only this packet.
inline bool apply_tx_offloads_sw(Mbuf& m) noexcept {
  constexpr std::uint64_t wanted = mbuf_flag::tx_vlan | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask;
  if ((m.ol_flags & wanted) == 0) [[likely]]
    return true;
  return apply_tx_vlan(m) && apply_tx_checksums(m);
}

}  // namespace ws
