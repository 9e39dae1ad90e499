// SPDX-License-Identifier: BSD-3-Clause
// The prompt's command table: each group file (run_cmds.cpp, show_cmds.cpp, set_cmds.cpp,
// port_cmds.cpp) lists its commands once, and that list drives parsing, argument checks, help
// and tab completion.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

// The words of a command line after the command's fixed leading words.
using CommandArgs = std::span<const std::string>;
using CommandFn = Result<void> (*)(Testpmd&, CommandArgs args);

struct Command {
  std::vector<std::string_view> words;  // fixed leading words: {"show", "port", "stats"}
  // Arguments, space separated: "a|b" one of the literals, "<name>" a value, "[...]" optional,
  // "<name>..." (last) the rest of the line.
  // A position made only of literals accepts nothing else.
  std::string_view args;
  std::string_view help;
  CommandFn run;  // nullptr: quit
};

std::span<const Command> run_commands();      // start, stop, quit, help
std::span<const Command> show_commands();     // show ..., clear port stats
std::span<const Command> set_commands();      // set ...
std::span<const Command> port_commands();     // port ...
std::span<const Command> capture_commands();  // capture start|stop
std::span<const Command> csum_commands();     // csum set|show, tso set|show
std::span<const Command> rss_commands();      // port config all rss, show port <p> rss-hash
std::span<const Command> config_commands();   // vlan, rx_vlan, port config mtu|<p>, mac_addr, set allmulti...
std::span<const Command> flow_commands();     // flow validate|create|destroy|flush|list|query|isolate
// Every command, in help order.
const std::vector<Command>& all_commands();

// Shared argument parsers; errors say what is accepted.
Result<std::uint64_t> parse_number(std::string_view what, std::string_view text, std::uint64_t min, std::uint64_t max);
// A port id that exists (no "all").
Result<std::uint16_t> parse_one_port(const Testpmd& tp, std::string_view text);
// "all" -> nullopt, else a port id that exists.
Result<std::optional<std::uint16_t>> parse_port(const Testpmd& tp, std::string_view text);
// Ports selected by "all" or an id, in order.
std::vector<std::uint16_t> selected_ports(const Testpmd& tp, std::optional<std::uint16_t> port);
// "show port stats all" as a usage line.
std::string usage_of(const Command& c);

}  // namespace ws::testpmd

namespace ws::testpmd {
// "help": every command, or those whose first word is `group`.
void print_help(std::string_view group);
}  // namespace ws::testpmd
