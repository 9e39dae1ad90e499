// SPDX-License-Identifier: BSD-3-Clause
// MappingGuard: memory a peer shared with us by fd (a vhost-user frontend's regions) may shrink
// under us; touching a page past the file's new end raises SIGBUS. This keeps the process alive.
#pragma once
#include <atomic>
#include <cstddef>

#include "ws/core/result.hpp"

namespace ws::virtio {

// A process-wide SIGBUS handler and a table of guarded mappings. When a thread faults inside a
// guarded mapping, the handler replaces the whole mapping in place with private zero pages
// (mmap MAP_FIXED, which a signal handler may call), sets the owner's `lost` flag and returns:
// the faulting access is retried and reads zeros. The data path pays nothing (no check per
// burst or per packet); the owner sees `lost`, stops using the memory and unmaps it. A fault
// anywhere else, and any SIGBUS a process sent (kill, sigqueue: si_code <= 0, whatever address it
// names), goes to the handler that was there before (or the default action: the process dies as
// it would have). The handler keeps errno for the code it interrupted. A frontend can seal its
// memfd (F_SEAL_SHRINK) to rule this out; one that does not, DPDK's virtio_user among them, is
// guarded.
class MappingGuard {
 public:
  // Guards [base, base + len) until the guard is destroyed; `lost` (which must outlive it) is
  // set when the mapping had to be replaced. Fails when the handler cannot be installed or the
  // table (max_mappings) is full. Control path.
  static Result<MappingGuard> guard(void* base, std::size_t len, std::atomic<bool>* lost);

  MappingGuard() = default;
  MappingGuard(MappingGuard&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }
  MappingGuard& operator=(MappingGuard&& o) noexcept;
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  // Unguards; returns once no handler works on the mapping, so the caller may then unmap it.
  ~MappingGuard() { release(); }
  void release() noexcept;

  static constexpr std::size_t max_mappings = 1024;
  // Mappings replaced since the process started (all owners).
  static std::size_t replaced() noexcept;

 private:
  explicit MappingGuard(int slot) : slot_(slot) {}
  int slot_ = -1;
};

}  // namespace ws::virtio
