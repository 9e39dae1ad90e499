// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands that configure ports and forwarding as dpdk-testpmd's do: VLAN offloads and
// filter (vlan set, rx_vlan), MTU and per-port offloads (port config), addresses (mac_addr,
// set eth-peer), multicast, link, forwarding ports (set nbport, set portlist), and the port
// summary and device views.
#include <cinttypes>
#include <cstdio>

#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

// dpdk-testpmd's offload names (port config <p> rx_offload|tx_offload <name> on|off).
struct OffloadName {
  std::string_view name;
  std::uint64_t bit;
};
constexpr OffloadName rx_names[] = {
    {"vlan_strip", rx_offload::vlan_strip},   {"ipv4_cksum", rx_offload::ipv4_cksum},
    {"udp_cksum", rx_offload::udp_cksum},     {"tcp_cksum", rx_offload::tcp_cksum},
    {"tcp_lro", rx_offload::tcp_lro},         {"qinq_strip", rx_offload::qinq_strip},
    {"vlan_filter", rx_offload::vlan_filter}, {"vlan_extend", rx_offload::vlan_extend},
    {"scatter", rx_offload::scatter},         {"timestamp", rx_offload::timestamp},
    {"keep_crc", rx_offload::keep_crc},       {"buffer_split", rx_offload::buffer_split}};
constexpr OffloadName tx_names[] = {{"vlan_insert", tx_offload::vlan_insert}, {"ipv4_cksum", tx_offload::ipv4_cksum},
                                    {"udp_cksum", tx_offload::udp_cksum},     {"tcp_cksum", tx_offload::tcp_cksum},
                                    {"tcp_tso", tx_offload::tcp_tso},         {"udp_tso", tx_offload::udp_tso},
                                    {"multi_segs", tx_offload::multi_segs}};

template <std::size_t N>
Result<std::uint64_t> offload_bit(const OffloadName (&names)[N], std::string_view what, std::string_view name) {
  for (const auto& n : names)
    if (n.name == name) return n.bit;
  std::string known;
  for (const auto& n : names) known += fmt::format("{}{}", known.empty() ? "" : " ", n.name);
  return fail("{} '{}' is not one of: {}", what, name, known);
}

Result<Port*> stopped_port(Testpmd& tp, std::string_view text) {
  auto p = parse_one_port(tp, text);
  if (!p) return std::unexpected(p.error());
  Port& port = *tp.ports()[*p];
  if (port.started()) return fail("Error: Can't config offload when Port {} is not stopped", *p);
  return &port;
}

// vlan set strip|filter|extend|qinq_strip on|off <port>
Result<void> vlan_set(Testpmd& tp, CommandArgs a) {
  const std::uint64_t bit = a[0] == "strip"    ? rx_offload::vlan_strip
                            : a[0] == "filter" ? rx_offload::vlan_filter
                            : a[0] == "extend" ? rx_offload::vlan_extend
                                               : rx_offload::qinq_strip;
  auto port = stopped_port(tp, a[2]);
  if (!port) return std::unexpected(port.error());
  const std::uint64_t now = (*port)->config().rx_offloads;
  auto ok = (*port)->set_rx_offloads(a[1] == "on" ? now | bit : now & ~bit);
  if (!ok) return fail("{}\nrx_vlan_{}_set(port_pi={}, on={}) failed", ok.error().message, a[0], a[2], a[1] == "on");
  return {};
}

// rx_vlan add|rm <vlan> <port>
Result<void> rx_vlan(Testpmd& tp, CommandArgs a) {
  auto vid = parse_number("rx_vlan", a[1], 0, 4095);
  if (!vid) return std::unexpected(vid.error());
  auto p = parse_one_port(tp, a[2]);
  if (!p) return std::unexpected(p.error());
  Port& port = *tp.ports()[*p];
  if ((port.config().rx_offloads & rx_offload::vlan_filter) == 0) return fail("Port {}: VLAN-filtering disabled", *p);
  return port.set_vlan_filter(static_cast<std::uint16_t>(*vid), a[0] == "add");
}

Result<void> port_offload(Testpmd& tp, CommandArgs a) {
  auto port = stopped_port(tp, a[0]);
  if (!port) return std::unexpected(port.error());
  const bool rx = a[1] == "rx_offload";
  auto bit = rx ? offload_bit(rx_names, a[1], a[2]) : offload_bit(tx_names, a[1], a[2]);
  if (!bit) return std::unexpected(bit.error());
  const bool on = a[3] == "on";
  if (rx) {
    const std::uint64_t now = (*port)->config().rx_offloads;
    return (*port)->set_rx_offloads(on ? now | *bit : now & ~*bit);
  }
  const std::uint64_t now = (*port)->config().tx_offloads;
  return (*port)->set_tx_offloads(on ? now | *bit : now & ~*bit, const_cast<PktmbufPool*>(&tp.pool()));
}

std::string link_speed(const LinkStatus& l) {
  if (l.speed_mbps == 0) return "None";
  if (l.speed_mbps % 1000 == 0) return fmt::format("{} Gbps", l.speed_mbps / 1000);
  return fmt::format("{} Mbps", l.speed_mbps);
}

void print_summary(const Testpmd& tp, std::optional<std::uint16_t> only) {
  std::printf("Number of available ports: %zu\n", tp.attached_ports());
  std::printf("Port MAC Address       Name         Driver         Status   Link\n");
  for (const auto& p : tp.ports()) {
    if ((only && p->id() != *only) || tp.detached(p->id())) continue;
    const LinkStatus l = p->link();
    std::printf("%-4u %s %-12s %-14s %-8s %s\n", p->id(), p->mac().to_string().c_str(), p->name().c_str(),
                p->driver_name().c_str(), l.up ? "up" : "down", link_speed(l).c_str());
  }
}

void print_device(const Port& p) {
  std::printf("\n********************* Infos for device %s *********************\n", p.name().c_str());
  std::printf("Bus name: %s\n", p.name().starts_with("net_") ? "vdev" : "pci");
  std::printf("Bus information: \nDriver name: %s\nDevargs: \nConnect to socket: 0\n", p.driver_name().c_str());
  std::printf("\n\tPort id: %u \n\tMAC address: %s\n\tDevice name: %s\n\tDevice speed capability: %s\n", p.id(),
              p.mac().to_string().c_str(), p.name().c_str(), link_speed(p.link()).c_str());
}

}  // namespace

std::span<const Command> config_commands() {
  static const Command table[] = {
      {{"vlan", "set"},
       "strip|filter|extend|qinq_strip on|off <port>",
       "VLAN offloads (port stopped; strip and filter are done in software where the device cannot)",
       vlan_set},
      {{"rx_vlan"}, "add|rm <vlan> <port>", "VLAN ids the VLAN filter lets in (any time)", rx_vlan},
      {{"port", "config", "mtu"},
       "<port> <mtu>",
       "the port's MTU",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto p = parse_one_port(tp, a[0]);
         if (!p) return std::unexpected(p.error());
         auto mtu = parse_number("port config mtu", a[1], 0, 65535);
         if (!mtu) return std::unexpected(mtu.error());
         return tp.ports()[*p]->set_mtu(static_cast<std::uint16_t>(*mtu));
       }},
      {{"port", "config"},
       "<port> rx_offload|tx_offload <offload> on|off",
       "enable or disable one offload (port stopped; applied at 'port start')",
       port_offload},
      {{"mac_addr"},
       "set|add <port> <mac>",
       "the port's address (set); extra addresses (add) are refused",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto p = parse_one_port(tp, a[1]);
         if (!p) return std::unexpected(p.error());
         auto mac = MacAddress::parse(a[2]);
         if (!mac) return std::unexpected(mac.error());
         // No wirespeed port filters by destination address, so it has no table to add to.
         if (a[0] == "add") return fail("mac_addr_cmd error: (Operation not supported)");
         return tp.set_port_mac(*p, *mac);
       }},
      {{"set", "allmulti"},
       "all|<port> on|off",
       "all-multicast mode",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         for (auto id : selected_ports(tp, *port))
           if (auto ok = tp.ports()[id]->set_allmulticast(a[1] == "on"); !ok) return ok;
         return {};
       }},
      {{"set", "nbport"},
       "<n>",
       "forwarding ports (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto n = parse_number("set nbport", a[0], 1, max_ports);
         if (!n) return std::unexpected(n.error());
         if (auto ok = tp.set_nb_ports(static_cast<unsigned>(*n)); !ok) return ok;
         std::printf("Number of forwarding ports set to %zu\n", tp.fwd_ports().size());
         return {};
       }},
      {{"set", "portlist"},
       "<list>",
       "forwarding ports, e.g. 0,2-3 (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto parsed = parse_app_args(std::vector<std::string>{"--portlist=" + a[0]});
         if (!parsed) return std::unexpected(parsed.error());
         return tp.set_fwd_port_list(parsed->fwd_ports);
       }},
      {{"set", "eth-peer"},
       "<port> <mac>",
       "the destination address mac, txonly and flowgen send to (forwarding stopped)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto p = parse_number("set eth-peer", a[0], 0, max_ports - 1);
         if (!p) return std::unexpected(p.error());
         auto mac = MacAddress::parse(a[1]);
         if (!mac) return std::unexpected(mac.error());
         return tp.set_eth_peer(static_cast<std::uint16_t>(*p), *mac);
       }},
      {{"set", "link-up", "port"},
       "<port>",
       "bring the link up (no wirespeed port can: as DPDK's virtual ports)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         if (auto p = parse_one_port(tp, a[0]); !p) return std::unexpected(p.error());
         return fail("Set link up fail.");
       }},
      {{"set", "link-down", "port"},
       "<port>",
       "take the link down (no wirespeed port can: as DPDK's virtual ports)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         if (auto p = parse_one_port(tp, a[0]); !p) return std::unexpected(p.error());
         return fail("Set link down fail.");
       }},
      {{"show", "port", "summary"},
       "all|<port>",
       "one line per port: address, name, driver, link",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         print_summary(tp, *port);
         return {};
       }},
      {{"show", "device", "info"},
       "all|<device>",
       "each device's bus, driver and ports",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         bool any = false;
         for (const auto& p : tp.ports())
           if (!tp.detached(p->id()) && (a[0] == "all" || a[0] == p->name())) {
             print_device(*p);
             any = true;
           }
         if (!any) return fail("show device info {}: no such device", a[0]);
         return {};
       }},
      {{"clear", "port", "xstats"},
       "all|<port>",
       "reset extended port counters",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         auto port = parse_port(tp, a[0]);
         if (!port) return std::unexpected(port.error());
         for (auto id : selected_ports(tp, *port)) tp.clear_port_stats(id);
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
