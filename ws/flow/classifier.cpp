// SPDX-License-Identifier: BSD-3-Clause
// Compiling rules into masked compares and running them over a burst (see classifier.hpp).
#include "ws/flow/classifier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
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
  index_ = build_flow_index(rules_);
  simple_ = index_.blocks.size() == 1 && group_begin_.size() == 2 && std::ranges::none_of(rules_, [](const auto& r) {
              return r.fate == CompiledFlow::Fate::passthru || r.fate == CompiledFlow::Fate::jump;
            });
}

bool flow_matches(const CompiledFlow& r, const FlowKey& k) noexcept {
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

// The block whose rows a packet's walk holds: looked up once per packet and block, however
// many times passthru and jump call next_match.
struct FlowClassifier::Cursor {
  std::uint32_t block = ~std::uint32_t{0};
  std::array<const std::uint64_t*, FlowIndex::max_dims> rows;  // filled with block
};

namespace {

// The row of the `Width`-byte big-endian value at `offset` of the key: a 16-bit root (a byte: a
// 256-entry one), and for 4-byte values two levels of 256 below it, always both loads (an
// entry that is already a row keeps it; the load goes to entry 0 and is dropped), so that the
// walk has no branch for the traffic to mispredict.
template <unsigned Width>
const std::uint64_t* row_for(const FlowIndex::Table& t, const FlowKey& k, unsigned offset,
                             std::uint32_t stride) noexcept {
  const auto* p = reinterpret_cast<const std::uint8_t*>(k.words.data()) + offset;
  const std::uint16_t* nodes = t.nodes.data();
  std::uint32_t e;
  if constexpr (Width == 1) {
    e = nodes[p[0]];
  } else if constexpr (Width == 2) {
    e = nodes[be16(p)];
  } else {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    v = __builtin_bswap32(v);
    e = nodes[v >> 16];
    for (unsigned shift : {8u, 0u}) {
      // Node k starts at 65536 + 256 * k; e << 8 is (child << 8) + 256 * k.
      const bool inner = (e & FlowIndex::child) != 0;
      const std::uint32_t at = inner ? (e << 8) + ((v >> shift) & 255) + 65536u - (FlowIndex::child << 8) : 0;
      const std::uint32_t next = nodes[at];
      e = inner ? next : e;
    }
  }
  return t.rows.data() + std::size_t{e} * stride;
}

}  // namespace

// The dims in build_flow_index's order, each lookup straight-line code for its width.
void FlowClassifier::load_rows(const FlowKey& key, std::uint32_t block, Cursor& c) const noexcept {
  const FlowIndex::Block& blk = index_.blocks[block];
  const std::uint32_t s = blk.stride;
  c.block = block;
  c.rows[0] = row_for<1>(blk.tables[0], key, fk::ip_proto, s);
  c.rows[1] = row_for<4>(blk.tables[1], key, fk::ipv4_src, s);
  c.rows[2] = row_for<4>(blk.tables[2], key, fk::ipv4_dst, s);
  c.rows[3] = row_for<2>(blk.tables[3], key, fk::l4_src, s);
  c.rows[4] = row_for<2>(blk.tables[4], key, fk::l4_dst, s);
  if (index_.dim_count == 6) c.rows[5] = row_for<4>(blk.tables[5], key, fk::ipv6_dst, s);
}

namespace {

// Word w of every dim's row ANDed (w 0: the summary words).
template <unsigned Dims>
std::uint64_t and_word(const std::array<const std::uint64_t*, FlowIndex::max_dims>& rows, std::uint32_t w) noexcept {
  std::uint64_t x = rows[0][w];
  for (unsigned d = 1; d < Dims; ++d) x &= rows[d][w];
  return x;
}

// Rule i (a candidate of every dim) matches: its layers when the dims say the rest exactly.
bool confirm(const FlowIndex& x, const std::vector<CompiledFlow>& rules, std::uint32_t i, const FlowKey& key) noexcept {
  const std::uint32_t need = x.check[i];
  if ((key.layers & need) == need) return true;
  return (need & FlowIndex::full_check) && flow_matches(rules[i], key);
}

}  // namespace

// The first rule in [from, end) that matches: per block, the words whose summary bit every
// field's row has, then their rules in order, each confirmed.
std::uint32_t FlowClassifier::next_match(const FlowKey& key, Cursor& c, std::uint32_t from,
                                         std::uint32_t end) const noexcept {
  if (index_.blocks.empty()) {
    for (; from < end; ++from)
      if (flow_matches(rules_[from], key)) return from;
    return end;
  }
  const bool six = index_.dim_count == 6;
  while (from < end) {
    const std::uint32_t b = from / FlowIndex::block_rules;
    if (c.block != b) load_rows(key, b, c);
    const FlowIndex::Block& blk = index_.blocks[b];
    const std::uint32_t lo = from - blk.begin, hi = std::min(end, blk.end) - blk.begin;
    std::uint64_t summary = (six ? and_word<6>(c.rows, 0) : and_word<5>(c.rows, 0)) & (~std::uint64_t{0} << (lo / 64));
    while (summary) {
      const auto w = static_cast<std::uint32_t>(__builtin_ctzll(summary));
      summary &= summary - 1;
      if (w * 64 >= hi) break;
      std::uint64_t bits = six ? and_word<6>(c.rows, 1 + w) : and_word<5>(c.rows, 1 + w);
      if (w == lo / 64) bits &= ~std::uint64_t{0} << (lo % 64);
      while (bits) {
        const std::uint32_t i = w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits));
        bits &= bits - 1;
        if (i >= hi) break;
        if (confirm(index_, rules_, blk.begin + i, key)) return blk.begin + i;
      }
    }
    from = blk.begin + hi;
  }
  return end;
}

std::uint16_t FlowClassifier::classify_key(const FlowKey& key, Mbuf& m, Cursor& c) const noexcept {
  const auto groups = static_cast<std::uint32_t>(group_begin_.size() - 1);
  bool matched = false;  // isolated ports receive what some rule matched
  std::uint32_t g = 0, i = group_begin_[0];
  while (g < groups) {
    const std::uint32_t j = next_match(key, c, i, group_begin_[g + 1]);
    if (j == group_begin_[g + 1]) break;
    const CompiledFlow& r = rules_[j];
    matched = true;
    const std::uint16_t to = apply(r, m);
    if (r.fate == CompiledFlow::Fate::passthru) {
      i = j + 1;
      continue;
    }
    if (r.fate != CompiledFlow::Fate::jump) return to;
    g = r.jump_group;  // always a higher group, so matching ends
    if (g >= groups) break;
    i = group_begin_[g];
  }
  return matched || !isolated_ ? flow_keep : flow_drop;
}

std::uint16_t FlowClassifier::classify_one(Mbuf& m) const noexcept {
  FlowKey key;
  flow_key_of(m, key);
  Cursor c;
  return classify_key(key, m, c);
}

// The common case (one group, one block, no passthru or jump): the first match is the rule,
// and the walk is the summary word, then the words it names. In stages over a few packets at a
// time (every header read, then every lookup, then the matches) so that the loads of different
// packets overlap instead of waiting on each other.
template <unsigned Dims>
void FlowClassifier::classify_simple(Mbuf* const* pkts, std::uint16_t n, std::uint16_t* verdict) const noexcept {
  constexpr std::uint16_t stage = 16;
  // Bytes, not FlowKeys: their zeroing would be a second one (flow_key_of clears each key), and
  // an array of bytes provides the keys' storage (its lifetime implicitly creates them).
  alignas(FlowKey) std::byte key_bytes[sizeof(FlowKey) * stage];
  FlowKey* keys = std::launder(reinterpret_cast<FlowKey*>(key_bytes));
  std::array<Cursor, stage> cursors;
  const std::uint16_t none = isolated_ ? flow_drop : flow_keep;
  const bool one_word = index_.blocks[0].stride == 2;
  for (std::uint16_t at = 0; at < n; at += stage) {
    const auto k = static_cast<std::uint16_t>(std::min<int>(stage, n - at));
    for (std::uint16_t i = 0; i < k; ++i) flow_key_of(*pkts[at + i], keys[i]);
    for (std::uint16_t i = 0; i < k; ++i) load_rows(keys[i], 0, cursors[i]);
    for (std::uint16_t i = 0; i < k; ++i) {
      std::uint16_t v = none;
      // One word of rules: its summary bit says no more than the word itself.
      std::uint64_t summary = one_word ? 1 : and_word<Dims>(cursors[i].rows, 0);
      for (; summary; summary &= summary - 1) {
        const auto w = static_cast<std::uint32_t>(__builtin_ctzll(summary));
        std::uint64_t bits = and_word<Dims>(cursors[i].rows, 1 + w);
        for (; bits; bits &= bits - 1) {
          const std::uint32_t r = w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits));
          if (confirm(index_, rules_, r, keys[i])) break;
        }
        if (bits) {
          v = apply(rules_[w * 64 + static_cast<std::uint32_t>(__builtin_ctzll(bits))], *pkts[at + i]);
          break;
        }
      }
      verdict[at + i] = v;
    }
  }
}

void FlowClassifier::classify(Mbuf* const* pkts, std::uint16_t n, std::uint16_t* verdict) const noexcept {
  if (simple_) {
    if (index_.dim_count == 6)
      classify_simple<6>(pkts, n, verdict);
    else
      classify_simple<5>(pkts, n, verdict);
    return;
  }
  for (std::uint16_t i = 0; i < n; ++i) verdict[i] = classify_one(*pkts[i]);
}

}  // namespace ws
