// SPDX-License-Identifier: BSD-3-Clause
// Port statistics: per-queue counters written by one lcore and read by any thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ws {

/// A counter with a single writer (the lcore polling the queue) and any number of readers.
/// The writer's load+store is not an atomic increment: only one thread ever writes it.
class Counter {
 public:
  /// Adds n (the writer only).
  void add(std::uint64_t n) noexcept {
    // relaxed: a statistic; readers need no ordering with packet data.
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  /// The value; any thread.
  std::uint64_t read() const noexcept { return value_.load(std::memory_order_relaxed); }
  /// Only while the writer is not running (control path).
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

/// DPDK's rte_eth_stats fields.
struct PortStats {
  std::uint64_t ipackets = 0;             ///< Packets received.
  std::uint64_t opackets = 0;             ///< Packets sent.
  std::uint64_t ibytes = 0;               ///< Bytes received.
  std::uint64_t obytes = 0;               ///< Bytes sent.
  std::uint64_t imissed = 0;              ///< Packets the device dropped on receive (queue full).
  std::uint64_t ierrors = 0;              ///< Packets received in error.
  std::uint64_t oerrors = 0;              ///< Packets that failed to be sent.
  std::uint64_t rx_nombuf = 0;            ///< Receive attempts that found no free mbuf.
  std::vector<std::uint64_t> q_ipackets;  ///< Packets received, per RX queue.
  std::vector<std::uint64_t> q_opackets;  ///< Packets sent, per TX queue.
  std::vector<std::uint64_t> q_ibytes;    ///< Bytes received, per RX queue.
  std::vector<std::uint64_t> q_obytes;    ///< Bytes sent, per TX queue.
  std::vector<std::uint64_t> q_errors;    ///< Packets that failed to be sent, per TX queue.

  /// Subtracts an earlier snapshot, field by field (the basis of reset_stats()).
  PortStats& operator-=(const PortStats& base);
};

/// A driver-specific named counter (DPDK's xstats).
struct XStat {
  std::string name;     ///< As DPDK names it where DPDK has it ("rx_q0_packets").
  std::uint64_t value;  ///< Its value since the port was created.
};

/// Counters every RX queue keeps (hot-path writes by its lcore only).
struct RxQueueCounters {
  Counter packets;  ///< Packets received.
  Counter bytes;    ///< Bytes received.
  Counter errors;   ///< Packets received in error.
  Counter missed;   ///< Packets dropped for want of room.
  Counter nombuf;   ///< Receive attempts that found no free mbuf.
};
/// Counters every TX queue keeps. `full` counts packets the queue could not take.
struct TxQueueCounters {
  Counter packets;  ///< Packets sent.
  Counter bytes;    ///< Bytes sent.
  Counter errors;   ///< Packets that failed.
  Counter full;     ///< Packets the queue could not take.
};

}  // namespace ws
