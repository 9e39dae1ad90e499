// SPDX-License-Identifier: BSD-3-Clause
// Building a classifier's FlowIndex (classifier.hpp) on the control path: per field, each rule
// becomes an interval of the values it lets through, a sweep over the interval ends gives every
// elementary interval's bitset of rules, and equal bitsets share one row.
#include <algorithm>
#include <bit>
#include <cstring>
#include <span>
#include <unordered_map>

#include "ws/flow/classifier.hpp"
#include "ws/flow/fields.hpp"

namespace ws {
namespace {

namespace fk = flow_key;

// The fields the index cuts on, in the order the data path reads them (classifier.cpp): the
// 5-tuple, and the top of an IPv6 destination (an IPv6 source's top shares the bytes of an
// IPv4 source).
constexpr std::array<FlowIndex::Dim, FlowIndex::max_dims> candidate_dims{{
    {fk::ip_proto, 1},
    {fk::ipv4_src, 4},
    {fk::ipv4_dst, 4},
    {fk::l4_src, 2},
    {fk::l4_dst, 2},
    {fk::ipv6_dst, 4},
}};

// Up to this many rules a scan costs less than the index's lookups (bench/flow_classifier).
constexpr std::size_t scan_max_rules = 4;

// The values of one field a rule lets through: [lo, hi], none when lo > hi.
struct Interval {
  std::uint64_t lo = 0, hi = 0;
};

std::uint64_t read_be(const std::uint8_t* p, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v = (v << 8) | p[i];
  return v;
}

std::uint64_t max_of(unsigned width) { return (std::uint64_t{1} << (8 * width)) - 1; }

// The leading ones of mask m: the part of it an interval expresses (a mask with holes below
// keeps only its prefix, which lets through a superset).
std::uint64_t prefix_part(std::uint64_t m, std::uint64_t max) {
  const std::uint64_t holes = ~m & max;
  if (holes == 0) return max;
  const int top = 63 - std::countl_zero(holes);
  return max & ~((std::uint64_t{2} << top) - 1);
}

// The protocol an L4 layer implies: a rule on UDP needs protocol 17 as much as one that says so.
int implied_proto(std::uint32_t layers) {
  if (layers & fk::layer_tcp) return 6;
  if (layers & fk::layer_udp) return 17;
  if (layers & fk::layer_icmp) return 1;
  return -1;
}

Interval interval_of(const CompiledFlow& r, FlowIndex::Dim d) {
  const std::uint64_t max = max_of(d.width);
  Interval iv{0, max};
  const auto overlaps = [d](const CompiledFlow::Range& rg) {
    return rg.offset < d.offset + d.width && d.offset < rg.offset + rg.width;
  };
  const auto rg = std::ranges::find_if(r.ranges, overlaps);
  if (rg != r.ranges.end()) {
    if (rg->offset == d.offset && rg->width == d.width) {  // else: a wider field, let all through
      const std::uint64_t p = prefix_part(read_be(rg->mask.data(), d.width), max);
      iv = {read_be(rg->lo.data(), d.width) & p, (read_be(rg->hi.data(), d.width) & p) | (~p & max)};
    }
  } else {
    const auto* m = reinterpret_cast<const std::uint8_t*>(r.mask.data()) + d.offset;
    const auto* v = reinterpret_cast<const std::uint8_t*>(r.value.data()) + d.offset;
    const std::uint64_t p = prefix_part(read_be(m, d.width), max);
    iv = {read_be(v, d.width) & p, (read_be(v, d.width) & p) | (~p & max)};
  }
  const int proto = implied_proto(r.layers);
  if (d.offset == fk::ip_proto && proto >= 0) {
    const auto p = static_cast<std::uint64_t>(proto);
    iv = iv.lo <= p && p <= iv.hi ? Interval{p, p} : Interval{1, 0};
  }
  return iv;
}

// Rows of one table, equal ones shared.
class RowSet {
 public:
  RowSet(std::uint32_t words, std::vector<std::uint64_t>& rows) : words_(words), rows_(rows) {}
  // The offset of the row with these bits, appended if new.
  std::uint32_t intern(std::span<const std::uint64_t> bits) {
    std::uint64_t h = 0x9e3779b97f4a7c15;
    for (std::uint64_t w : bits) h = (h ^ w) * 0x100000001b3;
    const auto [first, last] = seen_.equal_range(h);
    for (auto it = first; it != last; ++it)
      if (std::equal(bits.begin(), bits.end(), rows_.begin() + it->second + 1)) return it->second;
    const auto at = static_cast<std::uint32_t>(rows_.size());
    std::uint64_t summary = 0;
    for (std::uint32_t w = 0; w < words_; ++w) summary |= std::uint64_t{bits[w] != 0} << w;
    rows_.push_back(summary);
    rows_.insert(rows_.end(), bits.begin(), bits.end());
    seen_.emplace(h, at);
    return at;
  }

 private:
  std::uint32_t words_;
  std::vector<std::uint64_t>& rows_;
  std::unordered_multimap<std::uint64_t, std::uint32_t> seen_;
};

// The trie over a dim's intervals (ascending starts `bounds`, each interval's row `row_of`):
// a root of 2^root_bits entries, then nodes of 256 after it.
class TrieBuilder {
 public:
  TrieBuilder(const std::vector<std::uint64_t>& bounds, const std::vector<std::uint16_t>& row_of, std::uint64_t max,
              std::vector<std::uint16_t>& nodes)
      : bounds_(bounds), row_of_(row_of), max_(max), nodes_(nodes) {}

  void root(unsigned root_bits) {
    const std::uint64_t entries = std::uint64_t{1} << root_bits;
    root_entries_ = entries;
    fill(0, entries, (max_ + 1) / entries);
  }

 private:
  // `entries` entries at the end of nodes_ over values [lo, lo + entries * span).
  void fill(std::uint64_t lo, std::uint64_t entries, std::uint64_t span) {
    const std::size_t at = nodes_.size();
    nodes_.resize(at + entries);
    for (std::uint64_t k = 0; k < entries; ++k) {
      const std::uint16_t e = entry(lo + k * span, span);  // may grow nodes_: store after
      nodes_[at + k] = e;
    }
  }
  // Values [lo, lo + span): a row when one interval covers them all, else a node.
  std::uint16_t entry(std::uint64_t lo, std::uint64_t span) {
    // Entries come in ascending order of lo (the trie is filled depth first): the interval
    // holding lo is at or after the last one's.
    while (i_ + 1 < bounds_.size() && bounds_[i_ + 1] <= lo) ++i_;
    const std::uint64_t next = i_ + 1 < bounds_.size() ? bounds_[i_ + 1] : max_ + 1;
    if (next >= lo + span) return row_of_[i_];
    const auto node = static_cast<std::uint16_t>((nodes_.size() - root_entries_) / 256);
    fill(lo, 256, span / 256);
    return static_cast<std::uint16_t>(FlowIndex::child | node);
  }

  const std::vector<std::uint64_t>& bounds_;
  const std::vector<std::uint16_t>& row_of_;
  std::uint64_t max_;
  std::vector<std::uint16_t>& nodes_;
  std::uint64_t root_entries_ = 0;
  std::size_t i_ = 0;  // the interval holding the last entry's lo
};

// One dim's table over the block's rules, whose intervals are `ivs` (one per rule): a sweep
// over the interval ends gives each elementary interval's bitset.
FlowIndex::Table build_table(std::span<const Interval> ivs, std::uint64_t max, std::uint32_t stride) {
  struct Event {
    std::uint64_t at;
    std::uint32_t rule;
    bool enters;
  };
  std::vector<Event> events;
  for (std::uint32_t i = 0; i < ivs.size(); ++i) {
    if (ivs[i].lo > ivs[i].hi) continue;  // the rule never matches this field
    events.push_back({ivs[i].lo, i, true});
    if (ivs[i].hi < max) events.push_back({ivs[i].hi + 1, i, false});
  }
  std::ranges::sort(events, {}, &Event::at);
  std::vector<std::uint64_t> bits(stride - 1), bounds;
  std::vector<std::uint16_t> row_of;
  FlowIndex::Table t;
  RowSet rows(stride - 1, t.rows);
  for (std::size_t e = 0, at = 0;;) {
    for (; e < events.size() && events[e].at == at; ++e) {
      const std::uint64_t bit = std::uint64_t{1} << (events[e].rule % 64);
      if (events[e].enters)
        bits[events[e].rule / 64] |= bit;
      else
        bits[events[e].rule / 64] &= ~bit;
    }
    const auto row = static_cast<std::uint16_t>(rows.intern(bits) / stride);
    if (row_of.empty() || row_of.back() != row) {
      bounds.push_back(at);
      row_of.push_back(row);
    }
    if (e == events.size()) break;
    at = events[e].at;
  }
  // A byte is one table; a port one 16-bit table; an address a 16-bit root and two levels of
  // 256: at most three loads, the same for every value, so none depends on a branch.
  const auto width_bits = static_cast<unsigned>(std::bit_width(max));
  t.root_bits = width_bits > 8 ? 16 : 8;
  t.levels = static_cast<std::uint8_t>((width_bits - t.root_bits) / 8);
  TrieBuilder(bounds, row_of, max, t.nodes).root(t.root_bits);
  t.nodes.shrink_to_fit();
  t.rows.shrink_to_fit();
  return t;
}

// Whether the dims say all of `r` but its layers: every masked byte in a dim under a prefix
// mask, every range exactly a dim's field under a prefix mask.
bool exact_in(const CompiledFlow& r, std::span<const FlowIndex::Dim> dims) {
  std::array<bool, flow_key_bytes> covered{};
  for (const FlowIndex::Dim d : dims) {
    const std::uint64_t max = max_of(d.width);
    const auto* m = reinterpret_cast<const std::uint8_t*>(r.mask.data()) + d.offset;
    if (prefix_part(read_be(m, d.width), max) != read_be(m, d.width)) return false;
    for (unsigned i = 0; i < d.width; ++i) covered[d.offset + i] = true;
  }
  for (const CompiledFlow::Range& rg : r.ranges) {
    const auto same = [&](const FlowIndex::Dim d) { return d.offset == rg.offset && d.width == rg.width; };
    const std::uint64_t m = read_be(rg.mask.data(), rg.width);
    if (std::ranges::none_of(dims, same) || prefix_part(m, max_of(rg.width)) != m) return false;
  }
  const auto* m = reinterpret_cast<const std::uint8_t*>(r.mask.data());
  for (std::size_t o = 0; o < flow_key_bytes; ++o)
    if (m[o] != 0 && !covered[o]) return false;
  return true;
}

}  // namespace

FlowIndex build_flow_index(const std::vector<CompiledFlow>& rules) {
  FlowIndex x;
  const std::size_t n = rules.size();
  if (n <= scan_max_rules) return x;
  std::vector<std::vector<Interval>> ivs;  // [dim][rule]
  bool narrows = false, v6_narrows = false;
  for (const FlowIndex::Dim d : candidate_dims) {
    std::vector<Interval>& v = ivs.emplace_back(n);
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = interval_of(rules[i], d);
      (d.offset == fk::ipv6_dst ? v6_narrows : narrows) |= v[i].lo != 0 || v[i].hi != max_of(d.width);
    }
  }
  // The 5-tuple dims are always there, so that the data path's lookups are straight-line code
  // (a dim no rule narrows costs a load of its one row); the IPv6 one only when it narrows.
  if (!narrows && !v6_narrows) return x;  // the index would let every rule through
  x.dims = candidate_dims;
  x.dim_count = v6_narrows ? 6 : 5;
  const std::span dims(x.dims.data(), x.dim_count);
  for (const CompiledFlow& r : rules) x.check.push_back(r.layers | (exact_in(r, dims) ? 0 : FlowIndex::full_check));
  for (std::size_t begin = 0; begin < n; begin += FlowIndex::block_rules) {
    FlowIndex::Block& b = x.blocks.emplace_back();
    b.begin = static_cast<std::uint32_t>(begin);
    b.end = static_cast<std::uint32_t>(std::min<std::size_t>(n, begin + FlowIndex::block_rules));
    b.stride = 1 + (b.end - b.begin + 63) / 64;
    for (std::uint32_t d = 0; d < x.dim_count; ++d)
      b.tables[d] = build_table(std::span(ivs[d]).subspan(b.begin, b.end - b.begin), max_of(x.dims[d].width), b.stride);
  }
  return x;
}

std::size_t flow_index_bytes(const FlowIndex& index) noexcept {
  std::size_t bytes = sizeof index + index.blocks.capacity() * sizeof(FlowIndex::Block);
  for (const FlowIndex::Block& b : index.blocks)
    for (const FlowIndex::Table& t : b.tables) bytes += t.nodes.capacity() * 2 + t.rows.capacity() * 8;
  return bytes + index.check.capacity() * 4;
}

}  // namespace ws
