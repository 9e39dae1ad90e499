// SPDX-License-Identifier: BSD-3-Clause
// IEEE 802.1Q tag insertion and stripping in software, driven by Mbuf::vlan_tci and the
// tx_vlan / rx_vlan / rx_vlan_stripped flags (what a NIC's VLAN offload would do).
#pragma once
#include <cstdint>
#include <cstring>

#include "ws/core/mbuf.hpp"
#include "ws/net/headers.hpp"

namespace ws {

// Insert a tag carrying m.vlan_tci after the MAC addresses. False (packet unchanged) when the
// first segment lacks 4 bytes of headroom, holds under 12 bytes or its buffer is shared (a clone
// or a buffer with other references: writing would change the other holders' packet).
inline bool vlan_insert(Mbuf& m, std::uint16_t ether_type = ether_type_vlan) noexcept {
  if (m.is_indirect() || m.refcnt.load(std::memory_order_relaxed) != 1 || m.data_len < 12 ||
      m.headroom() < sizeof(VlanHdr))
    return false;
  std::uint8_t* p = m.prepend(sizeof(VlanHdr));
  std::memmove(p, p + sizeof(VlanHdr), 12);
  const VlanHdr tag{to_be16(m.vlan_tci), to_be16(ether_type)};
  std::memcpy(p + 12, &tag.ether_type_be, 2);  // the TPID sits where the EtherType was
  std::memcpy(p + 14, &tag.tci_be, 2);
  return true;
}

// Remove the outer 802.1Q tag into m.vlan_tci and set rx_vlan | rx_vlan_stripped. False when
// the frame carries no tag (or it does not fit in the first segment, or the buffer is shared).
inline bool vlan_strip(Mbuf& m) noexcept {
  if (m.data_len < sizeof(EtherHdr) + sizeof(VlanHdr) || m.is_indirect() ||
      m.refcnt.load(std::memory_order_relaxed) != 1)
    return false;
  std::uint8_t* p = m.data();
  const std::uint16_t tpid = static_cast<std::uint16_t>((p[12] << 8) | p[13]);
  if (tpid != ether_type_vlan && tpid != ether_type_qinq) return false;
  m.vlan_tci = static_cast<std::uint16_t>((p[14] << 8) | p[15]);
  std::memmove(p + sizeof(VlanHdr), p, 12);
  m.adj(sizeof(VlanHdr));
  m.ol_flags |= mbuf_flag::rx_vlan | mbuf_flag::rx_vlan_stripped;
  if (m.l2_len >= sizeof(EtherHdr) + sizeof(VlanHdr)) m.l2_len = m.l2_len - sizeof(VlanHdr);
  return true;
}

// TX side: insert the tag the packet asks for (tx_vlan) and clear the request. False when the
// tag was requested and could not be inserted.
inline bool apply_tx_vlan(Mbuf& m) noexcept {
  if ((m.ol_flags & mbuf_flag::tx_vlan) == 0) return true;
  if (!vlan_insert(m)) return false;
  m.ol_flags &= ~mbuf_flag::tx_vlan;
  if (m.l2_len != 0) m.l2_len = m.l2_len + sizeof(VlanHdr);
  return true;
}

}  // namespace ws
