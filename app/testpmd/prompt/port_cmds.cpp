// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands on ports: port stop|start|close|reset all|<port>, port config all rxq|txq|rxd|txd <n>.
// A queue change needs every port stopped and applies at the next "port start" (as
// dpdk-testpmd).
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {

std::span<const Command> port_commands() {
  static const Command table[] = {
      {{"port", "stop"},
       "all|<port>",
       "stop ports (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         return tp.stop_ports(*port);
       }},
      {{"port", "start"},
       "all|<port>",
       "start ports, applying a pending port config",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         return tp.start_ports(*port);
       }},
      {{"port", "close"},
       "all|<port>",
       "close stopped ports: their mbufs go back to the pool; 'port reset' configures them again",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         return tp.close_ports(*port);
       }},
      {{"port", "reset"},
       "all|<port>",
       "configure stopped or closed ports afresh (queues rebuilt)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         return tp.reset_ports(*port);
       }},
      {{"port", "attach"},
       "<devargs>",
       "add a virtual device (a --vdev string) as a stopped port",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto id = tp.attach_port(a[0]);
         if (!id) return std::unexpected(id.error());
         return {};
       }},
      {{"port", "detach"},
       "<port>",
       "remove a closed port's device; its id stays free until an attach",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         return tp.detach_port(*port);
       }},
      {{"port", "config", "all"},
       "rxq|txq|rxd|txd <n>",
       "queues or descriptors per queue (all ports stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("port config all " + a[0], a[1], 1, 65535);
         if (!n) return std::unexpected(n.error());
         if (auto ok = tp.set_port_queues(a[0], static_cast<std::uint16_t>(*n)); !ok) return ok;
         std::printf("Port config %s set to %u; applied at 'port start all'\n", a[0].c_str(),
                     static_cast<unsigned>(*n));
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
