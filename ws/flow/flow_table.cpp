// SPDX-License-Identifier: BSD-3-Clause
// A port's flow rules: bookkeeping, ids, and recompiling the classifier after every change.
#include "ws/flow/flow_table.hpp"

#include <algorithm>
#include <cerrno>

#include "ws/port/port.hpp"

namespace ws {

FlowTable::FlowTable(Port& port) : port_(port) {}
FlowTable::~FlowTable() = default;

FlowResult<void> FlowTable::validate(const FlowRule& rule) const {
  auto compiled = compile_flow(rule, port_.config().rx_queues);
  if (!compiled) return std::unexpected(compiled.error());
  return {};
}

FlowResult<std::uint32_t> FlowTable::create(const FlowRule& rule) {
  if (auto ok = validate(rule); !ok) return std::unexpected(ok.error());
  const std::uint32_t id = rules_.empty() ? 0 : rules_.rbegin()->first + 1;
  auto entry = std::make_unique<Entry>();
  entry->id = id;
  entry->rule = rule;
  rules_.emplace(id, std::move(entry));
  if (auto ok = recompile(); !ok) {
    rules_.erase(id);
    (void)recompile();  // back to the rules that worked
    return std::unexpected(ok.error());
  }
  return id;
}

FlowResult<bool> FlowTable::destroy(std::uint32_t id) {
  auto it = rules_.find(id);
  if (it == rules_.end()) return false;
  // The classifier points at the rule and its counters: replace it before freeing them.
  auto gone = std::move(it->second);
  rules_.erase(it);
  if (auto ok = recompile(); !ok) return std::unexpected(ok.error());
  return true;
}

FlowResult<void> FlowTable::flush() {
  auto gone = std::move(rules_);
  rules_.clear();
  return recompile();
}

FlowResult<FlowCounts> FlowTable::query_count(std::uint32_t id) const {
  auto it = rules_.find(id);
  if (it == rules_.end()) return std::unexpected(FlowError{FlowErrorType::handle, -1, "no such flow rule", ENOENT});
  const Entry& e = *it->second;
  if (std::ranges::none_of(e.rule.actions, [](const FlowAction& a) { return a.type == FlowActionType::count; }))
    return std::unexpected(FlowError{FlowErrorType::action, -1, "the rule has no COUNT action", ENOTSUP});
  return FlowCounts{e.counters.hits.read(), e.counters.bytes.read()};
}

FlowResult<void> FlowTable::isolate(bool on) {
  isolated_ = on;
  return recompile();
}

std::vector<const FlowTable::Entry*> FlowTable::list() const {
  std::vector<const Entry*> out;
  for (const auto& [id, e] : rules_) out.push_back(e.get());
  return out;
}

FlowResult<void> FlowTable::recompile() {
  std::unique_ptr<FlowClassifier> next;
  if (!rules_.empty() || isolated_) {
    std::vector<std::pair<const FlowRule*, FlowCounters*>> rules;
    for (auto& [id, e] : rules_) rules.emplace_back(&e->rule, &e->counters);
    next = std::make_unique<FlowClassifier>(std::move(rules), isolated_, port_.config().rx_queues, &dropped_);
  }
  // The port switches to the new classifier (or none) before the old one is freed.
  std::swap(classifier_, next);
  if (auto ok = port_.apply_flows(); !ok)
    return std::unexpected(FlowError{FlowErrorType::state, -1, ok.error().message, ENOMEM});
  return {};
}

}  // namespace ws
