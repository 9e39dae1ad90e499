// SPDX-License-Identifier: BSD-3-Clause
// net_tap's flower filters (tap_flow.hpp). A rule's pattern is read as one masked compare over
// the FlowKey layout (flow_exact_match) and each masked field becomes the flower key of the
// same header field. Layouts: linux/pkt_cls.h (TCA_FLOWER_*), linux/tc_act/tc_gact.h,
// linux/tc_act/tc_skbedit.h.
#include "ws/drivers/tap/tap_flow.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/tc_act/tc_gact.h>
#include <linux/tc_act/tc_skbedit.h>
#include <net/if.h>

#include <algorithm>
#include <optional>

#include "ws/drivers/tap/tap_netlink.hpp"
#include "ws/flow/fields.hpp"

namespace ws::tap_pmd {
namespace {

namespace fk = flow_key;

constexpr std::uint16_t first_prio = 0x2000;  // slot 0's flower priority; remote= rules use 0xc0de
constexpr std::uint32_t egress_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS);

bool any(const FlowBytes& b, std::size_t at, std::size_t width) {
  return std::any_of(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + width),
                     [](std::uint8_t x) { return x != 0; });
}
bool full(const FlowBytes& b, std::size_t at, std::size_t width) {
  return std::all_of(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + width),
                     [](std::uint8_t x) { return x == 0xff; });
}

// The filter's protocol and IP protocol, or why flower cannot take the pattern.
struct Protocols {
  std::uint16_t eth = ETH_P_ALL;
  std::uint8_t ip = 0;  // 0: any
};
std::optional<Protocols> protocols(const FlowExactMatch& m, std::string& why) {
  Protocols p;
  if ((m.layers & (fk::layer_vlan | fk::layer_icmp)) != 0 || any(m.mask, fk::tcp_flags, 1)) {
    why = "VLAN, ICMP and TCP flags stay in software";
    return std::nullopt;
  }
  if ((any(m.mask, fk::eth_type, 2) && !full(m.mask, fk::eth_type, 2)) ||
      (any(m.mask, fk::ip_proto, 1) && !full(m.mask, fk::ip_proto, 1))) {
    why = "partial masks on the EtherType or IP protocol stay in software";
    return std::nullopt;
  }
  const bool has_type = any(m.mask, fk::eth_type, 2);
  const auto type = static_cast<std::uint16_t>(m.value[fk::eth_type] << 8 | m.value[fk::eth_type + 1]);
  if (has_type) p.eth = type;
  if (m.layers & fk::layer_ipv4) p.eth = ETH_P_IP;
  if (m.layers & fk::layer_ipv6) p.eth = ETH_P_IPV6;
  if (any(m.mask, fk::ip_proto, 1)) p.ip = m.value[fk::ip_proto];
  if (m.layers & fk::layer_udp) p.ip = IPPROTO_UDP;
  if (m.layers & fk::layer_tcp) p.ip = IPPROTO_TCP;
  if ((has_type && type != p.eth) || (any(m.mask, fk::ip_proto, 1) && m.value[fk::ip_proto] != p.ip) ||
      (p.ip && p.eth == ETH_P_ALL)) {
    why = "a pattern flower reads differently stays in software";
    return std::nullopt;
  }
  return p;
}

// Key and mask attributes of one field, when its mask is not empty.
void put_field(TcRequest& r, const FlowExactMatch& m, std::size_t at, std::size_t width, std::uint16_t key,
               std::uint16_t mask) {
  if (!any(m.mask, at, width)) return;
  r.put(key, m.value.data() + at, width);
  r.put(mask, m.mask.data() + at, width);
}

void put_keys(TcRequest& r, const FlowExactMatch& m, const Protocols& p) {
  const std::uint16_t eth = htons(p.eth);
  if (p.eth != ETH_P_ALL) r.put(TCA_FLOWER_KEY_ETH_TYPE, &eth, sizeof eth);
  if (p.ip) r.put(TCA_FLOWER_KEY_IP_PROTO, &p.ip, 1);
  put_field(r, m, fk::eth_dst, 6, TCA_FLOWER_KEY_ETH_DST, TCA_FLOWER_KEY_ETH_DST_MASK);
  put_field(r, m, fk::eth_src, 6, TCA_FLOWER_KEY_ETH_SRC, TCA_FLOWER_KEY_ETH_SRC_MASK);
  put_field(r, m, fk::ip_tos, 1, TCA_FLOWER_KEY_IP_TOS, TCA_FLOWER_KEY_IP_TOS_MASK);
  put_field(r, m, fk::ip_ttl, 1, TCA_FLOWER_KEY_IP_TTL, TCA_FLOWER_KEY_IP_TTL_MASK);
  if (p.eth == ETH_P_IP) {
    put_field(r, m, fk::ipv4_src, 4, TCA_FLOWER_KEY_IPV4_SRC, TCA_FLOWER_KEY_IPV4_SRC_MASK);
    put_field(r, m, fk::ipv4_dst, 4, TCA_FLOWER_KEY_IPV4_DST, TCA_FLOWER_KEY_IPV4_DST_MASK);
  } else if (p.eth == ETH_P_IPV6) {
    put_field(r, m, fk::ipv6_src, 16, TCA_FLOWER_KEY_IPV6_SRC, TCA_FLOWER_KEY_IPV6_SRC_MASK);
    put_field(r, m, fk::ipv6_dst, 16, TCA_FLOWER_KEY_IPV6_DST, TCA_FLOWER_KEY_IPV6_DST_MASK);
  }
  const bool udp = p.ip == IPPROTO_UDP;
  if (udp || p.ip == IPPROTO_TCP) {
    put_field(r, m, fk::l4_src, 2, udp ? TCA_FLOWER_KEY_UDP_SRC : TCA_FLOWER_KEY_TCP_SRC,
              udp ? TCA_FLOWER_KEY_UDP_SRC_MASK : TCA_FLOWER_KEY_TCP_SRC_MASK);
    put_field(r, m, fk::l4_dst, 2, udp ? TCA_FLOWER_KEY_UDP_DST : TCA_FLOWER_KEY_TCP_DST,
              udp ? TCA_FLOWER_KEY_UDP_DST_MASK : TCA_FLOWER_KEY_TCP_DST_MASK);
  }
}

// gact drop, or skbedit queue_mapping (then the packet goes on: pipe).
void put_action(TcRequest& r, const FlowAction& fate) {
  const auto actions = r.begin(TCA_FLOWER_ACT);
  const auto first = r.begin(1);  // actions are numbered from 1 in the order they run
  const bool drop = fate.type == FlowActionType::drop;
  r.put_string(TCA_ACT_KIND, drop ? "gact" : "skbedit");
  const auto options = r.begin(TCA_ACT_OPTIONS);
  if (drop) {
    tc_gact parms{};
    parms.action = TC_ACT_SHOT;
    r.put(TCA_GACT_PARMS, &parms, sizeof parms);
  } else {
    tc_skbedit parms{};
    parms.action = TC_ACT_PIPE;
    r.put(TCA_SKBEDIT_PARMS, &parms, sizeof parms);
    r.put(TCA_SKBEDIT_QUEUE_MAPPING, &fate.queue, sizeof fate.queue);
  }
  r.end(options);
  r.end(first);
  r.end(actions);
}

FlowOffloadResult refuse(std::string why) { return std::unexpected(FlowOffloadRefusal{false, std::move(why)}); }

}  // namespace

FlowOffloadResult TcFlows::add(const std::string& iface, const std::string& port, const FlowRule& rule,
                               std::uint32_t slot) {
  const auto fate = std::ranges::find_if(rule.actions, [](const FlowAction& a) {
    return a.type == FlowActionType::drop || a.type == FlowActionType::queue;
  });
  if (fate == rule.actions.end() || rule.actions.size() != 1) return refuse("flower takes drop or queue alone");
  if (slot >= 0xc0de - first_prio) return refuse("too many rules for flower priorities");
  const auto match = flow_exact_match(rule);
  if (!match) return refuse("ranges (last) stay in software");
  std::string why;
  const auto p = protocols(*match, why);
  if (!p) return refuse(why);
  const int ifindex = static_cast<int>(::if_nametoindex(iface.c_str()));
  if (ifindex == 0) return refuse("the TAP interface '" + iface + "' is gone");
  if (ifindex_ != ifindex) {
    remove_all();
    if (int e = add_clsact(ifindex, own_qdisc_); e != 0)
      return std::unexpected(FlowOffloadRefusal{
          true, fmt::format("device '{}': cannot add a clsact qdisc for flower filters: {}", port, std::strerror(e))});
    ifindex_ = ifindex;
  }
  const auto prio = static_cast<std::uint16_t>(first_prio + slot);
  TcRequest r(RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, ifindex, egress_parent, 1,
              TC_H_MAKE(std::uint32_t{prio} << 16, htons(p->eth)));
  r.put_string(TCA_KIND, "flower");
  const auto options = r.begin(TCA_OPTIONS);
  const std::uint32_t flags = TCA_CLS_FLAGS_SKIP_HW;
  r.put(TCA_FLOWER_FLAGS, &flags, sizeof flags);
  put_keys(r, *match, *p);
  put_action(r, *fate);
  r.end(options);
  std::string kernel_says;
  if (int e = r.send(&kernel_says); e != 0) {
    if (e == ENOENT) {
      if (!kernel_says.empty()) kernel_says += "; ";
      kernel_says += "no cls_flower, act_gact or act_skbedit in this kernel";
    }
    return std::unexpected(
        FlowOffloadRefusal{true, fmt::format("device '{}': the kernel refused the flower filter: {}{}", port,
                                             std::strerror(e), kernel_says.empty() ? "" : " (" + kernel_says + ")")});
  }
  slots_.push_back(slot);
  return FlowOffload{FlowPlace::kernel_tc, slot};
}

void TcFlows::remove(std::uint32_t slot) noexcept {
  const auto it = std::ranges::find(slots_, slot);
  if (it == slots_.end()) return;
  slots_.erase(it);
  // Protocol 0 and handle 0: the whole priority, whatever its protocol.
  TcRequest r(RTM_DELTFILTER, 0, ifindex_, egress_parent, 0,
              TC_H_MAKE(std::uint32_t{static_cast<std::uint16_t>(first_prio + slot)} << 16, 0));
  (void)r.send();
}

void TcFlows::remove_all() noexcept {
  while (!slots_.empty()) remove(slots_.back());
  if (own_qdisc_ && ifindex_) delete_clsact(ifindex_);
  own_qdisc_ = false;
  ifindex_ = 0;
}

}  // namespace ws::tap_pmd
