// SPDX-License-Identifier: BSD-3-Clause
// Test helper: one aligned block posing as guest memory (guest address = base + offset), with a
// bump allocator for rings, tables and buffers.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "ws/virtio/guest_memory.hpp"

namespace ws::virtio::test {

class TestMemory {
 public:
  static constexpr std::uint64_t guest_base = 0x40000000;
  explicit TestMemory(std::size_t bytes) : size_(bytes), host_(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))) {
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

}  // namespace ws::virtio::test
