// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands that run forwarding: start, start tx_first [N], stop, help, quit.
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {

std::span<const Command> run_commands() {
  static const Command table[] = {
      {{"start"},
       "",
       "start packet forwarding",
       [](Testpmd& tp, std::span<const std::string>) { return tp.start_forwarding(0); }},
      {{"start", "tx_first"},
       "[<n>]",
       "send n (default 1) bursts from every stream, then forward",
       [](Testpmd& tp, std::span<const std::string> a) -> Result<void> {
         std::uint64_t n = 1;
         if (!a.empty()) {
           auto v = parse_number("start tx_first", a[0], 1, 1u << 20);
           if (!v) return std::unexpected(v.error());
           n = *v;
         }
         return tp.start_forwarding(static_cast<unsigned>(n));
       }},
      {{"stop"},
       "",
       "stop packet forwarding and show forward statistics",
       [](Testpmd& tp, std::span<const std::string>) -> Result<void> {
         if (!tp.forwarding()) std::printf("Packet forwarding not started\n");
         tp.stop_forwarding();
         return {};
       }},
      {{"help"},
       "[<command>]",
       "list the commands, or those starting with a word (help show)",
       [](Testpmd&, std::span<const std::string> a) -> Result<void> {
         print_help(a.empty() ? std::string_view{} : std::string_view(a[0]));
         return {};
       }},
      {{"quit"}, "", "stop forwarding and exit", nullptr},
  };
  return table;
}

}  // namespace ws::testpmd
