// SPDX-License-Identifier: BSD-3-Clause
// The command table as a whole: argument checks, help, completion candidates and the shared
// argument parsers the group files use.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {

const std::vector<Command>& all_commands() {
  static const std::vector<Command> table = [] {
    std::vector<Command> t;
    for (auto group : {run_commands(), show_commands(), set_commands(), port_commands(), capture_commands(),
                       csum_commands(), rss_commands(), config_commands(), flow_commands()})
      t.insert(t.end(), group.begin(), group.end());
    return t;
  }();
  return table;
}

Result<std::uint64_t> parse_number(std::string_view what, std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    return fail("{}: '{}' is not a number; accepted {} to {}", what, text, min, max);
  if (n < min || n > max) return fail("{}: {} is out of range; accepted {} to {}", what, text, min, max);
  return n;
}

Result<std::uint16_t> parse_one_port(const Testpmd& tp, std::string_view text) {
  auto n = parse_number("port", text, 0, tp.ports().size() - 1);
  if (!n) return std::unexpected(n.error());
  if (tp.detached(static_cast<std::uint16_t>(*n))) return fail("port {} is detached ('port attach' a device)", *n);
  return static_cast<std::uint16_t>(*n);
}

Result<std::optional<std::uint16_t>> parse_port(const Testpmd& tp, std::string_view text) {
  if (text == "all") return std::optional<std::uint16_t>{};
  const std::size_t last = tp.ports().size() - 1;
  auto n = parse_number("port", text, 0, last);
  if (!n) return fail("port '{}' does not exist; accepted all or a port id 0 to {}", text, last);
  if (tp.detached(static_cast<std::uint16_t>(*n))) return fail("port {} is detached ('port attach' a device)", *n);
  return std::optional<std::uint16_t>{static_cast<std::uint16_t>(*n)};
}

std::vector<std::uint16_t> selected_ports(const Testpmd& tp, std::optional<std::uint16_t> port) {
  if (port) return {*port};
  std::vector<std::uint16_t> all;
  for (const auto& p : tp.ports())
    if (!tp.detached(p->id())) all.push_back(p->id());
  return all;
}

std::string usage_of(const Command& c) {
  std::string out;
  for (auto w : c.words) out += std::string(w) + " ";
  out += c.args;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void print_help(std::string_view group) {
  bool any = false;
  for (const auto& c : all_commands()) {
    if (!group.empty() && c.words[0] != group) continue;
    // The modes come from the engine table, so that help never lists a stale set.
    // (fmt, not " " + string: GCC 12's -Wrestrict misreads that operator+ inlined here.)
    const std::string modes = c.args == "<mode>" ? fmt::format(" {}", engine_names()) : "";
    std::printf("  %-42s %s%s\n", usage_of(c).c_str(), std::string(c.help).c_str(), modes.c_str());
    any = true;
  }
  if (!any) {
    std::printf("help: no command starts with '%s'; commands start with:", std::string(group).c_str());
    std::string_view last;
    for (const auto& c : all_commands())
      if (c.words[0] != last) std::printf(" %s", std::string(last = c.words[0]).c_str());
    std::printf("\n");
  }
}

}  // namespace ws::testpmd
