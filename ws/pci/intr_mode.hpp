// SPDX-License-Identifier: BSD-3-Clause
// How a PCI device's interrupts are delivered, as DPDK's EAL option --vfio-intr names it: apart
// from ws/pci/irq.hpp, so that the EAL's options (a public header) need nothing else of ws/pci.
#pragma once
#include <cstdint>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws::pci {

/// How interrupts are delivered (DPDK's --vfio-intr=legacy|msi|msix).
enum class IntrMode : std::uint8_t { legacy, msi, msix };
/// Parses "legacy", "msi" or "msix", as DPDK's EAL.
Result<IntrMode> parse_intr_mode(std::string_view text);
/// The name parse_intr_mode() takes.
std::string_view intr_mode_name(IntrMode mode);

}  // namespace ws::pci
