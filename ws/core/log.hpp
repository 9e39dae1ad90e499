// SPDX-License-Identifier: BSD-3-Clause
// Levelled logging for the control path (never the hot path). Thread-safe: one line per call.
#pragma once
#include <string_view>

#include <fmt/format.h>

namespace ws {

enum class LogLevel : int { emerg = 0, alert, crit, err, warning, notice, info, debug };

void set_log_level(LogLevel level);
LogLevel log_level();
// Parses DPDK's level names and numbers ("debug", "8", "info"...); false if unknown.
bool parse_log_level(std::string_view text, LogLevel& out);
void log_line(LogLevel level, std::string_view line);

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (static_cast<int>(level) <= static_cast<int>(log_level()))
    log_line(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ws
