// SPDX-License-Identifier: BSD-3-Clause
// rtnetlink messages for net_tap's remote= rules (see tap_remote.hpp): a clsact qdisc per
// interface and one u32 filter on its ingress hook that matches every packet (one key: 0 under
// mask 0, as `tc filter ... u32 match u32 0 0`) and whose only action is mirred "egress redirect"
// to the other interface. u32 rather than matchall or flower: kernels built without those two
// (this machine's is one) still have u32. Layouts: linux/rtnetlink.h, linux/pkt_sched.h,
// linux/pkt_cls.h (TCA_U32_*), linux/tc_act/tc_mirred.h.
#include "ws/drivers/tap/tap_remote.hpp"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/tc_act/tc_mirred.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <span>

#include "ws/drivers/tap/tap_netlink.hpp"

namespace ws::tap_pmd {
namespace {

// Our filters' priority on each clsact ingress hook: one fixed value, so the rule can be found
// and deleted again without touching other filters.
constexpr std::uint16_t filter_prio = 0xc0de;
constexpr std::uint32_t ingress_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);

int add_redirect(int from, int to) {
  TcRequest r(RTM_NEWTFILTER, NLM_F_CREATE | NLM_F_EXCL, from, ingress_parent, 0,
              TC_H_MAKE(std::uint32_t{filter_prio} << 16, htons(ETH_P_ALL)));
  r.put_string(TCA_KIND, "u32");
  const auto options = r.begin(TCA_OPTIONS);
  // tc_u32_sel ends in a flexible array of keys: the selector and its one key, back to back.
  tc_u32_sel sel{};
  sel.flags = TC_U32_TERMINAL;
  sel.nkeys = 1;
  const tc_u32_key match_all{};  // (packet word at offset 0 & mask 0) == 0
  std::array<std::uint8_t, sizeof(tc_u32_sel) + sizeof(tc_u32_key)> selector{};
  std::memcpy(selector.data(), &sel, sizeof sel);
  std::memcpy(selector.data() + sizeof sel, &match_all, sizeof match_all);
  r.put(TCA_U32_SEL, selector.data(), selector.size());
  const auto actions = r.begin(TCA_U32_ACT);
  const auto first = r.begin(1);  // actions are numbered from 1 in the order they run
  r.put_string(TCA_ACT_KIND, "mirred");
  const auto act_options = r.begin(TCA_ACT_OPTIONS);
  tc_mirred parms{};
  parms.action = TC_ACT_STOLEN;
  parms.eaction = TCA_EGRESS_REDIR;
  parms.ifindex = static_cast<std::uint32_t>(to);
  r.put(TCA_MIRRED_PARMS, &parms, sizeof parms);
  r.end(act_options);
  r.end(first);
  r.end(actions);
  r.end(options);
  return r.send();
}

void delete_redirect(int from) {
  TcRequest r(RTM_DELTFILTER, 0, from, ingress_parent, 0,
              TC_H_MAKE(std::uint32_t{filter_prio} << 16, htons(ETH_P_ALL)));
  (void)r.send();
}

}  // namespace

Result<void> RemoteRedirect::install(const std::string& tap, const std::string& remote) {
  remove();
  const int tap_index = static_cast<int>(::if_nametoindex(tap.c_str()));
  const int remote_index = static_cast<int>(::if_nametoindex(remote.c_str()));
  if (tap_index == 0) return fail("key 'iface' value '{}': the TAP interface is gone: {}", tap, std::strerror(errno));
  if (remote_index == 0) return fail("key 'remote' value '{}': no such interface in this network namespace", remote);
  tap_ifindex_ = tap_index;
  const auto add = [&](Rule& rule, int from, int to, const std::string& what) -> Result<void> {
    rule.ifindex = from;
    if (int e = add_clsact(from, rule.own_qdisc); e != 0)
      return fail("key 'remote' value '{}': cannot add a clsact qdisc to {}: {}", remote, what, std::strerror(e));
    if (int e = add_redirect(from, to); e != 0)
      return fail("key 'remote' value '{}': cannot add the redirect filter on {}: {}", remote, what, std::strerror(e));
    rule.installed = true;
    return {};
  };
  auto ok = add(remote_rule_, remote_index, tap_index, "the remote '" + remote + "'");
  if (ok) ok = add(tap_rule_, tap_index, remote_index, "the TAP interface '" + tap + "'");
  if (!ok) remove();
  return ok;
}

void RemoteRedirect::remove() noexcept {
  for (Rule* rule : {&remote_rule_, &tap_rule_}) {
    if (rule->installed) delete_redirect(rule->ifindex);
    if (rule->own_qdisc) delete_clsact(rule->ifindex);
    *rule = {};
  }
  tap_ifindex_ = 0;
}

}  // namespace ws::tap_pmd
