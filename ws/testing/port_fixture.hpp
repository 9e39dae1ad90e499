// SPDX-License-Identifier: BSD-3-Clause
// Test fixture for tests that make ports through the driver registry: the built-in drivers, an
// arena without huge pages, a packet pool in it, and port creation whose failure says why.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "ws/core/mbuf.hpp"
#include "ws/drivers/builtin.hpp"

namespace ws::testing {

class PortFixture : public ::testing::Test {
 protected:
  // Registers the built-in drivers and makes the arena `arena_name` of `arena_bytes`.
  void open_arena(const char* arena_name, std::size_t arena_bytes) {
    register_builtin_drivers(registry_);
    auto a = Arena::create({arena_name, arena_bytes, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
  }

  // open_arena(), then pool_ made in it from `pool`.
  void open_arena_and_pool(const char* arena_name, std::size_t arena_bytes, const PktmbufPool::Options& pool) {
    ASSERT_NO_FATAL_FAILURE(open_arena(arena_name, arena_bytes));
    auto p = PktmbufPool::create(*arena_, pool);
    ASSERT_TRUE(p.has_value()) << p.error().message;
    pool_ = std::move(*p);
  }

  // What a port made here gets: the arena, one lcore.
  PortEnv env() const { return {arena_.get(), 1}; }

  // The port `device` names, or nullptr and a test failure with the error.
  std::unique_ptr<Port> create(std::string_view device) {
    auto p = registry_.create_port(device, env());
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return p ? std::move(*p) : nullptr;
  }

  // The error `device` is refused with; a test failure when it is accepted.
  std::string create_error(std::string_view device) {
    auto p = registry_.create_port(device, env());
    EXPECT_FALSE(p.has_value()) << device;
    return p ? std::string() : p.error().message;
  }

  DriverRegistry registry_;  // owns the rings: declared first, destroyed last
  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
};

}  // namespace ws::testing
