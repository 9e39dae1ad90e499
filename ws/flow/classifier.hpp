// SPDX-License-Identifier: BSD-3-Clause
// The software matcher of a port's flow rules: compiled once per rule change on the control
// path, run once per RX burst on the data path. Each packet's headers are read into a FlowKey
// (64 bytes, the layout of fields.hpp); each rule is then eight masked 64-bit compares, a
// layer check and, for items with `last`, a range check. Rules are tried in DPDK's order:
// group 0 first, lower priority values first, older rules first; jump goes on in another group,
// passthru goes on with the next rule of the same group.
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

 private:
  bool matches(const CompiledFlow& r, const FlowKey& k) const noexcept;
  std::uint16_t apply(const CompiledFlow& r, Mbuf& m) const noexcept;

  std::vector<CompiledFlow> rules_;         // by group, then priority, then age
  std::vector<std::uint32_t> group_begin_;  // [g]: first rule of group index g; one past the end last
  bool isolated_ = false;
  Toeplitz key_;
  Counter* dropped_;
};

/// Compiles one rule (for validation too): the first item or action it cannot do, as FlowError.
FlowResult<CompiledFlow> compile_flow(const FlowRule& rule, std::uint16_t rx_queues);

}  // namespace ws
