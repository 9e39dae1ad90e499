// SPDX-License-Identifier: BSD-3-Clause
// 82574L reset, MAC, link, filter and statistics registers.
#include "ws/drivers/e1000/e1000_hw.hpp"

#include <thread>

namespace ws::e1000 {
namespace {

using Clock = std::chrono::steady_clock;

// Polls `done` every 100 us until it holds or `timeout` passes; whether it held.
template <class F>
bool poll_until(F done, std::chrono::milliseconds timeout) {
  const auto end = Clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (Clock::now() >= end) return done();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

struct StatReg {
  std::uint32_t reg;
  std::string_view name;  // DPDK's igb/em xstat name
  bool wide;              // low half of a 64-bit pair (the high half follows at reg + 4)
};

// §10.2.7; GORC/GOTC/TOR/TOT are 64-bit pairs, read low then high (reading high clears both).
constexpr StatReg stat_regs[] = {
    {0x4000, "rx_crc_errors", false},
    {0x4004, "rx_align_errors", false},
    {0x4008, "rx_symbol_errors", false},
    {0x400c, "rx_errors_rxerrc", false},
    {0x4010, "rx_missed_packets", false},
    {0x4014, "tx_single_collision_packets", false},
    {0x4018, "tx_excessive_collision_packets", false},
    {0x401c, "tx_multiple_collision_packets", false},
    {0x4020, "tx_late_collisions", false},
    {0x4028, "tx_total_collisions", false},
    {0x4030, "tx_deferred_packets", false},
    {0x4034, "tx_no_carrier_sense_packets", false},
    {0x4038, "rx_sequence_errors", false},
    {0x403c, "rx_carrier_ext_errors", false},
    {0x4040, "rx_length_errors", false},
    {0x4048, "rx_xon_packets", false},
    {0x404c, "tx_xon_packets", false},
    {0x4050, "rx_xoff_packets", false},
    {0x4054, "tx_xoff_packets", false},
    {0x4058, "rx_flow_control_unsupported_packets", false},
    {0x405c, "rx_size_64_packets", false},
    {0x4060, "rx_size_65_to_127_packets", false},
    {0x4064, "rx_size_128_to_255_packets", false},
    {0x4068, "rx_size_256_to_511_packets", false},
    {0x406c, "rx_size_512_to_1023_packets", false},
    {0x4070, "rx_size_1024_to_max_packets", false},
    {0x4074, "rx_good_packets_gprc", false},
    {0x4078, "rx_broadcast_packets", false},
    {0x407c, "rx_multicast_packets", false},
    {0x4080, "tx_good_packets_gptc", false},
    {0x4088, "rx_good_bytes_gorc", true},
    {0x4090, "tx_good_bytes_gotc", true},
    {0x40a0, "rx_no_buffers", false},
    {0x40a4, "rx_undersize_errors", false},
    {0x40a8, "rx_fragment_errors", false},
    {0x40ac, "rx_oversize_errors", false},
    {0x40b0, "rx_jabber_errors", false},
    {0x40b4, "rx_management_packets", false},
    {0x40b8, "rx_management_dropped", false},
    {0x40bc, "tx_management_packets", false},
    {0x40c0, "rx_total_bytes", true},
    {0x40c8, "tx_total_bytes", true},
    {0x40d0, "rx_total_packets", false},
    {0x40d4, "tx_total_packets", false},
    {0x40d8, "tx_size_64_packets", false},
    {0x40dc, "tx_size_65_to_127_packets", false},
    {0x40e0, "tx_size_128_to_255_packets", false},
    {0x40e4, "tx_size_256_to_511_packets", false},
    {0x40e8, "tx_size_512_to_1023_packets", false},
    {0x40ec, "tx_size_1023_to_max_packets", false},
    {0x40f0, "tx_multicast_packets", false},
    {0x40f4, "tx_broadcast_packets", false},
    {0x40f8, "tx_tso_packets", false},
    {0x40fc, "tx_tso_errors", false},
};

}  // namespace

Result<void> reset(const pci::Bar& bar, std::string_view who, std::chrono::milliseconds timeout) {
  bar.write32(reg::imc, 0xffffffffu);
  bar.write32(reg::rctl, 0);
  bar.write32(reg::tctl, tctl::psp);
  (void)bar.read32(reg::status);  // flush the writes before the reset
  bar.write32(reg::ctrl, bar.read32(reg::ctrl) | ctrl::rst);
  if (!poll_until([&] { return (bar.read32(reg::ctrl) & ctrl::rst) == 0; }, timeout))
    return fail(
        "PCI device {}: the device did not complete its reset (CTRL.RST still set after {} ms); check that "
        "it is an 82574L and powered (D0), or reset it with: echo 1 > /sys/bus/pci/devices/{}/reset",
        who, timeout.count(), who);
  bar.write32(reg::imc, 0xffffffffu);  // the reset unmasked nothing, but say it: we poll
  (void)bar.read32(reg::icr);          // clears pending causes
  return {};
}

Result<MacAddress> read_mac(const pci::Bar& bar, std::string_view who) {
  const std::uint32_t ral = bar.read32(reg::ral0), rah = bar.read32(reg::rah0);
  MacAddress mac{};
  if ((rah & (1u << 31)) != 0) {  // RAH.AV: address valid
    for (int i = 0; i < 4; ++i) mac.bytes[i] = static_cast<std::uint8_t>(ral >> (8 * i));
    mac.bytes[4] = static_cast<std::uint8_t>(rah);
    mac.bytes[5] = static_cast<std::uint8_t>(rah >> 8);
    return mac;
  }
  for (std::uint32_t word = 0; word < 3; ++word) {
    bar.write32(reg::eerd, (word << eerd::addr_shift) | eerd::start);
    std::uint32_t v = 0;
    if (!poll_until([&] { return ((v = bar.read32(reg::eerd)) & eerd::done) != 0; }, std::chrono::milliseconds(10)))
      return fail("PCI device {}: no valid MAC in RAL0/RAH0 and the EEPROM did not answer a read of word {}", who,
                  word);
    mac.bytes[2 * word] = static_cast<std::uint8_t>(v >> eerd::data_shift);
    mac.bytes[2 * word + 1] = static_cast<std::uint8_t>(v >> (eerd::data_shift + 8));
  }
  return mac;
}

Result<void> link_up(const pci::Bar& bar, std::string_view who, std::chrono::milliseconds timeout) {
  std::uint32_t c = bar.read32(reg::ctrl);
  c = (c | ctrl::slu) & ~(ctrl::frcspd | ctrl::frcdplx | ctrl::phy_rst | ctrl::vme);
  bar.write32(reg::ctrl, c);
  if (timeout.count() == 0) return {};
  if (!poll_until([&] { return (bar.read32(reg::status) & status::lu) != 0; }, timeout))
    return fail(
        "PCI device {}: no link after {} ms (STATUS.LU clear): check the cable or the peer, or give "
        "link_wait_ms=0 to start without link",
        who, timeout.count());
  return {};
}

LinkStatus read_link(const pci::Bar& bar) {
  const std::uint32_t s = bar.read32(reg::status);
  static constexpr std::uint32_t speeds[] = {10, 100, 1000, 1000};
  return {(s & status::lu) != 0, speeds[(s & status::speed_mask) >> status::speed_shift], (s & status::fd) != 0};
}

void set_promiscuous(const pci::Bar& bar, bool on) {
  std::uint32_t r = bar.read32(reg::rctl) | rctl::bam;
  r = on ? (r | rctl::upe | rctl::mpe) : (r & ~(rctl::upe | rctl::mpe));
  bar.write32(reg::rctl, r);
}

void HwStats::accumulate(const pci::Bar& bar) {
  for (const StatReg& s : stat_regs) {
    std::uint64_t v = bar.read32(s.reg);
    if (s.wide) v |= std::uint64_t{bar.read32(s.reg + 4)} << 32;
    totals_[(s.reg - reg::stats_begin) / 4] += v;
  }
}

void HwStats::add_to(PortStats& s) const {
  s.ipackets += get(0x4074);
  s.opackets += get(0x4080);
  s.ibytes += get(0x4088);
  s.obytes += get(0x4090);
  s.imissed += get(0x4010);
  s.ierrors += get(0x4000) + get(0x4004) + get(0x400c) + get(0x403c) + get(0x4040) + get(0x40a4) + get(0x40ac);
  s.oerrors += get(0x4018) + get(0x4020);
}

void HwStats::add_xstats(std::vector<XStat>& out) const {
  for (const StatReg& s : stat_regs) out.push_back({std::string(s.name), get(s.reg)});
}

}  // namespace ws::e1000
