// SPDX-License-Identifier: BSD-3-Clause
// Arena on memfd: MFD_HUGETLB first when allowed, plain shmem pages otherwise.
#include "ws/core/arena.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/mman.h>
#include <unistd.h>

#include "ws/core/log.hpp"

namespace ws {
namespace {

constexpr std::size_t huge_2m = 2u << 20;

std::size_t round_up(std::size_t n, std::size_t align) { return (n + align - 1) & ~(align - 1); }

struct Mapping {
  int fd = -1;
  std::byte* base = nullptr;
};

// Maps `size` bytes of a fresh memfd; returns an errno message on failure.
Result<Mapping> map_memfd(const std::string& name, std::size_t size, bool huge) {
  const unsigned flags = MFD_CLOEXEC | (huge ? MFD_HUGETLB : 0u);
  const int fd = memfd_create(name.c_str(), flags);
  if (fd < 0) return fail("memfd_create({}{}): {}", name, huge ? ", hugetlb" : "", std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    close(fd);
    return fail("ftruncate of arena '{}' to {} bytes: {}", name, size, std::strerror(e));
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    return fail("mmap of arena '{}' ({} bytes{}): {}", name, size, huge ? ", hugetlb" : "", std::strerror(e));
  }
  return Mapping{fd, static_cast<std::byte*>(p)};
}

}  // namespace

std::size_t free_huge_pages_2m() {
  std::ifstream in("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  std::size_t n = 0;
  if (in >> n) return n;
  return 0;
}

Result<std::unique_ptr<Arena>> Arena::create(const ArenaOptions& options) {
  if (options.size_bytes == 0) return fail("arena '{}': size must be > 0", options.name);
  const std::size_t small_page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t huge_size = round_up(options.size_bytes, huge_2m);
  const bool try_huge = options.huge == HugePolicy::required ||
                        (options.huge == HugePolicy::automatic && free_huge_pages_2m() * huge_2m >= huge_size);
  if (try_huge) {
    auto mapped = map_memfd(options.name, huge_size, true);
    if (mapped) {
      log(LogLevel::info, "arena '{}': {} MiB on 2 MiB huge pages", options.name, huge_size >> 20);
      return std::unique_ptr<Arena>(new Arena(options.name, mapped->fd, mapped->base, huge_size, huge_2m, true));
    }
    if (options.huge == HugePolicy::required)
      return fail("{} (huge pages were required; reserve them in /sys/kernel/mm/hugepages or pass --no-huge)",
                  mapped.error().message);
    log(LogLevel::notice, "arena '{}': huge pages unavailable ({}), using 4 KiB pages", options.name,
        mapped.error().message);
  }
  const std::size_t size = round_up(options.size_bytes, small_page);
  auto mapped = map_memfd(options.name, size, false);
  if (!mapped) return std::unexpected(mapped.error());
  return std::unique_ptr<Arena>(new Arena(options.name, mapped->fd, mapped->base, size, small_page, false));
}

Arena::Arena(std::string name, int fd, std::byte* base, std::size_t size, std::size_t page, bool huge)
    : name_(std::move(name)), fd_(fd), base_(base), size_(size), page_(page), huge_(huge) {}

Arena::~Arena() {
  munmap(base_, size_);
  close(fd_);
}

Result<void*> Arena::allocate(std::size_t size, std::size_t align, std::string_view what) {
  std::lock_guard lock(mutex_);
  // Align the address, not the offset: the base is only page-aligned, and `align` may be larger.
  const auto base = reinterpret_cast<std::uintptr_t>(base_);
  const std::size_t start = round_up(base + used_, align) - base;
  if (start > size_ || size > size_ - start)
    return fail("arena '{}' is too small for {} ({} bytes requested, {} of {} bytes free); raise -m",
                name_, what, size, size_ - std::min(used_, size_), size_);
  used_ = start + size;
  return static_cast<void*>(base_ + start);
}

std::size_t Arena::used_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

bool Arena::contains(const void* p, std::size_t len) const {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && len <= size_ && static_cast<std::size_t>(b - base_) <= size_ - len;
}

}  // namespace ws
