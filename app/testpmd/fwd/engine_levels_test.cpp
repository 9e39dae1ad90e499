// SPDX-License-Identifier: BSD-3-Clause
// The forwarding loops and the ports' burst functions are built for every SIMD level and chosen
// when forwarding starts (ws/core/simd.hpp): at each level this CPU has, io, mac and csum leave
// exactly the bytes and offload fields the scalar build leaves, over frames of every shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "app/testpmd/fwd/engine.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/testing/port_fixture.hpp"
#include "ws/testing/simd_levels.hpp"

namespace ws::testpmd {
namespace {

// What a packet is after forwarding: its bytes and the fields an engine sets.
struct Outcome {
  std::vector<std::uint8_t> bytes;
  std::uint64_t ol_flags = 0;
  std::uint64_t tx_offload = 0;
  std::uint32_t packet_type = 0;
  bool operator==(const Outcome&) const = default;
};

std::string describe(const Outcome& o) {
  std::string s =
      fmt::format("ol_flags {:#x} tx_offload {:#x} ptype {:#x} bytes", o.ol_flags, o.tx_offload, o.packet_type);
  for (std::uint8_t b : o.bytes) s += fmt::format(" {:02x}", b);
  return s;
}

class EngineLevels : public ws::testing::PortFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_arena_and_pool("engine_levels", 16u << 20, {.name = "levels", .count = 512}));
  }

  // Every frame shape the csum engine meets, with 1 to 300 payload bytes; checksums left stale.
  std::vector<BuiltFrame> frames() const {
    std::vector<BuiltFrame> out;
    std::uint32_t payload = 1;
    for (bool v6 : {false, true})
      for (std::uint8_t proto : {ip_proto_udp, ip_proto_tcp, ip_proto_icmp})
        for (std::uint8_t tags : {0, 1})
          for (int i = 0; i < 4; ++i, payload = payload * 7 % 300 + 1) {
            BuiltFrame f = build_frame({.ipv6 = v6, .l4_proto = proto, .payload_bytes = payload, .vlan_tags = tags});
            f.bytes[f.bytes.size() / 2] ^= 0x5a;  // the checksums in the frame are now wrong
            out.push_back(std::move(f));
          }
    return out;
  }

  // Runs `engine`'s loop built for `level` on a looped-back net_ring port holding the frames,
  // for long enough that each frame went round many times, and returns the packets as left (in
  // the order of their bytes: where the ring's head stops depends on how many bursts ran).
  std::vector<Outcome> run(const Engine& engine, SimdLevel level) {
    ws::testing::ScopedSimdLevel scope(level);
    auto port = create("net_ring0,size=512");
    EXPECT_TRUE(port->configure({}));
    EXPECT_TRUE(port->setup_rx_queue(0, {0, pool_.get()}));
    EXPECT_TRUE(port->setup_tx_queue(0, {}));
    EXPECT_TRUE(port->start());
    const auto built = frames();
    std::vector<Mbuf*> in;
    for (const BuiltFrame& f : built) {
      Mbuf* m = pool_->alloc();
      std::memcpy(m->append(static_cast<std::uint16_t>(f.bytes.size())), f.bytes.data(), f.bytes.size());
      in.push_back(m);
    }
    EXPECT_EQ(port->tx_burst(0, in.data(), static_cast<std::uint16_t>(in.size())), in.size());

    FwdConfig config;
    config.burst = 16;
    Stream stream;
    stream.rx_port = stream.tx_port = port.get();
    stream.pool = pool_.get();
    stream.config = &config;
    FwdLcore lcore;
    lcore.streams.push_back(&stream);
    std::thread t([&] { engine.loop(level)(lcore); });
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    lcore.stop.store(true);
    t.join();
    EXPECT_GT(stream.rx_packets.read(), 4 * in.size()) << "each frame went round several times";

    std::vector<Mbuf*> back(in.size() + 1);
    const std::uint16_t n = port->rx_burst(0, back.data(), static_cast<std::uint16_t>(back.size()));
    EXPECT_EQ(n, in.size()) << "io, mac and csum forward every packet";
    std::vector<Outcome> out;
    for (std::uint16_t i = 0; i < n; ++i) {
      Mbuf* m = back[i];
      out.push_back({{m->data(), m->data() + m->data_len}, m->ol_flags, m->tx_offload, m->packet_type});
      mbuf_free(m);
    }
    port->stop();
    std::sort(out.begin(), out.end(), [](const Outcome& a, const Outcome& b) { return a.bytes < b.bytes; });
    return out;
  }
};

TEST_F(EngineLevels, EveryLevelForwardsWhatTheScalarBuildDoes) {
  for (const char* name : {"io", "mac", "csum"}) {
    const Engine* engine = find_engine(name);
    ASSERT_NE(engine, nullptr);
    const std::vector<Outcome> reference = run(*engine, SimdLevel::scalar);
    ASSERT_FALSE(reference.empty());
    for (SimdLevel level : ws::testing::cpu_simd_levels()) {
      const std::vector<Outcome> got = run(*engine, level);
      ASSERT_EQ(got.size(), reference.size()) << name << " at " << simd_name(level);
      for (std::size_t i = 0; i < got.size(); ++i)
        EXPECT_TRUE(got[i] == reference[i])
            << name << " at " << simd_name(level) << ": packet " << i << " differs: " << describe(got[i]) << " against "
            << describe(reference[i]);
    }
    EXPECT_EQ(pool_->in_use(), 0u);
  }
}

TEST_F(EngineLevels, EachLevelHasItsOwnBuild) {
  const Engine* csum = find_engine("csum");
  ASSERT_NE(csum, nullptr);
  EXPECT_NE(csum->loop(SimdLevel::sse), csum->loop(SimdLevel::avx2));
  EXPECT_NE(csum->loop(SimdLevel::avx2), csum->loop(SimdLevel::avx512));
  EXPECT_EQ(csum->loop(SimdLevel::scalar), csum->loop(SimdLevel::sse)) << "no engine has 64-bit vector code";
}

}  // namespace
}  // namespace ws::testpmd
