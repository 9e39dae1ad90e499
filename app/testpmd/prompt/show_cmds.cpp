// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands that report: show port stats|xstats|info, show fwd stats, show config
// fwd|rxtx|cores, clear port stats. Layouts follow dpdk-testpmd's so that scripts carry over.
#include <cinttypes>
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

void print_xstats(const Testpmd& tp, std::uint16_t port) {
  std::printf("###### NIC extended statistics for port %-2u\n", port);
  for (const XStat& x : tp.port_xstats(port)) std::printf("%s: %" PRIu64 "\n", x.name.c_str(), x.value);
}

// dpdk-testpmd's port_infos_display, with the lines that apply to our ports ("Port state" is
// wirespeed's own).
void print_info(const Port& p) {
  const PortInfo i = p.info();
  const LinkStatus l = p.link();
  const std::uint64_t rx = p.config().rx_offloads;
  const auto on = [&](std::uint64_t bit) { return (rx & bit) ? "on" : "off"; };
  std::printf("\n********************* Infos for port %-2u *********************\n", p.id());
  std::printf("MAC address: %s\n", p.mac().to_string().c_str());
  std::printf("Device name: %s\n", p.name().c_str());
  std::printf("Driver name: %s\n", p.driver_name().c_str());
  std::printf("Connect to socket: 0\n");
  std::printf("Port state: %s\n", p.started() ? "started" : "stopped");
  std::printf("Link status: %s\n", l.up ? "up" : "down");
  if (l.speed_mbps % 1000 == 0 && l.speed_mbps)
    std::printf("Link speed: %u Gbps\n", l.speed_mbps / 1000);
  else
    std::printf("Link speed: %u Mbps\n", l.speed_mbps);
  std::printf("Link duplex: %s\n", l.full_duplex ? "full-duplex" : "half-duplex");
  std::printf("MTU: %u\n", p.config().mtu);
  std::printf("Promiscuous mode: %s\n", p.promiscuous() ? "enabled" : "disabled");
  std::printf("Allmulticast mode: %s\n", p.allmulticast() ? "enabled" : "disabled");
  std::printf("Maximum number of MAC addresses: 1\n");
  std::printf("VLAN offload: \n  strip %s, filter %s, extend %s, qinq strip %s\n", on(rx_offload::vlan_strip),
              on(rx_offload::vlan_filter), on(rx_offload::vlan_extend), on(rx_offload::qinq_strip));
  std::printf("Max possible RX queues: %u\n", i.max_rx_queues);
  std::printf("Current number of RX queues: %u\n", p.config().rx_queues);
  std::printf("Max possible TX queues: %u\n", i.max_tx_queues);
  std::printf("Current number of TX queues: %u\n", p.config().tx_queues);
  std::printf("Max possible number of RXDs per queue: %u\n", i.max_descriptors);
  std::printf("Min possible number of RXDs per queue: %u\n", i.min_descriptors);
}

Result<void> for_ports(Testpmd& tp, CommandArgs a, void (*print)(const Port&)) {
  auto port = parse_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  for (auto id : selected_ports(tp, *port)) print(*tp.ports()[id]);
  return {};
}

void print_rxtx(const Testpmd& tp) {
  const AppOptions& a = tp.app();
  std::printf("  %s packet forwarding packets/burst=%u\n", a.forward_mode.c_str(), tp.fwd_config().burst);
  std::printf("  packet len=%u - nb packet segments=%zu\n", tp.fwd_config().tx_pkt_length,
              tp.fwd_config().txpkts.size());
  std::printf("  nb forwarding cores=%u - nb forwarding ports=%zu\n", tp.forwarding_cores(),
              a.nb_ports ? *a.nb_ports : tp.ports().size());
  for (const auto& p : tp.ports()) {
    std::printf("  port %u: RX queue number: %u Tx queue number: %u\n", p->id(), p->config().rx_queues,
                p->config().tx_queues);
    std::printf("    RX desc=%u - TX desc=%u (0: driver default)\n", a.rxd, a.txd);
  }
}

void print_cores(const Testpmd& tp) {
  std::printf("List of forwarding lcores:\n");
  for (const CorePlan& c : tp.core_plan()) {
    std::printf("  Logical Core %u (socket 0) forwards packets on %zu streams:\n", c.lcore_id, c.streams.size());
    for (const Stream* s : c.streams)
      std::printf("    RX P=%u/Q=%u (socket 0) -> TX P=%u/Q=%u (socket 0) peer=%s\n", s->rx_port_id, s->rx_queue,
                  s->tx_port_id, s->tx_queue, tp.fwd_config().peer_mac[s->tx_port_id].to_string().c_str());
  }
}

}  // namespace

std::span<const Command> show_commands() {
  static const Command table[] = {
      {{"show", "port", "stats"},
       "all|<port>",
       "port counters and throughput since the last show",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         tp.print_nic_stats(false, *port);
         return {};
       }},
      {{"show", "port", "xstats"},
       "all|<port>",
       "extended port counters",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         for (auto id : selected_ports(tp, *port)) print_xstats(tp, id);
         return {};
       }},
      {{"show", "port", "info"},
       "all|<port>",
       "device, link, queues, promiscuous mode",
       [](Testpmd& tp, CommandArgs a) { return for_ports(tp, a, print_info); }},
      {{"clear", "port", "stats"},
       "all|<port>",
       "reset port counters",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         for (auto id : selected_ports(tp, *port)) {
           tp.clear_port_stats(id);
           std::printf("\n  NIC statistics for port %u cleared\n", id);
         }
         return {};
       }},
      {{"show", "fwd", "stats"},
       "all",
       "forward statistics since start",
       [](Testpmd& tp, CommandArgs) -> Result<void> {
         tp.print_forward_stats();
         return {};
       }},
      {{"show", "config"},
       "fwd|rxtx|cores",
       "streams and mode; burst, packet and queue settings; lcores",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         if (a[0] == "fwd")
           tp.print_fwd_config();
         else if (a[0] == "rxtx")
           print_rxtx(tp);
         else
           print_cores(tp);
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
