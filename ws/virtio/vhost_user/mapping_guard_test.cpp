// SPDX-License-Identifier: BSD-3-Clause
// MappingGuard: a shared file that shrinks under a guarded mapping costs that mapping (it reads
// zeros and its owner is told), not the process; a fault anywhere else still ends the process.
#include "ws/virtio/vhost_user/mapping_guard.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

// GCC says it builds with AddressSanitizer through __SANITIZE_ADDRESS__, clang through
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define WS_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WS_UNDER_ASAN 1
#endif
#endif
#ifndef WS_UNDER_ASAN
#define WS_UNDER_ASAN 0
#endif

namespace ws::virtio {
namespace {

constexpr std::size_t mib = 1 << 20;

struct SharedFile {
  int fd = ::memfd_create("guard-test", MFD_CLOEXEC);
  std::byte* map = nullptr;
  explicit SharedFile(std::size_t bytes) {
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
    map = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(map, MAP_FAILED);
  }
};

std::byte read_byte(const std::byte* p) { return *static_cast<const volatile std::byte*>(p); }

// errno around an access that faults: the handler runs in between, unseen by the compiler, which
// must move neither the store nor the load across the access.
void errno_before_fault(int e) {
  errno = e;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}
int errno_after_fault() {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  return errno;
}

TEST(MappingGuard, AFileShrunkUnderAGuardedMappingReadsZerosAndTellsTheOwner) {
  SharedFile f(mib);
  f.map[mib / 2] = std::byte{7};
  std::atomic<bool> lost{false};
  const std::size_t before = MappingGuard::replaced();
  {
    auto g = MappingGuard::guard(f.map, mib, &lost);
    ASSERT_TRUE(g.has_value()) << g.error().message;
    EXPECT_EQ(read_byte(f.map + mib / 2), std::byte{7});
    ASSERT_EQ(::ftruncate(f.fd, 0), 0);  // what a frontend may do to the memfd it shared
    errno_before_fault(EAGAIN);          // as if the fault came between a failed call and its check of errno
    EXPECT_EQ(read_byte(f.map + mib / 2), std::byte{0}) << "the fault was caught, the page reads zero";
    EXPECT_EQ(errno_after_fault(), EAGAIN) << "the handler keeps errno";
    EXPECT_TRUE(lost.load());
    EXPECT_EQ(MappingGuard::replaced(), before + 1);
    f.map[0] = std::byte{1};  // writable too: a device may be in the middle of a copy into it
    EXPECT_EQ(read_byte(f.map), std::byte{1});
  }
  EXPECT_EQ(::munmap(f.map, mib), 0);
  ::close(f.fd);
}

TEST(MappingGuard, OtherMappingsAreUntouchedAndReleaseUnguards) {
  SharedFile a(mib), b(mib);
  std::atomic<bool> lost_a{false}, lost_b{false};
  {
    auto ga = MappingGuard::guard(a.map, mib, &lost_a);
    auto gb = MappingGuard::guard(b.map, mib, &lost_b);
    ASSERT_TRUE(ga && gb);
    b.map[100] = std::byte{9};
    ASSERT_EQ(::ftruncate(a.fd, 0), 0);
    (void)read_byte(a.map + 4096);
    EXPECT_TRUE(lost_a.load());
    EXPECT_FALSE(lost_b.load());
    EXPECT_EQ(read_byte(b.map + 100), std::byte{9});
  }
  // Unguarded now: a shrunk file faults as it would without us (in a child, which dies of it;
  // under AddressSanitizer, whose own SIGBUS handler reports the fault and exits with 1).
  EXPECT_EXIT(
      {
        ::ftruncate(b.fd, 0);
        (void)read_byte(b.map + 100);
        ::_exit(0);
      },
      [](int status) {
#if WS_UNDER_ASAN
        return WIFEXITED(status) && WEXITSTATUS(status) == 1;  // ASan's exit code after its report
#else
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
#endif
      },
      "");
  ::munmap(a.map, mib);
  ::munmap(b.map, mib);
  ::close(a.fd);
  ::close(b.fd);
}

// In a child that starts afresh (death_test_style threadsafe: the test binary runs again), so
// that the handler MappingGuard finds and passes signals on to is the one `fn` installs.
// `fn` returns what went wrong, or nullptr.
template <class Fn>
void in_fresh_child(Fn fn) {
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const char* wrong = fn();
        if (wrong != nullptr) std::fprintf(stderr, "%s\n", wrong);
        ::_exit(wrong == nullptr ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  GTEST_FLAG_SET(death_test_style, style);
}

// The handler that was there before MappingGuard's: counts what it gets.
std::atomic<int> previous_calls{0};
std::atomic<int> previous_code{0};
std::atomic<int> previous_errno{0};
const char* install_previous(void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction sa{};
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  return ::sigaction(SIGBUS, &sa, nullptr) == 0 ? nullptr : "cannot install the previous handler";
}

// What another process of the same user can send: a SIGBUS whose si_code says it was sent and
// whose si_addr (the union's bytes it shares with si_pid and si_uid) names a guarded byte.
int send_forged_sigbus(int code, void* addr) {
  siginfo_t si{};
  si.si_signo = SIGBUS;
  si.si_code = code;
  si.si_addr = addr;
  return static_cast<int>(::syscall(SYS_rt_sigqueueinfo, ::getpid(), SIGBUS, &si));
}

TEST(MappingGuard, AForgedSigbusNamingAGuardedAddressLeavesTheMappingAlone) {
  in_fresh_child([]() -> const char* {
    if (const char *e = install_previous([](int, siginfo_t* info, void*) {
          previous_calls.fetch_add(1);
          previous_code.store(info->si_code);
        }))
      return e;
    SharedFile f(mib);
    f.map[100] = std::byte{7};
    std::atomic<bool> lost{false};
    auto g = MappingGuard::guard(f.map, mib, &lost);
    if (!g) return "cannot guard";
    const std::size_t before = MappingGuard::replaced();
    int calls = 0;
    for (const int code : {SI_USER, SI_QUEUE, SI_TKILL}) {
      if (send_forged_sigbus(code, f.map + 100) != 0) return "rt_sigqueueinfo failed";
      if (previous_calls.load() != ++calls) return "the forged signal did not reach the previous handler";
      if (previous_code.load() != code) return "the previous handler got another si_code";
    }
    if (lost.load() || MappingGuard::replaced() != before) return "a forged signal replaced the mapping";
    const std::byte nine{9};
    if (::pwrite(f.fd, &nine, 1, 200) != 1) return "pwrite failed";
    if (read_byte(f.map + 100) != std::byte{7} || read_byte(f.map + 200) != std::byte{9})
      return "the mapping is no longer the shared file";
    return nullptr;
  });
}

TEST(MappingGuard, AForgedSigbusTakesTheDefaultActionAsWithoutTheGuard) {
  SharedFile f(mib);
  std::atomic<bool> lost{false};
  auto g = MappingGuard::guard(f.map, mib, &lost);
  ASSERT_TRUE(g) << g.error().message;
  // The default action ends the process (under AddressSanitizer, its handler reports and exits 1).
  EXPECT_EXIT(
      {
        send_forged_sigbus(SI_QUEUE, f.map + 100);
        ::_exit(0);
      },
      [](int status) {
#if WS_UNDER_ASAN
        return WIFEXITED(status) && WEXITSTATUS(status) == 1;
#else
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
#endif
      },
      "");
  EXPECT_FALSE(lost.load());
  g->release();
  ::munmap(f.map, mib);
  ::close(f.fd);
}

// A guarded range that cannot be replaced (mmap fails: more than the address space) goes to the
// previous handler, which here maps the page itself. Neither the previous handler nor the
// interrupted code sees the errno of the failed mmap.
TEST(MappingGuard, ErrnoIsKeptWhenTheReplacementFailsAndTheFaultIsPassedOn) {
  in_fresh_child([]() -> const char* {
    if (const char *e = install_previous([](int, siginfo_t* info, void*) {
          previous_errno.store(errno);
          const auto page = reinterpret_cast<std::uintptr_t>(info->si_addr) & ~std::uintptr_t{4095};
          ::mmap(reinterpret_cast<void*>(page), 4096, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
        }))
      return e;
    SharedFile f(mib);
    std::atomic<bool> lost{false};
    auto g = MappingGuard::guard(f.map, std::size_t{1} << 62, &lost);
    if (!g) return "cannot guard";
    if (::ftruncate(f.fd, 0) != 0) return "ftruncate failed";
    errno_before_fault(EAGAIN);
    if (read_byte(f.map + 100) != std::byte{0}) return "the previous handler did not map the page";
    if (errno_after_fault() != EAGAIN) return "the interrupted code sees another errno";
    if (previous_errno.load() != EAGAIN) return "the previous handler saw another errno";
    if (lost.load()) return "the mapping was not replaced, yet its owner was told so";
    return nullptr;
  });
}

TEST(MappingGuard, AFullTableIsAnErrorNotACrash) {
  std::vector<MappingGuard> guards;
  std::atomic<bool> lost{false};
  static std::byte dummy[64];
  for (std::size_t i = 0; i < MappingGuard::max_mappings + 1; ++i) {
    auto g = MappingGuard::guard(dummy, sizeof dummy, &lost);
    if (!g) {
      EXPECT_NE(g.error().message.find("in use"), std::string::npos) << g.error().message;
      break;
    }
    guards.push_back(std::move(*g));
  }
  EXPECT_LE(guards.size(), MappingGuard::max_mappings);
  guards.clear();
  EXPECT_TRUE(MappingGuard::guard(dummy, sizeof dummy, &lost)) << "released slots are free again";
}

}  // namespace
}  // namespace ws::virtio
