// SPDX-License-Identifier: BSD-3-Clause
// The EAL half of a dpdk-testpmd command line (everything before "--"): lcores, virtual and
// PCI devices, memory. Same option names and meanings as DPDK's EAL.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/core/result.hpp"
#include "ws/pci/address.hpp"

namespace ws::testpmd {

struct EalOptions {
  std::vector<LcoreConfig> lcores;  // the first (or --main-lcore) is the main lcore
  unsigned main_lcore = 0;
  std::vector<std::string> vdevs;
  // -a/-w "0000:00:04.0[,key=value...]": only these PCI devices (checked addresses); -b: every
  // device but these. Neither: every device bound to uio_pci_generic that a driver takes.
  std::vector<std::string> pci_allow;
  std::vector<pci::Address> pci_block;
  bool no_pci = false;
  std::optional<IovaMode> iova_mode;  // --iova-mode; unset: pa with PCI devices, else va
  HugePolicy huge = HugePolicy::automatic;
  std::size_t memory_mb = 0;        // 0: sized from the pools
  std::string file_prefix = "rte";
  bool telemetry = true;  // --no-telemetry: no telemetry socket
  LogLevel log_level = LogLevel::notice;
};

// Parses args (without argv[0]). Errors name the option, the value and what is accepted.
Result<EalOptions> parse_eal_args(std::span<const std::string> args);
std::string eal_usage();

}  // namespace ws::testpmd
