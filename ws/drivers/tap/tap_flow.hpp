// SPDX-License-Identifier: BSD-3-Clause
// net_tap's kernel offload of flow rules, as DPDK's tap PMD does it: one TC flower filter per
// rule, through rtnetlink, whose action is gact drop or skbedit queue_mapping. The filters hang
// off the clsact egress hook of the TAP interface: what the kernel sends into the TAP is what
// the port receives, and on egress skbedit's queue decides which queue's file descriptor reads
// the packet. Slot s of the FlowTable's order is flower priority first_prio + s, so the kernel
// tries them in the same order. What flower cannot express here (VLAN, ICMP, TCP flags,
// partial masks on the EtherType or IP protocol, ranges, COUNT) stays in software.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ws/flow/flow.hpp"

namespace ws::tap_pmd {

class TcFlows {
 public:
  TcFlows() = default;
  TcFlows(const TcFlows&) = delete;
  TcFlows& operator=(const TcFlows&) = delete;
  ~TcFlows() { remove_all(); }

  /// Installs `rule` as slot `slot` on interface `iface` (the port `port` names errors).
  FlowOffloadResult add(const std::string& iface, const std::string& port, const FlowRule& rule, std::uint32_t slot);
  /// Removes slot `slot`'s filter.
  void remove(std::uint32_t slot) noexcept;
  /// Removes every filter added, and the clsact qdisc if it was created for them.
  void remove_all() noexcept;

 private:
  int ifindex_ = 0;
  bool own_qdisc_ = false;
  std::vector<std::uint32_t> slots_;
};

}  // namespace ws::tap_pmd
