// SPDX-License-Identifier: BSD-3-Clause
// Software GSO: segments of TCP/IPv4, TCP/IPv6 and UDP packets (one- and multi-segment input)
// re-assembled by the test equal the input; headers (ids, sequence numbers, flags, lengths)
// are right; payload is shared, not copied; nothing leaks. Every segment's checksums pass our
// verifier and tshark's (segments written to a pcap). Also VLAN insert/strip.
#include "ws/net/gso.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ws/net/checksum.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"
#include "ws/net/tx_offload.hpp"
#include "ws/net/vlan.hpp"
#include "ws/testing/shell.hpp"

namespace ws {
namespace {

class GsoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"gso_test", 64u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    auto p = PktmbufPool::create(*arena_, {.name = "gso_in", .count = 256, .cache_size = 0, .data_room_bytes = 9216});
    ASSERT_TRUE(p.has_value()) << p.error().message;
    in_pool_ = std::move(*p);
    p = PktmbufPool::create(*arena_, {.name = "gso_hdr", .count = 1024, .cache_size = 0, .data_room_bytes = 256});
    ASSERT_TRUE(p.has_value());
    hdr_pool_ = std::move(*p);
    p = PktmbufPool::create(*arena_, {.name = "gso_ind", .count = 1024, .cache_size = 0, .data_room_bytes = 128});
    ASSERT_TRUE(p.has_value());
    ind_pool_ = std::move(*p);
  }
  void TearDown() override {
    EXPECT_EQ(in_pool_->in_use(), 0u);
    EXPECT_EQ(hdr_pool_->in_use(), 0u);
    EXPECT_EQ(ind_pool_->in_use(), 0u);
  }

  // `bytes` as a packet, split into segments of at most `seg_bytes`.
  Mbuf* packet(const std::vector<std::uint8_t>& bytes, std::size_t seg_bytes) {
    Mbuf* head = nullptr;
    for (std::size_t from = 0; from < bytes.size(); from += seg_bytes) {
      const std::size_t n = std::min(seg_bytes, bytes.size() - from);
      Mbuf* m = in_pool_->alloc();
      if (m == nullptr) std::abort();  // the pool is sized for every test
      std::memcpy(m->append(static_cast<std::uint16_t>(n)), bytes.data() + from, n);
      if (head)
        head->chain(m);
      else
        head = m;
    }
    if (head == nullptr) std::abort();  // callers pass non-empty frames
    return head;
  }

  static std::vector<std::uint8_t> bytes_of(const Mbuf& m) {
    std::vector<std::uint8_t> v(m.pkt_len);
    copy_front(m, v);
    return v;
  }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> in_pool_, hdr_pool_, ind_pool_;
};

// Writes frames in the classic pcap format (no libpcap needed to write it).
void write_pcap(const std::string& path, const std::vector<std::vector<std::uint8_t>>& frames) {
  std::ofstream f(path, std::ios::binary);
  const std::uint32_t global[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};  // v2.4, LINKTYPE_ETHERNET
  f.write(reinterpret_cast<const char*>(global), sizeof global);
  std::uint32_t sec = 1;
  for (const auto& fr : frames) {
    const std::uint32_t rec[4] = {sec++, 0, static_cast<std::uint32_t>(fr.size()),
                                  static_cast<std::uint32_t>(fr.size())};
    f.write(reinterpret_cast<const char*>(rec), sizeof rec);
    f.write(reinterpret_cast<const char*>(fr.data()), static_cast<std::streamsize>(fr.size()));
  }
}

// tshark's verdict per frame: one line per frame with the checksum statuses it computed
// (Wireshark: 1 = good, 0 = bad).
std::vector<std::string> tshark_verdicts(const std::string& pcap) {
  const std::string cmd = "tshark -r " + pcap +
                          " -o ip.check_checksum:TRUE -o tcp.check_checksum:TRUE -o udp.check_checksum:TRUE"
                          " -T fields -E separator=, -e ip.checksum.status -e tcp.checksum.status"
                          " -e udp.checksum.status 2>/dev/null";
  std::vector<std::string> lines;
  std::istringstream in(ws::testing::shell_output(cmd));
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

struct GsoCase {
  bool ipv6;
  std::uint8_t proto;
  std::uint32_t payload;
  std::uint16_t mss;
  std::size_t in_seg_bytes;  // input segment size (multi-segment input when < frame size)
};

TEST_F(GsoTest, SegmentsReassembleAndPassTshark) {
  const GsoCase cases[] = {
      {false, ip_proto_tcp, 8000, 1448, 9000}, {false, ip_proto_tcp, 5000, 1000, 1500},
      {true, ip_proto_tcp, 7001, 1440, 9000},  {true, ip_proto_tcp, 3001, 500, 700},
      {false, ip_proto_udp, 6000, 1472, 9000}, {true, ip_proto_udp, 4001, 1000, 999},
      {false, ip_proto_tcp, 1000, 1448, 9000},  // fits: returned alone
  };
  std::vector<std::vector<std::uint8_t>> capture;
  for (const auto& c : cases) {
    FrameSpec s;
    s.ipv6 = c.ipv6;
    s.l4_proto = c.proto;
    s.payload_bytes = c.payload;
    s.tcp_option_words = c.proto == ip_proto_tcp ? 3 : 0;
    s.tcp_flags = tcp_flag::ack | tcp_flag::psh | tcp_flag::fin | 0x80;
    s.tcp_seq = 0xfffff000;  // wraps during the run
    s.ip_id = 0xfffe;        // wraps too
    const BuiltFrame f = build_frame(s);
    Mbuf* m = packet(f.bytes, c.in_seg_bytes);
    m->l2_len = f.l2_len;
    m->l3_len = f.l3_len;
    m->l4_len = f.l4_len;
    m->tso_segsz = c.mss;
    m->ol_flags = (c.ipv6 ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum) |
                  (c.proto == ip_proto_tcp ? mbuf_flag::tx_tcp_seg : gso_flag::tx_udp_seg);
    Mbuf* segs[64];
    const std::uint32_t in_use_before = in_pool_->in_use();
    auto n = gso_segment(m, {hdr_pool_.get(), ind_pool_.get()}, segs);
    ASSERT_TRUE(n.has_value());
    const std::uint32_t expect_n = (c.payload + c.mss - 1) / c.mss;
    ASSERT_EQ(*n, expect_n);
    if (expect_n > 1) {
      EXPECT_EQ(in_pool_->in_use(), in_use_before) << "payload shared, not copied";
    }
    std::vector<std::uint8_t> payload;
    const std::size_t hdr = f.l2_len + f.l3_len + f.l4_len;
    for (std::uint16_t i = 0; i < *n; ++i) {
      auto b = bytes_of(*segs[i]);
      const std::size_t len = b.size() - hdr;
      EXPECT_EQ(len, std::min<std::size_t>(c.mss, c.payload - i * c.mss));
      payload.insert(payload.end(), b.begin() + static_cast<std::ptrdiff_t>(hdr), b.end());
      const PacketInfo info = classify(*segs[i]);
      const CksumStatus st = verify_checksums(*segs[i]);
      EXPECT_TRUE(st.l4_checked && st.l4_good) << "segment " << i;
      if (!c.ipv6) {
        EXPECT_TRUE(st.ip_checked && st.ip_good);
        const auto* ip = reinterpret_cast<const Ipv4Hdr*>(b.data() + f.l2_len);
        EXPECT_EQ(from_be16(ip->packet_id_be), static_cast<std::uint16_t>(0xfffe + (*n > 1 ? i : 0)));
        EXPECT_EQ(from_be16(ip->total_length_be), b.size() - f.l2_len);
      } else {
        const auto* ip = reinterpret_cast<const Ipv6Hdr*>(b.data() + f.l2_len);
        EXPECT_EQ(from_be16(ip->payload_len_be), b.size() - f.l2_len - 40);
      }
      if (c.proto == ip_proto_tcp) {
        const auto* th = reinterpret_cast<const TcpHdr*>(b.data() + info.l4_offset);
        EXPECT_EQ(from_be32(th->sent_seq_be), 0xfffff000u + i * c.mss);
        const bool last = i + 1 == *n;
        EXPECT_EQ((th->tcp_flags & tcp_flag::fin) != 0, last);
        EXPECT_EQ((th->tcp_flags & tcp_flag::psh) != 0, last);
        EXPECT_EQ((th->tcp_flags & 0x80) != 0, i == 0);
        EXPECT_TRUE(th->tcp_flags & tcp_flag::ack);
      } else {
        const auto* uh = reinterpret_cast<const UdpHdr*>(b.data() + info.l4_offset);
        EXPECT_EQ(from_be16(uh->dgram_len_be), 8 + len);
      }
      EXPECT_EQ(segs[i]->ol_flags & (mbuf_flag::tx_tcp_seg | gso_flag::tx_udp_seg | mbuf_flag::tx_l4_mask), 0u);
      capture.push_back(std::move(b));
    }
    EXPECT_EQ(payload, std::vector<std::uint8_t>(f.bytes.begin() + static_cast<std::ptrdiff_t>(hdr), f.bytes.end()));
    mbuf_free_bulk(std::span<Mbuf* const>(segs, *n));
  }
  // A control frame with a broken TCP checksum: proves tshark really checks.
  auto bad = capture.front();
  bad.back() ^= 0xff;
  capture.push_back(bad);

  WS_REQUIRE_TSHARK("the checksum cross-check with Wireshark");
  const std::string pcap = ::testing::TempDir() + "ws_gso_segments.pcap";
  write_pcap(pcap, capture);
  const auto verdicts = tshark_verdicts(pcap);
  ASSERT_EQ(verdicts.size(), capture.size());
  for (std::size_t i = 0; i + 1 < verdicts.size(); ++i) {
    EXPECT_EQ(verdicts[i].find('0'), std::string::npos) << "frame " << i + 1 << ": " << verdicts[i];
    EXPECT_NE(verdicts[i].find('1'), std::string::npos) << "frame " << i + 1 << ": " << verdicts[i];
  }
  EXPECT_NE(verdicts.back().find('0'), std::string::npos) << "tshark did not flag the broken control frame";
  std::remove(pcap.c_str());
}

// Checksums left to the port (as DPDK's GSO): the L4 field holds the pseudo-header sum, so a
// NIC summing the L4 bytes from there produces the right checksum.
TEST_F(GsoTest, ChecksumsLeftToThePort) {
  for (bool ipv6 : {false, true}) {
    for (std::uint8_t proto : {ip_proto_tcp, ip_proto_udp}) {
      FrameSpec s;
      s.ipv6 = ipv6;
      s.l4_proto = proto;
      s.payload_bytes = 3000;
      const BuiltFrame f = build_frame(s);
      Mbuf* m = packet(f.bytes, 9000);
      m->l2_len = f.l2_len;
      m->l3_len = f.l3_len;
      m->l4_len = f.l4_len;
      m->tso_segsz = 1000;
      m->ol_flags = (ipv6 ? mbuf_flag::tx_ipv6 : mbuf_flag::tx_ipv4) |
                    (proto == ip_proto_tcp ? mbuf_flag::tx_tcp_seg : gso_flag::tx_udp_seg);
      Mbuf* segs[8];
      auto n = gso_segment(m, {hdr_pool_.get(), ind_pool_.get(), false}, segs);
      ASSERT_TRUE(n.has_value());
      ASSERT_EQ(*n, 3);
      const std::size_t l4_off = f.l2_len + f.l3_len;
      const std::size_t field = l4_off + (proto == ip_proto_tcp ? 16 : 6);
      for (std::uint16_t i = 0; i < *n; ++i) {
        Mbuf* seg = segs[i];
        EXPECT_TRUE(seg->ol_flags & (proto == ip_proto_tcp ? mbuf_flag::tx_tcp_cksum : mbuf_flag::tx_udp_cksum));
        EXPECT_EQ((seg->ol_flags & mbuf_flag::tx_ip_cksum) != 0, !ipv6);
        auto b = bytes_of(*seg);
        // What the NIC does: sum the L4 bytes as they are (pseudo sum in the field), store ~sum.
        std::uint16_t nic = static_cast<std::uint16_t>(~fold_sum(raw_sum_scalar(b.data() + l4_off, b.size() - l4_off)));
        if (nic == 0 && proto == ip_proto_udp) nic = 0xffff;
        ASSERT_TRUE(apply_tx_checksums(*seg));
        b = bytes_of(*seg);
        std::uint16_t sw;
        std::memcpy(&sw, b.data() + field, 2);
        EXPECT_EQ(nic, sw) << "ipv6=" << ipv6 << " proto=" << int(proto) << " segment " << i;
        classify(*seg);
        EXPECT_TRUE(verify_checksums(*seg).l4_good);
      }
      mbuf_free_bulk(std::span<Mbuf* const>(segs, *n));
    }
  }
}

TEST_F(GsoTest, RefusesBadInputAndRunsDryCleanly) {
  const BuiltFrame f = build_frame({.l4_proto = ip_proto_tcp, .payload_bytes = 4000});
  Mbuf* m = packet(f.bytes, 9000);
  m->l2_len = f.l2_len;
  m->l3_len = f.l3_len;
  m->l4_len = f.l4_len;
  m->tso_segsz = 100;
  m->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_tcp_seg;
  Mbuf* segs[64];
  auto r = gso_segment(m, {hdr_pool_.get(), ind_pool_.get()}, std::span<Mbuf*>(segs, 8));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), GsoError::too_many_segments);
  // Run the header pool dry: the attempt fails and frees what it built.
  std::vector<Mbuf*> hold(hdr_pool_->mempool().count() - 10);
  ASSERT_TRUE(hdr_pool_->alloc_bulk(hold));
  r = gso_segment(m, {hdr_pool_.get(), ind_pool_.get()}, segs);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), GsoError::no_mbufs);
  EXPECT_EQ(ind_pool_->in_use(), 0u);
  EXPECT_EQ(hdr_pool_->in_use(), hold.size());
  mbuf_free_bulk(hold);
  m->l3_len = 0;
  r = gso_segment(m, {hdr_pool_.get(), ind_pool_.get()}, segs);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), GsoError::bad_headers);
  mbuf_free(m);
}

// What a port without offloads does before sending: tag and checksums in software.
TEST_F(GsoTest, TxOffloadsInSoftware) {
  const BuiltFrame f = build_frame({.l4_proto = ip_proto_tcp, .payload_bytes = 700});
  auto zeroed = f.bytes;
  std::memset(zeroed.data() + 14 + 10, 0, 2);       // IPv4 checksum
  std::memset(zeroed.data() + 14 + 20 + 16, 0, 2);  // TCP checksum
  Mbuf* m = packet(zeroed, 100);
  m->l2_len = 14;
  m->l3_len = 20;
  m->vlan_tci = 7;
  m->ol_flags = mbuf_flag::tx_vlan | mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_tcp_cksum;
  ASSERT_TRUE(apply_tx_offloads_sw(*m));
  EXPECT_EQ(m->ol_flags & (mbuf_flag::tx_vlan | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_l4_mask), 0u);
  const PacketInfo info = classify(*m);
  EXPECT_EQ(info.vlan_tci[0], 7);
  const CksumStatus st = verify_checksums(*m);
  EXPECT_TRUE(st.ip_good && st.l4_good);
  ASSERT_TRUE(vlan_strip(*m));
  EXPECT_EQ(bytes_of(*m), f.bytes);
  EXPECT_TRUE(apply_tx_offloads_sw(*m)) << "nothing requested";
  mbuf_free(m);
}

TEST_F(GsoTest, VlanInsertAndStrip) {
  const BuiltFrame f = build_frame({.l4_proto = ip_proto_udp});
  Mbuf* m = packet(f.bytes, 9000);
  m->vlan_tci = 0x0123;
  m->ol_flags = mbuf_flag::tx_vlan;
  ASSERT_TRUE(apply_tx_vlan(*m));
  EXPECT_EQ(m->pkt_len, f.bytes.size() + 4);
  EXPECT_FALSE(m->ol_flags & mbuf_flag::tx_vlan);
  const PacketInfo info = classify(*m);
  EXPECT_EQ(info.packet_type, ptype::l2_ether_vlan | ptype::l3_ipv4 | ptype::l4_udp);
  EXPECT_EQ(info.vlan_tci[0], 0x0123);
  m->vlan_tci = 0;
  ASSERT_TRUE(vlan_strip(*m));
  EXPECT_EQ(m->vlan_tci, 0x0123);
  EXPECT_TRUE(m->ol_flags & mbuf_flag::rx_vlan_stripped);
  EXPECT_EQ(bytes_of(*m), f.bytes);
  EXPECT_FALSE(vlan_strip(*m)) << "no tag left";
  // A clone shares the buffer: inserting into it would change the original, so it refuses.
  Mbuf* c = in_pool_->clone(m);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(vlan_insert(*c));
  EXPECT_FALSE(vlan_insert(*m)) << "the original has two references now";
  mbuf_free(c);
  mbuf_free(m);
}

}  // namespace
}  // namespace ws
