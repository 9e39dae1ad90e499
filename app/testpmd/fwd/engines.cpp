// The table of forwarding engines.
#include <array>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {

const Engine* find_engine(std::string_view name) {
  static const std::array engines = {io_engine(),      mac_engine(),    macswap_engine(),
                                     flowgen_engine(), txonly_engine(), rxonly_engine()};
  for (const auto& e : engines)
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace ws::testpmd
