// SPDX-License-Identifier: BSD-3-Clause
// Lcores: the application's worker threads, each pinned to a set of CPUs. Parses DPDK's
// `-l 0-3,5` lists and `--lcores '0@0,1@(2-3),(4-5)@6'` mappings, and launches functions on them.
#pragma once
#include <cstdint>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

#include "ws/core/result.hpp"

namespace ws {

/// Lcore ids are below this (per-lcore caches are arrays of this size).
inline constexpr unsigned max_lcores = 128;
/// lcore_id() of a thread that is not an lcore.
inline constexpr unsigned no_lcore = ~0u;

/// One lcore: its id and the CPUs its thread may run on.
struct LcoreConfig {
  unsigned id = 0;             ///< Lcore id, below max_lcores.
  std::vector<unsigned> cpus;  ///< allowed CPUs
};

/// The lcore the calling thread runs as, or no_lcore for threads that are not lcores.
unsigned lcore_id() noexcept;
/// Marks the calling thread as lcore `id` (the main thread does this for the main lcore).
void set_lcore_id(unsigned id) noexcept;

/// CPUs this process may run on (sched_getaffinity).
std::vector<unsigned> available_cpus();

/// `-l` list: "0-3,5". Each lcore runs on the CPU of the same number, which must exist.
Result<std::vector<LcoreConfig>> parse_lcore_list(std::string_view text);
/// `-c` hex mask: "0x3".
Result<std::vector<LcoreConfig>> parse_core_mask(std::string_view text);
/// `--lcores` map: "0@0,1@0", "(0-1)@(0-1)", "2" (lcore 2 on CPU 2). CPUs must exist.
Result<std::vector<LcoreConfig>> parse_lcore_map(std::string_view text);

/// Pin the calling thread to `cpus`.
Result<void> pin_current_thread(const std::vector<unsigned>& cpus);

/// A worker thread running as one lcore. Joined on destruction.
class LcoreThread {
 public:
  /// Starts a thread that marks itself lcore config.id, pins itself to config.cpus and runs body.
  LcoreThread(const LcoreConfig& config, std::function<void()> body);
  ~LcoreThread();
  LcoreThread(LcoreThread&&) = default;  ///< Moves the running thread.
  /// Waits for body to return (no-op when already joined).
  void join();

 private:
  std::thread thread_;
};

}  // namespace ws
