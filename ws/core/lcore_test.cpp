// SPDX-License-Identifier: BSD-3-Clause
// Lcore option parsing (-l, -c, --lcores) against the CPUs this machine really has, and the
// thread-local lcore id that LcoreThread sets.
#include "ws/core/lcore.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "ws/core/hex.hpp"
#include "ws/testing/require.hpp"

namespace ws {
namespace {

// These tests assume CPUs 0 and 1 exist and CPU 2 does not (the 2-CPU build machine); on another
// shape of machine they skip rather than fail.
bool two_cpu_machine() {
  const auto cpus = available_cpus();
  return cpus == std::vector<unsigned>{0, 1};
}

#define REQUIRE_TWO_CPUS() WS_REQUIRE(two_cpu_machine(), "needs exactly CPUs 0 and 1 available")

void expect_error(const Result<std::vector<LcoreConfig>>& r, std::initializer_list<std::string_view> needles) {
  ASSERT_FALSE(r.has_value());
  for (auto n : needles) EXPECT_NE(r.error().message.find(n), std::string::npos) << r.error().message;
}

TEST(Lcore, AvailableCpusIsSortedAndNotEmpty) {
  const auto cpus = available_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
}

TEST(Lcore, ListRangesAndCommas) {
  REQUIRE_TWO_CPUS();
  for (std::string_view text : {"0-1", "0,1"}) {
    auto r = parse_lcore_list(text);
    ASSERT_TRUE(r.has_value()) << r.error().message;
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[0].id, 0u);
    EXPECT_EQ((*r)[0].cpus, std::vector<unsigned>{0});
    EXPECT_EQ((*r)[1].id, 1u);
    EXPECT_EQ((*r)[1].cpus, std::vector<unsigned>{1});
  }
  auto one = parse_lcore_list("1");
  ASSERT_TRUE(one.has_value());
  EXPECT_EQ(one->size(), 1u);
}

TEST(Lcore, ListOfMissingCpuPointsAtLcores) {
  REQUIRE_TWO_CPUS();
  expect_error(parse_lcore_list("0-63"), {"-l '0-63'", "CPU 2 is not available", "available: 0,1", "--lcores"});
  expect_error(parse_lcore_list("5"), {"CPU 5"});
}

TEST(Lcore, ListMalformed) {
  expect_error(parse_lcore_list(""), {"empty list"});
  expect_error(parse_lcore_list("a"), {"'a' is not a number"});
  expect_error(parse_lcore_list("0-"), {"is not a number"});
  expect_error(parse_lcore_list("-1"), {"is not a number"});
  expect_error(parse_lcore_list("0,,1"), {"is not a number"});
  expect_error(parse_lcore_list("1-0"), {"runs backwards"});
  expect_error(parse_lcore_list("0-4294967295"), {"beyond the maximum lcore id"});
  expect_error(parse_lcore_list("99999999999"), {"is not a number"});
  expect_error(parse_lcore_list("0,0"), {"lcore 0 is listed twice"});
}

TEST(Lcore, CoreMask) {
  REQUIRE_TWO_CPUS();
  for (std::string_view text : {"0x3", "3", "0X3"}) {
    auto r = parse_core_mask(text);
    ASSERT_TRUE(r.has_value()) << text << ": " << r.error().message;
    ASSERT_EQ(r->size(), 2u);
    EXPECT_EQ((*r)[1].id, 1u);
  }
  auto two = parse_core_mask("0x2");
  ASSERT_TRUE(two.has_value());
  ASSERT_EQ(two->size(), 1u);
  EXPECT_EQ((*two)[0].id, 1u);
  expect_error(parse_core_mask("0xf"), {"-c '0xf'", "CPU 2"});
  for (std::string_view bad : {"", "0x", "0", "0x0", "0xg", "zz", "0x1 "})
    expect_error(parse_core_mask(bad), {"non-zero hexadecimal core mask"});
}

TEST(HexMask, DigitsWithOrWithoutPrefixAndNothingElse) {
  EXPECT_EQ(parse_hex_mask("0x3"), 3u);
  EXPECT_EQ(parse_hex_mask("0XfF"), 0xffu);
  EXPECT_EQ(parse_hex_mask("ffffffffffffffff"), ~std::uint64_t{0});
  for (std::string_view bad : {"", "0x", "0x1 ", " 1", "0xg", "-1", "1ffffffffffffffff", "0x0x1"})
    EXPECT_EQ(parse_hex_mask(bad), std::nullopt) << bad;
}

TEST(Lcore, MapOnSharedCpus) {
  REQUIRE_TWO_CPUS();
  auto r = parse_lcore_map("0@0,1@0");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ((*r)[1].id, 1u);
  EXPECT_EQ((*r)[1].cpus, std::vector<unsigned>{0});

  auto group = parse_lcore_map("(0-1)@0");
  ASSERT_TRUE(group.has_value()) << group.error().message;
  ASSERT_EQ(group->size(), 2u);
  EXPECT_EQ((*group)[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ((*group)[1].cpus, std::vector<unsigned>{0});

  // Lcores beyond the CPU count are fine when mapped onto CPUs that exist.
  auto many = parse_lcore_map("(2-5)@(0-1),6@1");
  ASSERT_TRUE(many.has_value()) << many.error().message;
  ASSERT_EQ(many->size(), 5u);
  EXPECT_EQ((*many)[0].id, 2u);
  EXPECT_EQ((*many)[0].cpus, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ((*many)[4].id, 6u);
  EXPECT_EQ((*many)[4].cpus, std::vector<unsigned>{1});
}

TEST(Lcore, MapWithoutAtSharedSetOrOwnCpus) {
  REQUIRE_TWO_CPUS();
  // "(0,1)": both lcores run on the set {0,1}.
  auto shared = parse_lcore_map("(0,1)");
  ASSERT_TRUE(shared.has_value()) << shared.error().message;
  ASSERT_EQ(shared->size(), 2u);
  EXPECT_EQ((*shared)[0].cpus, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ((*shared)[1].cpus, (std::vector<unsigned>{0, 1}));
  // "0-1": each lcore on the CPU of its own number.
  auto own = parse_lcore_map("0-1");
  ASSERT_TRUE(own.has_value()) << own.error().message;
  EXPECT_EQ((*own)[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ((*own)[1].cpus, std::vector<unsigned>{1});
  // "2-3": CPUs 2 and 3 do not exist here.
  expect_error(parse_lcore_map("2-3"), {"--lcores '2-3'", "CPU 2 is not available"});
  expect_error(parse_lcore_map("0@5"), {"CPU 5"});
}

TEST(Lcore, MapMalformed) {
  expect_error(parse_lcore_map("(0-1@0"), {"unbalanced '('"});
  expect_error(parse_lcore_map("0-1)@0"), {"unbalanced ')'"});
  expect_error(parse_lcore_map("0@"), {"empty list"});
  expect_error(parse_lcore_map("@0"), {"empty list"});
  expect_error(parse_lcore_map(""), {"empty list"});
  expect_error(parse_lcore_map("0@x"), {"'x' is not a number"});
  expect_error(parse_lcore_map("0@0@1"), {"is not a number"});
  expect_error(parse_lcore_map("0@0,,1@0"), {"empty list"});
  expect_error(parse_lcore_map("0@0,0@1"), {"lcore 0 is listed twice"});
  expect_error(parse_lcore_map("0@200"), {"beyond the maximum"});
}

TEST(Lcore, ThreadRunsAsItsLcore) {
  EXPECT_EQ(lcore_id(), no_lcore);
  std::atomic<unsigned> seen{no_lcore};
  {
    LcoreThread t({7, available_cpus()}, [&] { seen = lcore_id(); });
  }
  EXPECT_EQ(seen.load(), 7u);
  EXPECT_EQ(lcore_id(), no_lcore) << "the id is per thread";
  set_lcore_id(3);
  EXPECT_EQ(lcore_id(), 3u);
  set_lcore_id(no_lcore);
}

TEST(Lcore, PinToAvailableCpus) {
  const auto cpus = available_cpus();
  ASSERT_TRUE(pin_current_thread(cpus).has_value());
  EXPECT_EQ(available_cpus(), cpus);
}

}  // namespace
}  // namespace ws
