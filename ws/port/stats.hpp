// SPDX-License-Identifier: BSD-3-Clause
// Port statistics: per-queue counters written by one lcore and read by any thread.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ws {

// A counter with a single writer (the lcore polling the queue) and any number of readers.
// The writer's load+store is not an atomic increment: only one thread ever writes it.
class Counter {
 public:
  void add(std::uint64_t n) noexcept {
    // relaxed: a statistic; readers need no ordering with packet data.
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t read() const noexcept { return value_.load(std::memory_order_relaxed); }
  // Only while the writer is not running (control path).
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// DPDK's rte_eth_stats fields.
struct PortStats {
  std::uint64_t ipackets = 0;
  std::uint64_t opackets = 0;
  std::uint64_t ibytes = 0;
  std::uint64_t obytes = 0;
  std::uint64_t imissed = 0;
  std::uint64_t ierrors = 0;
  std::uint64_t oerrors = 0;
  std::uint64_t rx_nombuf = 0;
  std::vector<std::uint64_t> q_ipackets, q_opackets, q_ibytes, q_obytes, q_errors;

  PortStats& operator-=(const PortStats& base);
};

struct XStat {
  std::string name;
  std::uint64_t value;
};

// Counters every RX queue keeps (hot-path writes by its lcore only).
struct RxQueueCounters {
  Counter packets, bytes, errors, missed, nombuf;
};
// Counters every TX queue keeps. `full` counts packets the queue could not take.
struct TxQueueCounters {
  Counter packets, bytes, errors, full;
};

}  // namespace ws
