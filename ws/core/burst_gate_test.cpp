// SPDX-License-Identifier: BSD-3-Clause
// BurstGate: close() returns only when the lcore is outside and will not enter until open().
#include "ws/core/burst_gate.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "ws/testing/require.hpp"

namespace ws {
namespace {

// An lcore thread enters and leaves in a loop, recording when it is inside.
void handshake(bool asymmetric) {
  BurstGate gate;
  gate.set_asymmetric(asymmetric);
  gate.close();
  std::atomic<bool> quit{false};
  std::atomic<int> inside{0};
  std::atomic<std::uint64_t> entered{0};
  std::thread lcore([&] {
    while (!quit.load(std::memory_order_relaxed)) {
      if (!gate.enter()) continue;
      inside.store(1, std::memory_order_relaxed);
      entered.fetch_add(1, std::memory_order_relaxed);
      inside.store(0, std::memory_order_relaxed);
      gate.leave();
    }
  });
  for (int round = 0; round < 20; ++round) {
    gate.open();
    EXPECT_TRUE(gate.is_open());
    const std::uint64_t before = entered.load(std::memory_order_relaxed);
    while (entered.load(std::memory_order_relaxed) == before) std::this_thread::yield();
    gate.close();
    ASSERT_EQ(inside.load(std::memory_order_relaxed), 0) << "round " << round;
    const std::uint64_t after = entered.load(std::memory_order_relaxed);
    for (int spin = 0; spin < 20; ++spin) std::this_thread::yield();
    ASSERT_EQ(entered.load(std::memory_order_relaxed), after) << "entered after close(), round " << round;
  }
  quit.store(true);
  lcore.join();
}

TEST(BurstGate, CloseWaitsForTheLcoreWithMembarrier) {
  WS_REQUIRE(register_heavy_fence(), "membarrier(PRIVATE_EXPEDITED), which this kernel does not offer");
  handshake(true);
}

TEST(BurstGate, CloseWaitsForTheLcoreWithFences) { handshake(false); }

TEST(BurstGate, AClosedGateRefusesAndAnOpenOneAdmits) {
  BurstGate gate;
  EXPECT_TRUE(gate.enter());  // open from the start
  gate.leave();
  gate.close();
  EXPECT_FALSE(gate.is_open());
  EXPECT_FALSE(gate.enter());
  gate.open();
  EXPECT_TRUE(gate.enter());
  gate.leave();
}

}  // namespace
}  // namespace ws
