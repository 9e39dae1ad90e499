// SPDX-License-Identifier: BSD-3-Clause
// Fds a peer hands us over a unix socket (vhost-user kick, call and err eventfds, memory
// regions): their type checked without a call that can block, and their close() done off the
// threads that serve the peer (FdReaper).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ws/core/result.hpp"

namespace ws::virtio {

// What a peer's fd is, as far as we can tell without asking its file system. fstat(), fstatfs()
// and close() of a file on FUSE (or NFS, 9p...) go to the daemon (or the server) and wait for
// its answer: a peer that owns the daemon makes them block for as long as it likes. So the type
// comes from /proc/self/fd (the link's text: "anon_inode:[eventfd]", "pipe:[N]", "socket:[N]",
// built by the kernel from the fd alone) and from F_GET_SEALS, which succeeds only on tmpfs and
// hugetlbfs files (the memfd seal calls) and asks nothing of any file system. Only on such a
// file do we then fstat()/fstatfs(): both file systems answer from memory.
enum class FdKind { eventfd, shared_memory, socket, pipe, other };

struct FdType {
  FdKind kind = FdKind::other;
  std::string link;  // the /proc/self/fd link ("pipe:[123]", "/dev/null"), for messages
};

// Never blocks (see above). Any thread.
FdType fd_type(int fd);

// Ok for an eventfd; else an error saying what the fd is ("the fd is 'pipe:[123]'"), expected
// an eventfd. Any thread, never blocks.
Result<void> expect_eventfd(int fd);
// Ok for a regular file on tmpfs or hugetlbfs (a memfd among them): memory a peer shares can
// then never fault or stat through a file system that answers late. Any thread, never blocks.
Result<void> expect_shared_memory(int fd);

// Closes a peer's fds on threads of its own. close() of a peer's fd can block: a TCP socket with
// SO_LINGER and unsent data waits for the peer's acknowledgement (we set SO_LINGER {0, 0} first:
// the connection is reset at once), and a file on FUSE waits for the daemon's answer to FLUSH,
// which nothing can interrupt. Two threads: one for eventfds and shared memory, the fds a
// well-behaved peer sends, and one for everything else, so that an fd stuck in close() delays
// only the fds a misbehaving peer sent.
class FdReaper {
 public:
  FdReaper() = default;
  // Waits for the threads for at most the deadline given to start(): a thread still inside a
  // close() is left behind, and said so (the process cannot finish exiting until that close()
  // returns: the kernel closes nothing of a thread stuck there).
  ~FdReaper();
  FdReaper(const FdReaper&) = delete;
  FdReaper& operator=(const FdReaper&) = delete;

  // Control path: starts the threads; `name` (the device) for messages.
  Result<void> start(std::string name, int shutdown_deadline_ms = 500);

  // Hands `fd` over to be closed. Any thread but a polling lcore (it takes a lock; a lock is
  // never held across a system call that waits). Before start() (tests, fuzzers) it closes
  // the fd at once.
  void close(int fd) noexcept;

  // Blocks until every fd handed over so far was closed (tests).
  void drain();

  // Fds handed over and not closed yet (any thread).
  std::uint64_t pending() const noexcept;

  // Tests only: what closes an fd (::close by default), to stand in for a close() that blocks.
  using CloseFn = int (*)(int fd);
  static void set_close_for_testing(CloseFn f) noexcept;

 private:
  struct Lane;
  std::string name_;
  int deadline_ms_ = 500;
  std::shared_ptr<Lane> quick_;  // eventfds, shared memory
  std::shared_ptr<Lane> slow_;   // everything else
};

}  // namespace ws::virtio
