// SPDX-License-Identifier: BSD-3-Clause
// l3fwd on wirespeed: DPDK's L3 forwarding example with longest-prefix match (ws/lpm). Each
// IPv4 packet goes to the port its destination's route names, TTL decremented (checksum updated,
// RFC 1624), Ethernet addresses rewritten; unrouted, expired and non-IPv4 packets are dropped
// and counted. Routes: DPDK's route file (--rule_ipv4), --route, or DPDK's default table.
// Options, routes, port set-up and forwarding: l3fwd.hpp (shared with examples/l3fwd-power).
#include "l3fwd.hpp"

namespace {

// An lcore's loop until SIGINT or SIGTERM: poll its RX queues; the main lcore also prints the
// statistics every -T seconds.
void run_lcore(l3fwd::App& app, unsigned lcore) {
  l3fwd::Forwarder f = app.forwarder(lcore);
  const std::vector<l3fwd::RxQueue> mine = app.queues_of(lcore);
  const std::uint64_t period = app.opt.period_s * ws::tsc_hz();
  ws::Mbuf* pkts[l3fwd::max_burst];
  std::uint64_t last = ws::rdtsc();
  while (!l3fwd::force_quit.load(std::memory_order_relaxed)) {
    for (const l3fwd::RxQueue& q : mine)
      if (const std::uint16_t n = f.eal.port(q.port).rx_burst(q.queue, pkts, l3fwd::max_burst))
        f.burst(q.port, pkts, n);
    if (lcore == f.eal.main_lcore() && period != 0 && ws::rdtsc() - last >= period) {
      l3fwd::print_stats(app.ports, app.counters);
      last = ws::rdtsc();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  l3fwd::App app = l3fwd::set_up(argc, argv, {});
  app.eal->run_on_lcores([&](unsigned lcore) { run_lcore(app, lcore); });
  l3fwd::print_stats(app.ports, app.counters);
  std::printf("Bye...\n");
  return 0;
}
