// SPDX-License-Identifier: BSD-3-Clause
// Arena on memfd: MFD_HUGETLB first when allowed, plain shmem pages otherwise.
#include "ws/core/arena.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "ws/core/log.hpp"

namespace ws {
namespace {

constexpr std::size_t huge_2m = 2u << 20;

std::size_t round_up(std::size_t n, std::size_t align) { return (n + align - 1) & ~(align - 1); }

struct Mapping {
  int fd = -1;
  std::byte* base = nullptr;
};

// Maps `size` bytes of a fresh memfd; returns an errno message on failure. The size is sealed:
// a vhost-user backend receives this fd, and one that could shrink the file would make our next
// touch of the memory past the new end a SIGBUS.
Result<Mapping> map_memfd(const std::string& name, std::size_t size, bool huge) {
  const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB : 0u);
  const int fd = memfd_create(name.c_str(), flags);
  if (fd < 0) return fail("memfd_create({}{}): {}", name, huge ? ", hugetlb" : "", std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    close(fd);
    return fail("ftruncate of arena '{}' to {} bytes: {}", name, size, std::strerror(e));
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int e = errno;
    close(fd);
    return fail("sealing the size of arena '{}' (F_ADD_SEALS): {}", name, std::strerror(e));
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

std::string_view iova_mode_name(IovaMode m) { return m == IovaMode::pa ? "pa" : "va"; }

Result<std::uint64_t> physical_address(const void* p, const std::string& pagemap, std::string_view what) {
  const int fd = ::open(pagemap.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail(
        "{}: cannot open {} to learn physical addresses: {} (IOVA as physical addresses needs root; or "
        "use --iova-mode=va with a device behind an IOMMU)",
        what, pagemap, std::strerror(errno));
  const std::size_t small_page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const auto va = reinterpret_cast<std::uintptr_t>(p);
  std::uint64_t entry = 0;
  const ssize_t n = ::pread(fd, &entry, sizeof entry, static_cast<off_t>(va / small_page * sizeof entry));
  const int e = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof entry))
    return fail("{}: reading {}: {}", what, pagemap, n < 0 ? std::strerror(e) : "short read");
  constexpr std::uint64_t present = 1ULL << 63;
  const std::uint64_t pfn = entry & ((1ULL << 55) - 1);
  if ((entry & present) == 0) return fail("{}: page at {} is not present in {}", what, p, pagemap);
  if (pfn == 0)
    return fail("{}: {} gives no physical addresses to this process (it needs CAP_SYS_ADMIN: run as root)", what,
                pagemap);
  return pfn * small_page + va % small_page;
}

// pa mode: the physical address of every page, which hugetlb pages keep while mapped.
Result<void> Arena::learn_physical_addresses() {
  page_shift_ = static_cast<unsigned>(std::countr_zero(page_));
  page_iova_.clear();
  for (std::size_t off = 0; off < size_; off += page_) {
    auto pa = physical_address(base_ + off, "/proc/self/pagemap", fmt::format("arena '{}'", name_));
    if (!pa) return std::unexpected(pa.error());
    page_iova_.push_back(*pa);
  }
  iova_mode_ = IovaMode::pa;
  return {};
}

Result<std::unique_ptr<Arena>> Arena::create(const ArenaOptions& options) {
  if (options.size_bytes == 0) return fail("arena '{}': size must be > 0", options.name);
  if (options.iova == IovaMode::pa) {
    // Plain pages may move and be swapped; a device must be given memory that stays put.
    if (options.huge == HugePolicy::never)
      return fail(
          "arena '{}': IOVA as physical addresses (--iova-mode=pa, needed by PCI devices on "
          "uio_pci_generic) needs huge pages, which do not move; drop --no-huge and reserve huge pages "
          "(echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages)",
          options.name);
    const std::size_t want = round_up(options.size_bytes, huge_2m);
    if (free_huge_pages_2m() * huge_2m < want)
      return fail(
          "arena '{}': IOVA as physical addresses (--iova-mode=pa, needed by PCI devices on "
          "uio_pci_generic) needs {} MiB of huge pages and {} MiB are free; reserve more (echo N > "
          "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) or lower --total-num-mbufs",
          options.name, want >> 20, free_huge_pages_2m() * 2);
    ArenaOptions huge = options;
    huge.huge = HugePolicy::required;
    huge.iova = IovaMode::va;
    auto arena = create(huge);
    if (!arena) return arena;
    if (auto ok = (*arena)->learn_physical_addresses(); !ok) return std::unexpected(ok.error());
    log(LogLevel::info, "arena '{}': IOVA = physical address ({} pages)", options.name, (*arena)->page_iova_.size());
    return arena;
  }
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
  std::size_t start = round_up(base + used_, align) - base;
  // pa mode: a block that fits in one page must not cross one (see iova()).
  if (iova_mode_ == IovaMode::pa && size <= page_ && start / page_ != (start + size - 1) / page_)
    start = round_up(start, page_);
  if (start > size_ || size > size_ - start)
    return fail("arena '{}' is too small for {} ({} bytes requested, {} of {} bytes free); raise -m", name_, what, size,
                size_ - std::min(used_, size_), size_);
  used_ = start + size;
  return static_cast<void*>(base_ + start);
}

std::size_t Arena::used_bytes() const {
  std::lock_guard lock(mutex_);
  return used_;
}

Result<std::unique_ptr<PrivateMemory>> PrivateMemory::create(std::size_t size_bytes, bool huge, std::string_view what) {
  if (size_bytes == 0) return fail("{}: size must be > 0", what);
  if (huge) {
    // Huge pages when some are still free; the arena usually took most of them, so this is a
    // wish, not a requirement.
    const std::size_t size = round_up(size_bytes, huge_2m);
    void* p =
        mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
    if (p != MAP_FAILED)
      return std::unique_ptr<PrivateMemory>(new PrivateMemory(static_cast<std::byte*>(p), size, true));
  }
  const std::size_t size = round_up(size_bytes, static_cast<std::size_t>(sysconf(_SC_PAGESIZE)));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return fail("{}: mmap of {} private bytes: {}", what, size, std::strerror(errno));
  // Transparent huge pages where the kernel has them spare the TLB; then populate, so that the
  // hot path never faults.
  madvise(p, size, MADV_HUGEPAGE);
  if (madvise(p, size, MADV_POPULATE_WRITE) != 0) std::memset(p, 0, size);  // kernels before 5.14
  return std::unique_ptr<PrivateMemory>(new PrivateMemory(static_cast<std::byte*>(p), size, false));
}

PrivateMemory::~PrivateMemory() { munmap(base_, size_); }

bool Arena::contains(const void* p, std::size_t len) const {
  const auto* b = static_cast<const std::byte*>(p);
  return b >= base_ && len <= size_ && static_cast<std::size_t>(b - base_) <= size_ - len;
}

}  // namespace ws
