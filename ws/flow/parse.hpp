// SPDX-License-Identifier: BSD-3-Clause
// dpdk-testpmd's text form of a flow rule (testpmd_funcs.rst, "Flow rules management"):
//   [group G] [priority P] [ingress] [egress] [transfer]
//   pattern ITEM [FIELD is|spec|last|mask|prefix VALUE]... / ... / end
//   actions ACTION [ARG VALUE]... / ... / end
#pragma once
#include <string_view>

#include "ws/core/result.hpp"
#include "ws/flow/flow.hpp"

namespace ws {

/// The rule that `text` (what follows `flow create <port>`) describes; the error names the
/// first word it cannot take and what was expected there. Values are checked (addresses,
/// ranges), not what the port can do: that is FlowTable::validate's.
Result<FlowRule> parse_flow_rule(std::string_view text);

}  // namespace ws
