// SPDX-License-Identifier: BSD-3-Clause
// MappingGuard: a shared file that shrinks under a guarded mapping costs that mapping (it reads
// zeros and its owner is told), not the process; a fault anywhere else still ends the process.
#include "ws/virtio/mapping_guard.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
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
    EXPECT_EQ(read_byte(f.map + mib / 2), std::byte{0}) << "the fault was caught, the page reads zero";
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
