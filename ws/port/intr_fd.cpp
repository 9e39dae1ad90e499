// SPDX-License-Identifier: BSD-3-Clause
#include "ws/port/intr_fd.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace ws {

IntrFd::~IntrFd() {
  if (epoll_ >= 0) ::close(epoll_);
  if (own_ >= 0) ::close(own_);
}

Result<void> IntrFd::open(const std::string& what) {
  what_ = what;
  if (epoll_ >= 0) return {};
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_ < 0) return fail("{}: epoll_create1: {}", what_, std::strerror(errno));
  own_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (own_ < 0) return fail("{}: eventfd: {}", what_, std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.fd = own_;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, own_, &ev) != 0) return fail("{}: epoll_ctl: {}", what_, std::strerror(errno));
  return {};
}

Result<void> IntrFd::watch(int peer) {
  if (peer == peer_) return {};
  if (peer_ >= 0) (void)::epoll_ctl(epoll_, EPOLL_CTL_DEL, peer_, nullptr);
  peer_ = -1;
  if (peer < 0) return {};
  // Edge-triggered: each write of the peer queues one event, whatever its counter holds, and
  // nothing has to read the peer's fd to rearm it.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.fd = peer;
  if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, peer, &ev) != 0)
    return fail("{}: epoll_ctl on the peer's fd {}: {}", what_, peer, std::strerror(errno));
  peer_ = peer;
  return {};
}

void IntrFd::signal() noexcept {
  const std::uint64_t one = 1;
  (void)!::write(own_, &one, sizeof one);
}

void IntrFd::drain() noexcept {
  epoll_event ev[2];
  while (::epoll_wait(epoll_, ev, 2, 0) > 0) {
  }
  std::uint64_t v;
  (void)!::read(own_, &v, sizeof v);  // ours alone and non-blocking: its count back to 0
}

}  // namespace ws
