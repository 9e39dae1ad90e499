// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands on flow rules, in dpdk-testpmd 22.11's syntax and with its output lines:
// flow validate|create <port> <rule>, flow destroy <port> rule <id>, flow flush|list <port>,
// flow query <port> <id> count, flow isolate <port> 0|1. Rules are matched in software by the
// port (ws/flow); changes to a port the lcores poll pause them for the swap.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "app/testpmd/prompt/command.hpp"
#include "ws/flow/flow_table.hpp"
#include "ws/flow/parse.hpp"

namespace ws::testpmd {
namespace {

std::string join(CommandArgs words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// dpdk-testpmd's port_flow_complain() line (on stderr, as there); the cause is the address of
// the item or action at fault in `rule`, as DPDK's is a pointer into the rule. The command has
// done its job: the refusal is its output, so the prompt adds no error line of its own.
Result<void> complain(const FlowError& e, const FlowRule* rule) {
  const void* cause = nullptr;
  if (rule && e.cause >= 0) {
    const bool item = e.type >= FlowErrorType::item_num && e.type <= FlowErrorType::item;
    const auto i = static_cast<std::size_t>(e.cause);
    if (item && i < rule->pattern.size()) cause = &rule->pattern[i];
    if (!item && i < rule->actions.size()) cause = &rule->actions[i];
  }
  char where[64] = "";
  if (cause) std::snprintf(where, sizeof where, "cause: %p, ", cause);
  std::fflush(stdout);
  std::fprintf(stderr, "port_flow_complain(): Caught PMD error type %d (%s): %s%s: %s\n", static_cast<int>(e.type),
               std::string(flow_error_type_name(e.type)).c_str(), where, e.message.c_str(), std::strerror(e.errnum));
  return {};
}

FlowTable& flows_of(Testpmd& tp, std::uint16_t port) { return tp.ports()[port]->flows(); }

// validate or create: the port and the rule's words.
Result<void> validate_or_create(Testpmd& tp, CommandArgs a, bool create) {
  auto port = parse_one_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  auto rule = parse_flow_rule(join(a.subspan(1)));
  if (!rule) {
    std::printf("Bad arguments: %s\n", rule.error().message.c_str());
    return {};
  }
  FlowTable& flows = flows_of(tp, *port);
  if (!create) {
    if (auto ok = flows.validate(*rule); !ok) return complain(ok.error(), &*rule);
    std::printf("Flow rule validated\n");
    return {};
  }
  FlowResult<std::uint32_t> id;
  tp.run_paused([&] { id = flows.create(*rule); });
  if (!id) return complain(id.error(), &*rule);
  std::printf("Flow rule #%u created\n", *id);
  return {};
}

Result<void> destroy(Testpmd& tp, CommandArgs a) {
  auto port = parse_one_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  auto id = parse_number("rule", a[2], 0, 0xffffffff);
  if (!id) return std::unexpected(id.error());
  FlowResult<bool> gone;
  tp.run_paused([&] { gone = flows_of(tp, *port).destroy(static_cast<std::uint32_t>(*id)); });
  if (!gone) return complain(gone.error(), nullptr);
  if (*gone) std::printf("Flow rule #%u destroyed\n", static_cast<unsigned>(*id));
  return {};  // as dpdk-testpmd, silent about rules that do not exist
}

// One `flow list` line: ID, group, priority, attributes, items => actions.
void print_rule(const FlowTable::Entry& e) {
  const FlowAttr& at = e.rule.attr;
  std::printf("%u\t%u\t%u\t%c%c%c\t", e.id, at.group, at.priority, at.ingress ? 'i' : '-', at.egress ? 'e' : '-',
              at.transfer ? 't' : '-');
  for (const FlowItem& item : e.rule.pattern) std::printf("%s ", std::string(flow_item_name(item.type)).c_str());
  std::printf("=>");
  for (const FlowAction& action : e.rule.actions)
    std::printf(" %s", std::string(flow_action_name(action.type)).c_str());
  std::printf("\n");
}

Result<void> list(Testpmd& tp, CommandArgs a) {
  auto port = parse_one_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  const auto rules = flows_of(tp, *port).list();
  if (rules.empty()) return {};  // dpdk-testpmd prints nothing for a port without rules
  std::printf("ID\tGroup\tPrio\tAttr\tRule\n");
  for (const auto* e : rules) print_rule(*e);
  // Ours, after dpdk-testpmd's table so that scripts reading its rows by their leading id are
  // undisturbed: where each rule runs, when the kernel runs any.
  if (std::ranges::none_of(rules, [](const FlowTable::Entry* e) { return e->place != FlowPlace::software; })) return {};
  std::string where = "Placement:";
  for (const auto* e : rules)
    where += fmt::format("{} #{} {}", e == rules.front() ? "" : ",", e->id, flow_place_name(e->place));
  std::printf("%s\n", where.c_str());
  return {};
}

Result<void> query(Testpmd& tp, CommandArgs a) {
  auto port = parse_one_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  auto id = parse_number("rule", a[1], 0, 0xffffffff);
  if (!id) return std::unexpected(id.error());
  auto counts = flows_of(tp, *port).query_count(static_cast<std::uint32_t>(*id));
  if (!counts && counts.error().type == FlowErrorType::handle) {
    std::fflush(stdout);
    std::fprintf(stderr, "Flow rule #%u not found\n", static_cast<unsigned>(*id));
    return {};
  }
  if (!counts) return complain(counts.error(), nullptr);
  std::printf("COUNT:\n hits_set: 1\n bytes_set: 1\n hits: %llu\n bytes: %llu\n",
              static_cast<unsigned long long>(counts->hits), static_cast<unsigned long long>(counts->bytes));
  return {};
}

}  // namespace

std::span<const Command> flow_commands() {
  static const Command table[] = {
      {{"flow", "validate"},
       "<port> <rule>...",
       "check a rule: [group G] [priority P] ingress pattern ITEM ... / end actions ACTION ... / end",
       [](Testpmd& tp, CommandArgs a) { return validate_or_create(tp, a, false); }},
      {{"flow", "create"},
       "<port> <rule>...",
       "add a rule (items eth vlan ipv4 ipv6 udp tcp icmp; actions queue rss drop mark count passthru jump)",
       [](Testpmd& tp, CommandArgs a) { return validate_or_create(tp, a, true); }},
      {{"flow", "destroy"}, "<port> rule <id>", "remove a rule", &destroy},
      {{"flow", "flush"},
       "<port>",
       "remove every rule of a port",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         FlowResult<void> ok;
         tp.run_paused([&] { ok = flows_of(tp, *port).flush(); });
         if (!ok) return complain(ok.error(), nullptr);
         return {};
       }},
      {{"flow", "list"}, "<port>", "a port's rules: ID, group, priority, attributes, items => actions", &list},
      {{"flow", "query"}, "<port> <id> count", "a rule's COUNT counters", &query},
      {{"flow", "isolate"},
       "<port> 0|1",
       "1: the port receives only what its rules match",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         const bool on = a[1] == "1";
         FlowResult<void> ok;
         tp.run_paused([&] { ok = flows_of(tp, *port).isolate(on); });
         if (!ok) return complain(ok.error(), nullptr);
         std::printf("Ingress traffic on port %u is %s to the defined flow rules\n", *port,
                     on ? "now restricted" : "not restricted anymore");
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
