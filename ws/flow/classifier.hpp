// SPDX-License-Identifier: BSD-3-Clause
// The software matcher of a port's flow rules: compiled once per rule change on the control
// path, run once per RX burst on the data path. Each packet's headers are read into a FlowKey
// (64 bytes, the layout of fields.hpp); a rule matches when eight masked 64-bit compares, a
// layer check and, for items with `last`, a range check say so. Rules are tried in DPDK's order:
// group 0 first, lower priority values first, older rules first; jump goes on in another group,
// passthru goes on with the next rule of the same group. Beyond a few rules, a FlowIndex
// (flow_index.cpp) finds the candidates instead of a scan: per field (protocol, IPv4 addresses,
// the top of an IPv6 destination, L4 ports) a trie maps the packet's value to the bitset of the
// rules that field lets match, and the first rule set in every field's bitset that the check
// accepts is the one the scan would have found.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/flow/flow.hpp"
#include "ws/net/rss.hpp"
#include "ws/port/stats.hpp"

namespace ws {

/// A packet's header fields in FlowKey layout and the layers it has.
struct FlowKey {
  std::array<std::uint64_t, flow_key_bytes / 8> words{};  ///< The fields (network byte order bytes).
  std::uint32_t layers = 0;                               ///< flow_key::layer_* bits.
};

/// Reads the headers of `m`'s first segment (Ethernet, one VLAN tag, IPv4/IPv6, UDP/TCP/ICMP).
void flow_key_of(const Mbuf& m, FlowKey& key) noexcept;

/// What a rule's COUNT action adds to (owned by the FlowTable, so counts survive recompiles).
struct FlowCounters {
  Counter hits;   ///< Packets.
  Counter bytes;  ///< Bytes.
};

/// A compiled rule.
struct CompiledFlow {
  enum class Fate : std::uint8_t { none, drop, queue, rss, passthru, jump };
  std::array<std::uint64_t, flow_key_bytes / 8> mask{};   // bits that matter
  std::array<std::uint64_t, flow_key_bytes / 8> value{};  // spec & mask
  std::uint32_t layers = 0;                               // layers the pattern needs
  struct Range {
    std::uint8_t offset, width;
    std::array<std::uint8_t, 16> mask, lo, hi;
  };
  std::vector<Range> ranges;  // fields matched between spec and last
  Fate fate = Fate::none;
  bool mark = false;
  std::uint32_t mark_id = 0;
  std::uint16_t queue = 0;
  std::uint32_t jump_group = 0;           // index into FlowClassifier's groups
  std::vector<std::uint16_t> rss_queues;  // rss
  std::uint32_t rss_types = 0;            // rss
  FlowCounters* counters = nullptr;       // count
};

/// The verdict for a burst: per packet, the RX queue it goes to (`keep` = where it came from)
/// or `drop`.
inline constexpr std::uint16_t flow_keep = 0xffff;
inline constexpr std::uint16_t flow_drop = 0xfffe;

/// The multi-field index over a classifier's rules (a bit-vector scheme with aggregated
/// bitsets): built on the control path, read on the data path. Rules sit in blocks of up to
/// block_rules, in the classifier's order; per block and per field ("dim"), the values a field
/// can take are cut into intervals at the ends of the rules' prefixes, masks and ranges, each
/// naming a row: a summary word (bit w: word w has a rule) and one bit per rule of the block
/// that the field does not rule out. A value finds its row through a trie: a root indexed by its
/// top 8 (a byte) or 16 bits, then for addresses two levels of 256-entry nodes, one byte each. A
/// row is a superset: the full check decides for rules the dims do not say exactly (masks with
/// holes, other fields, other items); for the others the layer check is all that is left.
/// Memory per block of B rules and per dim: at most 2B + 1 rows of 1 + B / 64 words, a 128 KiB
/// root and, for an address, two 512-byte nodes per interval end: linear in the rule count.
struct FlowIndex {
  static constexpr std::size_t max_dims = 6;
  static constexpr std::uint32_t block_rules = 4096;  // 64 words: one summary word
  static constexpr std::uint16_t child = 0x8000;      // a trie entry naming a node, not a row
  // Row ids (at most 2 * block_rules + 1) and node numbers (at most 2 per interval end, fewer
  // than 3 per row) fit an entry's 15 bits.
  static_assert(3 * (2 * block_rules + 1) < child);
  static constexpr std::uint32_t full_check = 0x80000000;  // in check[]: flow_matches decides
  struct Dim {
    std::uint8_t offset = 0;  // FlowKey byte offset
    std::uint8_t width = 0;   // 1, 2 or 4 bytes, read big-endian
  };
  struct Table {
    std::uint8_t root_bits = 8;        // the root has 2^root_bits entries
    std::uint8_t levels = 0;           // 256-entry levels below it
    std::vector<std::uint16_t> nodes;  // the root, then nodes of 256: entries are a row id, or child | node
    std::vector<std::uint64_t> rows;   // per row id: summary word, then the block's words
  };
  struct Block {
    std::uint32_t begin = 0, end = 0;  // rules [begin, end) of the classifier
    std::uint32_t stride = 0;          // words per row: 1 + (end - begin + 63) / 64
    std::array<Table, max_dims> tables;
  };
  std::array<Dim, max_dims> dims{};  // protocol, IPv4 source, destination, L4 ports, IPv6 destination
  std::uint32_t dim_count = 0;       // 5, or 6 when a rule narrows the IPv6 destination
  std::vector<Block> blocks;         // empty: the classifier scans its rules
  std::vector<std::uint32_t> check;  // per rule: the layers it needs, | full_check
};

/// Builds the index over `rules` (in the classifier's order); empty when a scan is as fast.
FlowIndex build_flow_index(const std::vector<CompiledFlow>& rules);
/// The bytes the index takes (tables and rows), for benchmarks and tests.
std::size_t flow_index_bytes(const FlowIndex& index) noexcept;

class FlowClassifier {
 public:
  /// Rules in the order they were created; `isolated`: packets no rule sends anywhere are
  /// dropped. `rx_queues`: the port's (rss actions without queues spread over all). `dropped`
  /// counts what the RX path drops for the rules (the FlowTable's, so it outlives recompiles).
  FlowClassifier(std::vector<std::pair<const FlowRule*, FlowCounters*>> rules, bool isolated, std::uint16_t rx_queues,
                 Counter* dropped);

  /// For each of the n packets, its queue (flow_keep, or a queue) or flow_drop in verdict[i];
  /// marks and counts as the rules say. One call per burst; no allocation.
  void classify(Mbuf* const* pkts, std::uint16_t n, std::uint16_t* verdict) const noexcept;
  /// One packet's verdict (the matcher's unit, for tests and benchmarks).
  std::uint16_t classify_one(Mbuf& m) const noexcept;
  /// Counts n packets dropped for the rules (the RX lcore, after freeing them).
  void add_dropped(std::uint16_t n) const noexcept { dropped_->add(n); }
  /// The multi-field index (empty when the rules are scanned), for tests and benchmarks.
  const FlowIndex& index() const noexcept { return index_; }

 private:
  struct Cursor;
  void load_rows(const FlowKey& key, std::uint32_t block, Cursor& c) const noexcept;
  template <unsigned Dims>
  void classify_simple(Mbuf* const* pkts, std::uint16_t n, std::uint16_t* verdict) const noexcept;
  std::uint16_t classify_key(const FlowKey& key, Mbuf& m, Cursor& c) const noexcept;
  std::uint32_t next_match(const FlowKey& key, Cursor& c, std::uint32_t from, std::uint32_t end) const noexcept;
  std::uint16_t apply(const CompiledFlow& r, Mbuf& m) const noexcept;

  std::vector<CompiledFlow> rules_;         // by group, then priority, then age
  std::vector<std::uint32_t> group_begin_;  // [g]: first rule of group index g; one past the end last
  FlowIndex index_;
  bool simple_ = false;  // one group, one block, no passthru or jump: classify_simple
  bool isolated_ = false;
  Toeplitz key_;
  Counter* dropped_;
};

/// Compiles one rule (for validation too): the first item or action it cannot do, as FlowError.
FlowResult<CompiledFlow> compile_flow(const FlowRule& rule, std::uint16_t rx_queues);
/// Whether compiled rule `r` matches `k`: the full check, which every path ends in.
bool flow_matches(const CompiledFlow& r, const FlowKey& k) noexcept;

}  // namespace ws
