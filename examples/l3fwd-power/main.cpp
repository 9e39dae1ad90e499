// SPDX-License-Identifier: BSD-3-Clause
// l3fwd-power on wirespeed: DPDK's l3fwd-power in its interrupt-only mode. It forwards as
// examples/l3fwd does (l3fwd.hpp: routes, LPM, port set-up, the forwarding of a burst); an lcore
// polls while its queues bring packets and, once every queue has been empty for 300 µs (what
// DPDK's SUSPEND_THRESHOLD of 300 empty polls lasts at least), arms their RX interrupts
// (Port::rx_intr_enable), sleeps in epoll_wait on their fds, and on the first event disarms them
// and polls again. The frequency scaling modes of DPDK's (legacy, empty poll, telemetry, pmd-mgmt,
// uncore) need cpufreq and are refused with the reason.
#include <sys/epoll.h>
#include <unistd.h>

#include "../l3fwd/l3fwd.hpp"

namespace {

constexpr std::uint32_t min_zero_poll_count = 10;  // DPDK's MIN_ZERO_POLL_COUNT: a queue is idle after these
// How long every queue stays empty before the lcore sleeps. DPDK's counts SUSPEND_THRESHOLD (300)
// empty polls and spins 1 µs (MINIMUM_SLEEP_TIME) after each, and its net_tap answers an empty
// poll without a system call: about 300 µs. Counted in polls, ours would last as long as 300 of
// the port's empty polls cost (on net_tap a read() per queue each), the lcore busy after every
// wake-up and whatever it woke (the frame's receiver on the same CPU) waiting behind it.
constexpr std::uint64_t suspend_us = 300;
constexpr unsigned sleep_timeout_ms = 10;  // DPDK's rte_epoll_wait timeout in sleep_until_rx_interrupt

struct PowerOptions {
  unsigned max_pkt_len = 0;                   // --max-pkt-len; 0: the ports' default MTU
  unsigned sleep_timeout = sleep_timeout_ms;  // --sleep-timeout (ours): the longest sleep, in ms
};

// DPDK l3fwd-power's options that need frequency scaling (cpufreq, uncore), with the reason.
[[noreturn]] void refuse_scaling(const std::string& option) {
  l3fwd::usage_error(option +
                     ": frequency scaling is not available here (no cpufreq driver in a virtual machine); "
                     "only the interrupt-only mode is (--interrupt-only, the mode DPDK picks without cpufreq)");
}

l3fwd::ExtraOption power_options(PowerOptions& p) {
  return [&p](const std::string& a, const std::function<const std::string&()>& value) {
    if (a == "--interrupt-only") return true;
    if (a == "--sleep-timeout") {
      p.sleep_timeout = l3fwd::number(a, value(), 60000);
      if (p.sleep_timeout == 0) l3fwd::usage_error("--sleep-timeout 0: expected 1-60000 (ms)");
      return true;
    }
    if (a == "--max-pkt-len") {
      p.max_pkt_len = l3fwd::number(a, value(), 9600);
      if (p.max_pkt_len < 64)
        l3fwd::usage_error("--max-pkt-len " + std::to_string(p.max_pkt_len) + ": expected 64-9600");
      return true;
    }
    for (const char* o : {"-u", "-U", "--legacy", "--telemetry"})
      if (a == o) refuse_scaling(a);
    for (const char* o : {"-i", "--high-perf-cores", "--perf-config", "--empty-poll", "--pmd-mgmt", "--max-empty-polls",
                          "--pause-duration", "--scale-freq-min", "--scale-freq-max", "-l", "-m", "-h"})
      if (a == o) refuse_scaling(a);
    return false;
  };
}

// One RX queue of an lcore: where it is and how long it has been empty.
struct Queue {
  std::uint16_t port, queue;
  std::uint32_t zero_polls = 0;   // up to min_zero_poll_count + 1
  std::uint64_t empty_since = 0;  // TSC of the first empty poll of this run of empty polls
};

// The lcore's epoll fd with every queue's interrupt fd (data: port << 16 | queue), made on the
// main thread before the lcores run. -1 when a queue has none: the lcore then polls only.
int register_queues(ws::Eal& e, unsigned lcore, const std::vector<l3fwd::RxQueue>& mine) {
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (const l3fwd::RxQueue& q : mine) {
    auto fd = e.port(q.port).rx_intr_fd(q.queue);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = std::uint64_t{q.port} << 16 | q.queue;
    if (!fd || ::epoll_ctl(ep, EPOLL_CTL_ADD, *fd, &ev) != 0) {
      std::printf("L3FWD_POWER: lcore %u: RX interrupt won't enable: %s\n", lcore,
                  fd ? std::strerror(errno) : fd.error().message.c_str());
      ::close(ep);
      return -1;
    }
  }
  return ep;
}

// Arms (on) or disarms every queue's interrupt. A refusal is printed and the lcore polls only.
bool turn_on_off_intr(ws::Eal& e, const std::vector<Queue>& queues, bool on) {
  for (const Queue& q : queues) {
    auto ok = on ? e.port(q.port).rx_intr_enable(q.queue) : e.port(q.port).rx_intr_disable(q.queue);
    if (!ok) {
      std::printf("L3FWD_POWER: RX interrupt won't enable: %s\n", ok.error().message.c_str());
      return false;
    }
  }
  return true;
}

// Sleeps until a queue's interrupt fires or DPDK's 10 ms pass; logs as DPDK's
// sleep_until_rx_interrupt does (the sleep only after a wake-up by traffic, not after a timeout).
void sleep_until_rx_interrupt(int ep, unsigned lcore, std::size_t queues, unsigned timeout_ms, bool& woken) {
  if (woken) std::printf("L3FWD_POWER: lcore %u sleeps until interrupt triggers\n", lcore);
  epoll_event ev[l3fwd::max_burst];
  const int n = ::epoll_wait(ep, ev, static_cast<int>(std::min<std::size_t>(queues, l3fwd::max_burst)),
                             static_cast<int>(timeout_ms));
  for (int i = 0; i < n; ++i)
    std::printf("L3FWD_POWER: lcore %u is waked up from rx interrupt on port %u queue %u\n", lcore,
                static_cast<unsigned>(ev[i].data.u64 >> 16), static_cast<unsigned>(ev[i].data.u64 & 0xffff));
  if (n > 0 || woken) std::fflush(stdout);
  woken = n > 0;
}

// One pass over the lcore's queues; returns whether every queue has been empty long enough to
// sleep (more than DPDK's MIN_ZERO_POLL_COUNT polls and suspend_us). The TSC is read only on
// empty polls: under load the pass costs what l3fwd's does.
bool poll_once(l3fwd::Forwarder& f, std::vector<Queue>& queues, std::uint64_t suspend_tsc) {
  ws::Mbuf* pkts[l3fwd::max_burst];
  bool all_idle = true;
  for (Queue& q : queues) {
    const std::uint16_t n = f.eal.port(q.port).rx_burst(q.queue, pkts, l3fwd::max_burst);
    if (n != 0) {
      q.zero_polls = 0;
      f.burst(q.port, pkts, n);
      all_idle = false;
      continue;
    }
    if (q.zero_polls == 0) q.empty_since = ws::rdtsc();
    if (q.zero_polls <= min_zero_poll_count) ++q.zero_polls;
    all_idle = all_idle && q.zero_polls > min_zero_poll_count && ws::rdtsc() - q.empty_since >= suspend_tsc;
  }
  return all_idle;
}

// An lcore's loop until SIGINT or SIGTERM (DPDK's main_intr_loop); the main lcore also prints
// the statistics every -T seconds.
void run_lcore(l3fwd::App& app, unsigned lcore, int ep, unsigned timeout_ms) {
  l3fwd::Forwarder f = app.forwarder(lcore);
  std::vector<Queue> queues;
  for (const l3fwd::RxQueue& q : app.queues_of(lcore)) queues.push_back({q.port, q.queue});
  const std::uint64_t period = app.opt.period_s * ws::tsc_hz();
  const std::uint64_t suspend_tsc = suspend_us * ws::tsc_hz() / 1000000;
  const bool main_lcore = lcore == f.eal.main_lcore();
  if (queues.empty() && !main_lcore) {
    std::printf("L3FWD_POWER: lcore %u has nothing to do\n", lcore);
    return;
  }
  bool intr = ep >= 0 && !queues.empty();
  bool woken = false;
  std::uint64_t last = ws::rdtsc();
  while (!l3fwd::force_quit.load(std::memory_order_relaxed)) {
    if (poll_once(f, queues, suspend_tsc) && intr) {
      intr = turn_on_off_intr(f.eal, queues, true);
      if (intr) sleep_until_rx_interrupt(ep, lcore, queues.size(), timeout_ms, woken);
      intr = turn_on_off_intr(f.eal, queues, false) && intr;
    } else if (queues.empty()) {
      ::usleep(10000);  // the main lcore with no queue: statistics only
    }
    if (main_lcore && period != 0 && ws::rdtsc() - last >= period) {
      l3fwd::print_stats(app.ports, app.counters);
      last = ws::rdtsc();
    }
  }
}

void print_lcore_queues(const l3fwd::App& app) {
  for (unsigned lcore : app.lcores) {
    const std::vector<l3fwd::RxQueue> mine = app.queues_of(lcore);
    if (mine.empty()) continue;
    std::printf("L3FWD_POWER: entering main interrupt loop on lcore %u\n", lcore);
    for (const l3fwd::RxQueue& q : mine)
      std::printf("L3FWD_POWER:  -- lcoreid=%u portid=%u rxqueueid=%u\n", lcore, q.port, q.queue);
  }
}

}  // namespace

int main(int argc, char** argv) {
  l3fwd::program = "l3fwd-power";
  l3fwd::usage_line =
      "l3fwd-power [EAL options] -- -p PORTMASK [-P] [--config (port,queue,lcore)[,...]] [--interrupt-only] "
      "[--max-pkt-len PKTLEN] [--no-numa] [--parse-ptype] [--rule_ipv4=FILE] [--route=PREFIX,PORT]... "
      "[--eth-dest=X,MM:MM:MM:MM:MM:MM] [--rx-queue-size N] [--tx-queue-size N] [--sleep-timeout MS] [-T PERIOD]";
  PowerOptions power;
  l3fwd::Options defaults;  // DPDK l3fwd-power's table: N+1.1.1.0/24 to port N, 8 routes
  defaults.default_route_base = 0x01010100u;
  defaults.default_route_step = 1u << 24;
  defaults.default_routes = 8;
  l3fwd::App app = l3fwd::set_up(argc, argv, defaults, power_options(power));
  std::printf("L3FWD_POWER: Selected operation mode: interrupt-only\n");
  for (std::uint16_t p : app.ports)
    if (power.max_pkt_len != 0)
      if (auto ok = app.eal->port(p).set_mtu(static_cast<std::uint16_t>(power.max_pkt_len - 18)); !ok)
        l3fwd::usage_error("--max-pkt-len " + std::to_string(power.max_pkt_len) + ": " + ok.error().message);
  std::vector<int> epoll_fds;
  for (unsigned lcore : app.lcores) epoll_fds.push_back(register_queues(*app.eal, lcore, app.queues_of(lcore)));
  print_lcore_queues(app);
  std::fflush(stdout);
  app.eal->run_on_lcores([&](unsigned lcore) {
    const auto i =
        static_cast<std::size_t>(std::find(app.lcores.begin(), app.lcores.end(), lcore) - app.lcores.begin());
    run_lcore(app, lcore, epoll_fds[i], power.sleep_timeout);
  });
  for (int ep : epoll_fds)
    if (ep >= 0) ::close(ep);
  l3fwd::print_stats(app.ports, app.counters);
  std::printf("Bye...\n");
  return 0;
}
