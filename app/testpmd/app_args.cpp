// SPDX-License-Identifier: BSD-3-Clause
// Application option parsing with dpdk-testpmd's names, defaults and limits.
#include "app/testpmd/app_args.hpp"

#include <arpa/inet.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <functional>

#include "app/testpmd/fwd/engine.hpp"
#include "ws/core/hex.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/core/mempool.hpp"
#include "ws/port/port.hpp"

namespace ws::testpmd {
namespace {

Result<std::uint64_t> parse_uint(std::string_view option, std::string_view v, std::uint64_t min, std::uint64_t max) {
  std::uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || end != v.data() + v.size())
    return fail("{}={}: expected an unsigned integer in [{}, {}]", option, v, min, max);
  if (n < min || n > max) return fail("{}={}: out of range, accepted [{}, {}]", option, v, min, max);
  return n;
}

Result<std::vector<std::uint16_t>> parse_txpkts(std::string_view v) {
  std::vector<std::uint16_t> out;
  std::string_view rest = v;
  while (true) {
    const auto comma = rest.find(',');
    auto n = parse_uint("--txpkts", rest.substr(0, comma), 1, 65535);
    if (!n) return fail("--txpkts={}: each segment length must be a number in [1, 65535]", v);
    out.push_back(static_cast<std::uint16_t>(*n));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (out.size() > max_tx_segments) return fail("--txpkts={}: at most {} segments", v, max_tx_segments);
  std::uint32_t total = 0;
  for (auto s : out) total += s;
  if (total < 42) return fail("--txpkts={}: total length {} is below 42 (Ethernet+IPv4+UDP headers)", v, total);
  if (out.front() < 42) return fail("--txpkts={}: the first segment must hold the 42 header bytes", v);
  return out;
}

// A hexadecimal mask, "0x3" or "3", of at most 64 bits.
Result<std::uint64_t> parse_hex(std::string_view option, std::string_view v) {
  if (auto n = parse_hex_mask(v)) return *n;
  return fail("{}={}: expected a hexadecimal mask such as 0x3", option, v);
}

// "0,2-3": ports in increasing order, each below max_ports, none twice.
Result<std::vector<std::uint16_t>> parse_port_list(std::string_view v) {
  std::vector<std::uint16_t> out;
  std::string_view rest = v;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto dash = item.find('-');
    auto lo = parse_uint("--portlist", item.substr(0, dash), 0, max_ports - 1);
    auto hi = dash == std::string_view::npos ? lo : parse_uint("--portlist", item.substr(dash + 1), 0, max_ports - 1);
    if (!lo || !hi || *hi < *lo)
      return fail("--portlist={}: expected port ids and ranges such as 0,2-3 (ports below {})", v, max_ports);
    for (auto p = *lo; p <= *hi; ++p) out.push_back(static_cast<std::uint16_t>(p));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) return fail("--portlist={}: names no port", v);
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) return fail("--portlist={}: a port is named twice", v);
  return out;
}

// The NUMA nodes this machine has (/sys/devices/system/node/online), {0} without sysfs.
std::vector<unsigned> numa_nodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string text;
  if (!(in >> text)) return {0};
  auto list = parse_lcore_list(text);
  if (!list) return {0};
  std::vector<unsigned> out;
  for (const auto& l : *list) out.push_back(l.id);
  return out;
}

Result<void> check_socket(std::string_view option, std::string_view v, std::uint64_t socket) {
  const auto nodes = numa_nodes();
  if (std::find(nodes.begin(), nodes.end(), socket) == nodes.end())
    return fail("{}={}: invalid socket id {}, options are: {}", option, v, socket, fmt::join(nodes, ","));
  return {};
}

// "(a,b)[,(a,b)...]" with `fields` numbers per group, each group checked by `check`.
Result<void> parse_groups(std::string_view option, std::string_view v, std::size_t fields,
                          const std::function<Result<void>(std::span<const std::uint64_t>)>& check) {
  std::string_view rest = v;
  const auto bad = [&] {
    return fail("{}={}: expected ({}) groups separated by commas", option, v,
                fields == 2 ? "port,socket" : "port,flag,socket");
  };
  if (rest.empty()) return bad();
  while (!rest.empty()) {
    if (rest.front() != '(') return bad();
    const auto close = rest.find(')');
    if (close == std::string_view::npos) return bad();
    std::vector<std::uint64_t> numbers;
    std::string_view inner = rest.substr(1, close - 1);
    while (true) {
      const auto comma = inner.find(',');
      auto n = parse_uint(option, inner.substr(0, comma), 0, 65535);
      if (!n) return bad();
      numbers.push_back(*n);
      if (comma == std::string_view::npos) break;
      inner = inner.substr(comma + 1);
    }
    if (numbers.size() != fields) return bad();
    if (auto ok = check(numbers); !ok) return ok;
    rest = rest.substr(close + 1);
    if (rest.starts_with(',')) rest.remove_prefix(1);
  }
  return {};
}

Result<std::uint32_t> parse_ipv4(std::string_view option, std::string_view whole, std::string_view v) {
  in_addr a{};
  if (inet_pton(AF_INET, std::string(v).c_str(), &a) != 1)
    return fail("{}={}: '{}' is not an IPv4 address", option, whole, v);
  return ntohl(a.s_addr);
}

Result<std::uint32_t> parse_event(std::string_view option, std::string_view v) {
  static constexpr std::pair<std::string_view, std::uint32_t> names[] = {
      {"unknown", event_type::unknown},
      {"intr_lsc", event_type::intr_lsc},
      {"queue_state", event_type::queue_state},
      {"intr_reset", event_type::intr_reset},
      {"vf_mbox", event_type::vf_mbox},
      {"macsec", event_type::macsec},
      {"intr_rmv", event_type::intr_rmv},
      {"flow_aged", event_type::flow_aged},
      {"err_recovering", event_type::err_recovering},
      {"recovery_success", event_type::recovery_success},
      {"recovery_failed", event_type::recovery_failed},
      {"all", event_type::all}};
  for (const auto& [name, bits] : names)
    if (v == name) return bits;
  return fail(
      "{} {}: invalid event (accepted: unknown, intr_lsc, queue_state, intr_reset, vf_mbox, macsec, "
      "intr_rmv, flow_aged, err_recovering, recovery_success, recovery_failed, all)",
      option, v);
}

// dpdk-testpmd's --eth-peers-configfile: line i holds port i's peer address.
Result<void> read_eth_peers(AppOptions& o, std::string_view path) {
  std::ifstream in{std::string(path)};
  if (!in) return fail("--eth-peers-configfile={}: cannot open the file", path);
  std::string line;
  std::uint16_t port = 0;
  while (std::getline(in, line)) {
    if (port >= max_ports) return fail("--eth-peers-configfile={}: more than {} addresses", path, max_ports);
    auto mac = MacAddress::parse(line);
    if (!mac) return fail("--eth-peers-configfile={}: line {}: bad MAC address format '{}'", path, port + 1, line);
    o.eth_peers[port++] = *mac;
  }
  return {};
}

enum class Arg { none, required };

// One option of dpdk-testpmd's: its name, its help line, how it is taken here and, unless it
// is refused, what it does to the options.
struct OptionSpec {
  std::string_view name;
  Arg arg;
  std::string_view help;  // dpdk-testpmd's words, after "--name"
  OptionStatus status;
  std::string_view why;  // accepted: why it changes nothing here; refused: what is missing
  std::function<Result<void>(AppOptions&, std::string_view)> apply;
};

using Apply = std::function<Result<void>(AppOptions&, std::string_view)>;

template <class T>
Apply set_uint(T AppOptions::* field, std::uint64_t min, std::uint64_t max, std::string_view name) {
  return [=](AppOptions& o, std::string_view v) -> Result<void> {
    auto n = parse_uint(name, v, min, max);
    if (!n) return std::unexpected(n.error());
    o.*field = static_cast<T>(*n);
    return {};
  };
}

Apply set_flag(bool AppOptions::* field, bool value = true) {
  return [=](AppOptions& o, std::string_view) -> Result<void> {
    o.*field = value;
    return {};
  };
}

Apply enable_rx(std::uint64_t bits) {
  return [=](AppOptions& o, std::string_view) -> Result<void> {
    o.rx_offloads |= bits;
    return {};
  };
}

// A number checked and otherwise ignored.
Apply check_uint(std::string_view name, std::uint64_t min, std::uint64_t max) {
  return [=](AppOptions&, std::string_view v) -> Result<void> {
    auto n = parse_uint(name, v, min, max);
    if (!n) return std::unexpected(n.error());
    return {};
  };
}

Apply nothing() {
  return [](AppOptions&, std::string_view) -> Result<void> { return {}; };
}

constexpr auto H = OptionStatus::honoured;
constexpr auto A = OptionStatus::accepted;
constexpr auto R = OptionStatus::refused;

constexpr std::string_view one_node =
    "memory comes from one arena; the machines wirespeed is tested on have one NUMA node, so the value is checked "
    "against the nodes present and changes nothing";
constexpr std::string_view register_threshold =
    "a register threshold of Intel NICs' descriptor rings; wirespeed's drivers refill and free in bursts";
constexpr std::string_view buffer_split =
    "buffer split (RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT) and several RX pools per queue: no wirespeed port offers them";
constexpr std::string_view noisy = "the noisy forwarding mode (a VNF simulator) is not implemented";
constexpr std::string_view hairpin = "hairpin queues are NIC hardware; no wirespeed port has them";

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {"--interactive", Arg::none, "run in interactive mode.", H, "", set_flag(&AppOptions::interactive)},
      {"-i", Arg::none, "run in interactive mode.", H, "", set_flag(&AppOptions::interactive)},
      {"--cmdline-file", Arg::required, "execute cli commands before startup.", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> { o.cmdline_file = std::string(v); return {}; }},
      {"--auto-start", Arg::none, "start forwarding on init [always when non-interactive].", H, "",
       set_flag(&AppOptions::auto_start)},
      {"-a", Arg::none, "start forwarding on init (--auto-start).", H, "", set_flag(&AppOptions::auto_start)},
      {"--help", Arg::none, "display this message and quit.", H, "", nothing()},
      {"--tx-first", Arg::none, "start forwarding sending a burst first (only if interactive is disabled).", H, "",
       [](AppOptions& o, std::string_view) -> Result<void> { o.tx_first = 1; return {}; }},
      {"--stats-period", Arg::required,
       "=PERIOD: statistics will be shown every PERIOD seconds (only if interactive is disabled).", H, "",
       set_uint(&AppOptions::stats_period_s, 0, 86400, "--stats-period")},
      {"--display-xstats", Arg::required,
       " xstat_name1[,...]: comma-separated list of extended statistics to show. Used with --stats-period specified "
       "or interactive commands that show Rx/Tx statistics (i.e. 'show port stats').",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         o.display_xstats.clear();
         std::string_view rest = v;
         while (true) {
           const auto comma = rest.find(',');
           const std::string_view name = rest.substr(0, comma);
           if (name.empty()) return fail("--display-xstats={}: expected xstat names separated by commas", v);
           o.display_xstats.emplace_back(name);
           if (comma == std::string_view::npos) break;
           rest = rest.substr(comma + 1);
         }
         return {};
       }},
      {"--num-procs", Arg::required, "=N: set the total number of multi-process instances.", A,
       "wirespeed runs one process: 1 is accepted, more are refused (the arena is shared with peers by fd, not with "
       "secondary processes)",
       check_uint("--num-procs", 1, 1)},
      {"--proc-id", Arg::required,
       "=id: set the id of the current process from multi-process instances (0 <= id < num-procs).", A,
       "one process: 0 is accepted, any other id refused", check_uint("--proc-id", 0, 0)},
      {"--nb-cores", Arg::required, "=N: set the number of forwarding cores.", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         o.nb_cores_given = true;
         return set_uint(&AppOptions::nb_cores, 1, max_lcores - 1, "--nb-cores")(o, v);
       }},
      {"--nb-ports", Arg::required, "=N: set the number of forwarding ports.", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto n = parse_uint("--nb-ports", v, 1, max_ports);
         if (!n) return std::unexpected(n.error());
         o.nb_ports = static_cast<unsigned>(*n);
         return {};
       }},
      {"--coremask", Arg::required,
       "=COREMASK: hexadecimal bitmask of cores running the packet forwarding test. The main lcore is reserved for "
       "command line parsing only, and cannot be masked on for packet forwarding.",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto m = parse_hex("--coremask", v);
         if (!m) return std::unexpected(m.error());
         if (*m == 0) return fail("--coremask={}: names no lcore", v);
         o.coremask = *m;
         return {};
       }},
      {"--portmask", Arg::required, "=PORTMASK: hexadecimal bitmask of ports used by the packet forwarding test.", H,
       "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto m = parse_hex("--portmask", v);
         if (!m) return std::unexpected(m.error());
         if (*m == 0) return fail("--portmask={}: names no port", v);
         o.fwd_ports.clear();
         for (std::uint16_t p = 0; p < 64; ++p)
           if (*m >> p & 1) o.fwd_ports.push_back(p);
         return {};
       }},
      {"--portlist", Arg::required, "=PORTLIST: list of forwarding ports", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto l = parse_port_list(v);
         if (!l) return std::unexpected(l.error());
         o.fwd_ports = std::move(*l);
         return {};
       }},
      {"--numa", Arg::none,
       "enable NUMA-aware allocation of RX/TX rings and of RX memory buffers (mbufs).", A, one_node,
       set_flag(&AppOptions::numa)},
      {"--no-numa", Arg::none, "disable NUMA-aware allocation.", H, "", set_flag(&AppOptions::numa, false)},
      {"--port-numa-config", Arg::required,
       "=(port,socket)[,(port,socket)]: specify the socket on which the memory pool used by the port will be "
       "allocated.",
       A, one_node,
       [](AppOptions&, std::string_view v) -> Result<void> {
         return parse_groups("--port-numa-config", v, 2, [&](std::span<const std::uint64_t> g) -> Result<void> {
           if (g[0] >= max_ports) return fail("--port-numa-config={}: port {} is not below {}", v, g[0], max_ports);
           return check_socket("--port-numa-config", v, g[1]);
         });
       }},
      {"--ring-numa-config", Arg::required,
       "=(port,flag,socket)[,(port,flag,socket)]: specify the socket on which the TX/RX rings for the port will be "
       "allocated (flag: 1 for RX; 2 for TX; 3 for RX and TX).",
       A, one_node,
       [](AppOptions&, std::string_view v) -> Result<void> {
         return parse_groups("--ring-numa-config", v, 3, [&](std::span<const std::uint64_t> g) -> Result<void> {
           if (g[0] >= max_ports) return fail("--ring-numa-config={}: port {} is not below {}", v, g[0], max_ports);
           if (g[1] < 1 || g[1] > 3) return fail("--ring-numa-config={}: flag {}: expected 1 (RX), 2 (TX) or 3", v, g[1]);
           return check_socket("--ring-numa-config", v, g[2]);
         });
       }},
      {"--socket-num", Arg::required, "=N: set socket from which all memory is allocated in NUMA mode.", A, one_node,
       [](AppOptions&, std::string_view v) -> Result<void> {
         auto n = parse_uint("--socket-num", v, 0, 65535);
         if (!n) return std::unexpected(n.error());
         return check_socket("--socket-num", v, *n);
       }},
      {"--mbuf-size", Arg::required,
       "=N,[N1[,..Nn]: set the data size of mbuf to N bytes. If multiple numbers are specified the extra pools will "
       "be created to receive packets based on the features supported, like packet split, multi-rx-mempool.",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (v.find(',') != std::string_view::npos)
           return fail("--mbuf-size={}: one size only; extra pools serve {}", v, buffer_split);
         return set_uint(&AppOptions::mbuf_size, 256, 65535, "--mbuf-size")(o, v);
       }},
      {"--total-num-mbufs", Arg::required, "=N: set the number of mbufs to be allocated in mbuf pools.", H, "",
       set_uint(&AppOptions::total_num_mbufs, 1025, 1u << 26, "--total-num-mbufs")},
      {"--max-pkt-len", Arg::required, "=N: set the maximum size of packet to N bytes.", H, "",
       set_uint(&AppOptions::max_pkt_len, 64, 65535 + 18, "--max-pkt-len")},
      {"--max-lro-pkt-size", Arg::required, "=N: set the maximum LRO aggregated packet size to N bytes.", A,
       "the size of coalesced packets is the device's (virtio's GUEST_TSO gives up to 64 KiB); checked as a number",
       set_uint(&AppOptions::max_lro_pkt_size, 1, 65535, "--max-lro-pkt-size")},
      {"--eth-peers-configfile", Arg::required, "=name: config file with ethernet addresses of peer ports.", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> { return read_eth_peers(o, v); }},
      {"--eth-peer", Arg::required, "=X,M:M:M:M:M:M: set the MAC address of the X peer port (0 <= X < 64).", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const auto comma = v.find(',');
         if (comma == std::string_view::npos) return fail("--eth-peer={}: expected PORT,XX:XX:XX:XX:XX:XX", v);
         auto port = parse_uint("--eth-peer", v.substr(0, comma), 0, max_ports - 1);
         if (!port) return std::unexpected(port.error());
         auto mac = MacAddress::parse(v.substr(comma + 1));
         if (!mac) return fail("--eth-peer={}: {}", v, mac.error().message);
         o.eth_peers[static_cast<std::uint16_t>(*port)] = *mac;
         return {};
       }},
      {"--disable-crc-strip", Arg::none, "disable CRC stripping by hardware.", A,
       "virtual ports carry no Ethernet CRC, and the e1000 driver strips it in the device", nothing()},
      {"--enable-scatter", Arg::none, "enable scattered Rx.", H, "", enable_rx(rx_offload::scatter)},
      {"--enable-lro", Arg::none, "enable large receive offload.", H, "", enable_rx(rx_offload::tcp_lro)},
      {"--enable-rx-cksum", Arg::none, "enable rx hardware checksum offload.", H,
       "", [](AppOptions& o, std::string_view) -> Result<void> { o.enable_rx_cksum = true; return {}; }},
      {"--enable-rx-timestamp", Arg::none, "enable rx hardware timestamp offload.", H, "",
       enable_rx(rx_offload::timestamp)},
      {"--enable-hw-vlan", Arg::none, "enable hardware vlan.", H, "", enable_rx(rx_offload::vlan)},
      {"--enable-hw-vlan-filter", Arg::none, "enable hardware vlan filter.", H, "", enable_rx(rx_offload::vlan_filter)},
      {"--enable-hw-vlan-strip", Arg::none, "enable hardware vlan strip.", H, "", enable_rx(rx_offload::vlan_strip)},
      {"--enable-hw-vlan-extend", Arg::none, "enable hardware vlan extend.", H, "", enable_rx(rx_offload::vlan_extend)},
      {"--enable-hw-qinq-strip", Arg::none, "enable hardware qinq strip.", H, "", enable_rx(rx_offload::qinq_strip)},
      {"--enable-drop-en", Arg::none, "enable per queue packet drop.", A,
       "wirespeed's RX queues always drop (and count as missed) what arrives when they are full", nothing()},
      {"--disable-rss", Arg::none, "disable rss.", H, "",
       [](AppOptions& o, std::string_view) -> Result<void> { o.rss_types = 0; return {}; }},
      {"--port-topology", Arg::required, "=<paired|chained|loop>: set port topology (paired is default).", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (v == "paired") o.topology = Topology::paired;
         else if (v == "chained") o.topology = Topology::chained;
         else if (v == "loop") o.topology = Topology::loop;
         else return fail("--port-topology={}: accepted paired, chained, loop", v);
         return {};
       }},
      {"--forward-mode", Arg::required, "=N: set forwarding mode (N: io|mac|macswap|flowgen|rxonly|txonly|csum|icmpecho|5tswap).",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (!find_engine(v)) return fail("--forward-mode={}: unknown mode (accepted: {})", v, engine_names());
         o.forward_mode = std::string(v);
         return {};
       }},
      {"--rss-ip", Arg::none, "set RSS functions to IPv4/IPv6 only .", H, "",
       [](AppOptions& o, std::string_view) -> Result<void> { o.rss_types = rss_type::ip; return {}; }},
      {"--rss-udp", Arg::none, "set RSS functions to IPv4/IPv6 + UDP.", H, "",
       [](AppOptions& o, std::string_view) -> Result<void> { o.rss_types = rss_type::ip | rss_type::udp; return {}; }},
      {"--rss-level-inner", Arg::none, "set RSS hash level to innermost", R,
       "RSS hashes the outermost headers only; no port parses tunnels for it", nullptr},
      {"--rss-level-outer", Arg::none, "set RSS hash level to outermost", A,
       "RSS always hashes the outermost headers", nothing()},
      {"--rxq", Arg::required, "=N: set the number of RX queues per port to N.", H, "",
       set_uint(&AppOptions::rxq, 1, port_max_queues, "--rxq")},
      {"--rxd", Arg::required, "=N: set the number of descriptors in RX rings to N.", H, "",
       set_uint(&AppOptions::rxd, 1, 65535, "--rxd")},
      {"--txq", Arg::required, "=N: set the number of TX queues per port to N.", H, "",
       set_uint(&AppOptions::txq, 1, port_max_queues, "--txq")},
      {"--txd", Arg::required, "=N: set the number of descriptors in TX rings to N.", H, "",
       set_uint(&AppOptions::txd, 1, 65535, "--txd")},
      {"--hairpinq", Arg::required, "=N: set the number of hairpin queues per port to N.", R, hairpin, nullptr},
      {"--hairpin-mode", Arg::required, "=0xXX: bitmask set the hairpin port mode.", R, hairpin, nullptr},
      {"--burst", Arg::required, "=N: set the number of packets per burst to N.", H, "",
       set_uint(&AppOptions::burst, 1, max_burst, "--burst")},
      {"--flowgen-clones", Arg::required,
       "=N: set the number of single packet clones to send in flowgen mode. Should be less than burst value.", H, "",
       set_uint(&AppOptions::flowgen_clones, 0, max_burst, "--flowgen-clones")},
      {"--flowgen-flows", Arg::required, "=N: set the number of flows in flowgen mode to N (1 <= N <= 16777216).", H,
       "", set_uint(&AppOptions::flowgen_flows, 1, 1u << 24, "--flowgen-flows")},
      {"--mbcache", Arg::required, "=N: set the cache of mbuf memory pool to N.", H, "",
       set_uint(&AppOptions::mbcache, 0, mempool_cache_max, "--mbcache")},
      {"--rxpt", Arg::required, "=N: set prefetch threshold register of RX rings to N.", A, register_threshold,
       check_uint("--rxpt", 0, 255)},
      {"--rxht", Arg::required, "=N: set the host threshold register of RX rings to N.", A, register_threshold,
       check_uint("--rxht", 0, 255)},
      {"--rxfreet", Arg::required, "=N: set the free threshold of RX descriptors to N (0 <= N < value of rxd).", A,
       register_threshold, check_uint("--rxfreet", 0, 65535)},
      {"--rxwt", Arg::required, "=N: set the write-back threshold register of RX rings to N.", A, register_threshold,
       check_uint("--rxwt", 0, 255)},
      {"--txpt", Arg::required, "=N: set the prefetch threshold register of TX rings to N.", A, register_threshold,
       check_uint("--txpt", 0, 255)},
      {"--txht", Arg::required, "=N: set the nhost threshold register of TX rings to N.", A, register_threshold,
       check_uint("--txht", 0, 255)},
      {"--txwt", Arg::required, "=N: set the write-back threshold register of TX rings to N.", A, register_threshold,
       check_uint("--txwt", 0, 255)},
      {"--txfreet", Arg::required, "=N: set the transmit free threshold of TX rings to N (0 <= N <= value of txd).",
       A, register_threshold, check_uint("--txfreet", 0, 65535)},
      {"--txrst", Arg::required, "=N: set the transmit RS bit threshold of TX rings to N (0 <= N <= value of txd).",
       A, register_threshold, check_uint("--txrst", 0, 65535)},
      {"--no-flush-rx", Arg::none, "Don't flush RX streams before forwarding. Used mainly with PCAP drivers.", H, "",
       set_flag(&AppOptions::flush_rx, false)},
      {"--rxoffs", Arg::required, "=X[,Y]*: set RX segment offsets for split.", R, buffer_split, nullptr},
      {"--rxpkts", Arg::required, "=X[,Y]*: set RX segment sizes to split.", R, buffer_split, nullptr},
      {"--rxhdrs", Arg::required, "=eth[,ipv4]*: set RX segment protocol to split.", R, buffer_split, nullptr},
      {"--txpkts", Arg::required, "=X[,Y]*: set TX segment sizes or total packet length.", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto r = parse_txpkts(v);
         if (!r) return std::unexpected(r.error());
         o.txpkts = std::move(*r);
         return {};
       }},
      {"--multi-rx-mempool", Arg::none, "enable multi-rx-mempool support", R, buffer_split, nullptr},
      {"--txonly-multi-flow", Arg::none, "generate multiple flows in txonly mode", H, "",
       set_flag(&AppOptions::txonly_multi_flow)},
      {"--tx-ip", Arg::required, "=src,dst: IP addresses in Tx-only mode", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const auto comma = v.find(',');
         if (comma == std::string_view::npos) return fail("--tx-ip={}: expected SRC,DST (two IPv4 addresses)", v);
         auto src = parse_ipv4("--tx-ip", v, v.substr(0, comma));
         if (!src) return std::unexpected(src.error());
         auto dst = parse_ipv4("--tx-ip", v, v.substr(comma + 1));
         if (!dst) return std::unexpected(dst.error());
         o.tx_ip_src = *src;
         o.tx_ip_dst = *dst;
         return {};
       }},
      {"--tx-udp", Arg::required, "=src[,dst]: UDP ports in Tx-only mode", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const auto comma = v.find(',');
         auto src = parse_uint("--tx-udp", v.substr(0, comma), 0, 65535);
         if (!src) return std::unexpected(src.error());
         auto dst = comma == std::string_view::npos ? src : parse_uint("--tx-udp", v.substr(comma + 1), 0, 65535);
         if (!dst) return std::unexpected(dst.error());
         o.tx_udp_src = static_cast<std::uint16_t>(*src);
         o.tx_udp_dst = static_cast<std::uint16_t>(*dst);
         return {};
       }},
      {"--eth-link-speed", Arg::required, ": force link speed.", A,
       "virtual ports have no link to negotiate and report a nominal speed; the e1000 driver takes its peer's",
       [](AppOptions&, std::string_view v) -> Result<void> {
         static constexpr std::uint64_t speeds[] = {10, 100, 1000, 10000, 25000, 40000, 50000, 100000, 200000};
         auto n = parse_uint("--eth-link-speed", v, 10, 200000);
         if (!n || std::find(std::begin(speeds), std::end(speeds), *n) == std::end(speeds))
           return fail("--eth-link-speed={}: expected one of {} (Mbit/s)", v, fmt::join(speeds, ", "));
         return {};
       }},
      {"--rxq-share", Arg::required,
       "=X: number of ports per shared Rx queue groups, defaults to UINT32_MAX (1 group)", R,
       "no wirespeed port shares RX queues between ports (RTE_ETH_DEV_CAPA_RXQ_SHARE)", nullptr},
      {"--disable-link-check", Arg::none, "disable check on link status when starting/stopping ports.", A,
       "ports are started without waiting for their links; 'show port info' reports each link", nothing()},
      {"--disable-device-start", Arg::none, "do not automatically start port", H, "",
       set_flag(&AppOptions::start_devices, false)},
      {"--no-lsc-interrupt", Arg::none, "disable link status change interrupt.", H, "",
       set_flag(&AppOptions::lsc_interrupt, false)},
      {"--no-rmv-interrupt", Arg::none, "disable device removal interrupt.", A,
       "no wirespeed port raises device removal events", nothing()},
      {"--bitrate-stats", Arg::required, "=N: set the logical core N to perform bit-rate calculation.", R,
       "DPDK publishes these through its metrics library to secondary processes, which wirespeed does not have; "
       "rates are in 'show port stats' and in telemetry",
       nullptr},
      {"--latencystats", Arg::required,
       "=N: enable latency and jitter statistics monitoring on forwarding lcore id N.", R,
       "per-packet RX timestamps and DPDK's latency statistics library (read by secondary processes) are not "
       "implemented",
       nullptr},
      {"--print-event", Arg::required,
       " <unknown|intr_lsc|queue_state|intr_reset|vf_mbox|macsec|intr_rmv|flow_aged|err_recovering|recovery_success|"
       "recovery_failed|all>: enable print of designated event or all of them.",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto bits = parse_event("--print-event", v);
         if (!bits) return std::unexpected(bits.error());
         o.event_print_mask |= *bits;
         return {};
       }},
      {"--mask-event", Arg::required,
       " <unknown|intr_lsc|queue_state|intr_reset|vf_mbox|macsec|intr_rmv|flow_aged|err_recovering|recovery_success|"
       "recovery_failed|all>: disable print of designated event or all of them.",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto bits = parse_event("--mask-event", v);
         if (!bits) return std::unexpected(bits.error());
         o.event_print_mask &= ~*bits;
         return {};
       }},
      {"--flow-isolate-all", Arg::none, "requests flow API isolated mode on all ports at initialization time.", R,
       "wirespeed has no flow API yet", nullptr},
      {"--tx-offloads", Arg::required, "=0xXXXXXXXX: hexadecimal bitmask of TX queue offloads", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto n = parse_hex("--tx-offloads", v);
         if (!n) return fail("--tx-offloads={}: expected a bit mask such as 0xe (DPDK's RTE_ETH_TX_OFFLOAD_* bits)", v);
         o.tx_offloads = *n;
         return {};
       }},
      {"--rx-offloads", Arg::required, "=0xXXXXXXXX: hexadecimal bitmask of RX queue offloads", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto n = parse_hex("--rx-offloads", v);
         if (!n) return fail("--rx-offloads={}: expected a bit mask such as 0x1 (DPDK's RTE_ETH_RX_OFFLOAD_* bits)", v);
         o.rx_offloads = *n;
         return {};
       }},
      {"--hot-plug", Arg::none, "enable hot plug for device.", R,
       "device hot plug needs kernel device events (uevents), which wirespeed does not watch", nullptr},
      {"--vxlan-gpe-port", Arg::required, "=N: UPD port of tunnel VXLAN-GPE", R,
       "the csum engine parses no tunnels", nullptr},
      {"--geneve-parsed-port", Arg::required, "=N: UPD port to parse GENEVE tunnel protocol", R,
       "the csum engine parses no tunnels", nullptr},
      {"--mlockall", Arg::none, "lock all memory", H, "", set_flag(&AppOptions::mlockall)},
      {"--no-mlockall", Arg::none, "do not lock all memory", H, "", set_flag(&AppOptions::mlockall, false)},
      {"--mp-alloc", Arg::required, " <native|anon|xmem|xmemhuge>: mempool allocation method.", H,
       "native only: packet memory must be the shared arena, which vhost-user peers map",
       [](AppOptions&, std::string_view v) -> Result<void> {
         if (v == "native") return {};
         if (v == "anon" || v == "xmem" || v == "xmemhuge")
           return fail("--mp-alloc={}: not available: packet memory is the shared arena (native), which vhost-user "
                       "and virtio peers map; anonymous memory could not be shared with them",
                       v);
         return fail("--mp-alloc={}: expected native, anon, xmem or xmemhuge", v);
       }},
      {"--noisy-tx-sw-buffer-size", Arg::required, "=N: size of FIFO buffer", R, noisy, nullptr},
      {"--noisy-tx-sw-buffer-flushtime", Arg::required, "=N: flush FIFO after N ms", R, noisy, nullptr},
      {"--noisy-lkup-memory", Arg::required, "=N: allocate N MB of VNF memory", R, noisy, nullptr},
      {"--noisy-lkup-num-writes", Arg::required, "=N: do N random writes per packet", R, noisy, nullptr},
      {"--noisy-lkup-num-reads", Arg::required, "=N: do N random reads per packet", R, noisy, nullptr},
      {"--noisy-lkup-num-reads-writes", Arg::required, "=N: do N random reads and writes per packet", R, noisy,
       nullptr},
      {"--no-iova-contig", Arg::none, "mempool memory can be IOVA non contiguous. valid only with --mp-alloc=anon", R,
       "valid only with --mp-alloc=anon, which is not available", nullptr},
      {"--rx-mq-mode", Arg::required, "=0xX: hexadecimal bitmask of RX mq mode can be enabled", H,
       "", [](AppOptions& o, std::string_view v) -> Result<void> {
         auto n = parse_hex("--rx-mq-mode", v);
         if (!n || *n > 7) return fail("--rx-mq-mode={}: expected a mask of 0x1 (RSS), 0x2 (DCB), 0x4 (VMDq)", v);
         // Only the RSS bit means something without DCB or VMDq hardware, as in dpdk-testpmd's
         // ordinary runs (its mq mode is this mask ANDed with RSS).
         if ((*n & 1) == 0) o.rss_types = 0;
         return {};
       }},
      {"--record-core-cycles", Arg::none, "enable measurement of CPU cycles.", H, "",
       set_flag(&AppOptions::record_core_cycles)},
      {"--record-burst-stats", Arg::none, "enable display of RX and TX bursts.", H, "",
       set_flag(&AppOptions::record_burst_stats)},
      // wirespeed's own.
      {"--rx-ptype-counts", Arg::none, ": rxonly counts received packet types per port (wirespeed).", H, "",
       set_flag(&AppOptions::rx_ptype_counts)},
      {"--icmpecho-ip", Arg::required, "=[PORT,]A.B.C.D: the address icmpecho answers for (wirespeed).", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const auto comma = v.find(',');
         std::uint16_t port = max_ports;
         if (comma != std::string_view::npos) {
           auto p = parse_uint("--icmpecho-ip", v.substr(0, comma), 0, max_ports - 1);
           if (!p) return std::unexpected(p.error());
           port = static_cast<std::uint16_t>(*p);
         }
         const std::string text(comma == std::string_view::npos ? v : v.substr(comma + 1));
         in_addr a{};
         if (inet_pton(AF_INET, text.c_str(), &a) != 1 || a.s_addr == 0)
           return fail("--icmpecho-ip={}: expected [PORT,]A.B.C.D (an IPv4 address, not 0.0.0.0)", v);
         o.icmpecho_ips[port] = a.s_addr;
         return {};
       }},
      {"--duration", Arg::required, "=SECONDS: forward for this long, then print the statistics and exit (wirespeed).",
       H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         double d = 0;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
         if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || d <= 0 || d > 1e7)
           return fail("--duration={}: expected a number of seconds > 0", v);
         o.duration_s = d;
         return {};
       }},
      {"--summary-json", Arg::required, "=FILE: write the run's results as JSON at exit (wirespeed).", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> { o.summary_json = std::string(v); return {}; }},
      {"--metrics-addr", Arg::required, "=127.0.0.1:PORT: serve Prometheus metrics on loopback (wirespeed).", H, "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         // Loopback only: the endpoint has no authentication (telemetry_metrics.cpp parses it).
         if (!v.starts_with("127.") || v.find(':') == std::string_view::npos)
           return fail("--metrics-addr={}: expected a loopback address and port, e.g. 127.0.0.1:9100", v);
         o.metrics_addr = std::string(v);
         return {};
       }},
      {"--capture", Arg::required, "=PORT,FILE[,FILTER]: pcapng capture of a port's RX from the start (wirespeed).", H,
       "",
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (std::count(v.begin(), v.end(), ',') < 1)
           return fail("--capture={}: expected PORT,FILE[,FILTER] (FILTER in tcpdump syntax)", v);
         o.captures.emplace_back(v);
         return {};
       }},
  };
  return table;
}

}  // namespace

std::string app_usage() {
  std::string out = "testpmd options:\n";
  for (const auto& o : option_table()) {
    out +=
        fmt::format("  {}{}{}", o.name,
                    o.help.starts_with('=') || o.help.starts_with(' ') || o.help.starts_with(':') ? "" : ": ", o.help);
    if (o.status == OptionStatus::refused) out += fmt::format(" [not available: {}]", o.why);
    out += '\n';
  }
  return out;
}

std::vector<OptionDoc> app_option_docs() {
  std::vector<OptionDoc> out;
  for (const auto& o : option_table()) out.push_back({o.name, o.status, o.why});
  return out;
}

Result<AppOptions> parse_app_args(std::span<const std::string> args) {
  AppOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto eq = a.find('=');
    const std::string_view name = std::string_view(a).substr(0, eq);
    const auto& table = option_table();
    const auto it = std::find_if(table.begin(), table.end(), [&](const OptionSpec& s) { return s.name == name; });
    if (it == table.end()) return fail("unknown option '{}' (wirespeed-testpmd -- --help lists the options)", a);
    if (it->status == OptionStatus::refused)
      return fail("option {} is not available in wirespeed-testpmd: {}", name, it->why);
    std::string_view value;
    if (it->arg == Arg::required) {
      if (eq != std::string::npos) {
        value = std::string_view(a).substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return fail("option {} needs a value", name);
      }
    } else if (eq != std::string::npos) {
      // Flags take no value in dpdk-testpmd; refuse rather than guess.
      return fail("option {} takes no value (got '{}')", name, a);
    }
    if (auto ok = it->apply(o, value); !ok) return std::unexpected(ok.error());
  }
  // As dpdk-testpmd's set_tx_pkt_segments: each segment must fit one mbuf (checked once all
  // options are known, since --mbuf-size may follow --txpkts).
  const unsigned room = o.mbuf_size - mbuf_default_headroom;
  for (auto len : o.txpkts)
    if (len > room)
      return fail(
          "--txpkts={}: segment length {} exceeds the {} data bytes of an mbuf (--mbuf-size={} minus {} "
          "headroom); split it into more segments or raise --mbuf-size",
          fmt::join(o.txpkts, ","), len, room, o.mbuf_size, mbuf_default_headroom);
  if (o.max_lro_pkt_size && (o.rx_offloads & rx_offload::tcp_lro) == 0)
    return fail("--max-lro-pkt-size={}: needs --enable-lro", o.max_lro_pkt_size);
  return o;
}

}  // namespace ws::testpmd
