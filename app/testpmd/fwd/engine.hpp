// SPDX-License-Identifier: BSD-3-Clause
// Forwarding engines: a stream is (RX port, queue) -> (TX port, queue); each forwarding lcore
// polls its streams in a loop compiled per engine, so the engine's per-burst function is
// inlined and the only indirect calls are the ports' burst functions.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/cpu.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/core/simd.hpp"
#include "ws/net/ether.hpp"
#include "ws/net/rss.hpp"
#include "ws/port/port.hpp"

namespace ws::testpmd {

inline constexpr std::size_t max_ports = 64;
inline constexpr std::uint16_t max_burst_slots = 512;  // dpdk-testpmd's MAX_PKT_BURST
inline constexpr std::size_t udp_header_bytes = 42;    // Ethernet + IPv4 + UDP

// csum engine, per TX port: per layer, recompute in software (false) or request the port's
// offload (true) -- the knobs of `csum set ip|udp|tcp hw|sw <port>` -- and `tso set <segsz>
// <port>`: TCP packets with more payload than tso_segsz are handed to the port to segment.
// The port does in software what its device cannot (ws::Port's TX offloads).
struct CsumConfig {
  bool ip_hw = false;
  bool udp_hw = false;
  bool tcp_hw = false;
  std::uint16_t tso_segsz = 0;  // 0: no TSO
};

// rxonly --rx-ptype-counts: packet-type classes counted per stream (ws/net/ptype.hpp's walk).
// A packet counts once in its L2 class, once in its L3 class if any, once in its L4 class if any.
inline constexpr std::array<std::string_view, 11> ptype_class_names = {
    "ether", "arp", "vlan", "ipv4", "ipv6", "tcp", "udp", "icmp", "frag", "vxlan", "unknown"};

// Read-only while forwarding runs.
struct FwdConfig {
  std::uint16_t burst = 32;
  std::vector<std::uint16_t> txpkts = {64};
  std::uint32_t tx_pkt_length = 64;
  std::uint16_t flowgen_clones = 0;
  std::uint32_t flowgen_flows = 1024;
  std::array<CsumConfig, max_ports> csum{};      // by TX port id
  bool rx_cksum = false;                         // --enable-rx-cksum: verify in software where ports give no verdict
  std::array<MacAddress, max_ports> port_mac{};  // our ports' addresses
  std::array<MacAddress, max_ports> peer_mac{};  // --eth-peer, default 02:00:00:00:00:<port>
  std::array<std::uint32_t, max_ports> icmpecho_ip_be{};  // --icmpecho-ip; 0: icmpecho answers any address
  bool rx_ptype_counts = false;     // --rx-ptype-counts: rxonly classifies and counts packet types
  bool record_burst_stats = false;  // --record-burst-stats: burst size spread per stream
  // txonly's packets (--tx-ip, --tx-udp, host order) and --txonly-multi-flow.
  std::uint32_t tx_ip_src = 0xc6120001;  // 198.18.0.1
  std::uint32_t tx_ip_dst = 0xc6120002;  // 198.18.0.2
  std::uint16_t tx_udp_src = 9;
  std::uint16_t tx_udp_dst = 9;
  bool txonly_multi_flow = false;
};

// --record-burst-stats: how many bursts returned each size, 0 to max_burst_slots (dpdk-testpmd's
// pkt_burst_stats). Written by the polling lcore only.
struct BurstSpread {
  std::array<Counter, max_burst_slots + 1> bursts;
  void add(std::uint16_t n) noexcept { bursts[n].add(1); }
  void reset() noexcept {
    for (Counter& c : bursts) c.reset();
  }
};

struct alignas(cache_line_bytes) Stream {
  // Set up by the control thread before forwarding starts; read-only afterwards.
  Port* rx_port = nullptr;
  Port* tx_port = nullptr;
  std::uint16_t rx_queue = 0;
  std::uint16_t tx_queue = 0;
  std::uint16_t rx_port_id = 0;
  std::uint16_t tx_port_id = 0;
  PktmbufPool* pool = nullptr;
  const FwdConfig* config = nullptr;
  std::uint32_t next_flow = 0;  // flowgen state, owned by the polling lcore
  std::uint8_t ip_var = 0;      // --txonly-multi-flow's source address counter, owned by the polling lcore
  std::uint16_t lcore_id = 0;   // the lcore polling this stream (set when forwarding starts)
  std::array<std::uint8_t, udp_header_bytes> udp_header{};  // txonly's frame header for tx_port

  // Written by the polling lcore only (Counter: single writer, any reader).
  // Accounting: rx_packets + generated == tx_packets + fwd_dropped + consumed.
  alignas(cache_line_bytes) Counter rx_packets;
  Counter tx_packets;
  Counter fwd_dropped;     // taken from RX or generated, not accepted by TX, freed
  Counter generated;       // built by txonly/flowgen
  Counter consumed;        // received and freed on purpose (rxonly, flowgen's RX side)
  Counter rx_bad_ip_csum;  // csum: packets whose IPv4 header checksum was bad on RX
  Counter rx_bad_l4_csum;  // csum: packets whose TCP/UDP checksum was bad on RX
  Counter busy_cycles;     // --record-core-cycles: TSC cycles in bursts that moved packets and the poll after each
  Counter busy_bursts;
  std::array<Counter, ptype_class_names.size()> ptypes;  // rxonly --rx-ptype-counts
  BurstSpread rx_bursts;                                 // --record-burst-stats: rx_burst results, empty polls included
  BurstSpread tx_bursts;                                 // --record-burst-stats: tx_burst results
};

// dpdk-testpmd's burst line for `spread` (bursts[n] = bursts that returned n packets): the total,
// then the share of empty bursts and of the two most frequent sizes, the rest as "other":
//   "  RX-bursts : 1000 [60% of 0 pkts + 30% of 32 pkts + 10% of 1 pkts]"
// Empty when no burst was counted.
std::string burst_spread_line(std::string_view rx_tx, const BurstSpread& spread);

// --record-burst-stats: count one rx_burst / tx_burst result of stream `s`.
inline void record_rx_burst(Stream& s, std::uint16_t n) noexcept {
  if (s.config->record_burst_stats) [[unlikely]]
    s.rx_bursts.add(n);
}
inline void record_tx_burst(Stream& s, std::uint16_t n) noexcept {
  if (s.config->record_burst_stats) [[unlikely]]
    s.tx_bursts.add(n);
}

struct FwdLcore {
  unsigned lcore_id = 0;
  std::vector<Stream*> streams;
  std::atomic<bool> stop{false};  // set by the control thread; polled relaxed each round
  bool record_cycles = false;
};

// One burst of an engine on one stream; returns the packets it handled (for cycle records).
using ForwardFn = std::uint16_t (*)(Stream&) noexcept;
using LcoreLoopFn = void (*)(FwdLcore&);

struct Engine {
  std::string_view name;
  // Runs until FwdLcore::stop; one build per SIMD level (ws/core/simd.hpp), indexed by it.
  std::array<LcoreLoopFn, simd_level_count> loops;
  ForwardFn forward_once;  // one burst (used by --tx-first with txonly)

  // The loop built for `level`.
  LcoreLoopFn loop(SimdLevel level) const noexcept { return loops[static_cast<std::size_t>(level)]; }
};

// The lcore loop for engine function F: poll every stream, round after round.
template <ForwardFn F>
[[gnu::hot, gnu::always_inline]] inline void lcore_loop_body(FwdLcore& lc) {
  Stream* const* streams = lc.streams.data();
  const std::size_t n = lc.streams.size();
  if (lc.record_cycles) {
    // A driver may finish a burst's work in the next poll (split virtio rings repost RX buffers
    // in the first poll that finds nothing), so that poll counts as busy too. This adds one
    // idle poll per burst where nothing was deferred.
    std::vector<std::uint8_t> after_busy(n, 0);
    while (!lc.stop.load(std::memory_order_relaxed)) {  // relaxed: a flag, no data rides on it
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t t0 = rdtsc();
        if (F(*streams[i]) != 0) {
          streams[i]->busy_cycles.add(rdtsc() - t0);
          streams[i]->busy_bursts.add(1);
          after_busy[i] = 1;
        } else if (after_busy[i]) {
          streams[i]->busy_cycles.add(rdtsc() - t0);
          after_busy[i] = 0;
        }
      }
    }
    return;
  }
  while (!lc.stop.load(std::memory_order_relaxed)) {
    for (std::size_t i = 0; i < n; ++i) F(*streams[i]);
  }
}

// The loop at the baseline, and built for AVX2 and AVX-512: flatten inlines the engine's
// per-burst function and the helpers it calls (the ports' burst functions are calls through the
// burst table, each built for the same level when the port started).
template <ForwardFn F>
[[gnu::hot]] void lcore_loop(FwdLcore& lc) {
  lcore_loop_body<F>(lc);
}
template <ForwardFn F>
[[gnu::hot, gnu::flatten, WS_TARGET_AVX2]] void lcore_loop_avx2(FwdLcore& lc) {
  lcore_loop_body<F>(lc);
}
template <ForwardFn F>
[[gnu::hot, gnu::flatten, WS_TARGET_AVX512]] void lcore_loop_avx512(FwdLcore& lc) {
  lcore_loop_body<F>(lc);
}

template <ForwardFn F>
constexpr Engine make_engine(std::string_view name) {
  return Engine{name, {&lcore_loop<F>, &lcore_loop<F>, &lcore_loop_avx2<F>, &lcore_loop_avx512<F>}, F};
}

// Free what TX did not take and count it as dropped.
inline void drop_unsent(Stream& s, Mbuf** pkts, std::uint16_t n, std::uint16_t sent) noexcept {
  if (sent < n) [[unlikely]] {
    s.fwd_dropped.add(n - sent);
    mbuf_free_bulk(std::span<Mbuf* const>(pkts + sent, n - sent));
  }
}

// Sends pkts[0..n) on `port`'s TX queue of the stream and counts what went; frees and counts as
// dropped what TX did not take. Returns how many were sent.
[[gnu::always_inline]] inline std::uint16_t send_burst(Stream& s, Port* port, Mbuf** pkts, std::uint16_t n) noexcept {
  const std::uint16_t sent = port->tx_burst(s.tx_queue, pkts, n);
  record_tx_burst(s, sent);
  s.tx_packets.add(sent);
  drop_unsent(s, pkts, n, sent);
  return sent;
}

// The shape of every receive-edit-send engine: receive a burst, let `edit(pkts, n)` change the
// packets in place, send them to the peer; what TX refuses is dropped. `edit` is inlined.
template <class Edit>
[[gnu::hot]] inline std::uint16_t receive_edit_send(Stream& s, Edit edit) noexcept {
  Mbuf* pkts[max_burst_slots];
  const std::uint16_t n = s.rx_port->rx_burst(s.rx_queue, pkts, s.config->burst);
  record_rx_burst(s, n);
  if (n == 0) return 0;
  s.rx_packets.add(n);
  edit(pkts, n);
  send_burst(s, s.tx_port, pkts, n);
  return n;
}

// Set the fields dpdk-testpmd's mac/macswap engines set for TX (no offloads requested).
inline void set_tx_fields(Mbuf* m) noexcept {
  m->ol_flags &= mbuf_flag::indirect;
  m->l2_len = sizeof(EtherHdr);
  m->l3_len = sizeof(Ipv4Hdr);
  m->vlan_tci = 0;
  m->vlan_tci_outer = 0;
}

// Engines, one file each under fwd/.
Engine io_engine();
Engine mac_engine();
Engine macswap_engine();
Engine flowgen_engine();
Engine txonly_engine();
Engine rxonly_engine();
Engine csum_engine();
Engine fivetswap_engine();
Engine icmpecho_engine();

// Every engine, in the order help lists them.
std::span<const Engine> all_engines();
// The engine called `name`; nullptr if none.
const Engine* find_engine(std::string_view name);
// "io, mac, macswap, ..." for help and error messages.
std::string engine_names();

// The UDP/IPv4 frame header txonly and flowgen write (42 bytes), for TX port `port`.
std::array<std::uint8_t, udp_header_bytes> udp_frame_header(const FwdConfig& config, std::uint16_t port,
                                                            std::uint32_t length);

}  // namespace ws::testpmd
