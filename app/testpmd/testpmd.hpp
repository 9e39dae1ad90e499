// The testpmd application state: ports, the mbuf pool, streams and forwarding lcores, and the
// start/stop/teardown sequence. main.cpp parses the command line and drives it.
#pragma once
#include <memory>
#include <vector>

#include "app/testpmd/app_args.hpp"
#include "app/testpmd/eal_args.hpp"
#include "app/testpmd/fwd/engine.hpp"
#include "ws/core/arena.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/port/driver.hpp"

namespace ws::testpmd {

// Port counters at forwarding start, to show what this run moved.
struct PortSnapshot {
  PortStats stats;
  std::uint64_t tsc = 0;
};

struct FwdTotals {
  std::uint64_t rx = 0, tx = 0, dropped = 0, generated = 0, consumed = 0, busy_cycles = 0;
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

  void print_nic_stats(bool throughput);
  void print_forward_stats() const;
  void print_fwd_config() const;
  // Stops ports, returns every mbuf and checks the pool; error if any mbuf is missing.
  Result<void> shutdown();

  FwdTotals totals() const;
  const std::vector<std::unique_ptr<Port>>& ports() const { return ports_; }
  const EalOptions& eal() const { return eal_; }
  const AppOptions& app() const { return app_; }
  const PktmbufPool& pool() const { return *pool_; }
  double forwarding_seconds() const;
  std::uint64_t forwarded_packets() const;  // per engine: what "Mpps" means for the summary
  unsigned forwarding_cores() const { return fwd_core_count_; }
  std::uint64_t tsc_at_start() const { return start_tsc_; }
  const std::vector<PortSnapshot>& start_snapshots() const { return start_; }
  std::uint64_t mbufs_in_use_at_exit() const { return leaked_; }

 private:
  Testpmd(EalOptions eal, AppOptions app) : eal_(std::move(eal)), app_(std::move(app)) {}
  Result<void> create_memory();
  Result<void> create_ports();
  Result<void> setup_streams();

  EalOptions eal_;
  AppOptions app_;
  DriverRegistry registry_;  // outlives the ports it made
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
  std::vector<std::unique_ptr<Port>> ports_;
  FwdConfig fwd_config_;
  const Engine* engine_ = nullptr;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<FwdLcore>> fwd_lcores_;
  std::vector<LcoreThread> lcores_;
  unsigned fwd_core_count_ = 0;
  std::vector<PortSnapshot> start_;
  std::vector<PortSnapshot> last_show_;
  std::uint64_t start_tsc_ = 0;
  std::uint64_t stop_tsc_ = 0;
  std::uint64_t leaked_ = 0;
  bool shut_down_ = false;
};

}  // namespace ws::testpmd
