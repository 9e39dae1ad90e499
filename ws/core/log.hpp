// SPDX-License-Identifier: BSD-3-Clause
// Levelled logging for the control path (never the hot path). Thread-safe: one line per call.
#pragma once
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace ws {

/// Syslog's levels, as DPDK's --log-level numbers them (emerg = 0 ... debug = 7).
enum class LogLevel : int { emerg = 0, alert, crit, err, warning, notice, info, debug };

/// Lines above `level` are dropped from now on (default: notice). Thread-safe.
void set_log_level(LogLevel level);
/// The current level.
LogLevel log_level();
/// Parses DPDK's level names and numbers ("debug", "8", "info"...); false if unknown.
bool parse_log_level(std::string_view text, LogLevel& out);
/// From now on, lines also go to syslog under `facility` (LOG_DAEMON...), as DPDK's --syslog.
void set_log_syslog(int facility);
/// Writes one line to stderr with its level, whatever the current level (and to syslog, if set).
void log_line(LogLevel level, std::string_view line);

/// Formats (fmt syntax) and writes a line when `level` is at or below the current level.
template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (static_cast<int>(level) <= static_cast<int>(log_level()))
    log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

/// A budget for lines that someone outside the process can trigger at will (a peer's bad
/// messages, reconnections): at most `burst` lines per `period`; the rest are dropped and, once
/// the period is over, one line from `source` says how many (at the next line, or at flush()).
/// Counters, not logs, are the exact record. Thread-safe.
class LogBudget {
 public:
  /// A budget of `burst` lines per `period`; `source` names it in the dropped-lines report.
  explicit LogBudget(std::string source, std::uint32_t burst = 10,
                     std::chrono::milliseconds period = std::chrono::seconds(1))
      : source_(std::move(source)), burst_(burst), period_(period) {}

  /// As ws::log, within the budget (over it: dropped and counted).
  template <class... Args>
  void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
    if (static_cast<int>(level) > static_cast<int>(log_level())) return;
    if (take()) log_line(level, fmt::format(format, std::forward<Args>(args)...));
  }
  /// Reports lines dropped in a period that is over (call it now and then, e.g. from a poll loop);
  /// `now`: whether or not the period is over (when the source goes away).
  void flush(bool now = false);
  std::uint64_t suppressed() const;  ///< lines dropped so far, in all

 private:
  bool take();            // false when this line is over budget (counted)
  void roll(bool force);  // mutex_ held

  mutable std::mutex mutex_;
  std::string source_;
  std::uint32_t burst_;
  std::chrono::milliseconds period_;
  std::chrono::steady_clock::time_point window_{};
  std::uint32_t used_ = 0;
  std::uint64_t pending_dropped_ = 0;
  std::uint64_t total_dropped_ = 0;
};

}  // namespace ws
