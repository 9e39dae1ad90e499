// SPDX-License-Identifier: BSD-3-Clause
// DevArgs: DPDK-style device strings, bracket lists, repeated keys, parse errors, typed getters
// and the unknown-key error that lists the known keys.
#include "ws/core/devargs.hpp"

#include <gtest/gtest.h>

#include <array>

namespace ws {
namespace {

DevArgs parse_ok(std::string_view text) {
  auto a = DevArgs::parse(text);
  EXPECT_TRUE(a.has_value()) << text << ": " << (a ? "" : a.error().message);
  return a ? *a : DevArgs{};
}

void expect_parse_error(std::string_view text, std::string_view needle) {
  auto a = DevArgs::parse(text);
  ASSERT_FALSE(a.has_value()) << "'" << text << "' should not parse";
  EXPECT_NE(a.error().message.find(needle), std::string::npos) << a.error().message;
  EXPECT_NE(a.error().message.find(fmt::format("device '{}'", text)), std::string::npos) << a.error().message;
}

void expect_contains(const std::string& s, std::string_view needle) {
  EXPECT_NE(s.find(needle), std::string::npos) << "'" << s << "' lacks '" << needle << "'";
}

TEST(DevArgs, ParsesNameAndPairsInOrder) {
  const DevArgs a = parse_ok("net_vhost0,iface=/tmp/vhost0,queues=4,client=0");
  EXPECT_EQ(a.name(), "net_vhost0");
  EXPECT_EQ(a.text(), "net_vhost0,iface=/tmp/vhost0,queues=4,client=0");
  ASSERT_EQ(a.pairs().size(), 3u);
  EXPECT_EQ(a.pairs()[0], (std::pair<std::string, std::string>{"iface", "/tmp/vhost0"}));
  EXPECT_EQ(a.pairs()[2], (std::pair<std::string, std::string>{"client", "0"}));
  EXPECT_TRUE(a.has("queues"));
  EXPECT_FALSE(a.has("queue"));
  EXPECT_EQ(a.get("queues"), "4");
  EXPECT_EQ(a.get("missing"), std::nullopt);
  EXPECT_EQ(a.get_string("iface", "x"), "/tmp/vhost0");
  EXPECT_EQ(a.get_string("missing", "dflt"), "dflt");
}

TEST(DevArgs, NameAloneAndOddButValidValues) {
  const DevArgs a = parse_ok("net_null0");
  EXPECT_EQ(a.name(), "net_null0");
  EXPECT_TRUE(a.pairs().empty());
  const DevArgs b = parse_ok("virtio_user0,path=/dev/vhost-net,mac=02:00:00:00:00:01,x=a=b,empty=");
  EXPECT_EQ(b.get("mac"), "02:00:00:00:00:01");
  EXPECT_EQ(b.get("x"), "a=b") << "only the first '=' separates key and value";
  EXPECT_EQ(b.get("empty"), "");
  EXPECT_TRUE(b.has("empty"));
}

TEST(DevArgs, BracketListsKeepTheirCommas) {
  const DevArgs a = parse_ok("net_pcap0,rx_pcap=[a.pcap,b.pcap],tx_pcap=c.pcap");
  ASSERT_EQ(a.pairs().size(), 2u);
  EXPECT_EQ(a.get("rx_pcap"), "[a.pcap,b.pcap]");
  EXPECT_EQ(a.get("tx_pcap"), "c.pcap");
  const DevArgs nested = parse_ok("dev0,k=[a,[b,c]],z=1");
  EXPECT_EQ(nested.get("k"), "[a,[b,c]]");
  EXPECT_EQ(nested.get("z"), "1");
}

TEST(DevArgs, RepeatedKeysKeepEveryValue) {
  const DevArgs a = parse_ok("net_pcap0,rx_pcap=a.pcap,tx_pcap=o.pcap,rx_pcap=b.pcap");
  EXPECT_EQ(a.get("rx_pcap"), "a.pcap") << "get() returns the first";
  const auto all = a.get_all("rx_pcap");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], "a.pcap");
  EXPECT_EQ(all[1], "b.pcap");
  EXPECT_TRUE(a.get_all("nothing").empty());
}

TEST(DevArgs, BareKeyIsTrueForBooleansAndAnErrorForNumbers) {
  auto a = DevArgs::parse("net_tap0,persist,size");
  ASSERT_TRUE(a) << a.error().message;
  auto persist = a->get_bool("persist", false);
  ASSERT_TRUE(persist);
  EXPECT_TRUE(*persist);
  auto size = a->get_uint("size", 64, 1, 9000);
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().message.find("key 'size' has no value, expected key=value"), std::string::npos)
      << size.error().message;
}

TEST(DevArgs, ParseErrorsNameTheDeviceAndTheProblem) {
  expect_parse_error("", "empty device name");
  expect_parse_error(",size=64", "empty device name");
  expect_parse_error("net null0", "outside [A-Za-z0-9_.:-]");
  expect_parse_error("net_null0,=64", "empty key");
  expect_parse_error("net_null0,", "empty field");
  expect_parse_error("net_null0,,size=1", "empty field");
  expect_parse_error("net_null0,si ze=1", "key 'si ze'");
  expect_parse_error("net_pcap0,rx_pcap=[a.pcap,b.pcap", "unbalanced '['");
  expect_parse_error("net_pcap0,rx_pcap=a.pcap]", "unbalanced ']'");
  expect_parse_error("net_pcap0,rx_pcap=][", "unbalanced ']'");
}

TEST(DevArgs, GetUintChecksRangeHexAndGarbage) {
  const DevArgs a = parse_ok(
      "dev0,n=64,hex=0x40,HEX=0X1f,big=18446744073709551615,over=18446744073709551616,"
      "neg=-1,plus=+1,space= 1,junk=12ab,empty=,bare0x=0x,zero=0,lead=010");
  EXPECT_EQ(a.get_uint("n", 0, 0, 100).value(), 64u);
  EXPECT_EQ(a.get_uint("hex", 0, 0, 100).value(), 64u);
  EXPECT_EQ(a.get_uint("HEX", 0, 0, 100).value(), 31u);
  EXPECT_EQ(a.get_uint("big", 0, 0, UINT64_MAX).value(), UINT64_MAX);
  EXPECT_EQ(a.get_uint("zero", 5, 0, 10).value(), 0u);
  EXPECT_EQ(a.get_uint("lead", 0, 0, 100).value(), 10u) << "a leading 0 is decimal, not octal";
  EXPECT_EQ(a.get_uint("missing", 42, 0, 10).value(), 42u) << "the default is not range-checked";

  auto low = a.get_uint("n", 0, 65, 100);
  ASSERT_FALSE(low.has_value());
  expect_contains(low.error().message, "device 'dev0'");
  expect_contains(low.error().message, "key 'n'");
  expect_contains(low.error().message, "[65, 100]");
  auto high = a.get_uint("hex", 0, 0, 63);
  ASSERT_FALSE(high.has_value());
  expect_contains(high.error().message, "value 64");
  expect_contains(high.error().message, "[0, 63]");

  for (const char* key : {"over", "neg", "plus", "space", "junk", "empty", "bare0x"}) {
    auto r = a.get_uint(key, 0, 0, UINT64_MAX);
    ASSERT_FALSE(r.has_value()) << key;
    expect_contains(r.error().message, fmt::format("key '{}'", key));
    expect_contains(r.error().message, "expected an unsigned integer");
  }
}

TEST(DevArgs, GetBoolAcceptsTheUsualSpellings) {
  const DevArgs a = parse_ok("dev0,a=1,b=0,c=true,d=false,e=yes,f=no,g=on,h=off,bad=2,worse=True");
  for (const char* k : {"a", "c", "e", "g"}) EXPECT_TRUE(a.get_bool(k, false).value()) << k;
  for (const char* k : {"b", "d", "f", "h"}) EXPECT_FALSE(a.get_bool(k, true).value()) << k;
  EXPECT_TRUE(a.get_bool("missing", true).value());
  EXPECT_FALSE(a.get_bool("missing", false).value());
  for (const char* k : {"bad", "worse"}) {
    auto r = a.get_bool(k, false);
    ASSERT_FALSE(r.has_value()) << k;
    expect_contains(r.error().message, "device 'dev0'");
    expect_contains(r.error().message, fmt::format("key '{}'", k));
    expect_contains(r.error().message, "expected 0 or 1");
  }
}

TEST(DevArgs, CheckKeysListsTheKnownKeys) {
  constexpr std::array known = {
      ParamSpec{"size", "uint", "64", "packet length"},
      ParamSpec{"copy", "bool", "0", "copy bytes"},
  };
  EXPECT_TRUE(parse_ok("net_null0,size=64,copy=1,size=128").check_keys(known).has_value());
  auto r = parse_ok("net_null0,size=64,sise=12").check_keys(known);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message, "device 'net_null0': unknown key 'sise' (known keys: size, copy)");
  auto none = parse_ok("net_x0,a=1").check_keys({});
  ASSERT_FALSE(none.has_value());
  expect_contains(none.error().message, "known keys: none");
}

TEST(DevArgs, DescribeParamsOneLinePerKey) {
  constexpr std::array params = {
      ParamSpec{"size", "uint", "64", "packet length"},
      ParamSpec{"iface", "path", "", "socket path"},
  };
  EXPECT_EQ(describe_params(params), "  size (uint, default 64): packet length\n  iface (path): socket path\n");
}

}  // namespace
}  // namespace ws
