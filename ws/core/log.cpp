// SPDX-License-Identifier: BSD-3-Clause
// Logging to stderr with the level as prefix.
#include "ws/core/log.hpp"

#include <syslog.h>

#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <mutex>

namespace ws {
namespace {

std::atomic<int> current_level{static_cast<int>(LogLevel::notice)};
constexpr std::array<std::string_view, 8> level_names = {"emerg",   "alert",  "crit", "err",
                                                         "warning", "notice", "info", "debug"};

}  // namespace

void set_log_level(LogLevel level) { current_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel log_level() { return static_cast<LogLevel>(current_level.load(std::memory_order_relaxed)); }

bool parse_log_level(std::string_view text, LogLevel& out) {
  for (std::size_t i = 0; i < level_names.size(); ++i) {
    if (text == level_names[i]) {
      out = static_cast<LogLevel>(i);
      return true;
    }
  }
  if (text == "error") {
    out = LogLevel::err;
    return true;
  }
  // DPDK numbers levels 1 (emerg) to 8 (debug).
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n < 1 || n > 8) return false;
  out = static_cast<LogLevel>(n - 1);
  return true;
}

void LogBudget::roll(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - window_ < period_) return;
  if (pending_dropped_ > 0)
    log_line(LogLevel::warning, fmt::format("{}: {} more lines like the above suppressed in {} ms", source_,
                                            pending_dropped_, period_.count()));
  window_ = now;
  used_ = 0;
  pending_dropped_ = 0;
}

bool LogBudget::take() {
  std::lock_guard lock(mutex_);
  roll(false);
  if (used_ == burst_) {
    ++pending_dropped_;
    ++total_dropped_;
    return false;
  }
  ++used_;
  return true;
}

void LogBudget::flush(bool now) {
  std::lock_guard lock(mutex_);
  roll(now);
}

std::uint64_t LogBudget::suppressed() const {
  std::lock_guard lock(mutex_);
  return total_dropped_;
}

namespace {
std::atomic<bool> to_syslog{false};
}  // namespace

void set_log_syslog(int facility) {
  openlog(nullptr, LOG_PID | LOG_NDELAY, facility);
  to_syslog.store(true, std::memory_order_release);
}

void log_line(LogLevel level, std::string_view line) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  std::fprintf(stderr, "%s: %.*s\n", level_names[static_cast<std::size_t>(level)].data(), static_cast<int>(line.size()),
               line.data());
  // LogLevel numbers are syslog's priorities.
  if (to_syslog.load(std::memory_order_acquire))
    syslog(static_cast<int>(level), "%.*s", static_cast<int>(line.size()), line.data());
}

}  // namespace ws
