// SPDX-License-Identifier: BSD-3-Clause
// vhost-user message decoding (strict) and SCM_RIGHTS socket I/O.
#include "ws/virtio/vhost_user/protocol.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>

#include "ws/virtio/vhost_user/peer_fd.hpp"

namespace ws::virtio::vhost_user {

std::string_view request_name(std::uint32_t request) noexcept {
  switch (static_cast<Request>(request)) {
    case Request::get_features:
      return "GET_FEATURES";
    case Request::set_features:
      return "SET_FEATURES";
    case Request::set_owner:
      return "SET_OWNER";
    case Request::reset_owner:
      return "RESET_OWNER";
    case Request::set_mem_table:
      return "SET_MEM_TABLE";
    case Request::set_log_base:
      return "SET_LOG_BASE";
    case Request::set_log_fd:
      return "SET_LOG_FD";
    case Request::set_vring_num:
      return "SET_VRING_NUM";
    case Request::set_vring_addr:
      return "SET_VRING_ADDR";
    case Request::set_vring_base:
      return "SET_VRING_BASE";
    case Request::get_vring_base:
      return "GET_VRING_BASE";
    case Request::set_vring_kick:
      return "SET_VRING_KICK";
    case Request::set_vring_call:
      return "SET_VRING_CALL";
    case Request::set_vring_err:
      return "SET_VRING_ERR";
    case Request::get_protocol_features:
      return "GET_PROTOCOL_FEATURES";
    case Request::set_protocol_features:
      return "SET_PROTOCOL_FEATURES";
    case Request::get_queue_num:
      return "GET_QUEUE_NUM";
    case Request::set_vring_enable:
      return "SET_VRING_ENABLE";
    case Request::send_rarp:
      return "SEND_RARP";
    case Request::net_set_mtu:
      return "NET_SET_MTU";
    case Request::set_status:
      return "SET_STATUS";
    case Request::get_status:
      return "GET_STATUS";
  }
  return "unknown";
}

void FdSet::close_one(int fd) noexcept {
  if (reaper_ != nullptr) {
    reaper_->close(fd);
  } else {
    ::close(fd);
  }
}

bool FdSet::push(int fd) noexcept {
  if (count_ == max_fds) {
    close_one(fd);
    return false;
  }
  fds_[count_++] = fd;
  return true;
}

int FdSet::take(std::size_t i) noexcept {
  if (i >= count_ || fds_[i] < 0) return -1;
  const int fd = fds_[i];
  fds_[i] = -1;
  return fd;
}

void FdSet::close_all() noexcept {
  for (std::size_t i = 0; i < count_; ++i)
    if (fds_[i] >= 0) close_one(fds_[i]);
  count_ = 0;
}

bool expected_size(std::uint32_t request, std::uint32_t& size) noexcept {
  switch (static_cast<Request>(request)) {
    case Request::get_features:
    case Request::set_owner:
    case Request::reset_owner:
    case Request::get_protocol_features:
    case Request::get_queue_num:
    case Request::get_status:
      size = 0;
      return true;
    case Request::set_features:
    case Request::set_protocol_features:
    case Request::set_vring_kick:
    case Request::set_vring_call:
    case Request::set_vring_err:
    case Request::set_status:
      size = 8;
      return true;
    case Request::set_vring_num:
    case Request::set_vring_base:
    case Request::get_vring_base:
    case Request::set_vring_enable:
      size = sizeof(VringState);
      return true;
    case Request::set_vring_addr:
      size = sizeof(VringAddr);
      return true;
    case Request::set_mem_table:
      size = 0;  // variable: checked against the region count
      return true;
    default:
      return false;  // logging, RARP, MTU, ...: never offered, so never accepted
  }
}

namespace {

std::size_t expected_fds(const Message& m) {
  switch (m.request()) {
    case Request::set_mem_table:
      return m.payload.mem.count;
    case Request::set_vring_kick:
    case Request::set_vring_call:
    case Request::set_vring_err:
      return (m.payload.u64 & vring_nofd) ? 0 : 1;
    default:
      return 0;
  }
}

bool overflows(std::uint64_t a, std::uint64_t b) { return b > std::numeric_limits<std::uint64_t>::max() - a; }

Result<void> check_payload(const Message& m) {
  const auto name = request_name(m.header.request);
  switch (m.request()) {
    case Request::set_mem_table: {
      const MemTable& t = m.payload.mem;
      if (t.count == 0 || t.count > max_mem_regions)
        return fail("vhost-user {}: {} regions, expected 1..{}", name, t.count, max_mem_regions);
      if (m.header.size != 8 + 32 * t.count)
        return fail("vhost-user {}: payload {} bytes for {} regions, expected {}", name, m.header.size, t.count,
                    8 + 32 * t.count);
      for (std::uint32_t i = 0; i < t.count; ++i) {
        const MemRegionDesc& r = t.regions[i];
        if (r.size == 0) return fail("vhost-user {}: region {} has size 0", name, i);
        if (overflows(r.guest_addr, r.size) || overflows(r.user_addr, r.size) || overflows(r.mmap_offset, r.size))
          return fail("vhost-user {}: region {} (guest {:#x} user {:#x} offset {:#x} size {:#x}) overflows", name, i,
                      r.guest_addr, r.user_addr, r.mmap_offset, r.size);
      }
      return {};
    }
    case Request::set_vring_kick:
    case Request::set_vring_call:
    case Request::set_vring_err:
      if (m.payload.u64 & ~(vring_index_mask | vring_nofd))
        return fail("vhost-user {}: payload {:#x} has bits beyond the ring index and the no-fd flag", name,
                    m.payload.u64);
      return {};
    case Request::set_vring_enable:
      if (m.payload.state.num > 1)
        return fail("vhost-user {}: ring {} enable={} expected 0 or 1", name, m.payload.state.index,
                    m.payload.state.num);
      return {};
    default:
      return {};
  }
}

}  // namespace

Result<Message> decode(std::span<const std::byte> bytes, FdSet& fds) {
  auto refuse = [&fds](Error e) -> Result<Message> {
    fds.close_all();
    return std::unexpected(std::move(e));
  };
  Message m;
  if (bytes.size() < sizeof(Header))
    return refuse({fmt::format("vhost-user: truncated header ({} bytes, expected 12)", bytes.size())});
  std::memcpy(&m.header, bytes.data(), sizeof(Header));
  const auto name = request_name(m.header.request);
  if ((m.header.flags & 3) != flag_version)
    return refuse({fmt::format("vhost-user {}: version {} in flags {:#x}, expected 1", name, m.header.flags & 3,
                               m.header.flags)});
  std::uint32_t want = 0;
  if (!expected_size(m.header.request, want))
    return refuse({fmt::format("vhost-user: request {} ({}) is not supported", m.header.request, name)});
  if (m.header.size > max_payload || bytes.size() - sizeof(Header) != m.header.size)
    return refuse({fmt::format("vhost-user {}: payload {} bytes with {} received", name, m.header.size,
                               bytes.size() - sizeof(Header))});
  if (m.request() != Request::set_mem_table && m.header.size != want)
    return refuse({fmt::format("vhost-user {}: payload {} bytes, expected {}", name, m.header.size, want)});
  if (m.request() == Request::set_mem_table && m.header.size < 8)
    return refuse({fmt::format("vhost-user {}: payload {} bytes, expected at least 8", name, m.header.size)});
  std::memcpy(m.payload.raw.data(), bytes.data() + sizeof(Header), m.header.size);
  if (auto ok = check_payload(m); !ok) return refuse(ok.error());
  if (fds.size() != expected_fds(m))
    return refuse({fmt::format("vhost-user {}: {} fds received, expected {}", name, fds.size(), expected_fds(m))});
  return m;
}

namespace {

using Clock = std::chrono::steady_clock;

// Milliseconds left until `deadline` (0 when it has passed).
int left_ms(Clock::time_point deadline) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return ms > 0 ? static_cast<int>(ms) : 0;
}

// Waits until `sock` has `events`; false when the deadline passed first.
bool wait_for(int sock, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{sock, events, 0};
    const int r = ::poll(&p, 1, left_ms(deadline));
    if (r > 0) return true;  // ready, or an error/hang-up the next call reports
    if (r == 0 || errno != EINTR) return false;
  }
}

// Reads what `sock` has of the `len` bytes wanted at `buf` (never waits), taking any fds that
// come with them into `fds` (when not null). The bytes read: 0 when none were there. Fails on a
// closed connection, an error, or too many fds.
Result<std::size_t> recv_some(int sock, std::byte* buf, std::size_t len, FdSet* fds, std::string_view what) {
  for (;;) {
    iovec iov{buf, len};
    alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.data();
    mh.msg_controllen = control.size();
    const ssize_t n = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          if (fds == nullptr) {
            ::close(fd);  // a reply carries none: not ours to keep
            return fail("vhost-user {}: the peer sent fds with it", what);
          }
          fds->push(fd);  // closed at once when the set is full
        }
      }
      if (mh.msg_flags & MSG_CTRUNC) return fail("vhost-user {}: more than {} fds with one message", what, max_fds);
      return static_cast<std::size_t>(n);
    }
    if (n == 0) return fail("vhost-user {}: connection closed by the peer", what);
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return std::size_t{0};
    return fail("vhost-user {}: recvmsg: {}", what, std::strerror(errno));
  }
}

// Reads exactly `len` bytes into `buf`, taking any fds that come with them into `fds` (when not
// null). Fails on a closed connection, an error, too many fds, or the deadline.
Result<void> recv_exact(int sock, std::byte* buf, std::size_t len, FdSet* fds, Clock::time_point deadline,
                        std::string_view what) {
  std::size_t got = 0;
  while (got < len) {
    auto n = recv_some(sock, buf + got, len - got, fds, what);
    if (!n) return std::unexpected(n.error());
    got += *n;
    if (*n == 0 && !wait_for(sock, POLLIN, deadline))
      return fail("vhost-user {}: the peer sent {} of {} bytes and then nothing for too long; closing", what, got, len);
  }
  return {};
}

}  // namespace

Result<Message> recv_message(int sock, FdSet& fds, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::array<std::byte, sizeof(Header) + max_payload> buf;
  auto refuse = [&fds](Error e) -> Result<Message> {
    fds.close_all();
    return std::unexpected(std::move(e));
  };
  if (auto ok = recv_exact(sock, buf.data(), sizeof(Header), &fds, deadline, "message header"); !ok)
    return refuse(ok.error());
  Header h;
  std::memcpy(&h, buf.data(), sizeof h);
  const auto name = request_name(h.request);
  if (h.size > max_payload)
    return refuse({fmt::format("vhost-user {}: payload {} bytes, at most {}", name, h.size, max_payload)});
  if (auto ok = recv_exact(sock, buf.data() + sizeof(Header), h.size, &fds, deadline, name); !ok)
    return refuse(ok.error());
  return decode(std::span(buf.data(), sizeof(Header) + h.size), fds);
}

std::size_t MessageReader::wanted() const noexcept {
  if (got_ < sizeof(Header)) return sizeof(Header);
  Header h;
  std::memcpy(&h, buf_.data(), sizeof h);
  return sizeof(Header) + h.size;  // read() refused sizes beyond max_payload
}

Result<std::optional<Message>> MessageReader::read(int sock) {
  auto refuse = [this](Error e) -> Result<std::optional<Message>> {
    fds_.close_all();
    got_ = 0;
    return std::unexpected(std::move(e));
  };
  for (;;) {
    const std::size_t want = wanted();
    if (got_ == want) {  // a whole header and its payload
      got_ = 0;
      auto m = decode(std::span(buf_.data(), want), fds_);
      if (!m) return std::unexpected(m.error());  // decode closed the fds
      return std::optional<Message>(*m);
    }
    Header h{};
    if (got_ >= sizeof(Header)) std::memcpy(&h, buf_.data(), sizeof h);
    const auto what = got_ < sizeof(Header) ? std::string_view("message header") : request_name(h.request);
    auto n = recv_some(sock, buf_.data() + got_, want - got_, &fds_, what);
    if (!n) return refuse(n.error());
    if (*n == 0) return std::optional<Message>();  // the rest has not come yet
    if (got_ == 0) started_ = Clock::now();
    got_ += *n;
    if (got_ == sizeof(Header)) {
      std::memcpy(&h, buf_.data(), sizeof h);
      if (h.size > max_payload)
        return refuse(
            {fmt::format("vhost-user {}: payload {} bytes, at most {}", request_name(h.request), h.size, max_payload)});
    }
  }
}

std::string MessageReader::describe_partial(std::chrono::milliseconds waited) const {
  Header h{};
  if (got_ >= sizeof(Header)) std::memcpy(&h, buf_.data(), sizeof h);
  const auto what = got_ < sizeof(Header) ? std::string_view("message header") : request_name(h.request);
  return fmt::format("vhost-user {}: the peer sent {} of {} bytes and then nothing for {} ms", what, got_, wanted(),
                     waited.count());
}

Result<Message> recv_reply(int sock, Request request, std::uint32_t size, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto name = request_name(static_cast<std::uint32_t>(request));
  Message m;
  if (auto ok = recv_exact(sock, reinterpret_cast<std::byte*>(&m.header), sizeof(Header), nullptr, deadline, name); !ok)
    return std::unexpected(ok.error());
  if (m.header.request != static_cast<std::uint32_t>(request) || !(m.header.flags & flag_reply) ||
      (m.header.flags & 3) != flag_version || m.header.size != size)
    return fail("vhost-user {}: unexpected reply (request {}, flags {:#x}, size {}; expected size {})", name,
                m.header.request, m.header.flags, m.header.size, size);
  if (auto ok = recv_exact(sock, m.payload.raw.data(), size, nullptr, deadline, name); !ok)
    return std::unexpected(ok.error());
  return m;
}

Result<void> send_message(int sock, const Message& msg, std::span<const int> fds, int timeout_ms) {
  const auto name = request_name(msg.header.request);
  if (fds.size() > max_fds) return fail("vhost-user {}: {} fds, at most {}", name, fds.size(), max_fds);
  if (msg.header.size > max_payload)
    return fail("vhost-user {}: payload {} bytes, at most {}", name, msg.header.size, max_payload);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::array<std::byte, sizeof(Header) + max_payload> buf;
  std::memcpy(buf.data(), &msg.header, sizeof(Header));
  std::memcpy(buf.data() + sizeof(Header), msg.payload.raw.data(), msg.header.size);
  const std::size_t len = sizeof(Header) + msg.header.size;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int) * max_fds)> control{};
  std::size_t sent = 0;
  while (sent < len) {
    iovec iov{buf.data() + sent, len - sent};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (sent == 0 && !fds.empty()) {  // the fds go with the first byte
      mh.msg_control = control.data();
      mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* c = CMSG_FIRSTHDR(&mh);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return fail("vhost-user {}: sendmsg: {}", name, std::strerror(errno));
    if (!wait_for(sock, POLLOUT, deadline))
      return fail("vhost-user {}: the peer does not read what we send ({} of {} bytes sent); closing", name, sent, len);
  }
  return {};
}

Result<int> listen_unix(const std::string& path) {
  sockaddr_un addr{};
  const std::string temp = fmt::format("{}.{}.tmp", path, ::getpid());
  if (temp.size() >= sizeof(addr.sun_path))
    return fail("socket path '{}' is too long: {} bytes at most here", path,
                sizeof(addr.sun_path) - 1 - (temp.size() - path.size()));
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) return fail("'{}' exists and is not a socket", path);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, temp.c_str(), temp.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail("socket for '{}': {}", path, std::strerror(errno));
  ::unlink(temp.c_str());  // left by a process of the same pid that died here
  // rename() replaces a stale socket at `path` in one step: the name never points at nothing.
  const char* failed = nullptr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    failed = "bind";
  } else if (::listen(fd, 8) != 0) {
    failed = "listen";
  } else if (::rename(temp.c_str(), path.c_str()) != 0) {
    failed = "rename into place";
  }
  if (failed != nullptr) {
    const int err = errno;
    ::unlink(temp.c_str());
    ::close(fd);
    return fail("cannot listen on '{}': {}: {}", path, failed, std::strerror(err));
  }
  return fd;
}

Result<int> connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return fail("socket path '{}' is longer than {} bytes", path, sizeof(addr.sun_path) - 1);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // Non-blocking: a unix socket's connect waits while the listener's backlog is full, and a peer
  // that never accepts must not hold us there (EAGAIN then: the caller tries again later).
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail("socket for '{}': {}", path, std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    return fail("cannot connect to '{}': {}", path,
                err == EAGAIN ? "the listener accepts no more connections for now" : std::strerror(err));
  }
  return fd;
}

}  // namespace ws::virtio::vhost_user
