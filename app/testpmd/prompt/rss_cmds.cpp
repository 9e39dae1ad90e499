// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands on RSS, as dpdk-testpmd names them: port config all rss ip|udp|none (ports
// stopped; applied at their next start) and show port <port> rss-hash. Ports hash when they
// have more than one RX queue; those without a hardware hash do it in software.
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

std::string type_names(std::uint32_t types) {
  std::string out;
  if (types & rss_type::ip) out += " ipv4 ipv6";
  if (types & rss_type::tcp) out += " ipv4-tcp ipv6-tcp";
  if (types & rss_type::udp) out += " ipv4-udp ipv6-udp";
  return out;
}

}  // namespace

std::span<const Command> rss_commands() {
  static const Command table[] = {
      {{"port", "config", "all", "rss"},
       "ip|udp|none",
       "RSS hash types of ports with several RX queues (all ports stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         const std::uint32_t types = a[0] == "ip" ? rss_type::ip : a[0] == "udp" ? rss_type::ip | rss_type::udp : 0;
         if (auto ok = tp.set_rss_types(types); !ok) return ok;
         std::printf("RSS hash types set to%s; applied at 'port start all'\n",
                     types ? type_names(types).c_str() : " none");
         return {};
       }},
      {{"show", "port"},
       "<port> rss-hash",
       "RSS hash types of a port",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         const Port& p = *tp.ports()[*port];
         const std::uint32_t types = p.config().rss.types;
         if (types == 0) {
           std::printf("RSS disabled\n");
           return {};
         }
         std::printf("RSS functions:\n %s\n", type_names(types).c_str());
         if (p.info().rss_types_capa == 0) std::printf("Port %u hashes in software (not in its device)\n", p.id());
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
