// SPDX-License-Identifier: BSD-3-Clause
// 82574L control path on its register BAR: reset, MAC address, link, receive filter and the
// hardware statistics registers. Everything polls with a deadline: a device that does not
// answer is an error naming it, never a hang.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/drivers/e1000/e1000_regs.hpp"
#include "ws/net/ether.hpp"
#include "ws/pci/device.hpp"
#include "ws/port/port.hpp"

namespace ws::e1000 {

// Interrupts masked, RX and TX off, global reset (CTRL.RST), which the device clears when
// done (§14.5). Refused if RST is still set after `timeout`.
Result<void> reset(const pci::Bar& bar, std::string_view who, std::chrono::milliseconds timeout);
// Receive address 0 (RAL0/RAH0, loaded from the NVM at reset); words 0-2 of the EEPROM through
// EERD when RAH0 is not marked valid.
Result<MacAddress> read_mac(const pci::Bar& bar, std::string_view who);
// CTRL.SLU, then STATUS.LU within `timeout` (0: do not wait).
Result<void> link_up(const pci::Bar& bar, std::string_view who, std::chrono::milliseconds timeout);
LinkStatus read_link(const pci::Bar& bar);
// Unicast and multicast promiscuous on or off; broadcast always accepted (ARP).
void set_promiscuous(const pci::Bar& bar, bool on);

// The clear-on-read statistics registers, accumulated into 64-bit totals. Control path; the
// caller serialises calls (every read clears the device's counts).
class HwStats {
 public:
  void accumulate(const pci::Bar& bar);
  std::uint64_t get(std::uint32_t reg) const { return totals_[(reg - reg::stats_begin) / 4]; }
  void add_to(PortStats& s) const;                 // DPDK em's mapping onto rte_eth_stats
  void add_xstats(std::vector<XStat>& out) const;  // every register, by DPDK's xstat names

 private:
  std::array<std::uint64_t, (reg::stats_end - reg::stats_begin) / 4> totals_{};
};

}  // namespace ws::e1000
