// SPDX-License-Identifier: BSD-3-Clause
// What tests/pci_guest_probe uses to show the IOMMU's isolation: one RX descriptor of a started
// net_e1000_em port given a buffer address that is not ours. Built only into test builds
// (WS_TESTING, set when WS_TESTS is on); no application and no path of wirespeed-testpmd calls it.
#pragma once
#include <cstdint>
#include <optional>

#include "ws/core/result.hpp"
#include "ws/port/port.hpp"

namespace ws::e1000::testing {

/// Points the next RX descriptor of `port` (net_e1000_em, started, nothing received waiting) at
/// `iova`. Refused for another driver or a stopped port.
Result<void> post_stray_rx(Port& port, std::uint64_t iova);
/// Whether the device has filled that descriptor; if so, its frame length, the queue's error
/// counted and the descriptor given back with our own buffer.
Result<std::optional<std::uint16_t>> take_stray_rx(Port& port);

}  // namespace ws::e1000::testing
