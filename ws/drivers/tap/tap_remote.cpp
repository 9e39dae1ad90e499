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

namespace ws::tap_pmd {
namespace {

// Our filters' priority on each clsact ingress hook: one fixed value, so the rule can be found
// and deleted again without touching other filters.
constexpr std::uint16_t filter_prio = 0xc0de;
constexpr std::uint32_t ingress_parent = TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS);

// One rtnetlink request in a fixed buffer: header, tcmsg, then attributes (nested ones are
// opened with begin() and closed with end(), which writes their length).
class TcRequest {
 public:
  TcRequest(std::uint16_t type, std::uint16_t flags, int ifindex, std::uint32_t parent, std::uint32_t handle,
            std::uint32_t info) {
    auto* h = header();
    h->nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
    h->nlmsg_type = type;
    h->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
    h->nlmsg_seq = 1;
    auto* t = reinterpret_cast<tcmsg*>(buf_.data() + NLMSG_HDRLEN);
    t->tcm_family = AF_UNSPEC;
    t->tcm_ifindex = ifindex;
    t->tcm_parent = parent;
    t->tcm_handle = handle;
    t->tcm_info = info;
  }

  void put(std::uint16_t type, const void* data, std::size_t len) {
    auto* a = reinterpret_cast<rtattr*>(buf_.data() + NLMSG_ALIGN(header()->nlmsg_len));
    a->rta_type = type;
    a->rta_len = static_cast<std::uint16_t>(RTA_LENGTH(len));
    if (len) std::memcpy(reinterpret_cast<char*>(a) + RTA_LENGTH(0), data, len);
    header()->nlmsg_len = NLMSG_ALIGN(header()->nlmsg_len) + RTA_ALIGN(a->rta_len);
  }
  void put_string(std::uint16_t type, const char* s) { put(type, s, std::strlen(s) + 1); }
  std::uint32_t begin(std::uint16_t type) {
    const std::uint32_t at = NLMSG_ALIGN(header()->nlmsg_len);
    put(type, nullptr, 0);
    return at;
  }
  void end(std::uint32_t at) {
    reinterpret_cast<rtattr*>(buf_.data() + at)->rta_len = static_cast<std::uint16_t>(header()->nlmsg_len - at);
  }

  // Sends the request and waits for the kernel's acknowledgement: 0 or a positive errno.
  int send() const {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return errno;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    int result = 0;
    if (::sendto(fd, buf_.data(), header()->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
      result = errno;
    } else {
      alignas(nlmsghdr) std::array<char, 4096> reply{};
      const ssize_t n = ::recv(fd, reply.data(), reply.size(), 0);
      const auto* r = reinterpret_cast<const nlmsghdr*>(reply.data());
      if (n < 0) {
        result = errno;
      } else if (static_cast<std::size_t>(n) < NLMSG_HDRLEN + sizeof(nlmsgerr) || r->nlmsg_type != NLMSG_ERROR) {
        result = EPROTO;
      } else {
        nlmsgerr e{};
        std::memcpy(&e, reply.data() + NLMSG_HDRLEN, sizeof e);
        result = -e.error;
      }
    }
    ::close(fd);
    return result;
  }

 private:
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  const nlmsghdr* header() const { return reinterpret_cast<const nlmsghdr*>(buf_.data()); }
  alignas(nlmsghdr) std::array<char, 1024> buf_{};
};

// Creates the clsact qdisc; false in `created` when one was there already.
int add_clsact(int ifindex, bool& created) {
  TcRequest r(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  r.put_string(TCA_KIND, "clsact");
  const int e = r.send();
  created = e == 0;
  return e == EEXIST ? 0 : e;
}

void delete_clsact(int ifindex) {
  TcRequest r(RTM_DELQDISC, 0, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  r.put_string(TCA_KIND, "clsact");
  (void)r.send();
}

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
