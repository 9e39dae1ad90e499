// SPDX-License-Identifier: BSD-3-Clause
// Flow items' fields: the field table, setting a field from testpmd's text, default masks and
// DPDK's names for items, actions and error types.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstdio>

#include "ws/flow/fields.hpp"

namespace ws {
namespace flow_key {

std::span<const Field> fields() {
  using enum FlowItemType;
  static constexpr Field table[] = {
      {eth, "dst", eth_dst, 6, Kind::mac, true},
      {eth, "src", eth_src, 6, Kind::mac, true},
      {eth, "type", eth_type, 2, Kind::number, true},
      {vlan, "tci", vlan_tci, 2, Kind::number, false},
      {vlan, "vid", vlan_tci, 2, Kind::number, true, 0x0fff, 0},
      {vlan, "pcp", vlan_tci, 2, Kind::number, false, 0xe000, 13},
      {vlan, "inner_type", vlan_inner_type, 2, Kind::number, false},
      {ipv4, "tos", ip_tos, 1, Kind::number, false},
      {ipv4, "ttl", ip_ttl, 1, Kind::number, false},
      {ipv4, "proto", ip_proto, 1, Kind::number, false},
      {ipv4, "src", ipv4_src, 4, Kind::ipv4, true},
      {ipv4, "dst", ipv4_dst, 4, Kind::ipv4, true},
      {ipv6, "tc", ip_tos, 1, Kind::number, false},
      {ipv6, "hop", ip_ttl, 1, Kind::number, false},
      {ipv6, "proto", ip_proto, 1, Kind::number, false},
      {ipv6, "src", ipv6_src, 16, Kind::ipv6, true},
      {ipv6, "dst", ipv6_dst, 16, Kind::ipv6, true},
      {udp, "src", l4_src, 2, Kind::number, true},
      {udp, "dst", l4_dst, 2, Kind::number, true},
      {tcp, "src", l4_src, 2, Kind::number, true},
      {tcp, "dst", l4_dst, 2, Kind::number, true},
      {tcp, "flags", tcp_flags, 1, Kind::number, false},
      {icmp, "type", icmp_type, 1, Kind::number, true},
      {icmp, "code", icmp_code, 1, Kind::number, true},
  };
  return table;
}

const Field* find_field(FlowItemType item, std::string_view name) {
  for (const Field& f : fields())
    if (f.item == item && f.name == name) return &f;
  return nullptr;
}

std::uint32_t layer_of(FlowItemType item) {
  switch (item) {
    case FlowItemType::eth:
      return layer_eth;
    case FlowItemType::vlan:
      return layer_vlan;
    case FlowItemType::ipv4:
      return layer_ipv4;
    case FlowItemType::ipv6:
      return layer_ipv6;
    case FlowItemType::udp:
      return layer_udp;
    case FlowItemType::tcp:
      return layer_tcp;
    case FlowItemType::icmp:
      return layer_icmp;
  }
  return 0;
}

}  // namespace flow_key

namespace {

using flow_key::Field;
using flow_key::Kind;

FlowError bad_value(const Field& f, std::string_view value, std::string_view why) {
  return {FlowErrorType::item_spec, -1, fmt::format("{} '{}': {}", f.name, value, why), EINVAL};
}

// The field's bytes for `value` (network order), or an error naming the field.
FlowResult<std::array<std::uint8_t, 16>> encode(const Field& f, std::string_view value) {
  std::array<std::uint8_t, 16> out{};
  const std::string text(value);
  if (f.kind == Kind::ipv4 || f.kind == Kind::ipv6) {
    if (inet_pton(f.kind == Kind::ipv4 ? AF_INET : AF_INET6, text.c_str(), out.data()) != 1)
      return std::unexpected(bad_value(f, value, f.kind == Kind::ipv4 ? "not an IPv4 address" : "not an IPv6 address"));
    return out;
  }
  if (f.kind == Kind::mac) {
    unsigned b[6];
    char extra = 0;
    if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &extra) != 6)
      return std::unexpected(bad_value(f, value, "not a MAC address"));
    for (int i = 0; i < 6; ++i) out[i] = static_cast<std::uint8_t>(b[i]);
    return out;
  }
  const bool hex = value.starts_with("0x") || value.starts_with("0X");
  std::uint64_t n = 0;
  const char* first = value.data() + (hex ? 2 : 0);
  auto [end, ec] = std::from_chars(first, value.data() + value.size(), n, hex ? 16 : 10);
  if (first == value.data() + value.size() || ec != std::errc{} || end != value.data() + value.size())
    return std::unexpected(bad_value(f, value, "not a number"));
  if (f.bits != 0xffff) n <<= f.shift;
  const std::uint64_t max = f.width == 1 ? 0xff : f.width == 2 ? f.bits : 0xffffffff;
  if (n & ~max) return std::unexpected(bad_value(f, value, "out of range"));
  for (std::size_t i = 0; i < f.width; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * (f.width - 1 - i)));
  return out;
}

// The field's full mask (its `bits` for sub-byte fields).
std::array<std::uint8_t, 16> full_mask(const Field& f) {
  std::array<std::uint8_t, 16> m{};
  for (std::size_t i = 0; i < f.width; ++i) m[i] = 0xff;
  if (f.width == 2) {
    m[0] = static_cast<std::uint8_t>(f.bits >> 8);
    m[1] = static_cast<std::uint8_t>(f.bits);
  }
  return m;
}

FlowResult<std::array<std::uint8_t, 16>> prefix_mask(const Field& f, std::string_view value) {
  unsigned bits = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), bits);
  if (ec != std::errc{} || end != value.data() + value.size() || bits > 8 * f.width)
    return std::unexpected(bad_value(f, value, "prefix out of range"));
  std::array<std::uint8_t, 16> m{};
  for (unsigned i = 0; i < bits; ++i) m[i / 8] |= static_cast<std::uint8_t>(0x80 >> (i % 8));
  return m;
}

// Writes the field's bytes into `where`, only the field's bits for sub-byte fields.
void put(FlowBytes& where, const Field& f, const std::array<std::uint8_t, 16>& bytes) {
  const auto mask = full_mask(f);
  for (std::size_t i = 0; i < f.width; ++i)
    where[f.offset + i] = static_cast<std::uint8_t>((where[f.offset + i] & ~mask[i]) | (bytes[i] & mask[i]));
}

}  // namespace

// As dpdk-testpmd: a mask given for any field (by is, mask or prefix) starts from zero, so only
// the fields named are matched; a spec with no mask at all takes the item's default mask.
FlowResult<void> FlowItem::set(std::string_view field, std::string_view how, std::string_view value) {
  const Field* f = flow_key::find_field(type, field);
  if (f == nullptr)
    return std::unexpected(
        FlowError{FlowErrorType::item, -1, fmt::format("{} has no field '{}'", flow_item_name(type), field), ENOTSUP});
  if (how == "prefix") {
    auto m = prefix_mask(*f, value);
    if (!m) return std::unexpected(m.error());
    put(mask, *f, *m);
    has_mask = true;
    return {};
  }
  auto bytes = encode(*f, value);
  if (!bytes) return std::unexpected(bytes.error());
  if (how == "is" || how == "spec") {
    put(spec, *f, *bytes);
    has_spec = true;
    if (how == "is") {
      put(mask, *f, full_mask(*f));
      has_mask = true;
    }
  } else if (how == "mask") {
    put(mask, *f, *bytes);
    has_mask = true;
  } else if (how == "last") {
    put(last, *f, *bytes);
    has_last = true;
  } else {
    return std::unexpected(
        FlowError{FlowErrorType::item, -1, fmt::format("'{}': is, spec, last, mask or prefix expected", how), EINVAL});
  }
  return {};
}

FlowBytes FlowItem::effective_mask() const {
  if (has_mask) return mask;
  FlowBytes m{};
  for (const Field& f : flow_key::fields())
    if (f.item == type && f.default_mask) put(m, f, full_mask(f));
  return m;
}

std::string_view flow_item_name(FlowItemType type) {
  static constexpr std::string_view names[] = {"ETH", "VLAN", "IPV4", "IPV6", "UDP", "TCP", "ICMP"};
  return names[static_cast<std::size_t>(type)];
}

std::string_view flow_action_name(FlowActionType type) {
  static constexpr std::string_view names[] = {"QUEUE", "RSS", "DROP", "MARK", "COUNT", "PASSTHRU", "JUMP"};
  return names[static_cast<std::size_t>(type)];
}

std::string_view flow_error_type_name(FlowErrorType type) {
  // dpdk-testpmd's errstrlist (port_flow_complain).
  static constexpr std::string_view names[] = {"no error",
                                               "cause unspecified",
                                               "flow rule (handle)",
                                               "group field",
                                               "priority field",
                                               "ingress field",
                                               "egress field",
                                               "transfer field",
                                               "attributes structure",
                                               "pattern length",
                                               "item specification",
                                               "item specification range",
                                               "item specification mask",
                                               "specific pattern item",
                                               "number of actions",
                                               "action configuration",
                                               "specific action",
                                               "current device state"};
  const auto i = static_cast<std::size_t>(type);
  return i < std::size(names) ? names[i] : "unknown type";
}

std::string_view flow_place_name(FlowPlace place) {
  switch (place) {
    case FlowPlace::kernel_xdp:
      return "kernel XDP";
    case FlowPlace::kernel_tc:
      return "kernel TC";
    case FlowPlace::software:
      break;
  }
  return "software";
}

std::optional<FlowExactMatch> flow_exact_match(const FlowRule& rule) {
  FlowExactMatch m;
  for (const FlowItem& item : rule.pattern) {
    if (item.has_last) return std::nullopt;
    m.layers |= flow_key::layer_of(item.type);
    if (!item.has_spec) continue;
    const FlowBytes mask = item.effective_mask();
    // Only the item's own fields: IPv4 and IPv6 share bytes, and the layer bits tell them apart.
    for (const Field& f : flow_key::fields()) {
      if (f.item != item.type) continue;
      for (std::size_t i = f.offset; i < f.offset + f.width; ++i) {
        m.mask[i] |= mask[i];
        m.value[i] |= static_cast<std::uint8_t>(item.spec[i] & mask[i]);
      }
    }
  }
  return m;
}

bool flow_matches_disjoint(const FlowExactMatch& a, const FlowExactMatch& b) {
  using namespace flow_key;
  const std::uint32_t both = a.layers | b.layers;
  if ((both & layer_ipv4) && (both & layer_ipv6)) return true;
  const int l4 = ((both & layer_udp) != 0) + ((both & layer_tcp) != 0) + ((both & layer_icmp) != 0);
  if (l4 > 1) return true;
  for (std::size_t i = 0; i < flow_key_bytes; ++i)
    if ((a.value[i] ^ b.value[i]) & a.mask[i] & b.mask[i]) return true;
  return false;
}

}  // namespace ws
