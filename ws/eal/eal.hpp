// SPDX-License-Identifier: BSD-3-Clause
// Eal: what DPDK's rte_eal_init does for an application, on wirespeed: logging and the SIMD
// level, the main lcore pinned, the built-in drivers, the PCI devices to drive (-a/-b), one arena
// of memory sized for the application and the devices with the IOVA mode they need, a port per
// PCI device then per --vdev, and launching work on lcores. wirespeed-testpmd is built on it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/core/result.hpp"
#include "ws/core/simd.hpp"
#include "ws/eal/eal_args.hpp"
#include "ws/port/driver.hpp"
#include "ws/port/port.hpp"

namespace ws {

/// A command line split at its first "--": the EAL options before it, the application's after.
struct SplitArgs {
  std::vector<std::string> eal;  ///< Arguments before "--" (argv[0] excluded).
  std::vector<std::string> app;  ///< Arguments after "--".
};

/// Splits `argv` (argv[0] excluded) at the first "--"; without one, everything is EAL.
SplitArgs split_args(int argc, const char* const* argv);

/// Sets the SIMD level that dispatch uses (ws/core/simd.hpp) from --force-max-simd-bitwidth and
/// logs the choice at info level. Refused when the option names a level this CPU lacks.
Result<SimdLevel> apply_simd_option(const EalOptions& options);
/// Applies the logging options (--log-level, --syslog) and prints the version for -v, as
/// DPDK's EAL does at start-up.
void apply_log_options(const EalOptions& options);

/// The environment an application runs in: memory, drivers, ports and lcores, created from
/// EalOptions. Owns everything it creates; ports are stopped and destroyed before the pools
/// and the arena they use.
class Eal {
 public:
  /// Applies the log and SIMD options, makes the calling thread the main lcore (pinned),
  /// registers the built-in drivers, finds the PCI devices to drive (those of -a, each checked;
  /// else every device on vfio-pci or uio_pci_generic that a driver takes, but those of -b; none
  /// with --no-pci), opens the VFIO container of those on vfio-pci, maps an arena of
  /// `arena_bytes` (what the application's pools need, e.g. PktmbufPool::memory_bytes(), plus
  /// 4 MiB for drivers' rings; -m when larger; an error when -m is smaller) in the IOVA mode the
  /// devices need (--iova-mode, else IOVAs in the IOMMU's aperture with vfio-pci, the arena
  /// mapped for DMA whole, and physical addresses with uio_pci_generic), and creates one port per PCI device, in
  /// address order, then one per
  /// --vdev, in order (port id = position). Ports are created, not configured. Nothing is
  /// allocated before every device is checked. Errors name the option or device at fault.
  /// `memory_for` says what the arena bytes are for, in the error when -m is too small (e.g.
  /// "8192 mbufs of 2176 bytes; raise -m or lower --total-num-mbufs").
  /// `before_ports`, when given, runs once the arena exists and before any port does (an
  /// application's pools: a port that a peer can reach, such as a vhost-user socket, then
  /// never waits for them).
  static Result<std::unique_ptr<Eal>> create(EalOptions options, std::size_t arena_bytes,
                                             std::string_view memory_for = "this application; raise -m",
                                             const std::function<Result<void>(Eal&)>& before_ports = {});
  /// Stops every port, returns the mbufs they hold, then frees ports, pools and the arena.
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  /// Creates a packet pool in the arena, owned by the Eal (destroyed after the ports).
  Result<PktmbufPool*> create_pktmbuf_pool(const PktmbufPool::Options& options);

  /// The options the Eal was created from.
  const EalOptions& options() const noexcept { return options_; }
  /// The arena pools and rings are carved from.
  Arena& arena() noexcept { return *arena_; }
  /// The driver registry (built-in drivers), for ports created later with create_port().
  DriverRegistry& drivers() noexcept { return drivers_; }
  /// Creates one more port from a device string; its id is the next free one.
  Result<Port*> create_port(std::string_view device);
  /// What a driver is given to create a port here (the arena, the lcore count).
  PortEnv port_env() noexcept {
    return {arena_.get(), static_cast<unsigned>(options_.lcores.size()), nullptr, options_.vfio_intr};
  }
  /// Puts `port` at id `id`, which is a port's (replaced and destroyed) or the next new one, and
  /// returns it. For applications that attach and detach ports (testpmd's `port attach`).
  Port& place_port(std::uint16_t id, std::unique_ptr<Port> port);
  /// Every port, by id.
  const std::vector<std::unique_ptr<Port>>& ports() const noexcept { return ports_; }
  /// The IOVA mode chosen for the arena.
  IovaMode iova_mode() const noexcept { return arena_->iova_mode(); }
  /// Number of ports (ids 0 to port_count() - 1).
  std::uint16_t port_count() const noexcept { return static_cast<std::uint16_t>(ports_.size()); }
  /// Port `id` (id < port_count()).
  Port& port(std::uint16_t id) noexcept { return *ports_[id]; }

  /// The main lcore's id (the calling thread of create()).
  unsigned main_lcore() const noexcept { return options_.main_lcore; }
  /// Every lcore id, main lcore included, in the order given on the command line.
  std::vector<unsigned> lcore_ids() const;
  /// True when `id` is one of the lcores.
  bool has_lcore(unsigned id) const noexcept;

  /// As rte_eal_mp_remote_launch(CALL_MAIN) then rte_eal_mp_wait_lcore: runs `body(lcore)` on
  /// every worker lcore (a pinned thread each) and on the main lcore in the calling thread, and
  /// returns once all have returned.
  void run_on_lcores(const std::function<void(unsigned lcore)>& body);

 private:
  explicit Eal(EalOptions options);
  Result<void> find_pci_devices();  // the PCI devices to drive, checked, before any memory
  Result<void> open_vfio();         // the IOVA mode they need; their VFIO container and fds
  Result<void> create_memory(std::size_t arena_bytes, std::string_view memory_for);
  Result<void> create_ports();

  struct PciPort;  // a PCI device and its device string (eal.cpp: ws/pci stays internal)
  struct Vfio;     // the VFIO container of the devices on vfio-pci
  EalOptions options_;
  DriverRegistry drivers_;
  std::vector<PciPort> pci_;  // in address order (as DPDK's bus scan); outlive their ports
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<Vfio> vfio_;  // after the arena: its DMA mappings go before the arena does
  std::vector<std::unique_ptr<PktmbufPool>> pools_;
  std::vector<std::unique_ptr<Port>> ports_;  // declared last: destroyed before pools and arena
};

}  // namespace ws
