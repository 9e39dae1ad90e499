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
#include "ws/net/ether.hpp"
#include "ws/net/rss.hpp"

namespace ws::testpmd {

inline constexpr std::uint16_t max_burst = 512;  // dpdk-testpmd's MAX_PKT_BURST
inline constexpr std::uint16_t max_tx_segments = 8;

enum class Topology { paired, chained, loop };

struct AppOptions {
  std::string forward_mode = "io";
  unsigned nb_cores = 1;
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
  bool rx_ptype_counts = false;  // --rx-ptype-counts (wirespeed's own)
  std::map<std::uint16_t, std::uint32_t> icmpecho_ips;  // --icmpecho-ip (network order); key max_ports: all
  Topology topology = Topology::paired;
  unsigned stats_period_s = 0;
  bool auto_start = false;
  unsigned tx_first = 0;  // bursts per stream sent before forwarding starts (0: off)
  bool interactive = false;
  std::string cmdline_file;
  double duration_s = 0;  // 0: until signal / quit
  std::string summary_json;
  std::string metrics_addr;  // --metrics-addr 127.0.0.1:PORT: Prometheus endpoint (loopback only)
  std::vector<std::string> captures;  // --capture PORT,FILE[,FILTER]: pcapng capture from the start
  bool record_core_cycles = false;
  bool record_burst_stats = false;  // --record-burst-stats: RX/TX burst size spread per port
  bool enable_rx_cksum = false;  // verify RX checksums (in software where ports give no verdict)
  // --tx-offloads: DPDK's RTE_ETH_TX_OFFLOAD_* bits, enabled on every port; IPV4/UDP/TCP_CKSUM
  // (0x2/0x4/0x8) also make the csum engine request those checksums, as `csum set ip|udp|tcp hw`.
  std::uint64_t tx_offloads = 0;
  // ws::rss_type bits hashed by ports with several RX queues: --rss-ip / --rss-udp / "port
  // config all rss". 0 by default: dpdk-testpmd's default (IP) is masked by the device's
  // capabilities, and no device here hashes, so DPDK's ports would not spread either.
  std::uint32_t rss_types = 0;
};

Result<AppOptions> parse_app_args(std::span<const std::string> args);
std::string app_usage();

}  // namespace ws::testpmd
