// SPDX-License-Identifier: BSD-3-Clause
// A port's flow rules (DPDK's rte_flow_validate/create/destroy/flush/query/isolate): Port::flows().
// Every change compiles the rules into a FlowClassifier that the port runs in software on its
// RX path (ws/port/software_rss.cpp), so every device can have them; a port with no rules and
// not isolated has no classifier and its RX burst entries stay the driver's own.
//
// Kernel offload: before compiling, the table offers the driver (Port::do_flow_offload) the
// rules of group 0 in matching order and keeps in the classifier only those the kernel did not
// take. Only a prefix of the order is ever offloaded, so no software rule of higher priority is
// skipped by the kernel acting first; a queue rule is offloaded only when no later rule of group
// 0 can match its packets, the port is not isolated and no software hash would move them again,
// since software still sees what the kernel queued. Entry::place says where each rule runs.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
    std::uint32_t id = 0;                   ///< Its id.
    FlowRule rule;                          ///< As created.
    FlowCounters counters;                  ///< COUNT's counters.
    FlowPlace place = FlowPlace::software;  ///< Where it runs.
    std::optional<FlowOffload> offload;     ///< The driver's handle while offloaded.
    FlowCounts kernel_base;                 ///< Kernel counts of earlier offloads of the rule.
    bool kernel_refused = false;            ///< The kernel refused it: not offered again.
  };
  /// Every rule, by increasing id.
  std::vector<const Entry*> list() const;
  /// The compiled rules, or nullptr when the port has none and is not isolated.
  const FlowClassifier* classifier() const { return classifier_.get(); }
  /// Compiles the rules again, for the port's current RX queues (Port::configure calls it): a
  /// rule naming a queue the port no longer has stays listed but matches nothing.
  FlowResult<void> recompile();
  /// Takes every offloaded rule back into software (Port::configure, before the driver
  /// replaces its kernel program); kernel counts are kept.
  void unoffload_all();
  /// Packets the rules dropped (on the port's RX lcore).
  Counter& dropped() { return dropped_; }
  const Counter& dropped() const { return dropped_; }  ///< As dropped().

 private:
  Port& port_;
  std::map<std::uint32_t, std::unique_ptr<Entry>> rules_;
  FlowResult<void> install_classifier(bool all);  // software rules (all: every rule) in place
  void sync_offloads();                           // offers the prefix of group 0 to the driver
  std::vector<Entry*> offload_order() const;      // group 0, in matching order
  bool offloadable(const std::vector<Entry*>& order, std::size_t i) const;
  void unoffload_last();

  std::unique_ptr<FlowClassifier> classifier_;
  std::vector<Entry*> offloaded_;  // slot order
  bool isolated_ = false;
  Counter dropped_;
};

}  // namespace ws
