// SPDX-License-Identifier: BSD-3-Clause
// The testpmd application state: ports, the mbuf pool, streams and forwarding lcores, and the
// start/stop/teardown sequence. main.cpp parses the command line and drives it.
#pragma once
#include <poll.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "app/testpmd/app_args.hpp"
#include "app/testpmd/fwd/engine.hpp"
#include "ws/core/arena.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/eal/eal.hpp"
#include "ws/eal/eal_args.hpp"
#include "ws/pci/device.hpp"
#include "ws/port/driver.hpp"

namespace ws::testpmd {

// Port counters at forwarding start, to show what this run moved.
struct PortSnapshot {
  PortStats stats;
  std::uint64_t tsc = 0;
};

// The counts of print_forward_stats' blocks, in dpdk-testpmd's terms.
struct ForwardSums {
  std::uint64_t rx = 0, rx_dropped = 0, tx = 0, tx_dropped = 0, nombuf = 0;

  ForwardSums& operator+=(const ForwardSums& o) noexcept {
    rx += o.rx;
    rx_dropped += o.rx_dropped;
    tx += o.tx;
    tx_dropped += o.tx_dropped;
    nombuf += o.nombuf;
    return *this;
  }
};

// One forwarding lcore and the streams it polls, as start_forwarding assigns them.
struct CorePlan {
  unsigned lcore_id = 0;
  std::vector<Stream*> streams;
};

struct FwdTotals {
  std::uint64_t rx = 0, tx = 0, dropped = 0, generated = 0, consumed = 0, busy_cycles = 0;
  std::uint64_t bad_ip_csum = 0, bad_l4_csum = 0;  // csum mode
};

class Testpmd {
 public:
  // Builds everything short of forwarding: arena, pool, ports (configured and started),
  // streams. Nothing is left half-started on error.
  static Result<std::unique_ptr<Testpmd>> create(EalOptions eal, AppOptions app);
  ~Testpmd();

  Result<void> start_forwarding(unsigned tx_first_bursts);
  void stop_forwarding();  // prints the forward statistics
  bool forwarding() const { return !lcores_.empty(); }
  Result<void> set_forward_mode(std::string_view mode);

  void print_nic_stats(bool throughput, std::optional<std::uint16_t> only = std::nullopt);  // only: one port
  void print_forward_stats() const;
  void print_display_xstats(std::size_t port, double seconds);  // --display-xstats
  void print_fwd_config() const;
  // Stops ports, returns every mbuf and checks the pool; error if any mbuf is missing.
  Result<void> shutdown();
  // Link state change events, as dpdk-testpmd prints them ("Port N: link state change event"):
  // a control thread polls every port's link every 100 ms (virtual devices raise no interrupt
  // here). Off with --no-lsc-interrupt or --mask-event intr_lsc. Stopped by shutdown().
  void start_link_monitor();
  void stop_link_monitor();

  // ---- run-time settings (prompt, control thread). Those that change what the lcores read
  // refuse while forwarding runs; port settings refuse unless the ports are stopped. ----
  Result<void> set_burst(std::uint16_t n);
  Result<void> set_nb_cores(unsigned n);
  Result<void> set_txpkts(std::string_view lengths);  // "64" or "64,128,..." as --txpkts
  Result<void> set_flowgen_clones(std::uint16_t n);
  // As dpdk-testpmd: 1 prints received packets' headers, 2 sent ones, 3 and more both (applied at
  // once if forwarding runs).
  void set_verbose(unsigned level);
  unsigned verbose() const { return verbose_; }
  Result<void> set_promiscuous(std::optional<std::uint16_t> port, bool on);  // nullopt: all
  // `set nbport N`, `set portlist L` and `set eth-peer P MAC`: the streams are rebuilt, so
  // forwarding must be stopped.
  Result<void> set_nb_ports(unsigned n);
  Result<void> set_fwd_port_list(std::vector<std::uint16_t> ports);
  Result<void> set_eth_peer(std::uint16_t port, const MacAddress& mac);
  Result<void> set_port_mac(std::uint16_t port, const MacAddress& mac);  // `mac_addr set`
  Result<void> stop_ports(std::optional<std::uint16_t> port);
  // `port close`: stopped ports give back their mbufs and cannot start until `port reset`.
  Result<void> close_ports(std::optional<std::uint16_t> port);
  // `port reset`: stopped (or closed) ports are configured afresh, queues and all.
  Result<void> reset_ports(std::optional<std::uint16_t> port);
  bool closed(std::uint16_t port) const { return port < closed_.size() && closed_[port]; }
  // `port attach DEVARGS`: a virtual device made, configured (not started), given the lowest
  // detached id or a new one, and added to the forwarding ports. Forwarding stopped.
  Result<std::uint16_t> attach_port(std::string_view devargs);
  // `port detach N` of a closed port: the device is destroyed, its id left empty (ids never
  // move) until an attach reuses it.
  Result<void> detach_port(std::uint16_t port);
  bool detached(std::uint16_t port) const { return port < detached_.size() && detached_[port]; }
  std::size_t attached_ports() const;  // ports not detached
  // Starts ports, first applying a pending "port config" (queues rebuilt, streams redone).
  Result<void> start_ports(std::optional<std::uint16_t> port);
  // what: rxq, txq, rxd or txd; applied to every port at its next start. Ports stopped.
  Result<void> set_port_queues(std::string_view what, std::uint16_t n);
  // csum engine settings of TX port `port` (offloads.cpp): `csum set <layer> hw|sw` (layer ip,
  // udp or tcp) and `tso set <segsz>` (0: off). They enable the port's matching TX offloads,
  // applied at its next start: the port must be stopped, as in dpdk-testpmd.
  Result<void> set_csum_offload(std::uint16_t port, std::string_view layer, bool hw);
  Result<void> set_tso(std::uint16_t port, std::uint16_t segsz);
  // rss_type bits every port hashes when it has several RX queues (0: none). Ports stopped.
  Result<void> set_rss_types(std::uint32_t types);
  void clear_port_stats(std::uint16_t port);
  // The port's xstats since the last clear_port_stats: drivers' own counters run from their
  // creation, so the values at the clear are subtracted, as DPDK's xstats reset does.
  std::vector<XStat> port_xstats(std::uint16_t port) const;
  std::vector<CorePlan> core_plan() const;
  // Puts `tap` (a proxy receiving from `port`, e.g. a capture) in front of the port for every
  // stream, pausing the lcores for the swap if they run; nullptr removes it. Returns the old one.
  std::unique_ptr<Port> swap_rx_tap(std::uint16_t port, std::unique_ptr<Port> tap);
  // Runs `change` (a flow rule change on a port the lcores may poll) with the forwarding lcores
  // paused if they run.
  void run_paused(const std::function<void()>& change);
  const Port* rx_tap(std::uint16_t port) const { return port < rx_taps_.size() ? rx_taps_[port].get() : nullptr; }
  const FwdConfig& fwd_config() const { return fwd_config_; }
  const std::vector<std::unique_ptr<Stream>>& streams() const { return streams_; }
  bool reconfig_pending() const;
  // Held by whoever runs a control operation (the prompt, the telemetry thread), so that one
  // never reads a port another is reconfiguring.
  std::mutex& control_mutex() { return control_mutex_; }

  FwdTotals totals() const;
  // rxonly --rx-ptype-counts: packets of each ptype_class_names class received on `port`.
  std::array<std::uint64_t, ptype_class_names.size()> ptype_counts(std::size_t port) const;
  const std::vector<std::unique_ptr<Port>>& ports() const { return ports_; }
  const EalOptions& eal() const { return eal_; }
  const AppOptions& app() const { return app_; }
  const PktmbufPool& pool() const { return *pool_; }
  /// The environment: memory, drivers and ports.
  Eal& env() noexcept { return *env_; }
  double forwarding_seconds() const;
  std::uint64_t forwarded_packets() const;  // per engine: what "Mpps" means for the summary
  unsigned forwarding_cores() const { return fwd_core_count_; }
  // The ports forwarding uses (--portmask, --portlist, --nb-ports), in increasing order.
  const std::vector<std::uint16_t>& fwd_ports() const { return fwd_ports_; }
  std::uint64_t tsc_at_start() const { return start_tsc_; }
  const std::vector<PortSnapshot>& start_snapshots() const { return start_; }
  std::uint64_t mbufs_in_use_at_exit() const { return leaked_; }

 private:
  Testpmd(EalOptions eal, AppOptions app, std::unique_ptr<Eal> env)
      : eal_(std::move(eal)), app_(std::move(app)), env_(std::move(env)), ports_(env_->ports()) {}
  Result<void> configure_ports();  // the Eal's ports, configured and started as the options say
  // One port's block of print_forward_stats; returns what it adds to the accumulated block.
  ForwardSums print_port_forward_stats(std::size_t port) const;
  // --coremask, or every lcore but the main one; may set app.nb_cores, as dpdk-testpmd does.
  static Result<std::vector<unsigned>> choose_fwd_lcores(const EalOptions& eal, AppOptions& app);
  Result<void> choose_fwd_ports();           // --portmask/--portlist and --nb-ports, checked against the ports
  Result<void> rebuild_fwd_ports();          // after attach/detach: forwarding ports and streams again
  Result<void> configure_new_port(Port& p);  // the command line's queues, offloads and MTU
  Result<void> setup_streams();
  void flush_rx_queues();  // as dpdk-testpmd's flush_fwd_rx_queues
  Result<void> reconfigure_port(Port& p);
  // What configure() gets for `p`: queue counts, and the TX offloads the csum settings enabled.
  PortConfig port_config(const Port& p) const;
  Result<void> apply_csum_config(std::uint16_t port);  // FwdConfig::csum[port] -> port offloads
  void launch_lcores();
  // Joins the lcores if they run, calls `change` (which may rebind streams), relaunches them.
  template <class F>
  void with_lcores_paused(F change);
  Port* rx_source(std::uint16_t port) const;  // capture tap, else verbose proxy, else the port
  Port* tx_target(std::uint16_t port) const;  // verbose proxy (level 2 and more), else the port
  void make_verbose_proxies();                // one per port if verbose > 0

  EalOptions eal_;
  AppOptions app_;
  std::unique_ptr<Eal> env_;                         // memory, drivers, PCI devices and ports; outlives what uses them
  const std::vector<std::unique_ptr<Port>>& ports_;  // env_'s, by id
  PktmbufPool* pool_ = nullptr;                      // env_'s
  FwdConfig fwd_config_;
  const Engine* engine_ = nullptr;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<FwdLcore>> fwd_lcores_;
  std::vector<LcoreThread> lcores_;
  unsigned fwd_core_count_ = 0;
  std::vector<unsigned> fwd_lcore_ids_;   // lcores forwarding may run on, in order
  std::vector<std::uint16_t> fwd_ports_;  // ports forwarding uses
  std::vector<PortSnapshot> start_;
  std::vector<PortSnapshot> last_show_;
  std::vector<std::map<std::string, std::uint64_t>> last_xstats_;
  std::vector<std::map<std::string, std::uint64_t>>
      xstats_base_;  // per port: values at the last clear  // per port: --display-xstats values shown
  std::uint64_t start_tsc_ = 0;
  std::uint64_t stop_tsc_ = 0;
  std::uint64_t leaked_ = 0;
  bool shut_down_ = false;
  unsigned verbose_ = 0;
  std::vector<bool> reconfig_;                        // per port: "port config" not yet applied
  std::vector<bool> closed_;                          // per port: closed, until reset
  std::vector<bool> detached_;                        // per port id: detached (a DetachedPort holds the slot)
  std::vector<std::unique_ptr<Port>> verbose_ports_;  // per port: printing proxies (verbose > 0)
  std::vector<std::unique_ptr<Port>> rx_taps_;        // per port: capture proxies
  std::mutex control_mutex_;
  std::vector<bool> link_at_start_;  // per port: link up right after start-up started it
  std::thread link_monitor_;
  static void wait_link_events(std::vector<pollfd>& fds);
  std::atomic<bool> link_monitor_stop_{false};
};

}  // namespace ws::testpmd
