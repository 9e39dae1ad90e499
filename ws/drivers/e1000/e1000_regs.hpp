// SPDX-License-Identifier: BSD-3-Clause
// Intel 82574L (e1000e) registers, bits and descriptor layouts that net_e1000_em uses. Section
// numbers are those of the 82574 GbE Controller Family Datasheet (rev. 3.4).
#pragma once
#include <cstdint>

namespace ws::e1000 {

// Register offsets in BAR 0 (§10.2).
namespace reg {
inline constexpr std::uint32_t ctrl = 0x0000, status = 0x0008, eecd = 0x0010, eerd = 0x0014, ctrl_ext = 0x0018;
inline constexpr std::uint32_t icr = 0x00c0, ims = 0x00d0, imc = 0x00d8, ivar = 0x00e4;
inline constexpr std::uint32_t rctl = 0x0100, tctl = 0x0400, tipg = 0x0410;
inline constexpr std::uint32_t rdbal = 0x2800, rdbah = 0x2804, rdlen = 0x2808, rdh = 0x2810, rdt = 0x2818,
                               rdtr = 0x2820, rxdctl = 0x2828, radv = 0x282c;
inline constexpr std::uint32_t tdbal = 0x3800, tdbah = 0x3804, tdlen = 0x3808, tdh = 0x3810, tdt = 0x3818,
                               tidv = 0x3820, txdctl = 0x3828, tadv = 0x382c;
inline constexpr std::uint32_t rxcsum = 0x5000, rfctl = 0x5008, mta = 0x5200, ral0 = 0x5400, rah0 = 0x5404;
inline constexpr std::uint32_t stats_begin = 0x4000, stats_end = 0x4100;  // clear-on-read counters (§10.2.7)
}  // namespace reg

// BAR 0, the registers, is 128 KiB on an 82574 (§9.2.2.1): anything smaller is not one.
inline constexpr std::uint32_t bar0_bytes = 128 * 1024;

namespace ctrl {
inline constexpr std::uint32_t slu = 1u << 6;  // set link up
inline constexpr std::uint32_t frcspd = 1u << 11, frcdplx = 1u << 12;
inline constexpr std::uint32_t rst = 1u << 26;  // device reset, self-clearing
inline constexpr std::uint32_t vme = 1u << 30;
inline constexpr std::uint32_t phy_rst = 1u << 31;
}  // namespace ctrl

namespace status {
inline constexpr std::uint32_t fd = 1u << 0, lu = 1u << 1;
inline constexpr std::uint32_t speed_shift = 6, speed_mask = 3u << 6;  // 0: 10, 1: 100, 2 or 3: 1000 Mb/s
}  // namespace status

namespace eerd {  // EEPROM read register (§10.2.2.4)
inline constexpr std::uint32_t start = 1u << 0, done = 1u << 1, addr_shift = 2, data_shift = 16;
}

// Interrupt causes (ICR, IMS, IMC; §10.2.4.1). With MSI-X the 82574 raises RXQ0 and OTHER (for
// LSC among others) on the vectors IVAR names; with MSI or INTx, RXT0 and LSC on its one.
namespace intr {
inline constexpr std::uint32_t lsc = 1u << 2, rxt0 = 1u << 7, rxq0 = 1u << 20, other = 1u << 24;
inline constexpr std::uint32_t rx = rxt0 | rxq0, link = lsc | other;
}  // namespace intr

// IVAR (§10.2.4.9): a 3-bit MSI-X vector and a valid bit per cause; RX queue 0 at bit 0, Other
// at bit 16.
namespace ivar {
inline constexpr std::uint32_t valid = 1u << 3, rxq0_shift = 0, other_shift = 16;
}

namespace rctl {
inline constexpr std::uint32_t en = 1u << 1, sbp = 1u << 2, upe = 1u << 3, mpe = 1u << 4, lpe = 1u << 5;
inline constexpr std::uint32_t bam = 1u << 15;    // accept broadcast
inline constexpr std::uint32_t bsize_2048 = 0;    // BSIZE 00 with BSEX 0
inline constexpr std::uint32_t secrc = 1u << 26;  // strip the Ethernet CRC
}  // namespace rctl

namespace tctl {
inline constexpr std::uint32_t en = 1u << 1, psp = 1u << 3;
inline constexpr std::uint32_t ct_shift = 4, cold_shift = 12;
inline constexpr std::uint32_t rtlc = 1u << 24;
}  // namespace tctl

namespace rxcsum {
inline constexpr std::uint32_t ipofl = 1u << 8, tuofl = 1u << 9;
}

// Legacy receive descriptor (§7.1.4.1): the driver writes addr; the device writes the rest.
struct RxDesc {
  std::uint64_t addr;
  std::uint16_t length;
  std::uint16_t csum;
  std::uint8_t status;
  std::uint8_t errors;
  std::uint16_t special;
};
static_assert(sizeof(RxDesc) == 16);

namespace rx_status {
inline constexpr std::uint8_t dd = 1u << 0, eop = 1u << 1, ixsm = 1u << 2, vp = 1u << 3, udpcs = 1u << 4,
                              tcpcs = 1u << 5, ipcs = 1u << 6;
}
namespace rx_error {
inline constexpr std::uint8_t ce = 1u << 0, se = 1u << 1, seq = 1u << 2, cxe = 1u << 4, tcpe = 1u << 5, ipe = 1u << 6,
                              rxe = 1u << 7;
inline constexpr std::uint8_t frame = ce | se | seq | cxe | rxe;  // the frame itself is bad: drop it
}  // namespace rx_error

// Transmit descriptors (§7.2.10): legacy, extended data and TCP/IP context, all 16 bytes.
struct TxDesc {
  std::uint64_t addr;
  std::uint32_t cmd_len;  // legacy: length 0-15, CSO 16-23, CMD 24-31; extended: length 0-19, DTYP 20-23, DCMD 24-31
  std::uint32_t upper;    // legacy: STA 0-7, CSS 8-15, special 16-31; data: STA 0-3, POPTS 8-15, special 16-31
};
static_assert(sizeof(TxDesc) == 16);

struct TxContextDesc {
  std::uint8_t ipcss, ipcso;
  std::uint16_t ipcse;
  std::uint8_t tucss, tucso;
  std::uint16_t tucse;
  std::uint32_t cmd_len;  // PAYLEN 0-19, DTYP 20-23 (0), TUCMD 24-31
  std::uint8_t status, hdr_len;
  std::uint16_t mss;
};
static_assert(sizeof(TxContextDesc) == 16);

namespace txd {
inline constexpr std::uint32_t eop = 1u << 24, ifcs = 1u << 25, ic = 1u << 26, rs = 1u << 27, dext = 1u << 29;
inline constexpr std::uint32_t dtyp_data = 1u << 20;                       // extended data descriptor
inline constexpr std::uint32_t tucmd_ip = 1u << 25, tucmd_tcp = 1u << 24;  // context: IPv4, TCP (else UDP)
inline constexpr std::uint32_t sta_dd = 1u << 0;
inline constexpr std::uint32_t popts_ixsm = 1u << 8, popts_txsm = 1u << 9;
}  // namespace txd

}  // namespace ws::e1000
