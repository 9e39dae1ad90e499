// SPDX-License-Identifier: BSD-3-Clause
// l2fwd on wirespeed: DPDK's L2 forwarding example. Enabled ports are paired in order (0<->1,
// 2<->3); what one receives the other sends, with the destination MAC set to 02:00:00:00:00:<port>
// and the source to the sending port's. Per-port counts every -T seconds and at exit.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <ws/wirespeed.hpp>

namespace {

constexpr std::uint16_t max_burst = 32;
constexpr std::uint16_t descriptors = 1024;
constexpr unsigned max_ports_per_lcore = 16;
std::atomic<bool> force_quit{false};

struct PortCounters {  // written by the lcore that receives on (or sends to) the port
  ws::Counter tx, rx, dropped;
};

struct Options {
  std::vector<std::uint16_t> ports;  // from -p, filled once the ports exist
  std::string portmask;
  unsigned per_lcore = 1;  // -q
  unsigned period_s = 10;  // -T
  bool mac_updating = true;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr,
               "l2fwd: error: %s\nusage: l2fwd [EAL options] -- -p PORTMASK [-q NQ] [-T PERIOD] "
               "[--[no-]mac-updating]\n",
               message.c_str());
  std::exit(2);
}

unsigned parse_number(const std::string& option, const std::string& text, unsigned min, unsigned max) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || text[0] == '-' || v < min || v > max)
    usage_error(option + " '" + text + "': expected a number " + std::to_string(min) + "-" + std::to_string(max));
  return static_cast<unsigned>(v);
}

Options parse_app_args(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) usage_error("option " + a + " needs a value");
      return args[++i];
    };
    if (a == "-p")
      o.portmask = value();
    else if (a == "-q")
      o.per_lcore = parse_number("-q", value(), 1, max_ports_per_lcore);
    else if (a == "-T")
      o.period_s = parse_number("-T", value(), 0, 86400);
    else if (a == "--mac-updating")
      o.mac_updating = true;
    else if (a == "--no-mac-updating")
      o.mac_updating = false;
    else
      usage_error("unknown option '" + a + "'");
  }
  if (o.portmask.empty()) usage_error("-p PORTMASK is required");
  return o;
}

void print_stats(const std::vector<std::uint16_t>& ports, const std::vector<PortCounters>& c) {
  std::uint64_t tx = 0, rx = 0, dropped = 0;
  std::printf("\033[2J\033[1;1H\nPort statistics ====================================");
  for (std::uint16_t p : ports) {
    std::printf("\nStatistics for port %u ------------------------------\nPackets sent: %24" PRIu64
                "\nPackets received: %20" PRIu64 "\nPackets dropped: %21" PRIu64,
                p, c[p].tx.read(), c[p].rx.read(), c[p].dropped.read());
    tx += c[p].tx.read(), rx += c[p].rx.read(), dropped += c[p].dropped.read();
  }
  std::printf("\nAggregate statistics ===============================\nTotal packets sent: %18" PRIu64
              "\nTotal packets received: %14" PRIu64 "\nTotal packets dropped: %15" PRIu64
              "\n====================================================\n",
              tx, rx, dropped);
  std::fflush(stdout);
}

// DPDK's l2fwd pool: every port's descriptors, a burst and each lcore's cache.
ws::PktmbufPool::Options pool_options_for(const ws::EalOptions& eal) {
  const std::size_t nb_ports = eal.vdevs.size();
  const std::size_t nb_lcores = eal.lcores.size();
  const std::size_t count = std::max<std::size_t>(nb_ports * (2 * descriptors + max_burst + nb_lcores * 256), 8192);
  return {"mbuf_pool", static_cast<std::uint32_t>(count), 256};
}

// The port each port sends to: pairs in order; an odd last port sends to itself.
std::vector<std::uint16_t> pair_ports(const std::vector<std::uint16_t>& ports, std::uint16_t port_count) {
  std::vector<std::uint16_t> dst(port_count);
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const std::uint16_t p = ports[i];
    dst[p] = i % 2 == 1 ? ports[i - 1] : (i + 1 < ports.size() ? ports[i + 1] : p);
  }
  if (ports.size() % 2) std::printf("Notice: odd number of ports in portmask.\n");
  return dst;
}

// Each lcore (the main one included) receives on up to -q ports: the ports each lcore polls,
// in the order of `lcores`.
std::vector<std::vector<std::uint16_t>> assign_rx_ports(const Options& opt, const std::vector<unsigned>& lcores,
                                                        const std::vector<std::uint16_t>& dst) {
  std::vector<std::vector<std::uint16_t>> rx_ports(lcores.size());
  std::size_t lc = 0;
  for (std::uint16_t p : opt.ports) {
    while (lc < lcores.size() && rx_ports[lc].size() >= opt.per_lcore) ++lc;
    if (lc == lcores.size())
      usage_error("not enough lcores for -q " + std::to_string(opt.per_lcore) + " and -p " + opt.portmask);
    rx_ports[lc].push_back(p);
    std::printf("Lcore %u: RX port %u TX port %u\n", lcores[lc], p, dst[p]);
  }
  return rx_ports;
}

// One RX and one TX queue, promiscuous, started.
void start_port(ws::Port& port, std::uint16_t p, ws::PktmbufPool& pool) {
  auto ok = port.configure({});
  if (ok) ok = port.setup_rx_queue(0, {descriptors, &pool});
  if (ok) ok = port.setup_tx_queue(0, {descriptors});
  if (ok) ok = port.set_promiscuous(true);
  if (ok) ok = port.start();
  if (!ok) usage_error("port " + std::to_string(p) + ": " + ok.error().message);
  std::printf("Port %u, MAC address: %s\n", p, port.mac().to_string().c_str());
}

// What the lcores share while they forward.
struct Forwarding {
  ws::Eal& eal;
  const Options& opt;
  std::vector<std::uint16_t> dst;  // the port each port's packets go to
  std::vector<PortCounters> counters;
};

// A burst received on port p goes out of its pair, addressed as -p's help says (unless
// --no-mac-updating); what the TX queue does not take is dropped.
void forward(Forwarding& fwd, std::uint16_t p, ws::Mbuf** pkts, std::uint16_t n) {
  const std::uint16_t d = fwd.dst[p];
  ws::Port& out = fwd.eal.port(d);
  if (fwd.opt.mac_updating) {
    const ws::MacAddress src = out.mac(), to{{0x02, 0, 0, 0, 0, static_cast<std::uint8_t>(d)}};
    for (std::uint16_t i = 0; i < n; ++i) {
      auto* eth = pkts[i]->data<ws::EtherHdr>();
      eth->dst = to;
      eth->src = src;
    }
  }
  const std::uint16_t sent = out.tx_burst(0, pkts, n);
  if (sent < n) ws::mbuf_free_bulk({pkts + sent, std::size_t(n - sent)});
  fwd.counters[p].rx.add(n);
  fwd.counters[d].tx.add(sent);
  fwd.counters[d].dropped.add(n - sent);
}

// An lcore's loop until SIGINT or SIGTERM: poll its ports; the main lcore also prints the
// statistics every -T seconds.
void run_lcore(Forwarding& fwd, const std::vector<std::uint16_t>& mine, bool main) {
  const std::uint64_t period = fwd.opt.period_s * ws::tsc_hz();
  ws::Mbuf* pkts[max_burst];
  std::uint64_t last = ws::rdtsc();
  while (!force_quit.load(std::memory_order_relaxed)) {
    for (std::uint16_t p : mine)
      if (const std::uint16_t n = fwd.eal.port(p).rx_burst(0, pkts, max_burst); n != 0) forward(fwd, p, pkts, n);
    if (main && period != 0 && ws::rdtsc() - last >= period) {
      print_stats(fwd.opt.ports, fwd.counters);
      last = ws::rdtsc();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const ws::SplitArgs args = ws::split_args(argc, argv);
  auto eal_options = ws::parse_eal_args(args.eal);
  if (!eal_options) usage_error(eal_options.error().message);
  Options opt = parse_app_args(args.app);
  const ws::PktmbufPool::Options pool_options = pool_options_for(*eal_options);
  auto eal = ws::Eal::create(std::move(*eal_options), ws::PktmbufPool::memory_bytes(pool_options));
  if (!eal) usage_error(eal.error().message);
  ws::Eal& e = **eal;
  if (e.port_count() == 0) usage_error("no ports: give them with --vdev (e.g. --vdev net_null0 --vdev net_null1)");
  auto ports = ws::parse_port_mask(opt.portmask, e.port_count());
  if (!ports) usage_error("-p: " + ports.error().message);
  opt.ports = *ports;
  auto pool = e.create_pktmbuf_pool(pool_options);
  if (!pool) usage_error(pool.error().message);

  Forwarding fwd{e, opt, pair_ports(opt.ports, e.port_count()), std::vector<PortCounters>(e.port_count())};
  const std::vector<unsigned> lcores = e.lcore_ids();
  const std::vector<std::vector<std::uint16_t>> rx_ports = assign_rx_ports(opt, lcores, fwd.dst);
  for (std::uint16_t p : opt.ports) start_port(e.port(p), p, **pool);
  std::signal(SIGINT, [](int) { force_quit = true; });
  std::signal(SIGTERM, [](int) { force_quit = true; });

  e.run_on_lcores([&](unsigned lcore) {
    const auto me = static_cast<std::size_t>(std::find(lcores.begin(), lcores.end(), lcore) - lcores.begin());
    run_lcore(fwd, rx_ports[me], lcore == e.main_lcore());
  });
  print_stats(opt.ports, fwd.counters);
  for (std::uint16_t p : opt.ports) std::printf("Closing port %u... Done\n", p);
  std::printf("Bye...\n");
  return 0;
}
