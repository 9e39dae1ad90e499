// SPDX-License-Identifier: BSD-3-Clause
// Application option parsing with dpdk-testpmd's names, defaults and limits.
#include "app/testpmd/app_args.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <functional>

#include <fmt/ranges.h>

#include "ws/core/mbuf.hpp"
#include "app/testpmd/fwd/engine.hpp"
#include "ws/core/mempool.hpp"

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

// One accepted option: name, whether it takes a value, and what to do with it.
struct OptionSpec {
  std::string_view name;
  bool has_value;
  std::function<Result<void>(AppOptions&, std::string_view)> apply;
};

template <class T>
auto set_uint(T AppOptions::*field, std::uint64_t min, std::uint64_t max, std::string_view name) {
  return [=](AppOptions& o, std::string_view v) -> Result<void> {
    auto n = parse_uint(name, v, min, max);
    if (!n) return std::unexpected(n.error());
    o.*field = static_cast<T>(*n);
    return {};
  };
}

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {"--forward-mode", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (!find_engine(v)) return fail("--forward-mode={}: unknown mode (accepted: {})", v, engine_names());
         o.forward_mode = std::string(v);
         return {};
       }},
      {"--nb-cores", true, set_uint(&AppOptions::nb_cores, 1, max_lcores - 1, "--nb-cores")},
      {"--nb-ports", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto n = parse_uint("--nb-ports", v, 1, 64);
         if (!n) return std::unexpected(n.error());
         o.nb_ports = static_cast<unsigned>(*n);
         return {};
       }},
      {"--rxq", true, set_uint(&AppOptions::rxq, 1, 64, "--rxq")},
      {"--txq", true, set_uint(&AppOptions::txq, 1, 64, "--txq")},
      {"--rxd", true, set_uint(&AppOptions::rxd, 1, 65535, "--rxd")},
      {"--txd", true, set_uint(&AppOptions::txd, 1, 65535, "--txd")},
      {"--burst", true, set_uint(&AppOptions::burst, 1, max_burst, "--burst")},
      {"--mbcache", true, set_uint(&AppOptions::mbcache, 0, mempool_cache_max, "--mbcache")},
      {"--total-num-mbufs", true, set_uint(&AppOptions::total_num_mbufs, 1025, 1u << 26, "--total-num-mbufs")},
      {"--mbuf-size", true, set_uint(&AppOptions::mbuf_size, 256, 65535, "--mbuf-size")},
      {"--txpkts", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         auto r = parse_txpkts(v);
         if (!r) return std::unexpected(r.error());
         o.txpkts = std::move(*r);
         return {};
       }},
      {"--flowgen-clones", true, set_uint(&AppOptions::flowgen_clones, 0, max_burst, "--flowgen-clones")},
      {"--flowgen-flows", true, set_uint(&AppOptions::flowgen_flows, 1, 1u << 24, "--flowgen-flows")},
      {"--rx-ptype-counts", false,  // wirespeed's own: rxonly counts packet types per port
       [](AppOptions& o, std::string_view) -> Result<void> { o.rx_ptype_counts = true; return {}; }},
      {"--icmpecho-ip", true,  // wirespeed's own: the address icmpecho answers for ([PORT,]A.B.C.D)
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
      {"--eth-peer", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const auto comma = v.find(',');
         if (comma == std::string_view::npos) return fail("--eth-peer={}: expected PORT,XX:XX:XX:XX:XX:XX", v);
         auto port = parse_uint("--eth-peer", v.substr(0, comma), 0, 63);
         if (!port) return std::unexpected(port.error());
         auto mac = MacAddress::parse(v.substr(comma + 1));
         if (!mac) return fail("--eth-peer={}: {}", v, mac.error().message);
         o.eth_peers[static_cast<std::uint16_t>(*port)] = *mac;
         return {};
       }},
      {"--port-topology", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (v == "paired") o.topology = Topology::paired;
         else if (v == "chained") o.topology = Topology::chained;
         else if (v == "loop") o.topology = Topology::loop;
         else return fail("--port-topology={}: accepted paired, chained, loop", v);
         return {};
       }},
      {"--stats-period", true, set_uint(&AppOptions::stats_period_s, 0, 86400, "--stats-period")},
      {"--auto-start", false, [](AppOptions& o, std::string_view) -> Result<void> { o.auto_start = true; return {}; }},
      {"-a", false, [](AppOptions& o, std::string_view) -> Result<void> { o.auto_start = true; return {}; }},
      {"--tx-first", false, [](AppOptions& o, std::string_view) -> Result<void> { o.tx_first = 1; return {}; }},
      {"-i", false, [](AppOptions& o, std::string_view) -> Result<void> { o.interactive = true; return {}; }},
      {"--interactive", false, [](AppOptions& o, std::string_view) -> Result<void> { o.interactive = true; return {}; }},
      {"--cmdline-file", true,
       [](AppOptions& o, std::string_view v) -> Result<void> { o.cmdline_file = std::string(v); return {}; }},
      {"--duration", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         double d = 0;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
         if (v.empty() || ec != std::errc{} || end != v.data() + v.size() || d <= 0 || d > 1e7)
           return fail("--duration={}: expected a number of seconds > 0", v);
         o.duration_s = d;
         return {};
       }},
      {"--summary-json", true,
       [](AppOptions& o, std::string_view v) -> Result<void> { o.summary_json = std::string(v); return {}; }},
      {"--metrics-addr", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         // Loopback only: the endpoint has no authentication (telemetry_metrics.cpp parses it).
         if (!v.starts_with("127.") || v.find(':') == std::string_view::npos)
           return fail("--metrics-addr={}: expected a loopback address and port, e.g. 127.0.0.1:9100", v);
         o.metrics_addr = std::string(v);
         return {};
       }},
      {"--capture", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         if (std::count(v.begin(), v.end(), ',') < 1)
           return fail("--capture={}: expected PORT,FILE[,FILTER] (FILTER in tcpdump syntax)", v);
         o.captures.emplace_back(v);
         return {};
       }},
      {"--record-core-cycles", false,
       [](AppOptions& o, std::string_view) -> Result<void> { o.record_core_cycles = true; return {}; }},
      {"--record-burst-stats", false,
       [](AppOptions& o, std::string_view) -> Result<void> { o.record_burst_stats = true; return {}; }},
      {"--tx-offloads", true,
       [](AppOptions& o, std::string_view v) -> Result<void> {
         const bool hex = v.starts_with("0x") || v.starts_with("0X");
         const std::string_view digits = hex ? v.substr(2) : v;
         std::uint64_t n = 0;
         auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n, hex ? 16 : 10);
         if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
           return fail("--tx-offloads={}: expected a bit mask such as 0xe (DPDK's RTE_ETH_TX_OFFLOAD_* bits)", v);
         o.tx_offloads = n;
         return {};
       }},
      {"--enable-rx-cksum", false,
       [](AppOptions& o, std::string_view) -> Result<void> { o.enable_rx_cksum = true; return {}; }},
      // Ports with several RX queues hash and spread by these (in software where the device cannot).
      {"--rss-ip", false,
       [](AppOptions& o, std::string_view) -> Result<void> { o.rss_types = rss_type::ip; return {}; }},
      {"--rss-udp", false,
       [](AppOptions& o, std::string_view) -> Result<void> { o.rss_types = rss_type::ip | rss_type::udp; return {}; }},
      // Accepted without effect because the condition they ask for always holds here:
      // virtual ports carry no Ethernet CRC, so there is nothing to strip or keep.
      {"--disable-crc-strip", false, [](AppOptions&, std::string_view) -> Result<void> { return {}; }},
  };
  return table;
}

}  // namespace

std::string app_usage() {
  std::string names;
  for (const auto& o : option_table()) names += fmt::format(" {}{}", o.name, o.has_value ? "=V" : "");
  return "application options:" + names;
}

Result<AppOptions> parse_app_args(std::span<const std::string> args) {
  AppOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const auto eq = a.find('=');
    const std::string_view name = std::string_view(a).substr(0, eq);
    const auto& table = option_table();
    const auto it = std::find_if(table.begin(), table.end(), [&](const OptionSpec& s) { return s.name == name; });
    if (it == table.end()) return fail("unsupported option '{}' ({})", a, app_usage());
    std::string_view value;
    if (it->has_value) {
      if (eq != std::string::npos) {
        value = std::string_view(a).substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return fail("option {} needs a value", name);
      }
    } else if (eq != std::string::npos) {
      // --tx-first has no value in dpdk-testpmd; refuse rather than guess.
      return fail("option {} takes no value (got '{}')", name, a);
    }
    if (auto ok = it->apply(o, value); !ok) return std::unexpected(ok.error());
  }
  // As dpdk-testpmd's set_tx_pkt_segments: each segment must fit one mbuf (checked once all
  // options are known, since --mbuf-size may follow --txpkts).
  const unsigned room = o.mbuf_size - mbuf_default_headroom;
  for (auto len : o.txpkts)
    if (len > room)
      return fail("--txpkts={}: segment length {} exceeds the {} data bytes of an mbuf (--mbuf-size={} minus {} "
                  "headroom); split it into more segments or raise --mbuf-size",
                  fmt::join(o.txpkts, ","), len, room, o.mbuf_size, mbuf_default_headroom);
  return o;
}

}  // namespace ws::testpmd
