// SPDX-License-Identifier: BSD-3-Clause
// IntrFd: the fd a driver hands the application for an RX queue's interrupt (Port::rx_intr_fd)
// when what fires is a peer's fd (a vhost-user call or kick eventfd, a memif ring's eventfd).
#pragma once
#include "ws/core/result.hpp"

namespace ws {

// An epoll fd of ours that holds the peer's current fd and one eventfd of ours, both
// edge-triggered. An epoll fd is itself pollable: it is readable while an event is queued, so the
// application waits on it as on any fd. Why not the peer's fd itself:
//  - the peer shares the open file description and may clear O_NONBLOCK or read the eventfd
//    itself, so a read to drain it could block the lcore; an edge-triggered event is drained by
//    epoll_wait(0) on our fd, which never blocks, and the peer's fd is never read or written;
//  - the peer's fd changes on reconnection (SET_VRING_KICK, SET_VRING_CALL, ADD_RING): watch()
//    swaps what the epoll fd holds, and the fd the application got stays valid;
//  - signal() makes it readable from our side: an enable that finds work already pending says
//    so through the fd, so that no packet that came before the enable is waited for.
class IntrFd {
 public:
  IntrFd() = default;
  ~IntrFd();
  IntrFd(const IntrFd&) = delete;
  IntrFd& operator=(const IntrFd&) = delete;

  // Creates the epoll fd and our eventfd; `what` names the device and queue in errors.
  Result<void> open(const std::string& what);
  bool is_open() const noexcept { return epoll_ >= 0; }
  // The fd for the application (valid until destruction).
  int fd() const noexcept { return epoll_; }
  // Control thread: from now on `peer` (-1: none) fires this fd. The caller keeps owning `peer`
  // and calls watch(-1) before closing it.
  Result<void> watch(int peer);
  // Lcore: makes the fd readable (never blocks: an eventfd of ours no one else holds).
  void signal() noexcept;
  // Lcore: forgets every queued event (never blocks).
  void drain() noexcept;

 private:
  std::string what_;
  int epoll_ = -1;
  int own_ = -1;   // our eventfd, for signal()
  int peer_ = -1;  // the peer's fd the epoll fd holds now
};

}  // namespace ws
