// SPDX-License-Identifier: BSD-3-Clause
// A port's flow rules (DPDK's rte_flow_validate/create/destroy/flush/query/isolate): Port::flows().
// Every change compiles the rules into a FlowClassifier that the port runs in software on its
// RX path (ws/port/software_rss.cpp), so every device can have them; a port with no rules and
// not isolated has no classifier and its RX burst entries stay the driver's own.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "ws/flow/classifier.hpp"
#include "ws/flow/flow.hpp"

namespace ws {

class Port;

class FlowTable {
 public:
  /// The rules of `port`.
  explicit FlowTable(Port& port);
  ~FlowTable();

  /// Whether `rule` could be created now (rte_flow_validate).
  FlowResult<void> validate(const FlowRule& rule) const;
  /// Adds `rule`; returns its id: one more than the newest rule's, 0 for the first
  /// (dpdk-testpmd's numbering).
  FlowResult<std::uint32_t> create(const FlowRule& rule);
  /// Removes rule `id`; false when there is none.
  FlowResult<bool> destroy(std::uint32_t id);
  /// Removes every rule.
  FlowResult<void> flush();
  /// Rule `id`'s COUNT counters. Errors: no such rule (handle), no COUNT action (action).
  FlowResult<FlowCounts> query_count(std::uint32_t id) const;
  /// Isolated mode on or off: only what rules match is received (rte_flow_isolate).
  FlowResult<void> isolate(bool on);
  bool isolated() const { return isolated_; }  ///< As last set.

  /// A rule and its counters.
  struct Entry {
    std::uint32_t id = 0;   ///< Its id.
    FlowRule rule;          ///< As created.
    FlowCounters counters;  ///< COUNT's counters.
  };
  /// Every rule, by increasing id.
  std::vector<const Entry*> list() const;
  /// The compiled rules, or nullptr when the port has none and is not isolated.
  const FlowClassifier* classifier() const { return classifier_.get(); }
  /// Compiles the rules again, for the port's current RX queues (Port::configure calls it): a
  /// rule naming a queue the port no longer has stays listed but matches nothing.
  FlowResult<void> recompile();
  /// Packets the rules dropped (on the port's RX lcore).
  Counter& dropped() { return dropped_; }
  const Counter& dropped() const { return dropped_; }  ///< As dropped().

 private:
  Port& port_;
  std::map<std::uint32_t, std::unique_ptr<Entry>> rules_;
  std::unique_ptr<FlowClassifier> classifier_;
  bool isolated_ = false;
  Counter dropped_;
};

}  // namespace ws
