// SPDX-License-Identifier: BSD-3-Clause
// Flow rules as DPDK's rte_flow describes them: attributes, a pattern of items (each with
// spec, mask and last) and a list of actions; errors carry DPDK's rte_flow_error_type numbers
// and the index of the item or action at fault. A port holds its rules in a FlowTable
// (flow_table.hpp); parse_flow_rule (parse.hpp) reads dpdk-testpmd's text form.
#pragma once
#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ws {

/// DPDK's enum rte_flow_error_type, same numbers.
enum class FlowErrorType : int {
  none = 0,           ///< No error.
  unspecified = 1,    ///< Cause unspecified.
  handle = 2,         ///< Flow rule (handle).
  attr_group = 3,     ///< Group field.
  attr_priority = 4,  ///< Priority field.
  attr_ingress = 5,   ///< Ingress field.
  attr_egress = 6,    ///< Egress field.
  attr_transfer = 7,  ///< Transfer field.
  attr = 8,           ///< Attributes structure.
  item_num = 9,       ///< Pattern length.
  item_spec = 10,     ///< Item specification.
  item_last = 11,     ///< Item specification range.
  item_mask = 12,     ///< Item specification mask.
  item = 13,          ///< Specific pattern item.
  action_num = 14,    ///< Number of actions.
  action_conf = 15,   ///< Action configuration.
  action = 16,        ///< Specific action.
  state = 17,         ///< Current device state.
};

/// dpdk-testpmd's words for an error type: "specific action", "cause unspecified".
std::string_view flow_error_type_name(FlowErrorType type);

/// Why a rule was refused (DPDK's rte_flow_error plus rte_errno).
struct FlowError {
  FlowErrorType type = FlowErrorType::unspecified;  ///< What is at fault.
  int cause = -1;                                   ///< Index of the item or action at fault; -1: none.
  std::string message;                              ///< "queue index out of range"
  int errnum = 0;                                   ///< The errno DPDK's PMDs set with it (ERANGE, ENOTSUP...).
};

/// A flow API result: the value, or why not.
template <class T>
using FlowResult = std::expected<T, FlowError>;

/// Pattern item types (DPDK's RTE_FLOW_ITEM_TYPE_* of the same names).
enum class FlowItemType : std::uint8_t { eth, vlan, ipv4, ipv6, udp, tcp, icmp };

/// Bytes of a FlowKey (classifier.hpp): the header fields a pattern can match, each at a fixed
/// offset in network byte order. Items' spec, mask and last are expressed in this layout.
inline constexpr std::size_t flow_key_bytes = 64;
/// An item's spec, mask or last in FlowKey layout.
using FlowBytes = std::array<std::uint8_t, flow_key_bytes>;

/// One pattern item. With no spec the item matches any packet that has the layer; with a spec,
/// the fields under the mask must equal it, or lie between spec and last where last is given.
struct FlowItem {
  FlowItemType type = FlowItemType::eth;  ///< The layer.
  bool has_spec = false;                  ///< spec given (else: the layer alone).
  bool has_mask = false;                  ///< mask given (else: the item's default mask, as DPDK's).
  bool has_last = false;                  ///< last given: range matching.
  FlowBytes spec{};                       ///< Field values.
  FlowBytes mask{};                       ///< Which bits matter.
  FlowBytes last{};                       ///< Upper ends of ranges.

  /// Sets field `field` ("dst", "src", "type", "tci", "vid", "proto", ...) of the item:
  /// `how` is "is" (spec and a full mask), "spec", "mask", "last" or "prefix" (a mask of that
  /// many leading bits), with `value` as testpmd writes it (10.0.0.1, 0x0800, 02:00:00:00:00:01).
  FlowResult<void> set(std::string_view field, std::string_view how, std::string_view value);
  /// The mask in effect: the given one, else the item type's default (DPDK's rte_flow_item_*_mask).
  FlowBytes effective_mask() const;
};

/// Action types (DPDK's RTE_FLOW_ACTION_TYPE_* of the same names).
enum class FlowActionType : std::uint8_t { queue, rss, drop, mark, count, passthru, jump };

/// One action and its configuration.
struct FlowAction {
  FlowActionType type = FlowActionType::drop;  ///< What to do.
  std::uint16_t queue = 0;                     ///< queue: the RX queue.
  std::vector<std::uint16_t> rss_queues;       ///< rss: the queues spread over (none: every RX queue).
  std::uint32_t rss_types = 0;                 ///< rss: rss_type::* hashed (0: ip).
  std::uint32_t mark = 0;                      ///< mark: the id put in Mbuf::mark.
  std::uint32_t group = 0;                     ///< jump: the group matching goes on in.
};

/// A rule's attributes (DPDK's rte_flow_attr).
struct FlowAttr {
  std::uint32_t group = 0;     ///< Rules of group 0 are tried first; jump leads to others.
  std::uint32_t priority = 0;  ///< Within a group, lower values are tried first.
  bool ingress = false;        ///< Received traffic (the only direction supported).
  bool egress = false;         ///< Sent traffic: refused.
  bool transfer = false;       ///< Switch-level rules: refused.
};

/// A whole rule: what flow validate/create take.
struct FlowRule {
  FlowAttr attr;                    ///< Attributes.
  std::vector<FlowItem> pattern;    ///< Items, outermost layer first; `end` is implied.
  std::vector<FlowAction> actions;  ///< Actions; `end` is implied.
  std::string text;                 ///< The testpmd text it was parsed from, if any.
};

/// DPDK's names, as `flow list` prints them: "ETH", "IPV4", ...
std::string_view flow_item_name(FlowItemType type);
/// "QUEUE", "RSS", "DROP", ...
std::string_view flow_action_name(FlowActionType type);

/// A COUNT action's counters (DPDK's rte_flow_query_count).
struct FlowCounts {
  std::uint64_t hits = 0;   ///< Packets that matched.
  std::uint64_t bytes = 0;  ///< Their bytes.
};

/// Where a rule runs: in the port's software classifier, or taken by the kernel under the
/// driver (net_af_xdp's XDP program, net_tap's TC filters) so that software never sees what it
/// matches.
enum class FlowPlace : std::uint8_t { software, kernel_xdp, kernel_tc };
/// "software", "kernel XDP", "kernel TC" (what `flow list` prints).
std::string_view flow_place_name(FlowPlace place);

/// A rule a driver took (Port::do_flow_offload): where, and the driver's own handle.
struct FlowOffload {
  FlowPlace place = FlowPlace::software;  ///< Where it runs now.
  std::uint64_t handle = 0;               ///< The driver's: slot, filter handle...
};

/// Why a driver did not take a rule. `kernel_refused`: it tried and the kernel said no (the
/// FlowTable logs the message and keeps the rule in software); otherwise the driver cannot
/// express the rule (quietly software).
struct FlowOffloadRefusal {
  bool kernel_refused = false;  ///< The kernel refused it (logged).
  std::string message;          ///< Why.
};
/// A driver's answer to an offload request.
using FlowOffloadResult = std::expected<FlowOffload, FlowOffloadRefusal>;

/// A rule's whole pattern as one masked compare over a FlowKey: a packet matches when it has
/// every layer in `layers` and (key & mask) == value. What the kernel programs compile.
struct FlowExactMatch {
  FlowBytes mask{};          ///< Bits that matter.
  FlowBytes value{};         ///< Their values (spec & mask).
  std::uint32_t layers = 0;  ///< flow_key::layer_* bits the packet must have.
};
/// The rule's pattern as a FlowExactMatch; nullopt when an item has a range (last).
std::optional<FlowExactMatch> flow_exact_match(const FlowRule& rule);
/// True when no packet can match both: layers that exclude each other (IPv4 and IPv6; two of
/// UDP, TCP, ICMP) or a bit both masks cover with different values.
bool flow_matches_disjoint(const FlowExactMatch& a, const FlowExactMatch& b);

}  // namespace ws
