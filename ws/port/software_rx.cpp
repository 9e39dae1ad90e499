// SPDX-License-Identifier: BSD-3-Clause
// Software RX offloads: VLAN filter and strip, one pass over each burst the driver returns.
#include "ws/port/software_rx.hpp"

#include <optional>

#include "ws/net/vlan.hpp"

namespace ws {
namespace {

// The packet's VLAN id: from vlan_tci if the device stripped the tag, else from an 802.1Q or
// 802.1ad tag in the first segment; nullopt for untagged packets, which no filter drops.
std::optional<std::uint16_t> vlan_id(const Mbuf& m) noexcept {
  if (m.ol_flags & mbuf_flag::rx_vlan_stripped) return static_cast<std::uint16_t>(m.vlan_tci & 0x0fff);
  if (m.data_len < sizeof(EtherHdr) + sizeof(VlanHdr)) return std::nullopt;
  const std::uint8_t* p = m.data();
  const auto tpid = static_cast<std::uint16_t>((p[12] << 8) | p[13]);
  if (tpid != ether_type_vlan && tpid != ether_type_qinq) return std::nullopt;
  return static_cast<std::uint16_t>(((p[14] << 8) | p[15]) & 0x0fff);
}

}  // namespace

template <bool Filter, bool Strip>
std::uint16_t software_offload_rx(QueueBase* base, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& q = *static_cast<SoftwareRxQueue*>(base);
  const std::uint16_t got = q.driver(pkts, n);
  std::uint16_t kept = 0;
  std::uint16_t dropped = 0;
  for (std::uint16_t i = 0; i < got; ++i) {
    Mbuf* m = pkts[i];
    if constexpr (Filter) {
      const auto vid = vlan_id(*m);
      if (vid && !q.filter->test(*vid)) {
        mbuf_free(m);
        ++dropped;
        continue;
      }
    }
    if constexpr (Strip) vlan_strip(*m);
    pkts[kept++] = m;
  }
  if constexpr (Filter) {
    if (dropped) q.filtered.add(dropped);
  }
  return kept;
}

template std::uint16_t software_offload_rx<true, true>(QueueBase*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t software_offload_rx<true, false>(QueueBase*, Mbuf**, std::uint16_t) noexcept;
template std::uint16_t software_offload_rx<false, true>(QueueBase*, Mbuf**, std::uint16_t) noexcept;

}  // namespace ws
