// SPDX-License-Identifier: BSD-3-Clause
// The application half of a dpdk-testpmd command line (after "--"): forwarding mode, cores,
// queues, bursts, packet shapes, stats and run control. Names and defaults follow dpdk-testpmd.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/eal/eal_args.hpp"
#include "ws/net/ether.hpp"
#include "ws/net/rss.hpp"

namespace ws::testpmd {

inline constexpr std::uint16_t max_burst = 512;  // dpdk-testpmd's MAX_PKT_BURST
inline constexpr std::uint16_t max_tx_segments = 8;

enum class Topology { paired, chained, loop };

// Port events dpdk-testpmd can print (--print-event, --mask-event), with its names and bits.
namespace event_type {
inline constexpr std::uint32_t unknown = 1u << 0;
inline constexpr std::uint32_t intr_lsc = 1u << 1;
inline constexpr std::uint32_t queue_state = 1u << 2;
inline constexpr std::uint32_t intr_reset = 1u << 3;
inline constexpr std::uint32_t vf_mbox = 1u << 4;
inline constexpr std::uint32_t macsec = 1u << 5;
inline constexpr std::uint32_t intr_rmv = 1u << 6;
inline constexpr std::uint32_t flow_aged = 1u << 10;
inline constexpr std::uint32_t err_recovering = 1u << 11;
inline constexpr std::uint32_t recovery_success = 1u << 12;
inline constexpr std::uint32_t recovery_failed = 1u << 13;
inline constexpr std::uint32_t all = unknown | intr_lsc | queue_state | intr_reset | vf_mbox | macsec | intr_rmv |
                                     flow_aged | err_recovering | recovery_success | recovery_failed;
// dpdk-testpmd's default: every event but the VF mailbox's.
inline constexpr std::uint32_t default_print = all & ~vf_mbox;
}  // namespace event_type

struct AppOptions {
  std::string forward_mode = "io";
  unsigned nb_cores = 1;
  bool nb_cores_given = false;  // --nb-cores was given (else --coremask sets the count)
  std::optional<unsigned> nb_ports;
  std::uint16_t rxq = 1;
  std::uint16_t txq = 1;
  std::uint16_t rxd = 0;  // 0: driver default
  std::uint16_t txd = 0;
  std::uint16_t burst = 32;
  std::uint32_t mbcache = 250;
  std::uint32_t total_num_mbufs = 0;  // 0: computed as dpdk-testpmd does
  std::uint16_t mbuf_size = 2176;     // data room incl. headroom (--mbuf-size)
  std::vector<std::uint16_t> txpkts = {64};
  std::uint16_t flowgen_clones = 0;
  std::uint32_t flowgen_flows = 1024;
  std::map<std::uint16_t, MacAddress> eth_peers;
  bool rx_ptype_counts = false;                         // --rx-ptype-counts (wirespeed's own)
  std::map<std::uint16_t, std::uint32_t> icmpecho_ips;  // --icmpecho-ip (network order); key max_ports: all
  Topology topology = Topology::paired;
  unsigned stats_period_s = 0;
  bool auto_start = false;
  unsigned tx_first = 0;  // bursts per stream sent before forwarding starts (0: off)
  bool interactive = false;
  std::string cmdline_file;
  double duration_s = 0;  // 0: until signal / quit
  std::string summary_json;
  std::string metrics_addr;           // --metrics-addr 127.0.0.1:PORT: Prometheus endpoint (loopback only)
  std::vector<std::string> captures;  // --capture PORT,FILE[,FILTER]: pcapng capture from the start
  bool record_core_cycles = false;
  bool record_burst_stats = false;  // --record-burst-stats: RX/TX burst size spread per port
  bool enable_rx_cksum = false;     // verify RX checksums (in software where ports give no verdict)
  // --tx-offloads: DPDK's RTE_ETH_TX_OFFLOAD_* bits, enabled on every port; IPV4/UDP/TCP_CKSUM
  // (0x2/0x4/0x8) also make the csum engine request those checksums, as `csum set ip|udp|tcp hw`.
  std::uint64_t tx_offloads = 0;
  // ws::rss_type bits hashed by ports with several RX queues: --rss-ip / --rss-udp / "port
  // config all rss". 0 by default: dpdk-testpmd's default (IP) is masked by the device's
  // capabilities, and no device here hashes, so DPDK's ports would not spread either.
  std::uint32_t rss_types = 0;

  // ---- port configuration ----
  // RX offloads (DPDK's bits, rx_offload::*) enabled on every port: --rx-offloads and the
  // --enable-* options. Checked against each port's capabilities when it is configured.
  std::uint64_t rx_offloads = 0;
  std::uint32_t max_pkt_len = 0;       // --max-pkt-len: the ports' MTU is this less 18 (0: MTU 1500)
  std::uint32_t max_lro_pkt_size = 0;  // --max-lro-pkt-size (with TCP LRO)
  bool start_devices = true;           // --disable-device-start: ports wait for "port start"
  // ---- forwarding ports and cores ----
  std::vector<std::uint16_t> fwd_ports;   // --portmask / --portlist; empty: every port
  std::optional<std::uint64_t> coremask;  // --coremask: forwarding lcores (never the main one)
  // ---- txonly ----
  bool txonly_multi_flow = false;        // --txonly-multi-flow: UDP source port varies
  std::uint32_t tx_ip_src = 0xc6120001;  // --tx-ip (host order): 198.18.0.1
  std::uint32_t tx_ip_dst = 0xc6120002;  // 198.18.0.2
  std::uint16_t tx_udp_src = 9;          // --tx-udp
  std::uint16_t tx_udp_dst = 9;
  // ---- memory and NUMA ----
  bool numa = true;       // --numa / --no-numa (one arena either way; printed as dpdk-testpmd)
  bool mlockall = false;  // --mlockall
  // ---- run control and events ----
  bool flush_rx = true;       // --no-flush-rx: keep what RX queues hold at forwarding start
  bool link_check = true;     // --disable-link-check
  bool lsc_interrupt = true;  // --no-lsc-interrupt: no link state change events
  std::uint32_t event_print_mask = event_type::default_print;  // --print-event / --mask-event: event_type bits printed
  std::vector<std::string> display_xstats;                     // --display-xstats: shown with port stats
};

Result<AppOptions> parse_app_args(std::span<const std::string> args);
// dpdk-testpmd's application usage, with what each option does here.
std::string app_usage();
// Every application option dpdk-testpmd 22.11 has, plus wirespeed's own.
std::vector<OptionDoc> app_option_docs();

}  // namespace ws::testpmd
