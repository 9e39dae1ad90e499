// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target for the memif control messages: the input is a stream of 128-byte messages,
// each with a flag byte saying whether an fd came with it, fed to a server session and a client
// session alike. No crash, no UB; every refusal says why; a server that calls itself connected
// holds rings that lie inside the regions it was given.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "ws/drivers/memif/memif_proto.hpp"

using namespace ws::memif;

namespace {

void check_server(const ServerSession& s) {
  if (!s.connected()) return;
  for (bool s2c : {false, true}) {
    for (const RingSetup& r : s.rings(s2c)) {
      if (!r.present) continue;
      const std::uint64_t bytes = sizeof(RingHeader) + (std::uint64_t{sizeof(Desc)} << r.log2_ring_size);
      if (r.region >= s.regions().size() || r.offset + bytes > s.regions()[r.region] || r.offset % 16 != 0)
        std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ServerSession server{{0, size % 2 ? "secret" : "", 4, 4, "fuzz"}};
  ClientSession client{{0, "", 4, 4, 10, 2048, "fuzz"}};
  bool server_alive = true, client_alive = true;
  for (std::size_t at = 0; at + 1 + message_bytes <= size; at += 1 + message_bytes) {
    const bool has_fd = data[at] & 1;
    auto m = decode(std::as_bytes(std::span(data + at + 1, message_bytes)));
    if (!m) {
      if (m.error().message.empty()) std::abort();
      continue;
    }
    if (server_alive) {
      auto s = server.on_message(*m, has_fd);
      if (!s && s.error().message.empty()) std::abort();
      server_alive = s.has_value();
      check_server(server);
    }
    if (client_alive) {
      auto c = client.on_message(*m);
      if (!c && c.error().message.empty()) std::abort();
      client_alive = c.has_value();
      if (c && c->reply) (void)decode(encode(*c->reply));
    }
  }
  return 0;
}
