// SPDX-License-Identifier: BSD-3-Clause
// Test helper: one aligned block posing as guest memory (guest address = base + offset), with a
// bump allocator for rings, tables and buffers.
#pragma once
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ws/virtio/ring/guest_memory.hpp"

namespace ws::virtio::test {

class TestMemory {
 public:
  static constexpr std::uint64_t guest_base = 0x40000000;
  explicit TestMemory(std::size_t bytes)
      : size_(bytes), host_(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))) {
    std::memset(host_.get(), 0, bytes);
    EXPECT_TRUE(mem_.add({guest_base, guest_base, bytes, host_.get()}));
  }
  template <class T = std::byte>
  T* alloc(std::size_t bytes, std::size_t align = 64) {
    used_ = (used_ + align - 1) & ~(align - 1);
    EXPECT_LE(used_ + bytes, size_);
    auto* p = host_.get() + used_;
    used_ += bytes;
    return reinterpret_cast<T*>(p);
  }
  std::uint64_t guest(const void* p) const {
    return guest_base + static_cast<std::uint64_t>(static_cast<const std::byte*>(p) - host_.get());
  }
  const GuestMemory& mem() const { return mem_; }
  std::uint64_t end() const { return guest_base + size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::size_t size_;
  std::unique_ptr<std::byte, Free> host_;
  std::size_t used_ = 0;
  GuestMemory mem_;
};

// `bytes` that end exactly where an inaccessible page begins: a write one byte past them faults
// at once (SIGSEGV), in any build, where a heap overflow would go unseen outside ASan.
class GuardedBytes {
 public:
  explicit GuardedBytes(std::size_t bytes) : bytes_(bytes) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    mapped_ = (bytes + page - 1) / page * page + page;
    base_ =
        static_cast<std::byte*>(::mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(::mprotect(base_ + mapped_ - page, page, PROT_NONE), 0);
  }
  ~GuardedBytes() { ::munmap(base_, mapped_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  template <class T = std::byte>
  T* get() const {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    return reinterpret_cast<T*>(base_ + mapped_ - page - bytes_);
  }

 private:
  std::size_t bytes_;
  std::size_t mapped_ = 0;
  std::byte* base_ = nullptr;
};

}  // namespace ws::virtio::test
