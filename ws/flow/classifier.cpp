// SPDX-License-Identifier: BSD-3-Clause
// Compiling rules into masked compares and running them over a burst (see classifier.hpp).
#include "ws/flow/classifier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <tuple>

#include "ws/flow/fields.hpp"

namespace ws {
namespace {

namespace fk = flow_key;

FlowError error(FlowErrorType type, int cause, std::string message, int errnum) {
  return {type, cause, std::move(message), errnum};
}

// Item order: each item's layer must lie under the previous one (eth, vlan, IP, L4), and ICMP
// under IPv4 only.
int rank_of(FlowItemType t) {
  switch (t) {
    case FlowItemType::eth:
      return 0;
    case FlowItemType::vlan:
      return 1;
    case FlowItemType::ipv4:
    case FlowItemType::ipv6:
      return 2;
    default:
      return 3;
  }
}

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>((p[0] << 8) | p[1]); }

// The L4 header at `l4` (`left` bytes) of protocol `proto` into the key.
void l4_key(std::uint8_t proto, const std::uint8_t* l4, std::size_t left, std::uint8_t* k, FlowKey& key) noexcept {
  if ((proto == 6 && left >= 20) || (proto == 17 && left >= 8)) {
    std::memcpy(k + fk::l4_src, l4, 4);
    if (proto == 6) k[fk::tcp_flags] = l4[13];
    key.layers |= proto == 6 ? fk::layer_tcp : fk::layer_udp;
  } else if (proto == 1 && left >= 4 && (key.layers & fk::layer_ipv4)) {
    k[fk::icmp_type] = l4[0];
    k[fk::icmp_code] = l4[1];
    key.layers |= fk::layer_icmp;
  }
}

// Adds the masked compares of one item to `r`; `index` names the item in errors.
FlowResult<void> compile_item(const FlowItem& item, int index, CompiledFlow& r) {
  r.layers |= fk::layer_of(item.type);
  if (!item.has_spec) {
    if (item.has_last) return std::unexpected(error(FlowErrorType::item_last, index, "last without spec", EINVAL));
    return {};
  }
  const FlowBytes mask = item.effective_mask();
  auto* m = reinterpret_cast<std::uint8_t*>(r.mask.data());
  auto* v = reinterpret_cast<std::uint8_t*>(r.value.data());
  for (const fk::Field& f : fk::fields()) {
    if (f.item != item.type) continue;
    CompiledFlow::Range range{static_cast<std::uint8_t>(f.offset), static_cast<std::uint8_t>(f.width), {}, {}, {}};
    bool ranged = false, last_zero = true;
    for (std::size_t i = 0; i < f.width; ++i) {
      const std::size_t o = f.offset + i;
      range.mask[i] = mask[o];
      range.lo[i] = item.spec[o] & mask[o];
      range.hi[i] = item.last[o] & mask[o];
      ranged |= item.has_last && range.hi[i] != range.lo[i];
      last_zero &= item.last[o] == 0;
    }
    // As rte_flow: a field whose last is 0 (or equal to spec) makes no range, so that one
    // field's last leaves the item's other fields exact.
    if (!ranged || last_zero) continue;
    if (std::memcmp(range.hi.data(), range.lo.data(), f.width) < 0)
      return std::unexpected(
          error(FlowErrorType::item_last, index, fmt::format("{}: last is lower than spec", f.name), EINVAL));
    r.ranges.push_back(range);
  }
  for (std::size_t o = 0; o < flow_key_bytes; ++o) {
    // A field under a range is matched by the range alone.
    const bool in_range =
        std::ranges::any_of(r.ranges, [o](const auto& rg) { return o >= rg.offset && o < rg.offset + rg.width; });
    if (in_range) continue;
    m[o] |= mask[o];
    v[o] |= item.spec[o] & mask[o];
  }
  return {};
}

FlowResult<void> compile_pattern(const std::vector<FlowItem>& pattern, CompiledFlow& r) {
  int last_rank = -1;
  bool ipv6 = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const FlowItem& item = pattern[i];
    const int rank = rank_of(item.type);
    if (rank <= last_rank)
      return std::unexpected(error(FlowErrorType::item, static_cast<int>(i),
                                   fmt::format("{} cannot follow the item before it", flow_item_name(item.type)),
                                   ENOTSUP));
    if (item.type == FlowItemType::icmp && ipv6)
      return std::unexpected(
          error(FlowErrorType::item, static_cast<int>(i), "ICMP under IPv6 is ICMP6: not supported", ENOTSUP));
    ipv6 |= item.type == FlowItemType::ipv6;
    last_rank = rank;
    if (auto ok = compile_item(item, static_cast<int>(i), r); !ok) return ok;
  }
  return {};
}

FlowResult<void> set_fate(CompiledFlow& r, CompiledFlow::Fate fate, int index) {
  if (r.fate != CompiledFlow::Fate::none)
    return std::unexpected(error(FlowErrorType::action, index, "a rule has at most one fate action", EINVAL));
  r.fate = fate;
  return {};
}

FlowResult<void> compile_action(const FlowAction& a, int index, std::uint16_t rx_queues, std::uint32_t group,
                                CompiledFlow& r) {
  using enum FlowActionType;
  using Fate = CompiledFlow::Fate;
  switch (a.type) {
    case queue:
      if (a.queue >= rx_queues)
        return std::unexpected(error(FlowErrorType::action, index, "queue index out of range", ERANGE));
      r.queue = a.queue;
      return set_fate(r, Fate::queue, index);
    case rss:
      for (std::uint16_t q : a.rss_queues)
        if (q >= rx_queues)
          return std::unexpected(error(FlowErrorType::action_conf, index, "RSS queue index out of range", ERANGE));
      r.rss_queues = a.rss_queues;
      if (r.rss_queues.empty()) {
        r.rss_queues.resize(rx_queues);
        std::iota(r.rss_queues.begin(), r.rss_queues.end(), std::uint16_t{0});
      }
      r.rss_types = a.rss_types ? a.rss_types : rss_type::ip;
      return set_fate(r, Fate::rss, index);
    case drop:
      return set_fate(r, Fate::drop, index);
    case passthru:
      return set_fate(r, Fate::passthru, index);
    case jump:
      if (a.group <= group)
        return std::unexpected(error(FlowErrorType::action_conf, index, "jump must lead to a higher group", EINVAL));
      r.jump_group = a.group;
      return set_fate(r, Fate::jump, index);
    case mark:
      r.mark = true;
      r.mark_id = a.mark;
      return {};
    case count:
      return {};
  }
  return {};
}

}  // namespace

FlowResult<CompiledFlow> compile_flow(const FlowRule& rule, std::uint16_t rx_queues) {
  const FlowAttr& at = rule.attr;
  if (at.egress) return std::unexpected(error(FlowErrorType::attr_egress, -1, "egress is not supported", ENOTSUP));
  if (at.transfer)
    return std::unexpected(error(FlowErrorType::attr_transfer, -1, "transfer is not supported", ENOTSUP));
  if (!at.ingress) return std::unexpected(error(FlowErrorType::attr_ingress, -1, "ingress is required", EINVAL));
  CompiledFlow r;
  if (auto ok = compile_pattern(rule.pattern, r); !ok) return std::unexpected(ok.error());
  for (std::size_t i = 0; i < rule.actions.size(); ++i)
    if (auto ok = compile_action(rule.actions[i], static_cast<int>(i), rx_queues, at.group, r); !ok)
      return std::unexpected(ok.error());
  if (rule.actions.empty()) return std::unexpected(error(FlowErrorType::action_num, -1, "no action", EINVAL));
  return r;
}

void flow_key_of(const Mbuf& m, FlowKey& key) noexcept {
  key = {};
  auto* k = reinterpret_cast<std::uint8_t*>(key.words.data());
  const std::uint8_t* p = m.data();
  std::size_t left = m.data_len;
  if (left < 14) return;
  std::memcpy(k, p, 14);
  key.layers = fk::layer_eth;
  std::uint16_t type = be16(p + 12);
  p += 14;
  left -= 14;
  if ((type == 0x8100 || type == 0x88a8) && left >= 4) {
    std::memcpy(k + fk::vlan_tci, p, 4);
    key.layers |= fk::layer_vlan;
    type = be16(p + 2);
    p += 4;
    left -= 4;
  }
  if (type == 0x0800 && left >= 20 && (p[0] >> 4) == 4) {
    const std::size_t ihl = (p[0] & 15u) * 4u;
    if (ihl < 20 || ihl > left) return;
    k[fk::ip_tos] = p[1];
    k[fk::ip_ttl] = p[8];
    k[fk::ip_proto] = p[9];
    std::memcpy(k + fk::ipv4_src, p + 12, 8);
    key.layers |= fk::layer_ipv4;
    const bool first_fragment = (be16(p + 6) & 0x1fff) == 0;
    if (first_fragment) l4_key(p[9], p + ihl, left - ihl, k, key);
  } else if (type == 0x86dd && left >= 40) {
    k[fk::ip_tos] = static_cast<std::uint8_t>(be16(p) >> 4);
    k[fk::ip_ttl] = p[7];
    k[fk::ip_proto] = p[6];
    std::memcpy(k + fk::ipv6_src, p + 8, 32);
    key.layers |= fk::layer_ipv6;
    l4_key(p[6], p + 40, left - 40, k, key);
  }
}

FlowClassifier::FlowClassifier(std::vector<std::pair<const FlowRule*, FlowCounters*>> rules, bool isolated,
                               std::uint16_t rx_queues, Counter* dropped)
    : isolated_(isolated), dropped_(dropped) {
  // Rules of equal group and priority keep their age order: the index in the
  // creation-ordered input breaks ties.
  std::vector<std::size_t> order(rules.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::ranges::sort(order, [&](std::size_t a, std::size_t b) {
    const FlowAttr& x = rules[a].first->attr;
    const FlowAttr& y = rules[b].first->attr;
    return std::tuple(x.group, x.priority, a) < std::tuple(y.group, y.priority, b);
  });
  std::vector<std::pair<const FlowRule*, FlowCounters*>> sorted;
  for (std::size_t i : order) sorted.push_back(rules[i]);
  rules = std::move(sorted);
  std::vector<std::uint32_t> groups;                            // group ids, ascending
  if (rules.empty() || rules.front().first->attr.group != 0) {  // matching starts in group 0, even an empty one
    groups.push_back(0);
    group_begin_.push_back(0);
  }
  for (const auto& [rule, counters] : rules) {
    auto c = compile_flow(*rule, rx_queues);
    if (!c) continue;  // FlowTable validated every rule; nothing to skip in practice
    const bool counts =
        std::ranges::any_of(rule->actions, [](const FlowAction& a) { return a.type == FlowActionType::count; });
    c->counters = counts ? counters : nullptr;
    if (groups.empty() || groups.back() != rule->attr.group) {
      groups.push_back(rule->attr.group);
      group_begin_.push_back(static_cast<std::uint32_t>(rules_.size()));
    }
    rules_.push_back(std::move(*c));
  }
  group_begin_.push_back(static_cast<std::uint32_t>(rules_.size()));
  // Jumps name groups by id; keep the index of the target group (one past the last: no rules).
  for (CompiledFlow& r : rules_) {
    if (r.fate != CompiledFlow::Fate::jump) continue;
    r.jump_group = static_cast<std::uint32_t>(std::ranges::find(groups, r.jump_group) - groups.begin());
  }
}

bool FlowClassifier::matches(const CompiledFlow& r, const FlowKey& k) const noexcept {
  if ((k.layers & r.layers) != r.layers) return false;
  std::uint64_t diff = 0;
  for (std::size_t i = 0; i < r.mask.size(); ++i) diff |= (k.words[i] & r.mask[i]) ^ r.value[i];
  if (diff) return false;
  const auto* kb = reinterpret_cast<const std::uint8_t*>(k.words.data());
  for (const CompiledFlow::Range& rg : r.ranges) {
    std::array<std::uint8_t, 16> v{};
    for (std::size_t i = 0; i < rg.width; ++i) v[i] = kb[rg.offset + i] & rg.mask[i];
    if (std::memcmp(v.data(), rg.lo.data(), rg.width) < 0 || std::memcmp(v.data(), rg.hi.data(), rg.width) > 0)
      return false;
  }
  return true;
}

// The rule's effects on `m`; its fate as a queue, flow_drop, or flow_keep (none, passthru, jump).
std::uint16_t FlowClassifier::apply(const CompiledFlow& r, Mbuf& m) const noexcept {
  if (r.counters) {
    r.counters->hits.add(1);
    r.counters->bytes.add(m.pkt_len);
  }
  if (r.mark) {
    m.mark = r.mark_id;
    m.ol_flags |= mbuf_flag::rx_fdir | mbuf_flag::rx_fdir_id;
  }
  switch (r.fate) {
    case CompiledFlow::Fate::drop:
      return flow_drop;
    case CompiledFlow::Fate::queue:
      return r.queue;
    case CompiledFlow::Fate::rss: {
      const std::uint32_t h = soft_rss(m, key_, r.rss_types);
      return r.rss_queues[h % r.rss_queues.size()];
    }
    default:
      return flow_keep;
  }
}

std::uint16_t FlowClassifier::classify_one(Mbuf& m) const noexcept {
  FlowKey key;
  flow_key_of(m, key);
  const auto groups = static_cast<std::uint32_t>(group_begin_.size() - 1);
  bool matched = false;  // isolated ports receive what some rule matched
  std::uint32_t g = 0;
  for (std::uint32_t i = group_begin_[0]; g < groups && i < group_begin_[g + 1]; ++i) {
    const CompiledFlow& r = rules_[i];
    if (!matches(r, key)) continue;
    matched = true;
    const std::uint16_t to = apply(r, m);
    if (r.fate == CompiledFlow::Fate::passthru) continue;
    if (r.fate != CompiledFlow::Fate::jump) return to;
    g = r.jump_group;  // always a higher group, so matching ends
    if (g >= groups) break;
    i = group_begin_[g] - 1;
  }
  return matched || !isolated_ ? flow_keep : flow_drop;
}

void FlowClassifier::classify(Mbuf* const* pkts, std::uint16_t n, std::uint16_t* verdict) const noexcept {
  for (std::uint16_t i = 0; i < n; ++i) verdict[i] = classify_one(*pkts[i]);
}

}  // namespace ws
