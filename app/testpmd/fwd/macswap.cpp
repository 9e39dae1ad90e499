// SPDX-License-Identifier: BSD-3-Clause
// macswap: receive a burst, swap each frame's Ethernet source and destination, send it back out.
#include <cstring>

#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t macswap_forward(Stream& s) noexcept {
  return receive_edit_send(s, [](Mbuf** pkts, std::uint16_t n) {
    for (std::uint16_t i = 0; i < n; ++i) {
      if (i + 1 < n) prefetch0(pkts[i + 1]->data());
      std::uint8_t* p = pkts[i]->data();
      std::uint8_t dst[6];
      std::memcpy(dst, p, 6);
      std::memmove(p, p + 6, 6);
      std::memcpy(p + 6, dst, 6);
      set_tx_fields(pkts[i]);
    }
  });
}

}  // namespace

Engine macswap_engine() { return make_engine<&macswap_forward>("macswap"); }

}  // namespace ws::testpmd
