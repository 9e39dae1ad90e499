// SPDX-License-Identifier: BSD-3-Clause
// The table of forwarding engines.
#include <array>
#include <string>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {

std::span<const Engine> all_engines() {
  // One line per engine: its file under fwd/ defines the function.
  static const std::array engines = {io_engine(),      mac_engine(),       macswap_engine(),
                                     flowgen_engine(), txonly_engine(),    rxonly_engine(),
                                     csum_engine(),    fivetswap_engine(), icmpecho_engine()};
  return engines;
}

const Engine* find_engine(std::string_view name) {
  for (const auto& e : all_engines())
    if (e.name == name) return &e;
  return nullptr;
}

std::string engine_names() {
  std::string out;
  for (const auto& e : all_engines()) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

std::string burst_spread_line(std::string_view rx_tx, const BurstSpread& spread) {
  // Slot 0: empty bursts, always shown; slots 1, 2: the two most frequent non-zero sizes.
  std::array<std::uint64_t, 3> count{spread.bursts[0].read(), 0, 0};
  std::array<std::size_t, 3> size{0, 0, 0};
  std::uint64_t total = count[0];
  for (std::size_t n = 1; n < spread.bursts.size(); ++n) {
    const std::uint64_t c = spread.bursts[n].read();
    if (c == 0) continue;
    total += c;
    if (c > count[1]) {
      count[2] = count[1];
      size[2] = size[1];
      count[1] = c;
      size[1] = n;
    } else if (c > count[2]) {
      count[2] = c;
      size[2] = n;
    }
  }
  if (total == 0) return {};
  std::string out = "  " + std::string(rx_tx) + "-bursts : " + std::to_string(total) + " [";
  std::uint64_t shown = 0;
  int percent_shown = 0;
  for (std::size_t i = 0; i < count.size(); ++i) {
    shown += count[i];
    if (shown == total)  // the rest rounds up to 100%
      return out + std::to_string(100 - percent_shown) + "% of " + std::to_string(size[i]) + " pkts]";
    const int percent = static_cast<int>(static_cast<double>(count[i]) / static_cast<double>(total) * 100);
    out += std::to_string(percent) + "% of " + std::to_string(size[i]) + " pkts + ";
    percent_shown += percent;
  }
  return out + std::to_string(100 - percent_shown) + "% of other]";
}

}  // namespace ws::testpmd
