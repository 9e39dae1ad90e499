// SPDX-License-Identifier: BSD-3-Clause
// net_tap's `remote=IFACE` (as DPDK's tap PMD): the TAP interface stands in for a real
// interface. Two traffic-control rules, set through rtnetlink:
//   remote ingress --(match all, mirred egress redirect)--> tap  : what arrives on the remote is
//                                                                  read from the tap's queues
//   tap ingress    --(match all, mirred egress redirect)--> remote: what the port sends leaves
//                                                                  through the remote
// Each rule hangs off a clsact qdisc; a qdisc we created is deleted at close, one that was there
// already (someone else's rules) keeps its other filters and loses only ours.
#pragma once
#include <string>

#include "ws/core/result.hpp"

namespace ws::tap_pmd {

class RemoteRedirect {
 public:
  RemoteRedirect() = default;
  RemoteRedirect(const RemoteRedirect&) = delete;
  RemoteRedirect& operator=(const RemoteRedirect&) = delete;
  ~RemoteRedirect() { remove(); }

  // Installs both rules; on error nothing stays installed.
  Result<void> install(const std::string& tap, const std::string& remote);
  void remove() noexcept;
  bool active() const { return tap_ifindex_ != 0; }

 private:
  struct Rule {
    int ifindex = 0;
    bool own_qdisc = false;  // we created the clsact qdisc
    bool installed = false;
  };
  Rule tap_rule_, remote_rule_;
  int tap_ifindex_ = 0;
};

}  // namespace ws::tap_pmd
