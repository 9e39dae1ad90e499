// The table of forwarding engines.
#include <array>
#include <string>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {

std::span<const Engine> all_engines() {
  // One line per engine: its file under fwd/ defines the function.
  static const std::array engines = {io_engine(),      mac_engine(),    macswap_engine(),
                                     flowgen_engine(), txonly_engine(), rxonly_engine(),
                                     csum_engine(),   fivetswap_engine(), icmpecho_engine()};
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

}  // namespace ws::testpmd
