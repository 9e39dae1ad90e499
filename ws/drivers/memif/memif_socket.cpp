// SPDX-License-Identifier: BSD-3-Clause
// The memif control socket (memif_socket.hpp).
#include "ws/drivers/memif/memif_socket.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ws/virtio/vhost_user/peer_fd.hpp"

namespace ws::memif {
namespace {

Result<socklen_t> fill(const SocketAddress& a, sockaddr_un& un) {
  un = {};
  un.sun_family = AF_UNIX;
  const std::size_t room = sizeof(un.sun_path) - 1;  // a NUL after the name, or before it
  if (a.path.empty() || a.path.size() > room) return fail("socket '{}' must be 1 to {} bytes long", a.describe(), room);
  if (a.abstract) {
    std::memcpy(un.sun_path + 1, a.path.data(), a.path.size());
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + a.path.size() + 1);
  }
  std::memcpy(un.sun_path, a.path.data(), a.path.size());
  return static_cast<socklen_t>(sizeof un);
}

}  // namespace

Result<int> listen_socket(const SocketAddress& a) {
  sockaddr_un un;
  auto len = fill(a, un);
  if (!len) return std::unexpected(len.error());
  if (!a.abstract) {
    struct stat st{};
    if (::lstat(a.path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) return fail("'{}' exists and is not a socket", a.path);
      if (auto live = connect_socket(a)) {
        ::close(*live);
        return fail("'{}' is in use: a server listens there", a.path);
      }
      ::unlink(a.path.c_str());  // a stale socket of an earlier run
    }
  }
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail("socket for '{}': {}", a.describe(), std::strerror(errno));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&un), *len) != 0 || ::listen(fd, 8) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("cannot listen on '{}': {}", a.describe(), std::strerror(err));
  }
  return fd;
}

Result<int> connect_socket(const SocketAddress& a) {
  sockaddr_un un;
  auto len = fill(a, un);
  if (!len) return std::unexpected(len.error());
  // Non-blocking: a full backlog makes connect fail with EAGAIN instead of waiting on a server
  // that does not accept.
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail("socket for '{}': {}", a.describe(), std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&un), *len) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("cannot connect to '{}': {}", a.describe(), std::strerror(err));
  }
  return fd;
}

Result<std::optional<Received>> receive(int conn, virtio::FdReaper& reaper) {
  std::array<std::byte, message_bytes> buf{};
  iovec iov{buf.data(), buf.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(8 * sizeof(int))];
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control;
  mh.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(conn, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::optional<Received>{};
  if (n < 0) return fail("reading the control socket: {}", std::strerror(errno));
  if (n == 0) return fail("the peer closed the control socket");
  Received r;
  bool extra = false;
  // Every fd that came is ours to close: the first is the message's, the rest go at once.
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (r.fd < 0) {
        r.fd = fd;
      } else {
        reaper.close(fd);
        extra = true;
      }
    }
  }
  auto fail_with = [&](std::string why) -> Result<std::optional<Received>> {
    reaper.close(r.fd);
    return fail("{}", why);
  };
  if (extra || (mh.msg_flags & MSG_CTRUNC)) return fail_with("a control message with more than one fd");
  if ((mh.msg_flags & MSG_TRUNC) || n != static_cast<ssize_t>(message_bytes))
    return fail_with(fmt::format("a control message of {}{} bytes, expected {}",
                                 (mh.msg_flags & MSG_TRUNC) ? "over " : "", n, message_bytes));
  auto m = decode(buf);
  if (!m) return fail_with(m.error().message);
  r.message = *m;
  return std::optional<Received>{r};
}

Result<void> send(int conn, const Message& m, int fd) {
  const auto bytes = encode(m);
  iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))]{};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  if (fd >= 0) {
    mh.msg_control = control;
    mh.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_len = CMSG_LEN(sizeof(int));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  const ssize_t n = ::sendmsg(conn, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(bytes.size()))
    return fail("sending {}: {}", msg_type_name(m.type), n < 0 ? std::strerror(errno) : "cut short");
  return {};
}

}  // namespace ws::memif
