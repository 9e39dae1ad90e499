// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands that change settings: set fwd, burst, nbcore, txpkts, flowgen clones,
// promisc, verbose. Those the lcores read refuse while forwarding runs ("Please stop
// forwarding first", as dpdk-testpmd).
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {

std::span<const Command> set_commands() {
  static const Command table[] = {
      {{"set", "fwd"},
       "<mode>",
       "forwarding mode, one of:",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         if (auto ok = tp.set_forward_mode(a[0]); !ok) return ok;
         std::printf("Set %s packet forwarding mode\n", a[0].c_str());
         return {};
       }},
      {{"set", "burst"},
       "<n>",
       "packets per burst, 1 to 512 (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("set burst", a[0], 1, max_burst);
         if (!n) return std::unexpected(n.error());
         if (auto ok = tp.set_burst(static_cast<std::uint16_t>(*n)); !ok) return ok;
         std::printf("Number of packets per burst set to %u\n", tp.fwd_config().burst);
         return {};
       }},
      {{"set", "nbcore"},
       "<n>",
       "forwarding cores (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("set nbcore", a[0], 1, max_lcores);
         if (!n) return std::unexpected(n.error());
         if (auto ok = tp.set_nb_cores(static_cast<unsigned>(*n)); !ok) return ok;
         std::printf("Number of forwarding cores set to %u\n", tp.forwarding_cores());
         return {};
       }},
      {{"set", "txpkts"},
       "<lens>",
       "generated packet segment lengths, e.g. 64 or 64,128 (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         if (auto ok = tp.set_txpkts(a[0]); !ok) {
           // The rules live in the --txpkts parser; name the command the user typed.
           std::string message = ok.error().message;
           if (message.starts_with("--txpkts=")) message.replace(0, 9, "set txpkts ");
           return fail("{}", message);
         }
         std::printf("Packet length set to %u bytes in %zu segment(s)\n", tp.fwd_config().tx_pkt_length,
                     tp.fwd_config().txpkts.size());
         return {};
       }},
      {{"set", "flowgen", "clones"},
       "<n>",
       "flowgen: send each packet n more times, 0 to 512 (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("set flowgen clones", a[0], 0, max_burst);
         if (!n) return std::unexpected(n.error());
         if (auto ok = tp.set_flowgen_clones(static_cast<std::uint16_t>(*n)); !ok) return ok;
         std::printf("flowgen clones set to %u\n", tp.fwd_config().flowgen_clones);
         return {};
       }},
      {{"set", "promisc"},
       "all|<port> on|off",
       "promiscuous mode",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         const bool on = a[1] == "on";
         if (auto ok = tp.set_promiscuous(*port, on); !ok) return ok;
         for (auto id : selected_ports(tp, *port))
           std::printf("Port %u: promiscuous mode %s\n", id, on ? "enabled" : "disabled");
         return {};
       }},
      {{"set", "verbose"},
       "<level>",
       "0: quiet; 1: print received packets' headers; 2: sent ones; 3: both",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("set verbose", a[0], 0, 3);
         if (!n) return std::unexpected(n.error());
         const unsigned old = tp.verbose();
         tp.set_verbose(static_cast<unsigned>(*n));
         std::printf("Change verbose level from %u to %u\n", old, tp.verbose());
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
