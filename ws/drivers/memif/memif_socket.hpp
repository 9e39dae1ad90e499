// SPDX-License-Identifier: BSD-3-Clause
// The memif control socket: a SOCK_SEQPACKET unix socket, at a path or (DPDK's default) in the
// abstract namespace, carrying one 128-byte message per packet and at most one fd with it.
#pragma once
#include <string>

#include "ws/core/result.hpp"
#include "ws/drivers/memif/memif_proto.hpp"

namespace ws::virtio {
class FdReaper;
}

namespace ws::memif {

/// Where the socket is: `path`, or with `abstract` the abstract name "\0path" (as DPDK 22.11
/// binds it: the name's bytes and one NUL, no more).
struct SocketAddress {
  std::string path;
  bool abstract = true;
  std::string describe() const { return abstract ? "@" + path : path; }
};

/// A listening socket (non-blocking accept); a stale socket file at the path is replaced.
Result<int> listen_socket(const SocketAddress& a);
/// A connected socket, or an error (nobody listens yet: the caller tries again).
Result<int> connect_socket(const SocketAddress& a);

/// One message received: its bytes decoded, and the fd it carried (-1: none).
struct Received {
  Message message;
  int fd = -1;
};
/// Receives one message without waiting. An empty optional: nothing there yet. Errors: the peer
/// closed, a message of another size, more fds than one (all closed through `reaper`).
Result<std::optional<Received>> receive(int conn, virtio::FdReaper& reaper);
/// Sends `m` with `fd` (-1: none) without waiting: a peer that does not read is an error.
Result<void> send(int conn, const Message& m, int fd = -1);

}  // namespace ws::memif
