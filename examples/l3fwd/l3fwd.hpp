// SPDX-License-Identifier: BSD-3-Clause
// What l3fwd and l3fwd-power share: options, the route table (ws/lpm), port set-up and the
// forwarding of a burst. Each IPv4 packet goes to the port its destination's route names, TTL
// decremented (checksum updated, RFC 1624), Ethernet addresses rewritten; unrouted, expired and
// non-IPv4 packets are dropped and counted. Header-only, so that each example stays one
// translation unit that builds with `g++ main.cpp $(pkg-config --cflags --libs wirespeed)`.
#pragma once
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <ws/wirespeed.hpp>

namespace l3fwd {

inline constexpr std::uint16_t max_burst = 32;
inline std::atomic<bool> force_quit{false};

// What the example is called and its usage line, for usage_error (set by each main()).
inline const char* program = "l3fwd";
inline std::string usage_line =
    "l3fwd [EAL options] -- -p PORTMASK [-P] [--config (port,queue,lcore)[,...]] [--rule_ipv4=FILE] "
    "[--route=PREFIX,PORT]... [--eth-dest=X,MM:MM:MM:MM:MM:MM] [--rx-queue-size N] [--tx-queue-size N] "
    "[--parse-ptype] [--lookup=lpm] [-T PERIOD]";

struct Counters {  // per lcore and port, written by that lcore only
  ws::Counter rx, tx, dropped, no_route, bad;
};
struct RxQueue {
  std::uint16_t port, queue;
  unsigned lcore;
};

struct Options {
  std::string portmask, rule_file;
  std::vector<std::string> routes;  // --route PREFIX,PORT
  std::vector<RxQueue> config;      // --config
  std::vector<std::pair<std::uint16_t, ws::MacAddress>> eth_dest;
  std::uint16_t rxd = 1024, txd = 1024;
  unsigned period_s = 0;  // -T (ours): periodic stats
  // The table without --rule_ipv4 or --route: DPDK l3fwd's, 198.18.N.0/24 to port N (16).
  std::uint32_t default_route_base = 0xc6120000u;
  std::uint32_t default_route_step = 1u << 8;
  std::uint32_t default_routes = 16;
};

// An option the example adds: (name, value getter) -> whether it took it. The getter returns the
// option's value (the next argument, or what follows '='), refusing the option when there is none.
using ExtraOption = std::function<bool(const std::string&, const std::function<const std::string&()>&)>;

[[noreturn]] inline void usage_error(const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\nusage: %s\n", program, message.c_str(), usage_line.c_str());
  std::exit(2);
}

inline unsigned number(const std::string& what, const std::string& text, unsigned max) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-' || v > max)
    usage_error(what + " '" + text + "': expected a number 0-" + std::to_string(max));
  return static_cast<unsigned>(v);
}

inline Options parse_app_args(const std::vector<std::string>& args, const ExtraOption& extra = {}) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i], v;
    if (const auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) v = a.substr(eq + 1), a.resize(eq);
    auto value = [&]() -> const std::string& {
      if (v.empty() && i + 1 < args.size()) v = args[++i];
      if (v.empty()) usage_error("option " + a + " needs a value");
      return v;
    };
    if (extra && extra(a, value))
      continue;
    else if (a == "-p")
      o.portmask = value();
    else if (a == "--rule_ipv4")
      o.rule_file = value();
    else if (a == "--route")
      o.routes.push_back(value());
    else if (a == "--rx-queue-size")
      o.rxd = static_cast<std::uint16_t>(number(a, value(), 4096));
    else if (a == "--tx-queue-size")
      o.txd = static_cast<std::uint16_t>(number(a, value(), 4096));
    else if (a == "-T")
      o.period_s = number(a, value(), 86400);
    else if (a == "-P" || a == "-L" || a == "--parse-ptype" || a == "--no-numa")
      continue;  // always so here
    else if (a == "--lookup") {
      if (value() != "lpm") usage_error("--lookup=" + v + ": only lpm is available");
    } else if (a == "--config") {
      const std::string& text = value();
      for (const char* s = text.c_str(); *s;) {
        unsigned port, queue, lcore;
        int used = 0;
        if (std::sscanf(s, " (%u ,%u ,%u )%n", &port, &queue, &lcore, &used) != 3 || used == 0 || port > 63 ||
            queue > 63 || (s[used] != '\0' && s[used] != ','))
          usage_error("--config '" + text +
                      "': expected (port,queue,lcore)[,(port,queue,lcore)...], port and queue < 64");
        o.config.push_back({static_cast<std::uint16_t>(port), static_cast<std::uint16_t>(queue), lcore});
        s += used + (s[used] == ',');
      }
    } else if (a == "--eth-dest") {
      const std::string& text = value();
      const auto comma = text.find(',');
      auto mac = ws::MacAddress::parse(comma == std::string::npos ? "" : text.substr(comma + 1));
      if (!mac) usage_error("--eth-dest '" + text + "': expected PORT,MM:MM:MM:MM:MM:MM");
      o.eth_dest.emplace_back(static_cast<std::uint16_t>(number("--eth-dest port", text.substr(0, comma), 63)), *mac);
    } else
      usage_error("unknown option '" + a + "'");
  }
  if (o.portmask.empty()) usage_error("-p PORTMASK is required");
  return o;
}

// The route file, --route, or the default table (Options::default_route_*).
inline std::vector<ws::Ipv4Route> load_routes(const Options& o) {
  std::vector<ws::Ipv4Route> routes;
  if (!o.rule_file.empty()) {
    auto r = ws::read_ipv4_routes(o.rule_file, 63);
    if (!r) usage_error("--rule_ipv4: " + r.error().message);
    routes = *r;
  }
  for (const auto& text : o.routes) {
    auto r = ws::parse_ipv4_route(text, 63);
    if (!r) usage_error("--route: " + r.error().message);
    routes.push_back(*r);
  }
  if (o.rule_file.empty() && o.routes.empty())
    for (std::uint32_t n = 0; n < o.default_routes; ++n)
      routes.push_back({{o.default_route_base + n * o.default_route_step, 24}, n});
  return routes;
}

inline void print_stats(const std::vector<std::uint16_t>& ports, const std::vector<std::vector<Counters>>& c) {
  std::printf("\nPort statistics ====================================");
  for (std::uint16_t p : ports) {
    std::uint64_t v[5] = {};
    for (const auto& lcore : c) {
      const Counters& k = lcore[p];
      for (int i = 0; const ws::Counter* x : {&k.tx, &k.rx, &k.dropped, &k.no_route, &k.bad}) v[i++] += x->read();
    }
    std::printf("\nStatistics for port %u ------------------------------\nPackets sent: %24" PRIu64
                "\nPackets received: %20" PRIu64 "\nPackets dropped: %21" PRIu64 "\nPackets with no route: %15" PRIu64
                "\nPackets not forwardable: %13" PRIu64,
                p, v[0], v[1], v[2], v[3], v[4]);
  }
  std::printf("\n====================================================\n");
  std::fflush(stdout);
}

// What one lcore forwards with: the shared route table and addresses, its own counters and TX
// queue (queue `txq` of every port) and a buffer per output port.
struct Forwarder {
  ws::Eal& eal;
  const ws::Lpm4& table;
  const std::vector<std::uint16_t>& ports;
  const std::vector<ws::MacAddress>& src;
  const std::vector<ws::MacAddress>& dst;
  std::vector<Counters>& count;
  std::uint16_t txq;
  std::vector<std::vector<ws::Mbuf*>> out;

  // RFC 1812 §5.2.2 checks, TTL included: the destination address of a forwardable packet.
  static bool forwardable(const ws::Mbuf& m, std::uint32_t& addr) {
    const auto* eth = m.data<ws::EtherHdr>();
    const auto* ip = reinterpret_cast<const ws::Ipv4Hdr*>(eth + 1);
    const unsigned ihl = ip->version_ihl & 0xfu;
    addr = ws::from_be32(ip->dst_addr_be);
    return m.data_len >= sizeof(ws::EtherHdr) + sizeof(ws::Ipv4Hdr) &&
           eth->ether_type_be == ws::to_be16(ws::ether_type_ipv4) && (ip->version_ihl >> 4) == 4 && ihl >= 5 &&
           ws::from_be16(ip->total_length_be) >= ihl * 4 && ip->ttl > 1;
  }

  void burst(std::uint16_t in, ws::Mbuf** pkts, std::uint16_t n) {
    std::uint32_t addrs[max_burst], hops[max_burst];
    bool ok[max_burst];
    std::uint32_t bad = 0, unrouted = 0;
    for (std::uint16_t i = 0; i < n; ++i) bad += !(ok[i] = forwardable(*pkts[i], addrs[i]));
    table.lookup_bulk(addrs, hops, n);
    for (std::uint16_t i = 0; i < n; ++i) {
      ws::Mbuf* m = pkts[i];
      if (!ok[i] || hops[i] == ws::lpm_no_route) {
        unrouted += ok[i];
        ws::mbuf_free(m);
        continue;
      }
      auto* eth = m->data<ws::EtherHdr>();
      auto* ip = reinterpret_cast<ws::Ipv4Hdr*>(eth + 1);
      std::uint16_t before, after;  // TTL and protocol: one 16-bit word of the header
      std::memcpy(&before, &ip->ttl, 2);
      --ip->ttl;
      std::memcpy(&after, &ip->ttl, 2);
      ip->hdr_checksum = ws::cksum_update16(ip->hdr_checksum, before, after);
      eth->dst = dst[hops[i]];
      eth->src = src[hops[i]];
      out[hops[i]].push_back(m);
    }
    count[in].rx.add(n);
    count[in].bad.add(bad);
    count[in].no_route.add(unrouted);
    for (std::uint16_t p : ports) {
      auto& o = out[p];
      if (o.empty()) continue;
      const std::uint16_t sent = eal.port(p).tx_burst(txq, o.data(), static_cast<std::uint16_t>(o.size()));
      if (sent < o.size()) ws::mbuf_free_bulk({o.data() + sent, o.size() - sent});
      count[p].tx.add(sent);
      count[p].dropped.add(o.size() - sent);
      o.clear();
    }
  }
};

// DPDK's l3fwd pool: every port's descriptors, a burst and each lcore's cache.
inline ws::PktmbufPool::Options pool_options_for(const ws::EalOptions& eal, const Options& opt) {
  const std::size_t count =
      std::max<std::size_t>(eal.vdevs.size() * (opt.rxd + opt.txd + max_burst + eal.lcores.size() * 256), 8192);
  return {"mbuf_pool", static_cast<std::uint32_t>(count), 256};
}

// The RX queues --config asks for (by default queue 0 of every port on the main lcore), checked
// against -p and the EAL's lcores.
inline std::vector<RxQueue> rx_queue_config(const ws::Eal& e, const Options& opt,
                                            const std::vector<std::uint16_t>& ports, const std::vector<bool>& enabled) {
  std::vector<RxQueue> config = opt.config;
  if (config.empty())
    for (std::uint16_t p : ports) config.push_back({p, 0, e.main_lcore()});
  for (const RxQueue& q : config) {
    const std::string where =
        "--config (" + std::to_string(q.port) + "," + std::to_string(q.queue) + "," + std::to_string(q.lcore) + "): ";
    if (q.port >= e.port_count() || !enabled[q.port])
      usage_error(where + "port " + std::to_string(q.port) + " is not in -p " + opt.portmask);
    if (!e.has_lcore(q.lcore))
      usage_error(where + "lcore " + std::to_string(q.lcore) + " is not one of the EAL lcores");
  }
  return config;
}

// How many RX queues each port has: one past the highest --config gives it.
inline std::vector<std::uint16_t> rx_queue_counts(const std::vector<RxQueue>& config, std::uint16_t port_count) {
  std::vector<std::uint16_t> rx_queues(port_count);
  for (const RxQueue& q : config)
    rx_queues[q.port] = std::max<std::uint16_t>(rx_queues[q.port], static_cast<std::uint16_t>(q.queue + 1));
  return rx_queues;
}

// One route table for every lcore; routes to ports outside -p are skipped, as DPDK's l3fwd does.
inline std::unique_ptr<ws::Lpm4> make_route_table(const ws::Eal& e, const Options& opt,
                                                  const std::vector<bool>& enabled) {
  auto lpm = ws::Lpm4::create({"l3fwd_lpm", 1024, 256, e.options().huge});
  if (!lpm) usage_error(lpm.error().message);
  for (const ws::Ipv4Route& r : load_routes(opt)) {
    if (r.next_hop >= e.port_count() || !enabled[r.next_hop]) {
      std::printf("Skipping route %s: port %u is not enabled\n", r.prefix.to_string().c_str(), r.next_hop);
    } else if (auto ok = (*lpm)->add(r.prefix, r.next_hop); !ok) {
      usage_error((opt.rule_file.empty() ? "--route: " : "--rule_ipv4 " + opt.rule_file + ": ") + ok.error().message);
    }
  }
  return std::move(*lpm);
}

// The destination MAC of each port's packets: 02:00:00:00:00:<port> unless --eth-dest says.
inline std::vector<ws::MacAddress> destination_macs(const Options& opt, std::uint16_t port_count) {
  std::vector<ws::MacAddress> dst(port_count);
  for (std::uint16_t p = 0; p < port_count; ++p)
    dst[p] = ws::MacAddress{{0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(p)}};
  for (const auto& [p, mac] : opt.eth_dest)
    if (p < port_count) dst[p] = mac;
  return dst;
}

// Port p gets its RX queues (at least one) and a TX queue per lcore, and starts; returns its MAC.
inline ws::MacAddress start_port(ws::Port& port, std::uint16_t p, std::uint16_t rx_queues, std::size_t nb_lcores,
                                 const Options& opt, ws::PktmbufPool& pool) {
  const std::uint16_t nb_rx = std::max<std::uint16_t>(rx_queues, 1);
  auto ok = port.configure({nb_rx, static_cast<std::uint16_t>(nb_lcores)});
  for (std::uint16_t q = 0; ok && q < nb_rx; ++q) ok = port.setup_rx_queue(q, {opt.rxd, &pool});
  for (std::uint16_t q = 0; ok && q < nb_lcores; ++q) ok = port.setup_tx_queue(q, {opt.txd});
  if (ok) ok = port.start();
  if (!ok) usage_error("port " + std::to_string(p) + ": " + ok.error().message);
  std::printf("Port %u, MAC address: %s, %u RX queue(s)\n", p, port.mac().to_string().c_str(), rx_queues);
  return port.mac();
}

// What main() sets up before the lcores run: the EAL, the ports started, the route table, the
// addresses and every lcore's counters.
struct App {
  std::unique_ptr<ws::Eal> eal;
  Options opt;
  std::vector<std::uint16_t> ports;  // -p
  std::vector<RxQueue> config;       // --config, checked
  std::unique_ptr<ws::Lpm4> lpm;
  std::vector<unsigned> lcores;
  std::vector<ws::MacAddress> src, dst;
  std::vector<std::vector<Counters>> counters;  // [lcore index][port]

  // Lcore `lcore`'s forwarder: it sends on TX queue <its index in lcores> of every port.
  Forwarder forwarder(unsigned lcore) {
    const auto me = static_cast<std::uint16_t>(std::find(lcores.begin(), lcores.end(), lcore) - lcores.begin());
    Forwarder f{*eal, *lpm, ports, src, dst, counters[me], me, std::vector<std::vector<ws::Mbuf*>>(eal->port_count())};
    for (auto& o : f.out) o.reserve(max_burst);  // no allocation while forwarding
    return f;
  }
  // The RX queues lcore `lcore` polls.
  std::vector<RxQueue> queues_of(unsigned lcore) const {
    std::vector<RxQueue> mine;
    for (const RxQueue& q : config)
      if (q.lcore == lcore) mine.push_back(q);
    return mine;
  }
};

// Parses the command line (`opt` holds the example's defaults, `extra` its own options), creates
// the EAL and starts every port of -p; SIGINT and SIGTERM set force_quit. Exits with code 2,
// naming the value, on anything it cannot honour.
inline App set_up(int argc, char** argv, Options defaults, const ExtraOption& extra = {}) {
  App a;
  const ws::SplitArgs args = ws::split_args(argc, argv);
  auto eal_options = ws::parse_eal_args(args.eal);
  if (!eal_options) usage_error(eal_options.error().message);
  a.opt = parse_app_args(args.app, extra);
  a.opt.default_route_base = defaults.default_route_base;
  a.opt.default_route_step = defaults.default_route_step;
  a.opt.default_routes = defaults.default_routes;
  const ws::PktmbufPool::Options pool_options = pool_options_for(*eal_options, a.opt);
  auto eal = ws::Eal::create(std::move(*eal_options), ws::PktmbufPool::memory_bytes(pool_options));
  if (!eal) usage_error(eal.error().message);
  a.eal = std::move(*eal);
  ws::Eal& e = *a.eal;
  auto mask = ws::parse_port_mask(a.opt.portmask, e.port_count());
  if (!mask) usage_error("-p: " + mask.error().message);
  a.ports = *mask;
  std::vector<bool> enabled(e.port_count());
  for (std::uint16_t p : a.ports) enabled[p] = true;
  a.config = rx_queue_config(e, a.opt, a.ports, enabled);
  const std::vector<std::uint16_t> rx_queues = rx_queue_counts(a.config, e.port_count());
  a.lpm = make_route_table(e, a.opt, enabled);
  auto pool = e.create_pktmbuf_pool(pool_options);
  if (!pool) usage_error(pool.error().message);
  a.lcores = e.lcore_ids();
  a.src.resize(e.port_count());
  a.dst = destination_macs(a.opt, e.port_count());
  for (std::uint16_t p : a.ports) a.src[p] = start_port(e.port(p), p, rx_queues[p], a.lcores.size(), a.opt, **pool);
  a.counters.resize(a.lcores.size());
  for (auto& c : a.counters) c = std::vector<Counters>(e.port_count());
  std::signal(SIGINT, [](int) { force_quit = true; });
  std::signal(SIGTERM, [](int) { force_quit = true; });
  return a;
}

}  // namespace l3fwd
