// SPDX-License-Identifier: BSD-3-Clause
// SIMD levels: detection, DPDK's --force-max-simd-bitwidth values, refusal of a level the CPU
// lacks, and the hooks that pick kernels.
#include "ws/core/simd.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "ws/testing/simd_levels.hpp"

namespace ws {
namespace {

TEST(Simd, TheCpuRunsTheBaselineAndReportsWhatItHas) {
  // The build's baseline is x86-64-v2: a CPU running this test has at least SSE4.2.
  EXPECT_GE(cpu_simd_level(), SimdLevel::sse);
  EXPECT_TRUE(__builtin_cpu_supports("sse4.2"));
  EXPECT_EQ(cpu_simd_level() >= SimdLevel::avx2, __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(cpu_simd_level() >= SimdLevel::avx512, __builtin_cpu_supports("avx512bw") != 0);
  EXPECT_EQ(simd_level(), cpu_simd_level()) << "nothing capped the level yet";
  RecordProperty("cpu_simd_level", std::string(simd_name(cpu_simd_level())));
}

TEST(Simd, NamesAndWidthsAreDpdks) {
  EXPECT_EQ(simd_bits(SimdLevel::scalar), 64u);
  EXPECT_EQ(simd_bits(SimdLevel::sse), 128u);
  EXPECT_EQ(simd_bits(SimdLevel::avx2), 256u);
  EXPECT_EQ(simd_bits(SimdLevel::avx512), 512u);
  EXPECT_EQ(simd_name(SimdLevel::avx2), "avx2");
}

TEST(Simd, EveryWidthTheCpuHasCanBeForced) {
  for (SimdLevel l : testing::cpu_simd_levels()) {
    testing::ScopedSimdLevel keep(simd_level());
    ASSERT_TRUE(set_max_simd_bitwidth(simd_bits(l)));
    EXPECT_EQ(simd_level(), l);
  }
  EXPECT_EQ(simd_level(), cpu_simd_level());
}

TEST(Simd, AboveFiveHundredTwelveMeansNoCap) {
  testing::ScopedSimdLevel keep(SimdLevel::scalar);
  ASSERT_TRUE(set_max_simd_bitwidth(1024));
  EXPECT_EQ(simd_level(), cpu_simd_level());
  ASSERT_TRUE(set_max_simd_bitwidth(32768));
  EXPECT_EQ(simd_level(), cpu_simd_level());
}

TEST(Simd, WidthsDpdkRefusesAreRefused) {
  for (unsigned bits : {0u, 1u, 32u, 100u, 384u, 65536u}) {
    auto r = set_max_simd_bitwidth(bits);
    ASSERT_FALSE(r) << bits;
    EXPECT_NE(r.error().message.find("expected 64, 128, 256 or 512"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(simd_level(), cpu_simd_level());
}

TEST(Simd, ALevelAboveTheCpusIsRefusedNamingWhatItLacks) {
  if (cpu_simd_level() == SimdLevel::avx512) {
    // Nothing is above: the widest is accepted as itself, never as something narrower.
    ASSERT_TRUE(set_max_simd_bitwidth(512));
    EXPECT_EQ(simd_level(), SimdLevel::avx512);
    return;
  }
  const auto above = static_cast<SimdLevel>(static_cast<int>(cpu_simd_level()) + 1);
  auto r = set_max_simd_bitwidth(simd_bits(above));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("it lacks"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find(std::string(simd_name(cpu_simd_level()))), std::string::npos) << r.error().message;
  EXPECT_EQ(simd_level(), cpu_simd_level()) << "a refused level changes nothing";
}

std::vector<SimdLevel> seen;

TEST(Simd, HooksSeeTheLevelAtOnceAndAtEveryChange) {
  seen.clear();
  on_simd_level([](SimdLevel l) noexcept { seen.push_back(l); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], cpu_simd_level());
  {
    testing::ScopedSimdLevel scalar(SimdLevel::scalar);
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1], SimdLevel::scalar);
  }
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2], cpu_simd_level());
}

}  // namespace
}  // namespace ws
