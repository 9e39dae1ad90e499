// SPDX-License-Identifier: BSD-3-Clause
// Software TX offloads through real ports (net_ring, net_pcap): a port whose device lacks an
// enabled offload segments TSO packets and fills checksums before its driver sends; without
// enabled offloads the driver's burst function is untouched. Segments re-assemble to the input
// and pass our verifier and tshark's; tx_burst counts a segmented packet once and the port's
// opackets counts its segments; every mbuf returns to its pool.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ws/net/checksum.hpp"
#include "ws/net/gso.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"
#include "ws/testing/port_fixture.hpp"
#include "ws/testing/shell.hpp"

namespace ws {
namespace {

constexpr std::uint64_t all_offloads = tx_offload::checksums | tx_offload::segmentation;

class SoftwareTxTest : public testing::PortFixture {
 protected:
  void SetUp() override {
    open_arena_and_pool("software_tx_test", 32u << 20,
                        {.name = "swtx", .count = 512, .cache_size = 0, .data_room_bytes = 9216});
  }
  void TearDown() override { EXPECT_EQ(pool_->in_use(), 0u) << "an mbuf was not returned"; }

  void start(Port& port, std::uint64_t offloads) {
    PortConfig c;
    c.tx_offloads = offloads;
    c.tx_segment_pool = pool_.get();
    auto ok = port.configure(c);
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
    ok = port.setup_rx_queue(0, {.pool = pool_.get()});
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
    ASSERT_TRUE(port.setup_tx_queue(0, {}).has_value());
    ok = port.start();
    ASSERT_TRUE(ok.has_value()) << ok.error().message;
  }

  // A TCP (or UDP) packet asking for segmentation at `mss` and for its checksums, whose stored
  // checksums are wrong (zero): only the port's work can make them right.
  Mbuf* tso_packet(const BuiltFrame& f, std::uint16_t mss, bool tcp) {
    Mbuf* m = pool_->alloc();
    EXPECT_NE(m, nullptr);
    std::uint8_t* d = m->append(static_cast<std::uint16_t>(f.bytes.size()));
    if (d == nullptr) std::abort();  // frames are sized to fit the pool's data room
    std::memcpy(d, f.bytes.data(), f.bytes.size());
    m->l2_len = f.l2_len;
    m->l3_len = f.l3_len;
    m->l4_len = f.l4_len;
    m->tso_segsz = mss;
    m->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum | (tcp ? mbuf_flag::tx_tcp_seg : gso_flag::tx_udp_seg);
    reinterpret_cast<Ipv4Hdr*>(d + f.l2_len)->hdr_checksum = 0xdead;
    return m;
  }

  // Receive everything a loopback port holds.
  std::vector<Mbuf*> drain(Port& port) {
    std::vector<Mbuf*> got;
    Mbuf* pkts[64];
    while (const std::uint16_t n = port.rx_burst(0, pkts, 64)) got.insert(got.end(), pkts, pkts + n);
    return got;
  }

  static std::vector<std::uint8_t> bytes_of(const Mbuf& m) {
    std::vector<std::uint8_t> v(m.pkt_len);
    copy_front(m, v);
    return v;
  }

  // Every received segment has good checksums; their payloads, in order, are the input's.
  static void expect_reassembles(const std::vector<Mbuf*>& segs, const BuiltFrame& f, std::size_t mss) {
    const std::size_t hdr = f.l2_len + f.l3_len + f.l4_len;
    std::vector<std::uint8_t> payload;
    for (std::size_t i = 0; i < segs.size(); ++i) {
      classify(*segs[i]);
      const CksumStatus st = verify_checksums(*segs[i]);
      EXPECT_TRUE(st.ip_checked && st.ip_good) << "segment " << i;
      EXPECT_TRUE(st.l4_checked && st.l4_good) << "segment " << i;
      const auto b = bytes_of(*segs[i]);
      EXPECT_LE(b.size() - hdr, mss);
      payload.insert(payload.end(), b.begin() + static_cast<std::ptrdiff_t>(hdr), b.end());
    }
    EXPECT_EQ(payload, std::vector<std::uint8_t>(f.bytes.begin() + static_cast<std::ptrdiff_t>(hdr), f.bytes.end()));
  }
};

BuiltFrame frame(std::uint8_t proto, std::uint32_t payload) {
  FrameSpec s;
  s.l4_proto = proto;
  s.payload_bytes = payload;
  s.tcp_flags = tcp_flag::ack | tcp_flag::psh | tcp_flag::fin;
  return build_frame(s);
}

TEST_F(SoftwareTxTest, RingPortSegmentsAndChecksumsTsoPackets) {
  auto port = create("net_ring0");
  ASSERT_NE(port, nullptr);
  start(*port, all_offloads);
  EXPECT_EQ(port->software_tx_offloads(), all_offloads);  // net_ring does none itself
  const BuiltFrame tcp = frame(ip_proto_tcp, 8000);
  const BuiltFrame udp = frame(ip_proto_udp, 3000);
  // A plain packet asking only for checksums rides along, between the two TSO packets.
  const BuiltFrame small = frame(ip_proto_udp, 100);
  Mbuf* plain = tso_packet(small, 0, false);
  plain->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_udp_cksum;
  std::memset(plain->data() + small.l2_len + small.l3_len + 6, 0x55, 2);  // a wrong UDP checksum
  Mbuf* pkts[3] = {tso_packet(tcp, 1448, true), plain, tso_packet(udp, 1000, false)};
  EXPECT_EQ(port->tx_burst(0, pkts, 3), 3) << "a segmented packet counts once";
  const std::size_t tcp_segs = (8000 + 1447) / 1448, udp_segs = 3;
  EXPECT_EQ(port->stats().opackets, tcp_segs + 1 + udp_segs) << "the driver counts segments";
  EXPECT_EQ(port->stats().oerrors, 0u);

  std::vector<Mbuf*> got = drain(*port);
  ASSERT_EQ(got.size(), tcp_segs + 1 + udp_segs);
  expect_reassembles({got.begin(), got.begin() + tcp_segs}, tcp, 1448);
  expect_reassembles({got.begin() + tcp_segs, got.begin() + tcp_segs + 1}, small, 1500);
  expect_reassembles({got.begin() + tcp_segs + 1, got.end()}, udp, 1000);
  mbuf_free_bulk(got);
  port->stop();
}

TEST_F(SoftwareTxTest, WithoutEnabledOffloadsTheDriverSendsAsIs) {
  auto port = create("net_ring0");
  ASSERT_NE(port, nullptr);
  start(*port, 0);
  EXPECT_EQ(port->software_tx_offloads(), 0u);
  const BuiltFrame tcp = frame(ip_proto_tcp, 4000);
  Mbuf* m = tso_packet(tcp, 1000, true);
  EXPECT_EQ(port->tx_burst(0, &m, 1), 1);
  std::vector<Mbuf*> got = drain(*port);
  ASSERT_EQ(got.size(), 1u) << "no offload enabled: no segmentation, no per-packet work";
  EXPECT_EQ(reinterpret_cast<const Ipv4Hdr*>(got[0]->data() + tcp.l2_len)->hdr_checksum, 0xdead);
  mbuf_free_bulk(got);
  port->stop();
}

TEST_F(SoftwareTxTest, FullQueueMidPacketDropsTheRestAndCountsIt) {
  auto port = create("net_ring0,size=4");
  ASSERT_NE(port, nullptr);
  start(*port, all_offloads);
  const BuiltFrame tcp = frame(ip_proto_tcp, 6000);
  Mbuf* pkts[2] = {tso_packet(tcp, 1000, true), tso_packet(tcp, 1000, true)};
  // The ring takes a few of the six segments: the first packet is taken (its other segments
  // dropped and counted), the second stays with the caller.
  const std::uint16_t taken = port->tx_burst(0, pkts, 2);
  EXPECT_EQ(taken, 1);
  const PortStats s = port->stats();
  EXPECT_GT(s.opackets, 0u);
  EXPECT_EQ(s.opackets + s.oerrors, 6u) << "every segment sent or counted as dropped";
  mbuf_free(pkts[1]);
  std::vector<Mbuf*> got = drain(*port);
  EXPECT_EQ(got.size(), s.opackets);
  mbuf_free_bulk(got);
  port->stop();
}

TEST_F(SoftwareTxTest, ConfigureErrorsNameTheOffloadAndWhatIsMissing) {
  auto port = create("net_ring0");
  ASSERT_NE(port, nullptr);
  PortConfig c;
  c.tx_offloads = tx_offload::tcp_tso;
  auto ok = port->configure(c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_NE(ok.error().message.find("tcp_tso"), std::string::npos) << ok.error().message;
  EXPECT_NE(ok.error().message.find("tx_segment_pool"), std::string::npos) << ok.error().message;
  c.tx_offloads = 1ULL << 9;  // a bit no device or software here does
  ok = port->configure(c);
  ASSERT_FALSE(ok.has_value());
  EXPECT_NE(ok.error().message.find("0x200"), std::string::npos) << ok.error().message;
  // Changing offloads needs a stopped port.
  start(*port, 0);
  EXPECT_FALSE(port->set_tx_offloads(tx_offload::ipv4_cksum, nullptr).has_value());
  port->stop();
  EXPECT_TRUE(port->set_tx_offloads(tx_offload::ipv4_cksum, nullptr).has_value());
  EXPECT_EQ(port->config().tx_offloads, tx_offload::ipv4_cksum);
}

TEST_F(SoftwareTxTest, PcapPortWritesSegmentsTsharkAccepts) {
  WS_REQUIRE_TSHARK("the Wireshark checksum cross-check");
  const std::string out = ::testing::TempDir() + "ws_software_tx_" + std::to_string(getpid()) + ".pcap";
  const BuiltFrame tcp = frame(ip_proto_tcp, 9000);  // 7 segments
  const BuiltFrame udp = frame(ip_proto_udp, 4000);
  {
    auto port = create("net_pcap0,tx_pcap=" + out);
    ASSERT_NE(port, nullptr);
    start(*port, all_offloads);
    Mbuf* pkts[2] = {tso_packet(tcp, 1448, true), tso_packet(udp, 1400, false)};
    EXPECT_EQ(port->tx_burst(0, pkts, 2), 2);
    EXPECT_EQ(port->stats().opackets, 7u + 3u);
    port->stop();
  }  // closing the port flushes the file
  const std::string fields =
      ws::testing::shell_output("tshark -r " + out +
                                " -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE -o udp.check_checksum:TRUE"
                                " -T fields -E separator=, -e frame.len -e ip.checksum.status -e tcp.checksum.status"
                                " -e udp.checksum.status -e tcp.seq_raw 2>/dev/null");
  // One row per frame: length, then ip/tcp/udp checksum status (1 good, 0 bad, 2 unverified,
  // empty when absent), then the TCP sequence number.
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(fields);
  for (std::string l; std::getline(in, l);) {
    std::vector<std::string> row;
    std::istringstream cells(l);
    for (std::string c; std::getline(cells, c, ',');) row.push_back(c);
    row.resize(5);
    rows.push_back(row);
  }
  ASSERT_EQ(rows.size(), 10u) << fields;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const bool is_tcp = i < 7;
    EXPECT_EQ(rows[i][1], "1") << "IPv4 checksum of frame " << i + 1;
    EXPECT_EQ(rows[i][is_tcp ? 2 : 3], "1") << "L4 checksum of frame " << i + 1;
    // TCP sequence numbers advance by the MSS (the builder starts at 1000).
    if (is_tcp) {
      EXPECT_EQ(rows[i][4], std::to_string(1000 + 1448 * i));
    }
  }
  std::remove(out.c_str());
}

}  // namespace
}  // namespace ws
