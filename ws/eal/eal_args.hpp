// SPDX-License-Identifier: BSD-3-Clause
// The EAL half of a dpdk-testpmd command line (everything before "--"): lcores, virtual and
// PCI devices, memory. Same option names and meanings as DPDK's EAL.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/core/result.hpp"
#include "ws/pci/address.hpp"
#include "ws/pci/intr_mode.hpp"

namespace ws {

/// How an option of DPDK's is taken here (docs/testpmd.md lists every one).
enum class OptionStatus {
  honoured,  ///< It does what it does in DPDK.
  accepted,  ///< Accepted and checked, with no effect: what it asks for holds here by construction.
  refused,   ///< Refused with the reason: it needs something wirespeed does not have.
};
/// "honoured", "accepted" or "refused".
std::string_view to_string(OptionStatus s);

/// One option as `--help` and docs/testpmd.md describe it.
struct OptionDoc {
  std::string_view name;  ///< "--rxq", "-l"
  OptionStatus status;    ///< How it is taken.
  std::string_view why;   ///< accepted: why it changes nothing here; refused: what is missing
};

/// The EAL part of a command line, as DPDK's EAL reads it.
struct EalOptions {
  std::vector<LcoreConfig> lcores;  ///< -l, -c or --lcores; default: one lcore per available CPU
  unsigned main_lcore = 0;          ///< --main-lcore; default: the first lcore
  std::vector<std::string> vdevs;   ///< --vdev device strings, in order
  /// -a/-w "0000:00:04.0[,key=value...]": only these PCI devices (checked addresses). Neither
  /// this nor pci_block: every device bound to uio_pci_generic that a driver takes.
  std::vector<std::string> pci_allow;
  std::vector<pci::Address> pci_block;      ///< -b: every PCI device but these
  bool no_pci = false;                      ///< --no-pci: no PCI device at all
  std::optional<pci::IntrMode> vfio_intr;   ///< --vfio-intr; unset: MSI-X, else MSI, else INTx, as the device has
  std::optional<IovaMode> iova_mode;        ///< --iova-mode; unset: pa with PCI devices, else va
  HugePolicy huge = HugePolicy::automatic;  ///< --no-huge: never
  std::size_t memory_mb = 0;                ///< -m / --socket-mem; 0: sized from the pools
  std::string file_prefix = "rte";          ///< --file-prefix: names the arena and runtime files
  bool telemetry = true;                    ///< --no-telemetry: no telemetry socket (for applications serving one)
  LogLevel log_level = LogLevel::notice;    ///< --log-level
  /// --force-max-simd-bitwidth: 64, 128, 256 or 512 caps the SIMD level dispatch picks
  /// (ws/core/simd.hpp); 0, the default, leaves the CPU's.
  unsigned max_simd_bitwidth = 0;
  int syslog_facility = -1;  ///< --syslog FACILITY: log lines also go to syslog (LOG_* facility)
  bool help = false;         ///< -h / --help: print the usage and exit
  bool version = false;      ///< -v: print the version at start-up
};

/// Parses args (without argv[0]). Errors name the option, the value and what is accepted.
Result<EalOptions> parse_eal_args(std::span<const std::string> args);
/// DPDK's EAL usage, with what each option does here.
std::string eal_usage();
/// Every EAL option DPDK 22.11 has.
std::vector<OptionDoc> eal_option_docs();

/// DPDK applications' -p PORTMASK: hexadecimal ("0x3" or "3"), bit i for port i, of
/// `port_count` ports. The ports named, in increasing order. Refused, naming the text: not
/// hexadecimal, no bit set, or a bit naming a port that does not exist.
Result<std::vector<std::uint16_t>> parse_port_mask(std::string_view text, std::uint16_t port_count);

}  // namespace ws
