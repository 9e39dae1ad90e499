// SPDX-License-Identifier: BSD-3-Clause
// A port's flow rules: bookkeeping, ids, offering a prefix of group 0 to the driver's kernel
// offload, and recompiling the classifier of the rest after every change.
#include "ws/flow/flow_table.hpp"

#include <algorithm>
#include <cerrno>

#include "ws/core/log.hpp"
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
    auto failed = std::move(rules_[id]);  // alive while the kernel may still hold it
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
  // What software counted, what earlier offloads counted and what the kernel counts now.
  FlowCounts c{e.counters.hits.read() + e.kernel_base.hits, e.counters.bytes.read() + e.kernel_base.bytes};
  if (e.offload) {
    const FlowCounts k = port_.do_flow_offload_counts(*e.offload);
    c.hits += k.hits;
    c.bytes += k.bytes;
  }
  return c;
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
  sync_offloads();
  return install_classifier(false);
}

FlowResult<void> FlowTable::install_classifier(bool all) {
  std::unique_ptr<FlowClassifier> next;
  std::vector<std::pair<const FlowRule*, FlowCounters*>> rules;
  for (auto& [id, e] : rules_)
    if (all || !e->offload) rules.emplace_back(&e->rule, &e->counters);
  if (!rules.empty() || isolated_)
    next = std::make_unique<FlowClassifier>(std::move(rules), isolated_, port_.config().rx_queues, &dropped_);
  // The port switches to the new classifier (or none) before the old one is freed.
  std::swap(classifier_, next);
  if (auto ok = port_.apply_flows(); !ok)
    return std::unexpected(FlowError{FlowErrorType::state, -1, ok.error().message, ENOMEM});
  return {};
}

namespace {

// The one fate the kernel programs can take (drop or queue, COUNT beside it), or none.
std::optional<FlowActionType> kernel_fate(const FlowRule& rule) {
  std::optional<FlowActionType> fate;
  for (const FlowAction& a : rule.actions) {
    if (a.type == FlowActionType::count) continue;
    if ((a.type != FlowActionType::drop && a.type != FlowActionType::queue) || fate) return std::nullopt;
    fate = a.type;
  }
  return fate;
}

}  // namespace

std::vector<FlowTable::Entry*> FlowTable::offload_order() const {
  std::vector<Entry*> order;
  for (const auto& [id, e] : rules_)
    if (e->rule.attr.group == 0) order.push_back(e.get());
  // Older rules first within a priority: ids grow with age.
  std::ranges::sort(order, {}, [](const Entry* e) { return std::pair(e->rule.attr.priority, e->id); });
  return order;
}

// Whether order[i] may run in the kernel when order[0..i) do. A dropped packet is gone in
// software too; a queued one is seen by software again on its queue, so nothing there may
// match it or move it.
bool FlowTable::offloadable(const std::vector<Entry*>& order, std::size_t i) const {
  const Entry& e = *order[i];
  const auto fate = kernel_fate(e.rule);
  const auto match = flow_exact_match(e.rule);
  if (e.kernel_refused || !fate || !match) return false;
  if (*fate == FlowActionType::drop) return true;
  const PortConfig& c = port_.config();
  const auto queue = std::ranges::find(e.rule.actions, FlowActionType::queue, &FlowAction::type)->queue;
  if (isolated_ || queue >= c.rx_queues || (c.rss.types != 0 && port_.info().rss_types_capa == 0)) return false;
  for (std::size_t j = i + 1; j < order.size(); ++j) {
    const auto later = flow_exact_match(order[j]->rule);
    if (!later || !flow_matches_disjoint(*match, *later)) return false;
  }
  return true;
}

void FlowTable::sync_offloads() {
  const auto order = offload_order();
  std::size_t keep = 0;
  while (keep < offloaded_.size() && keep < order.size() && offloaded_[keep] == order[keep] && offloadable(order, keep))
    ++keep;
  if (keep < offloaded_.size()) {
    (void)install_classifier(true);  // what leaves the kernel is matched in software meanwhile
    while (offloaded_.size() > keep) unoffload_last();
  }
  for (std::size_t i = keep; i < order.size() && offloadable(order, i); ++i) {
    Entry& e = *order[i];
    auto taken = port_.do_flow_offload(e.rule, static_cast<std::uint32_t>(i));
    if (!taken) {
      if (taken.error().kernel_refused) {
        e.kernel_refused = true;
        log(LogLevel::warning, "port {} ({}): flow rule #{} stays in software: {}", port_.id(), port_.name(), e.id,
            taken.error().message);
      }
      break;
    }
    e.offload = *taken;
    e.place = taken->place;
    offloaded_.push_back(&e);
  }
}

void FlowTable::unoffload_last() {
  Entry& e = *offloaded_.back();
  const FlowCounts k = port_.do_flow_offload_counts(*e.offload);
  e.kernel_base.hits += k.hits;
  e.kernel_base.bytes += k.bytes;
  port_.do_flow_unoffload(*e.offload);
  e.offload.reset();
  e.place = FlowPlace::software;
  offloaded_.pop_back();
}

void FlowTable::unoffload_all() {
  if (!offloaded_.empty()) (void)install_classifier(true);
  while (!offloaded_.empty()) unoffload_last();
  for (auto& [id, e] : rules_) e->kernel_refused = false;  // the driver's next program may take them
}

}  // namespace ws
