// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands of the csum engine, as dpdk-testpmd names them: csum set ip|udp|tcp hw|sw
// <port>, csum show <port>, tso set <segsz> <port>, tso show <port>. A change needs the port
// stopped and applies at its next start; "hw" enables the port's TX offload, which the port
// does in software when its device cannot (the lines after "csum show" say so).
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

void print_csum(const Testpmd& tp, std::uint16_t port) {
  const CsumConfig& c = tp.fwd_config().csum[port];
  std::printf("Parse tunnel is off\n");
  std::printf("IP checksum offload is %s\n", c.ip_hw ? "hw" : "sw");
  std::printf("UDP checksum offload is %s\n", c.udp_hw ? "hw" : "sw");
  std::printf("TCP checksum offload is %s\n", c.tcp_hw ? "hw" : "sw");
  const Port& p = *tp.ports()[port];
  const std::uint64_t soft = p.config().tx_offloads & ~p.info().tx_offload_capa;
  if (soft) std::printf("Port %u does %s in software (not in its device)\n", port, tx_offload::names(soft).c_str());
}

void print_tso(const Testpmd& tp, std::uint16_t port) {
  const std::uint16_t segsz = tp.fwd_config().csum[port].tso_segsz;
  if (segsz == 0)
    std::printf("TSO for non-tunneled packets is disabled\n");
  else
    std::printf("TSO segment size for non-tunneled packets is %u\n", segsz);
}

}  // namespace

std::span<const Command> csum_commands() {
  static const Command table[] = {
      {{"csum", "set"},
       "ip|udp|tcp|sctp|outer-ip hw|sw <port>",
       "csum engine: checksum in software or by the TX port (port stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[2]);
         if (!port) return std::unexpected(port.error());
         if (auto ok = tp.set_csum_offload(*port, a[0], a[1] == "hw"); !ok) return ok;
         print_csum(tp, *port);
         return {};
       }},
      {{"csum", "show"},
       "<port>",
       "csum engine settings of a port",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         print_csum(tp, *port);
         return {};
       }},
      {{"tso", "set"},
       "<segsz> <port>",
       "csum engine: TCP segment size the TX port cuts to, 0 off (port stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto segsz = parse_number("tso set", a[0], 0, 65535);
         if (!segsz) return std::unexpected(segsz.error());
         auto port = parse_one_port(tp, a[1]);
         if (!port) return std::unexpected(port.error());
         if (auto ok = tp.set_tso(*port, static_cast<std::uint16_t>(*segsz)); !ok) return ok;
         print_tso(tp, *port);
         return {};
       }},
      {{"tso", "show"},
       "<port>",
       "TSO segment size of a port",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_one_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         print_tso(tp, *port);
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
