// SPDX-License-Identifier: BSD-3-Clause
// Where each item's fields sit in a FlowKey (flow.hpp): the one table the parser, the default
// masks and the packet parser (classifier.cpp) agree on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "ws/flow/flow.hpp"

namespace ws::flow_key {

// Offsets (bytes) of the header fields in a FlowKey, network byte order. IPv4 and IPv6 share
// the L3 bytes: a packet has one or the other, and the layer bits say which.
inline constexpr std::size_t eth_dst = 0, eth_src = 6, eth_type = 12;
inline constexpr std::size_t vlan_tci = 14, vlan_inner_type = 16;
inline constexpr std::size_t ip_tos = 18, ip_ttl = 19, ip_proto = 20;
inline constexpr std::size_t ipv4_src = 22, ipv4_dst = 26;
inline constexpr std::size_t ipv6_src = 22, ipv6_dst = 38;
inline constexpr std::size_t l4_src = 54, l4_dst = 56, tcp_flags = 58, icmp_type = 60, icmp_code = 61;

// Layer bits: which headers a packet has, and which a pattern needs.
inline constexpr std::uint32_t layer_eth = 1, layer_vlan = 2, layer_ipv4 = 4, layer_ipv6 = 8;
inline constexpr std::uint32_t layer_udp = 16, layer_tcp = 32, layer_icmp = 64;

// How a field's value is written.
enum class Kind : std::uint8_t { number, mac, ipv4, ipv6 };

// One field of an item: `width` bytes at `offset`; for sub-byte fields (vlan vid, pcp) a
// number is shifted left by `shift` and only `bits` of the 16-bit word belong to it.
struct Field {
  FlowItemType item;
  std::string_view name;
  std::size_t offset;
  std::size_t width;
  Kind kind;
  bool default_mask;  // in DPDK's rte_flow_item_<item>_mask
  std::uint16_t bits = 0xffff;
  unsigned shift = 0;
};

// Every field of every item.
std::span<const Field> fields();
// The field `name` of `item`, or nullptr.
const Field* find_field(FlowItemType item, std::string_view name);
// The layer bit of an item type.
std::uint32_t layer_of(FlowItemType item);

}  // namespace ws::flow_key
