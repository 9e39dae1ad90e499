// SPDX-License-Identifier: BSD-3-Clause
// Arena: memfd-backed memory with and without huge pages, aligned carving, exhaustion errors,
// contains(), and the fd a vhost-user peer would map.
#include "ws/core/arena.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "ws/core/mbuf.hpp"
#include "ws/testing/require.hpp"

namespace ws {
namespace {

constexpr std::size_t mib = 1u << 20;

std::unique_ptr<Arena> make(std::size_t size, HugePolicy huge) {
  auto a = Arena::create({"arena_test", size, huge});
  EXPECT_TRUE(a.has_value()) << (a ? "" : a.error().message);
  return a ? std::move(*a) : nullptr;
}

TEST(Arena, NeverUsesSmallPagesAndRoundsUp) {
  auto a = make(mib + 1, HugePolicy::never);
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->huge());
  EXPECT_EQ(a->page_bytes(), 4096u);
  EXPECT_EQ(a->size_bytes(), mib + 4096);
  EXPECT_EQ(a->used_bytes(), 0u);
  EXPECT_EQ(a->name(), "arena_test");
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->base()) % 4096, 0u);
}

TEST(Arena, ThePeerCannotShrinkOrGrowIt) {
  // A vhost-user backend gets this fd: had it shrunk the file, our next touch past the new end
  // would be a SIGBUS. The seals make ftruncate fail instead, and cannot be lifted.
  for (HugePolicy huge : {HugePolicy::never, HugePolicy::automatic}) {
    auto a = make(4 * mib, huge);
    ASSERT_TRUE(a);
    const int seals = fcntl(a->fd(), F_GET_SEALS);
    EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    EXPECT_NE(ftruncate(a->fd(), 0), 0);
    EXPECT_EQ(errno, EPERM);
    EXPECT_NE(ftruncate(a->fd(), static_cast<off_t>(a->size_bytes() * 2)), 0);
    EXPECT_NE(fcntl(a->fd(), F_ADD_SEALS, F_SEAL_WRITE), 0) << "the seals themselves are sealed";
    // The peer may still write: it fills RX buffers.
    void* peer = mmap(nullptr, a->size_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, a->fd(), 0);
    ASSERT_NE(peer, MAP_FAILED);
    static_cast<std::uint8_t*>(peer)[a->size_bytes() - 1] = 0x5a;
    EXPECT_EQ(static_cast<std::uint8_t>(a->base()[a->size_bytes() - 1]), 0x5a);
    munmap(peer, a->size_bytes());
  }
}

TEST(PrivateMemory, IsPopulatedZeroedAndHasNoFd) {
  auto m = PrivateMemory::create(3 * mib + 5, false, "headers");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_GE((*m)->size_bytes(), 3 * mib + 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>((*m)->base()) % 4096, 0u);
  for (std::size_t off = 0; off < (*m)->size_bytes(); off += 4096) ASSERT_EQ((*m)->base()[off], std::byte{0});
  EXPECT_FALSE(PrivateMemory::create(0, false, "empty").has_value());
}

TEST(Arena, ZeroSizeIsRefused) {
  auto a = Arena::create({"empty", 0, HugePolicy::never});
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message.find("arena 'empty'"), std::string::npos) << a.error().message;
}

TEST(Arena, AllocateHonoursAlignmentAndZeroes) {
  auto a = make(mib, HugePolicy::never);
  ASSERT_TRUE(a);
  auto first = a->allocate(1, 1, "a byte");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(*first, static_cast<void*>(a->base()));
  for (std::size_t align : {std::size_t{8}, std::size_t{64}, std::size_t{4096}, std::size_t{64} << 10}) {
    auto p = a->allocate(100, align, "aligned");
    ASSERT_TRUE(p.has_value()) << p.error().message;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*p) % align, 0u) << "align " << align;
    EXPECT_TRUE(a->contains(*p, 100));
    const auto* bytes = static_cast<const std::uint8_t*>(*p);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(bytes[i], 0);
    std::memset(*p, 0xff, 100);  // the next allocation must not overlap this one
    auto q = a->allocate(1, 1, "after");
    ASSERT_TRUE(q.has_value());
    EXPECT_GE(static_cast<std::byte*>(*q), static_cast<std::byte*>(*p) + 100);
  }
}

TEST(Arena, ExhaustionSaysWhatAndHowMuch) {
  auto a = make(64 * 1024, HugePolicy::never);
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->allocate(60 * 1024, 64, "first").has_value());
  auto r = a->allocate(8 * 1024, 64, "mempool 'rx' (64 objects of 128 bytes)");
  ASSERT_FALSE(r.has_value());
  const std::string& m = r.error().message;
  EXPECT_NE(m.find("arena 'arena_test' is too small for mempool 'rx' (64 objects of 128 bytes)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("8192 bytes requested"), std::string::npos) << m;
  EXPECT_NE(m.find("4096 of 65536 bytes free"), std::string::npos) << m;
  EXPECT_NE(m.find("raise -m"), std::string::npos) << m;
  EXPECT_EQ(a->used_bytes(), 60u * 1024) << "a failed allocation takes nothing";
  // What is left can still be had, exactly.
  EXPECT_TRUE(a->allocate(4 * 1024, 64, "rest").has_value());
  EXPECT_FALSE(a->allocate(1, 1, "one more").has_value());
  // An alignment that pushes past the end fails too, without wrapping.
  auto b = make(4096, HugePolicy::never);
  ASSERT_TRUE(b->allocate(1, 1, "x").has_value());
  EXPECT_FALSE(b->allocate(1, 8192, "far").has_value());
  EXPECT_FALSE(b->allocate(SIZE_MAX, 1, "everything").has_value());
}

TEST(Arena, ContainsChecksBothEnds) {
  auto a = make(8192, HugePolicy::never);
  ASSERT_TRUE(a);
  std::byte* base = a->base();
  EXPECT_TRUE(a->contains(base, 8192));
  EXPECT_TRUE(a->contains(base + 8191, 1));
  EXPECT_TRUE(a->contains(base + 8192, 0));
  EXPECT_FALSE(a->contains(base + 8191, 2));
  EXPECT_FALSE(a->contains(base - 1, 1));
  EXPECT_FALSE(a->contains(base, 8193));
  EXPECT_FALSE(a->contains(base + 1, SIZE_MAX));
  int on_stack = 0;
  EXPECT_FALSE(a->contains(&on_stack, sizeof on_stack));
}

TEST(Arena, FdMapsTheSameMemory) {
  auto a = make(mib, HugePolicy::never);
  ASSERT_TRUE(a);
  ASSERT_GE(a->fd(), 0);
  EXPECT_NE(fcntl(a->fd(), F_GETFD), -1);
  EXPECT_TRUE(fcntl(a->fd(), F_GETFD) & FD_CLOEXEC);
  // A peer mapping the fd sees what we write (vhost-user SET_MEM_TABLE relies on this).
  auto p = a->allocate(64, 64, "shared");
  ASSERT_TRUE(p.has_value());
  std::memcpy(*p, "hello peer", 11);
  void* peer = mmap(nullptr, a->size_bytes(), PROT_READ, MAP_SHARED, a->fd(), 0);
  ASSERT_NE(peer, MAP_FAILED);
  const auto offset = static_cast<std::byte*>(*p) - a->base();
  EXPECT_STREQ(static_cast<const char*>(peer) + offset, "hello peer");
  munmap(peer, a->size_bytes());
}

TEST(Arena, AutomaticWorksWithOrWithoutHugePages) {
  const std::size_t free_huge = free_huge_pages_2m();
  auto a = make(4 * mib, HugePolicy::automatic);
  ASSERT_TRUE(a);
  if (a->huge()) {
    EXPECT_GT(free_huge, 0u) << "huge pages only when some were free";
    EXPECT_EQ(a->page_bytes(), 2 * mib);
    EXPECT_EQ(a->size_bytes() % (2 * mib), 0u);
  } else {
    EXPECT_EQ(a->page_bytes(), 4096u);
    if (free_huge == 0) SUCCEED() << "no huge pages here: automatic fell back to 4 KiB pages";
  }
  EXPECT_GE(a->size_bytes(), 4 * mib);
  auto p = a->allocate(mib, 64, "block");
  ASSERT_TRUE(p.has_value()) << p.error().message;
  std::memset(*p, 1, mib);
}

TEST(Arena, RequiredFailsClearlyWithoutHugePages) {
  // One page more than are free, whatever this machine has reserved.
  auto a = Arena::create({"need_huge", (free_huge_pages_2m() + 1) * 2 * mib, HugePolicy::required});
  ASSERT_FALSE(a.has_value());
  EXPECT_NE(a.error().message.find("--no-huge"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("need_huge"), std::string::npos) << a.error().message;
}

TEST(ArenaIova, VirtualModeIsTheAddress) {
  auto a = make(4 * mib, HugePolicy::never);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->iova_mode(), IovaMode::va);
  EXPECT_TRUE(a->iova_contiguous());
  EXPECT_EQ(a->iova(a->base() + 12345), reinterpret_cast<std::uint64_t>(a->base() + 12345));
}

// What an IOMMU mapping gives (vfio-pci): the arena at a base IOVA inside the aperture, far below
// our virtual addresses; every buffer then carries base + offset.
TEST(ArenaIova, AnIommuBaseShiftsEveryIova) {
  auto a = make(4 * mib, HugePolicy::never);
  ASSERT_TRUE(a);
  constexpr std::uint64_t base = 2 * mib;
  a->set_iova_base(base);
  EXPECT_EQ(a->iova_mode(), IovaMode::va);
  EXPECT_TRUE(a->iova_contiguous());
  EXPECT_EQ(a->iova(a->base()), base);
  EXPECT_EQ(a->iova(a->base() + 12345), base + 12345);
  auto pool = PktmbufPool::create(*a, {"iommu", 64, 0});
  ASSERT_TRUE(pool) << pool.error().message;
  Mbuf* m = (*pool)->alloc();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->buf_iova, base + static_cast<std::uint64_t>(reinterpret_cast<std::byte*>(m->buf_addr) - a->base()));
  EXPECT_LT(m->buf_iova + m->buf_len, base + a->size_bytes());
  mbuf_free(m);
}

TEST(ArenaIova, PhysicalModeNeedsHugePages) {
  auto a = Arena::create({"pa_small_pages", 4 * mib, HugePolicy::never, IovaMode::pa});
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("needs huge pages"), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find("--no-huge"), std::string::npos) << a.error().message;
  auto b = Arena::create({"pa_too_big", (free_huge_pages_2m() + 1) * 2 * mib, HugePolicy::automatic, IovaMode::pa});
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("MiB of huge pages"), std::string::npos) << b.error().message;
  EXPECT_NE(b.error().message.find("nr_hugepages"), std::string::npos) << b.error().message;
}

TEST(ArenaIova, PagemapWithoutPhysicalAddressesIsAClearError) {
  // A pagemap entry of a present page whose frame number reads as zero: what a process without
  // CAP_SYS_ADMIN sees.
  char tmpl[] = "/tmp/ws_pagemap_XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  static int probe = 0;
  const auto index = reinterpret_cast<std::uintptr_t>(&probe) / static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t entry = 1ULL << 63;
  ASSERT_EQ(::pwrite(fd, &entry, 8, static_cast<off_t>(index * 8)), 8);
  ::close(fd);
  auto pa = physical_address(&probe, tmpl, "probe");
  ::unlink(tmpl);
  ASSERT_FALSE(pa);
  EXPECT_NE(pa.error().message.find("CAP_SYS_ADMIN"), std::string::npos) << pa.error().message;
  auto missing = physical_address(&probe, "/nonexistent/pagemap", "probe");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/pagemap"), std::string::npos) << missing.error().message;
}

TEST(ArenaIova, PhysicalModeTranslatesAndKeepsBlocksInOnePage) {
  WS_REQUIRE(::geteuid() == 0, "IOVA as physical addresses reads /proc/self/pagemap as root");
  WS_REQUIRE(free_huge_pages_2m() >= 8, "8 free 2 MiB huge pages (nr_hugepages)");
  auto a = Arena::create({"pa", 16 * mib, HugePolicy::automatic, IovaMode::pa});
  ASSERT_TRUE(a) << a.error().message;
  Arena& arena = **a;
  EXPECT_EQ(arena.iova_mode(), IovaMode::pa);
  EXPECT_FALSE(arena.iova_contiguous());
  for (std::size_t page = 0; page < 4; ++page) {
    const std::byte* p = arena.base() + page * 2 * mib;
    auto pa = physical_address(p + 100, "/proc/self/pagemap", "check");
    ASSERT_TRUE(pa) << pa.error().message;
    EXPECT_EQ(arena.iova(p + 100), *pa);
    EXPECT_EQ(arena.iova(p) % (2 * mib), 0u) << "a huge page is physically aligned";
    EXPECT_EQ(arena.iova(p + 2 * mib - 1), arena.iova(p) + 2 * mib - 1);
  }
  // A block that would straddle a page boundary starts on the next page.
  ASSERT_TRUE(arena.allocate(2 * mib - 1000, 64, "filler"));
  auto block = arena.allocate(4096, 64, "ring");
  ASSERT_TRUE(block);
  EXPECT_EQ(static_cast<std::byte*>(*block), arena.base() + 2 * mib);
  // Mbufs: no buffer crosses a page, buf_iova is the buffer's physical address.
  auto pool = PktmbufPool::create(arena, {"pa_pool", 2000, 0});
  ASSERT_TRUE(pool) << pool.error().message;
  const Mempool& mp = (*pool)->mempool();
  for (std::uint32_t i = 0; i < mp.count(); ++i) {
    auto* m = static_cast<Mbuf*>(mp.object(i));
    const auto off = static_cast<std::size_t>(reinterpret_cast<std::byte*>(m->buf_addr) - arena.base());
    ASSERT_EQ(off / (2 * mib), (off + m->buf_len - 1) / (2 * mib)) << "buffer " << i << " crosses a page";
    ASSERT_TRUE(mp.owns(m));
    ASSERT_EQ(m->buf_iova, arena.iova(m->buf_addr));
  }
  EXPECT_FALSE(mp.owns(static_cast<std::byte*>(mp.object(0)) + 64));
}

}  // namespace
}  // namespace ws
