// SPDX-License-Identifier: BSD-3-Clause
// io: receive a burst and send it unchanged to the peer port.
#include "app/testpmd/fwd/engine.hpp"

namespace ws::testpmd {
namespace {

std::uint16_t io_forward(Stream& s) noexcept {
  return receive_edit_send(s, [](Mbuf**, std::uint16_t) {});
}

}  // namespace

Engine io_engine() { return make_engine<&io_forward>("io"); }

}  // namespace ws::testpmd
