// SPDX-License-Identifier: BSD-3-Clause
// Port: one network device. Control operations are virtual and run on the control thread; the
// data path (rx_burst/tx_burst) is one indirect call per burst through a flat table of
// {function, queue} filled when the port starts.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ws/core/mbuf.hpp"
#include "ws/core/result.hpp"
#include "ws/core/simd.hpp"
#include "ws/flow/flow.hpp"
#include "ws/net/ether.hpp"
#include "ws/net/rss.hpp"
#include "ws/port/burst.hpp"
#include "ws/port/stats.hpp"

namespace ws {

/// The most RX (and TX) queues a port may have.
inline constexpr std::uint16_t port_max_queues = 64;

class FlowTable;         // ws/flow/flow_table.hpp: the port's flow rules (DPDK's rte_flow)
class SoftwareRss;       // private: ws/port/software_rss.hpp
struct SoftwareRxQueue;  // private: ws/port/software_rx.hpp
struct SoftwareTxQueue;  // private: ws/port/software_tx.hpp

/// The VLAN ids a port lets in when rx_offload::vlan_filter is on: bit i for id i. Words are
/// atomic so that ids can be added and removed while lcores filter (relaxed loads: a change
/// shows within a burst or two, as a NIC's table write does).
class VlanFilter {
 public:
  /// Whether VLAN id `vid` (0 to 4095) is let in.
  bool test(std::uint16_t vid) const noexcept {
    return (words_[vid >> 6].load(std::memory_order_relaxed) >> (vid & 63)) & 1;
  }
  /// Lets VLAN id `vid` in (on) or not.
  void set(std::uint16_t vid, bool on) noexcept {
    const std::uint64_t bit = 1ULL << (vid & 63);
    if (on)
      words_[vid >> 6].fetch_or(bit, std::memory_order_relaxed);
    else
      words_[vid >> 6].fetch_and(~bit, std::memory_order_relaxed);
  }
  /// The number of VLAN ids.
  static constexpr std::uint16_t size() noexcept { return 4096; }

 private:
  std::array<std::atomic<std::uint64_t>, 64> words_{};
};

/// A driver RX queue type: q.rx_burst(Mbuf** pkts, uint16_t n) -> received count.
template <class Q>
concept RxQueue = std::derived_from<Q, QueueBase> && requires(Q& q, Mbuf** pkts, std::uint16_t n) {
  { q.rx_burst(pkts, n) } noexcept -> std::same_as<std::uint16_t>;
};
/// A driver TX queue type: q.tx_burst(Mbuf** pkts, uint16_t n) -> count taken (the rest stays
/// with the caller).
template <class Q>
concept TxQueue = std::derived_from<Q, QueueBase> && requires(Q& q, Mbuf** pkts, std::uint16_t n) {
  { q.tx_burst(pkts, n) } noexcept -> std::same_as<std::uint16_t>;
};

/// What a burst function calls: Q::rx_burst (Rx) or Q::tx_burst.
template <class Q, bool Rx>
[[gnu::always_inline]] inline std::uint16_t queue_burst(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept {
  if constexpr (Rx) {
    return static_cast<Q*>(q)->rx_burst(pkts, n);
  } else {
    return static_cast<Q*>(q)->tx_burst(pkts, n);
  }
}

/// The burst function a driver publishes for queue type Q, at the baseline.
// [[gnu::hot]] on the data path's out-of-line functions: GCC puts them in .text.hot, one block
// laid out the same whatever else is linked (see cmake/warnings.cmake, -falign-functions).
template <class Q, bool Rx>
[[gnu::hot]] std::uint16_t burst_trampoline(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept {
  return queue_burst<Q, Rx>(q, pkts, n);
}
// The same, built for AVX2 and AVX-512 (ws/core/simd.hpp): flatten inlines the whole burst, the
// driver's code and the ring, mempool and mbuf helpers it calls, so all of it is compiled for
// the wider instruction set. What is not inlined (out-of-line slow paths) is called at the
// baseline, which every CPU runs.
/// burst_trampoline built for AVX2.
template <class Q, bool Rx>
[[gnu::hot, gnu::flatten, WS_TARGET_AVX2]] std::uint16_t burst_trampoline_avx2(QueueBase* q, Mbuf** pkts,
                                                                               std::uint16_t n) noexcept {
  return queue_burst<Q, Rx>(q, pkts, n);
}
/// burst_trampoline built for AVX-512.
template <class Q, bool Rx>
[[gnu::hot, gnu::flatten, WS_TARGET_AVX512]] std::uint16_t burst_trampoline_avx512(QueueBase* q, Mbuf** pkts,
                                                                                   std::uint16_t n) noexcept {
  return queue_burst<Q, Rx>(q, pkts, n);
}
/// The build of queue type Q's burst for `level`.
template <class Q, bool Rx>
BurstFn burst_fn(SimdLevel level) noexcept {
  if (level >= SimdLevel::avx512) return &burst_trampoline_avx512<Q, Rx>;
  if (level >= SimdLevel::avx2) return &burst_trampoline_avx2<Q, Rx>;
  return &burst_trampoline<Q, Rx>;
}

/// The RX burst function of queue type Q built for `level`: what a port publishes when it
/// starts, so the choice is made once per start, never per burst.
template <RxQueue Q>
BurstFn rx_burst_fn(SimdLevel level) noexcept {
  return burst_fn<Q, true>(level);
}
/// As rx_burst_fn, for TX queue type Q.
template <TxQueue Q>
BurstFn tx_burst_fn(SimdLevel level) noexcept {
  return burst_fn<Q, false>(level);
}

/// TX offloads, with DPDK's RTE_ETH_TX_OFFLOAD_* bit values. A device advertises the ones it
/// does itself in PortInfo::tx_offload_capa; the application enables the ones it will request
/// through mbuf flags in PortConfig::tx_offloads (DPDK's txmode.offloads). An enabled offload the
/// device lacks is done in software by the port (see Port::start) if it is in `software`.
namespace tx_offload {
inline constexpr std::uint64_t vlan_insert = 1ULL << 0;  ///< Insert Mbuf::vlan_tci (mbuf_flag::tx_vlan).
inline constexpr std::uint64_t ipv4_cksum = 1ULL << 1;   ///< IPv4 header checksums.
inline constexpr std::uint64_t udp_cksum = 1ULL << 2;    ///< UDP checksums.
inline constexpr std::uint64_t tcp_cksum = 1ULL << 3;    ///< TCP checksums.
inline constexpr std::uint64_t tcp_tso = 1ULL << 5;      ///< TCP segmentation.
inline constexpr std::uint64_t udp_tso = 1ULL << 6;      ///< UDP segmentation.
inline constexpr std::uint64_t multi_segs = 1ULL << 15;  ///< Chained (multi-segment) packets.
inline constexpr std::uint64_t checksums = ipv4_cksum | udp_cksum | tcp_cksum;     ///< Every checksum offload.
inline constexpr std::uint64_t segmentation = tcp_tso | udp_tso;                   ///< Every segmentation offload.
inline constexpr std::uint64_t software = vlan_insert | checksums | segmentation;  ///< What ports emulate.
/// "ipv4_cksum,tcp_tso" (DPDK's names without the prefix); "none" for 0.
std::string names(std::uint64_t offloads);
}  // namespace tx_offload

/// RX offloads, with DPDK's RTE_ETH_RX_OFFLOAD_* bit values. A device advertises the ones it
/// does itself in PortInfo::rx_offload_capa; the application enables them in
/// PortConfig::rx_offloads (DPDK's rxmode.offloads). Those in `software` the port does itself
/// for any device (software_rx.hpp); any other one the device lacks is refused by configure().
namespace rx_offload {
inline constexpr std::uint64_t vlan_strip = 1ULL << 0;     ///< Tag moved to Mbuf::vlan_tci.
inline constexpr std::uint64_t ipv4_cksum = 1ULL << 1;     ///< IPv4 header checksum verdicts.
inline constexpr std::uint64_t udp_cksum = 1ULL << 2;      ///< UDP checksum verdicts.
inline constexpr std::uint64_t tcp_cksum = 1ULL << 3;      ///< TCP checksum verdicts.
inline constexpr std::uint64_t tcp_lro = 1ULL << 4;        ///< Large receive (coalesced TCP segments).
inline constexpr std::uint64_t qinq_strip = 1ULL << 5;     ///< Outer (QinQ) tag stripped.
inline constexpr std::uint64_t vlan_filter = 1ULL << 9;    ///< Tagged packets of other VLANs dropped.
inline constexpr std::uint64_t vlan_extend = 1ULL << 10;   ///< Double-tag (extended) VLAN mode.
inline constexpr std::uint64_t scatter = 1ULL << 13;       ///< Packets longer than one mbuf, chained.
inline constexpr std::uint64_t timestamp = 1ULL << 14;     ///< Receive timestamps.
inline constexpr std::uint64_t keep_crc = 1ULL << 16;      ///< Ethernet CRC kept in the data.
inline constexpr std::uint64_t buffer_split = 1ULL << 20;  ///< Headers and payload in separate pools.
inline constexpr std::uint64_t checksums = ipv4_cksum | udp_cksum | tcp_cksum;  ///< DPDK's RX_OFFLOAD_CHECKSUM.
inline constexpr std::uint64_t vlan = vlan_strip | vlan_filter | vlan_extend | qinq_strip;  ///< DPDK's RX_OFFLOAD_VLAN.
inline constexpr std::uint64_t software = vlan_strip | vlan_filter;                         ///< What ports emulate.
}  // namespace rx_offload

/// Port::configure's settings (DPDK's rte_eth_conf and queue counts).
struct PortConfig {
  std::uint16_t rx_queues = 1;    ///< RX queues, 1 to PortInfo::max_rx_queues.
  std::uint16_t tx_queues = 1;    ///< TX queues, 1 to PortInfo::max_tx_queues.
  std::uint64_t tx_offloads = 0;  ///< tx_offload::* the application will request
  std::uint64_t rx_offloads = 0;  ///< rx_offload::* enabled
  std::uint16_t mtu = 1500;       ///< Largest IP packet, PortInfo::min_mtu to max_mtu (DPDK's rxmode.mtu).
  /// Where software TSO takes its segments' header and indirect mbufs from; needed when
  /// tx_offloads has TSO and the device does not.
  PktmbufPool* tx_segment_pool = nullptr;
  /// Receive side scaling. A device without the hash gets it in software (software_rss.hpp).
  RssConfig rss{};
};

/// An RX queue's settings.
struct RxQueueConfig {
  std::uint16_t descriptors = 0;  ///< 0: driver default
  PktmbufPool* pool = nullptr;    ///< Where received packets' mbufs come from (required).
};

/// A TX queue's settings.
struct TxQueueConfig {
  std::uint16_t descriptors = 0;  ///< 0: driver default
};

/// A port's link, as rte_eth_link.
struct LinkStatus {
  bool up = false;               ///< Link up.
  std::uint32_t speed_mbps = 0;  ///< Speed in Mbit/s.
  bool full_duplex = true;       ///< Full duplex.
};

/// What a device can do (DPDK's rte_eth_dev_info).
struct PortInfo {
  std::string driver;                 ///< Driver name: "net_null".
  std::uint16_t max_rx_queues = 1;    ///< RX queues at most.
  std::uint16_t max_tx_queues = 1;    ///< TX queues at most.
  std::uint16_t min_descriptors = 0;  ///< Smallest queue size accepted.
  std::uint16_t max_descriptors = 0;  ///< Largest queue size accepted.
  std::uint64_t tx_offload_capa = 0;  ///< tx_offload::* the device does itself
  std::uint32_t rss_types_capa = 0;   ///< rss_type::* the device hashes itself (flow_type_rss_offloads)
  std::uint64_t rx_offload_capa = 0;  ///< rx_offload::* the device does itself
  std::uint16_t min_mtu = 68;         ///< Smallest MTU accepted (DPDK's default, RTE_ETHER_MIN_MTU).
  std::uint16_t max_mtu = 65535;      ///< Largest MTU accepted.
};

/// One network device made by a driver: control calls on the control thread, burst calls on
/// the lcore polling each queue.
class Port {
 public:
  /// For drivers: a port named `name` (the device name) of driver `driver`.
  Port(std::string name, std::string driver);
  virtual ~Port();
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // ---- data path: lock-free; a queue is polled by one lcore at a time ----
  /// Receives up to n packets from RX queue `queue` into pkts; returns how many (the caller owns
  /// them). Never fails: a stopped port or empty queue gives 0.
  std::uint16_t rx_burst(std::uint16_t queue, Mbuf** pkts, std::uint16_t n) noexcept {
    const BurstEntry& e = rx_table_[queue];
    return e(pkts, n);
  }
  /// Sends up to n packets of pkts on TX queue `queue`; returns how many the port took (it frees
  /// them); pkts[returned..n) still belong to the caller.
  std::uint16_t tx_burst(std::uint16_t queue, Mbuf** pkts, std::uint16_t n) noexcept {
    const BurstEntry& e = tx_table_[queue];
    return e(pkts, n);
  }

  // ---- control path: control thread only, never while lcores poll this port ----
  /// Sets queue counts (validated against info()); discards existing queues.
  Result<void> configure(const PortConfig& config);
  /// Sets up RX queue `queue` (< configured rx_queues) of a stopped port.
  virtual Result<void> setup_rx_queue(std::uint16_t queue, const RxQueueConfig& config) = 0;
  /// Sets up TX queue `queue` (< configured tx_queues) of a stopped port.
  virtual Result<void> setup_tx_queue(std::uint16_t queue, const TxQueueConfig& config) = 0;
  /// Starts the device; every configured queue must be set up. Fills the burst tables.
  Result<void> start();
  /// Stops the device; queues keep their mbufs until release_mbufs() or destruction.
  void stop();
  /// Changes the enabled TX offloads (and software TSO's pool) of a stopped port without
  /// touching its queues; applied at the next start(). DPDK reconfigures the device for this.
  Result<void> set_tx_offloads(std::uint64_t offloads, PktmbufPool* segment_pool);
  /// Enabled offloads the device lacks, done by the port in software while it runs.
  std::uint64_t software_tx_offloads() const;
  /// Changes the RSS configuration of a stopped port; applied at the next start().
  Result<void> set_rss(const RssConfig& rss);
  /// Changes the enabled RX offloads of a stopped port; applied at the next start(). Refused,
  /// with DPDK's message, when one is neither the device's nor the port's (rx_offload::software).
  Result<void> set_rx_offloads(std::uint64_t offloads);
  /// Enabled RX offloads the device lacks, done by the port in software while it runs.
  std::uint64_t software_rx_offloads() const;
  /// Adds (on) or removes VLAN id `vid` (0 to 4095) from the filter that rx_offload::vlan_filter
  /// applies, at once, even while lcores poll. Every id is out of the filter at first.
  Result<void> set_vlan_filter(std::uint16_t vid, bool on);
  /// The VLAN ids in the filter, in increasing order.
  std::vector<std::uint16_t> vlan_filter_ids() const;
  /// True while the port hashes (and spreads) received packets in software.
  bool software_rss() const { return sw_rss_ != nullptr && started_; }
  /// Returns every mbuf the driver holds (in queues, rings) to its pool. Port stopped.
  virtual void release_mbufs() {}
  /// The port's flow rules (DPDK's rte_flow API, ws/flow/flow_table.hpp). Rules are matched in
  /// software on the RX path; changing them on a started port is a control call like any other:
  /// never while lcores poll the port.
  FlowTable& flows() { return *flows_; }
  const FlowTable& flows() const { return *flows_; }  ///< As flows().

  // ---- interrupts (DPDK's rte_eth_dev_rx_intr_* and link-state events) ----
  /// The fd that becomes readable when RX queue `queue` (< configured rx_queues) may hold
  /// packets, while its interrupt is enabled. The caller waits on it (epoll) and never reads it:
  /// rx_intr_disable drains it. Valid while the port exists (a peer that reconnects does not
  /// change it). Ports with no fd to wait on (net_null, net_ring, net_pcap) refuse, naming the
  /// port and the reason.
  Result<int> rx_intr_fd(std::uint16_t queue);
  /// Arms RX queue `queue`'s interrupt: its fd fires on the next packet, or at once when packets
  /// came before the arming (none is waited for). Called by the lcore that polls the queue,
  /// between bursts, as DPDK's rte_eth_dev_rx_intr_enable.
  Result<void> rx_intr_enable(std::uint16_t queue);
  /// Disarms RX queue `queue`'s interrupt (the lcore polls again) and drains its fd.
  Result<void> rx_intr_disable(std::uint16_t queue);
  /// An fd that becomes readable when the link state may have changed (link() tells the new
  /// state). Ports whose link never changes on its own refuse.
  Result<int> link_event_fd();

  /// What the device can do.
  virtual PortInfo info() const = 0;
  PortStats stats() const;  ///< driver counters minus the last reset_stats() snapshot. Any thread.
  /// Zeroes stats() (a snapshot is taken; the driver's counters keep running).
  void reset_stats();
  /// The driver's named counters.
  virtual std::vector<XStat> xstats() const;
  /// Link state (virtual devices: up while started).
  virtual LinkStatus link() const { return {started_, 10000, true}; }
  /// The port's Ethernet address.
  virtual MacAddress mac() const { return mac_; }
  /// Sets the port's Ethernet address (a unicast one): what mac() returns and the source the
  /// application puts in frames; virtual devices filter nothing by it.
  virtual Result<void> set_mac(const MacAddress& mac) {
    if (mac.bytes[0] & 1) return fail("port {} ({}): {} is a multicast address", id_, name_, mac.to_string());
    mac_ = mac;
    return {};
  }
  /// Sets the MTU (PortInfo::min_mtu to max_mtu), at once: what PortConfig::mtu says.
  Result<void> set_mtu(std::uint16_t mtu);
  /// All-multicast mode on or off (virtual devices: recorded only).
  virtual Result<void> set_allmulticast(bool on) {
    allmulticast_ = on;
    return {};
  }
  bool allmulticast() const { return allmulticast_; }  ///< As last set (default on, as DPDK's virtual ports).
  /// Promiscuous mode on or off (virtual devices: recorded only).
  virtual Result<void> set_promiscuous(bool on) {
    promiscuous_ = on;
    return {};
  }
  bool promiscuous() const { return promiscuous_; }  ///< As last set (default on).

  const std::string& name() const { return name_; }           ///< Device name: "net_null0".
  const std::string& driver_name() const { return driver_; }  ///< Driver name: "net_null".
  std::uint16_t id() const { return id_; }                    ///< Port id in the application.
  void set_id(std::uint16_t id) { id_ = id; }                 ///< Sets the port id (used in errors).
  bool started() const { return started_; }                   ///< Between start() and stop().
  const PortConfig& config() const { return config_; }        ///< As last configured.

 protected:
  /// Drivers implement these; the base class keeps state and the burst table consistent.
  virtual Result<void> do_configure(const PortConfig&) { return {}; }
  /// Starts the device; publishes every queue's burst function (publish_rx/publish_tx).
  virtual Result<void> do_start() = 0;
  /// Stops the device (the burst tables already point at idle_burst).
  virtual void do_stop() {}
  /// Raw driver counters since creation.
  virtual PortStats read_stats() const = 0;
  /// Interrupt hooks behind rx_intr_fd/rx_intr_enable/rx_intr_disable/link_event_fd, called
  /// with `queue` already checked. The defaults refuse: the port has no fd to wait on.
  virtual Result<int> do_rx_intr_fd(std::uint16_t queue);
  virtual Result<void> do_rx_intr_enable(std::uint16_t queue);   ///< As do_rx_intr_fd.
  virtual Result<void> do_rx_intr_disable(std::uint16_t queue);  ///< As do_rx_intr_fd.
  virtual Result<int> do_link_event_fd();                        ///< As do_rx_intr_fd.
  /// Kernel offload of flow rules, called by the FlowTable on the control path. It offers the
  /// rules of group 0 in matching order, `slot` 0 first, and stops at the first one refused;
  /// it takes them back from the last slot down (do_flow_unoffload), so the offloaded rules are
  /// always slots 0..n-1 and the kernel acts only on what no software rule would have taken
  /// first. The defaults take nothing: every rule runs in software.
  virtual FlowOffloadResult do_flow_offload(const FlowRule& rule, std::uint32_t slot);
  /// Removes an offloaded rule (the last slot) from the kernel.
  virtual void do_flow_unoffload(const FlowOffload& offload);
  /// An offloaded rule's counters in the kernel since do_flow_offload.
  virtual FlowCounts do_flow_offload_counts(const FlowOffload& offload) const;

  /// Called by do_start() for every queue.
  template <RxQueue Q>
  void publish_rx(std::uint16_t queue, Q* q) {
    rx_table_[queue] = {rx_burst_fn<Q>(simd_level()), q};
  }
  /// As publish_rx, for TX queue `queue`.
  template <TxQueue Q>
  void publish_tx(std::uint16_t queue, Q* q) {
    tx_table_[queue] = {tx_burst_fn<Q>(simd_level()), q};
  }
  /// A queue made by make_rx_variant/make_tx_variant (variant.hpp): its entry() carries the
  /// burst function of its exact type.
  void publish_rx(std::uint16_t queue, BurstEntry e) { rx_table_[queue] = e; }
  /// As publish_rx(queue, BurstEntry), for TX queue `queue`.
  void publish_tx(std::uint16_t queue, BurstEntry e) { tx_table_[queue] = e; }
  /// For a driver whose queue changes variant while the port runs (net_vhost: the frontend
  /// starts a ring, and the features decide its variant): replaces the burst function of RX
  /// queue `queue`, its queue unchanged, wherever the port keeps it (the table, or the software
  /// offload or RSS queue that calls it). Any thread; nothing while the port is stopped: its
  /// next do_start() publishes. An lcore may still make one call to the function replaced, so
  /// that function must find out and do nothing (net_vhost checks its variant under the gate).
  void republish_rx(std::uint16_t queue, BurstFn fn);
  /// As republish_rx, for TX queue `queue`.
  void republish_tx(std::uint16_t queue, BurstFn fn);
  /// Helpers for drivers summing their queues' counters.
  static void add_rx(PortStats& s, const RxQueueCounters& c);
  /// As add_rx, for a TX queue's counters.
  static void add_tx(PortStats& s, const TxQueueCounters& c);
  /// The sum over every queue of two containers of (smart) pointers to queues with `counters`.
  template <class RxQueues, class TxQueues>
  static PortStats sum_queues(const RxQueues& rx, const TxQueues& tx) {
    PortStats s;
    for (const auto& q : rx) add_rx(s, q->counters);
    for (const auto& q : tx) add_tx(s, q->counters);
    return s;
  }

  MacAddress mac_{};  ///< What mac() returns unless a driver overrides it.

 private:
  void idle_tables();          // every burst entry back to idle_burst
  void find_driver_entries();  // rx_driver_/tx_driver_, once the queues are wrapped
  std::string context() const { return fmt::format("port {} ({})", id_, name_); }  // for errors
  Result<void> check_tx_offloads(std::uint64_t offloads, PktmbufPool* segment_pool) const;
  Result<void> check_rss(const RssConfig& rss, std::uint16_t rx_queues) const;
  Result<void> check_rx(std::uint64_t rx_offloads, std::uint16_t mtu) const;  // DPDK's messages
  void wrap_rx_queues();              // software RX offloads behind the driver's RX burst functions
  Result<void> start_software_rss();  // hashing/spreading RX entries, when the device has no hash
  void wrap_tx_queues();              // software offloads in front of the driver's TX burst functions
  PortStats raw_stats() const;        // read_stats() plus the software offloads' drops
  friend class FlowTable;             // calls apply_flows() after every rule change
  Result<void> apply_flows();         // a started port's RX entries after a rule change
  Result<void> check_rx_queue(std::uint16_t queue) const;  // < configured rx_queues

  std::string name_;
  std::string driver_;
  std::uint16_t id_ = 0;
  bool started_ = false;
  bool promiscuous_ = true;
  bool allmulticast_ = true;
  PortConfig config_{};
  PortStats baseline_{};
  std::vector<BurstEntry> rx_table_;
  std::vector<BurstEntry> tx_table_;
  // While started: the entry holding each queue's driver function (republish_*), its table
  // entry or the software queue's in front of it. start(), stop() and republish_* hold the mutex.
  std::mutex publish_mu_;
  std::vector<BurstEntry*> rx_driver_;
  std::vector<BurstEntry*> tx_driver_;
  std::vector<std::unique_ptr<SoftwareTxQueue>> sw_tx_;                       // one per TX queue, from configure()
  std::vector<std::unique_ptr<SoftwareRxQueue>> sw_rx_;                       // one per RX queue, from configure()
  std::unique_ptr<VlanFilter> vlan_filter_ = std::make_unique<VlanFilter>();  // ids vlan_filter lets in
  std::unique_ptr<SoftwareRss> sw_rss_;                                       // from the last start() with software RSS
  std::uint64_t rss_missed_before_ = 0;                                       // missed counts of replaced sw_rss_
  std::uint64_t rx_filtered_before_ = 0;                                      // filtered counts of replaced sw_rx_
  std::unique_ptr<FlowTable> flows_;                                          // rules; their classifier
};

/// An RX/TX burst function for queues that are not ready: receives and takes nothing.
std::uint16_t idle_burst(QueueBase*, Mbuf**, std::uint16_t) noexcept;

}  // namespace ws
