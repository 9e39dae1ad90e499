// SPDX-License-Identifier: BSD-3-Clause
// lcore_loop's --record-core-cycles accounting: which polls count as busy.
#include "app/testpmd/fwd/engine.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "ws/core/cpu.hpp"

namespace ws::testpmd {
namespace {

// A scripted stream: each poll takes the next step. A step with packets returns at once; a
// "deferred" step returns nothing after spinning work_cycles (a driver finishing the last burst's
// work); an idle step returns nothing at once. The loop stops after the script.
enum class Step : std::uint8_t { packets, deferred, idle };
constexpr std::uint64_t work_cycles = 200'000;
constexpr std::array script{Step::packets, Step::deferred, Step::idle,     Step::idle,
                            Step::packets, Step::packets,  Step::deferred, Step::idle};
std::size_t next_step = 0;
FwdLcore* running = nullptr;

std::uint16_t scripted_poll(Stream&) noexcept {
  if (next_step == script.size()) {
    running->stop.store(true, std::memory_order_relaxed);
    return 0;
  }
  switch (script[next_step++]) {
    case Step::packets:
      return 32;
    case Step::deferred: {
      const std::uint64_t t0 = rdtsc();
      while (rdtsc() - t0 < work_cycles) cpu_pause();
      return 0;
    }
    case Step::idle:
      return 0;
  }
  return 0;
}

TEST(RecordCoreCycles, ThePollAfterABurstCountsAsBusy) {
  Stream stream;
  FwdLcore lcore;
  lcore.streams.push_back(&stream);
  lcore.record_cycles = true;
  next_step = 0;
  running = &lcore;
  lcore_loop<&scripted_poll>(lcore);
  running = nullptr;

  // Bursts are the polls that moved packets; the work deferred to the polls after them is in
  // the busy cycles (both deferred steps follow a burst).
  EXPECT_EQ(stream.busy_bursts.read(), 3u);
  EXPECT_GE(stream.busy_cycles.read(), 2 * work_cycles);
}

}  // namespace
}  // namespace ws::testpmd
