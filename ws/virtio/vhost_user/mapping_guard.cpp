// SPDX-License-Identifier: BSD-3-Clause
// MappingGuard: the SIGBUS handler and its lock-free table (mapping_guard.hpp says why).
#include "ws/virtio/vhost_user/mapping_guard.hpp"

#include <signal.h>
#include <sys/mman.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "ws/core/cpu.hpp"

namespace ws::virtio {
namespace {

// One guarded mapping. `base` 0 means free; a slot is claimed under table_mutex (control path)
// and read by the handler without a lock.
struct Entry {
  std::atomic<std::uintptr_t> base{0};
  std::atomic<std::size_t> len{0};
  std::atomic<std::atomic<bool>*> lost{nullptr};
};

std::array<Entry, MappingGuard::max_mappings> table;
std::mutex table_mutex;  // claims and releases (control path)
// Handlers running now. The handler raises it before reading the table and a release clears an
// entry before waiting for it to be zero, all seq_cst: either the handler sees the entry cleared,
// or the release waits for the handler (the Dekker pattern, as BurstGate).
std::atomic<int> in_handler{0};
std::atomic<std::size_t> replaced_count{0};
struct sigaction previous{};
bool installed = false;

// Replaces the guarded mapping that holds `addr` with private zero pages; false when no guarded
// mapping holds it, or the replacement failed (then there is nothing to retry on).
bool replace_guarded(std::uintptr_t addr) noexcept {
  in_handler.fetch_add(1, std::memory_order_seq_cst);
  bool done = false;
  for (Entry& e : table) {
    const std::uintptr_t base = e.base.load(std::memory_order_seq_cst);
    const std::size_t len = e.len.load(std::memory_order_relaxed);
    if (base == 0 || addr < base || addr - base >= len) continue;
    // The same range, now private zero pages: the faulting access is retried and succeeds. mmap
    // is a plain system call, safe in a signal handler.
    void* p = ::mmap(reinterpret_cast<void*>(base), len, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED) {
      if (std::atomic<bool>* lost = e.lost.load(std::memory_order_relaxed))
        lost->store(true, std::memory_order_release);
      replaced_count.fetch_add(1, std::memory_order_relaxed);
      done = true;
    }
    break;
  }
  in_handler.fetch_sub(1, std::memory_order_seq_cst);
  return done;
}

// What would have happened without us: the handler that was there before, or the default action.
void pass_on(int sig, siginfo_t* info, void* context, bool fault) {
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != nullptr) return previous.sa_sigaction(sig, info, context);
  } else if (previous.sa_handler == SIG_IGN) {
    if (!fault) return;  // a fault cannot be ignored (the kernel forces it): it takes the default
  } else if (previous.sa_handler != SIG_DFL) {
    return previous.sa_handler(sig);
  }
  // Default action: restore it. A fault recurs when we return and the process dies of it; a sent
  // signal does not recur, so it is raised again (SA_NODEFER: it is not blocked here).
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  if (!fault) ::raise(sig);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  // The interrupted code may be between a failed call and its read of errno; mmap and sigaction
  // here may set it.
  const int saved_errno = errno;
  // Only the kernel reports a fault, with si_code > 0 (BUS_ADRERR for a page past the end of a
  // shrunk file). A signal sent by kill, sigqueue or tgkill has si_code <= 0 and carries whatever
  // si_addr its sender wrote (another process cannot send si_code > 0: the kernel refuses it); it
  // must not cost a mapping.
  const bool fault = info != nullptr && info->si_code > 0;
  if (fault && replace_guarded(reinterpret_cast<std::uintptr_t>(info->si_addr))) {
    errno = saved_errno;
    return;
  }
  errno = saved_errno;
  pass_on(sig, info, context, fault);
  errno = saved_errno;
}

Result<void> install() {  // table_mutex held
  if (installed) return {};
  struct sigaction sa{};
  sa.sa_sigaction = &on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;  // NODEFER: a second guarded fault inside this handler
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &previous) != 0)
    return fail("cannot install the SIGBUS handler: {}", std::strerror(errno));
  installed = true;
  return {};
}

}  // namespace

Result<MappingGuard> MappingGuard::guard(void* base, std::size_t len, std::atomic<bool>* lost) {
  std::lock_guard lock(table_mutex);
  if (auto ok = install(); !ok) return std::unexpected(ok.error());
  for (std::size_t i = 0; i < table.size(); ++i) {
    Entry& e = table[i];
    if (e.base.load(std::memory_order_relaxed) != 0) continue;
    e.len.store(len, std::memory_order_relaxed);
    e.lost.store(lost, std::memory_order_relaxed);
    e.base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_seq_cst);  // publishes len, lost
    return MappingGuard(static_cast<int>(i));
  }
  return fail("cannot guard another shared memory mapping: {} are in use in this process", table.size());
}

MappingGuard& MappingGuard::operator=(MappingGuard&& o) noexcept {
  if (this != &o) {
    release();
    slot_ = o.slot_;
    o.slot_ = -1;
  }
  return *this;
}

void MappingGuard::release() noexcept {
  if (slot_ < 0) return;
  std::lock_guard lock(table_mutex);
  table[static_cast<std::size_t>(slot_)].base.store(0, std::memory_order_seq_cst);
  while (in_handler.load(std::memory_order_seq_cst) != 0) cpu_pause();
  slot_ = -1;
}

std::size_t MappingGuard::replaced() noexcept { return replaced_count.load(std::memory_order_relaxed); }

}  // namespace ws::virtio
