// SPDX-License-Identifier: BSD-3-Clause
// The EAL half of a dpdk-testpmd command line (everything before "--"): lcores, virtual and
// PCI devices, memory. Same option names and meanings as DPDK's EAL.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/core/result.hpp"
#include "ws/pci/address.hpp"

namespace ws {

/// The EAL part of a command line, as DPDK's EAL reads it.
struct EalOptions {
  std::vector<LcoreConfig> lcores;  ///< -l, -c or --lcores; default: one lcore per available CPU
  unsigned main_lcore = 0;          ///< --main-lcore; default: the first lcore
  std::vector<std::string> vdevs;   ///< --vdev device strings, in order
  /// -a/-w "0000:00:04.0[,key=value...]": only these PCI devices (checked addresses). Neither
  /// this nor pci_block: every device bound to uio_pci_generic that a driver takes.
  std::vector<std::string> pci_allow;
  std::vector<pci::Address> pci_block;  ///< -b: every PCI device but these
  bool no_pci = false;                  ///< --no-pci: no PCI device at all
  std::optional<IovaMode> iova_mode;    ///< --iova-mode; unset: pa with PCI devices, else va
  HugePolicy huge = HugePolicy::automatic;  ///< --no-huge: never
  std::size_t memory_mb = 0;        ///< -m / --socket-mem; 0: sized from the pools
  std::string file_prefix = "rte";  ///< --file-prefix: names the arena and runtime files
  bool telemetry = true;  ///< --no-telemetry: no telemetry socket (for applications serving one)
  LogLevel log_level = LogLevel::notice;  ///< --log-level
  /// --force-max-simd-bitwidth: 64, 128, 256 or 512 caps the SIMD level dispatch picks
  /// (ws/core/simd.hpp); 0, the default, leaves the CPU's.
  unsigned max_simd_bitwidth = 0;
};

/// Parses args (without argv[0]). Errors name the option, the value and what is accepted.
Result<EalOptions> parse_eal_args(std::span<const std::string> args);
/// One line listing the EAL options accepted, for usage messages.
std::string eal_usage();

/// DPDK applications' -p PORTMASK: hexadecimal ("0x3" or "3"), bit i for port i, of
/// `port_count` ports. The ports named, in increasing order. Refused, naming the text: not
/// hexadecimal, no bit set, or a bit naming a port that does not exist.
Result<std::vector<std::uint16_t>> parse_port_mask(std::string_view text, std::uint16_t port_count);

}  // namespace ws
