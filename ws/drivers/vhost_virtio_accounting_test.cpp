// SPDX-License-Identifier: BSD-3-Clause
// net_vhost and virtio_user in one process, joined by their socket: each drop path of either side
// (no mbufs, no room in the peer's ring, a packet the peer cannot take, a packet too long to
// post) is counted where it happens and nowhere else, and what one side sent the other received.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

class VhostVirtioAccounting : public ws::testing::PortFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(open_arena("accounting", 96u << 20));
    char dir[] = "/tmp/ws-acct-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    sock_ = dir_ + "/vhost.sock";
    vhost_pool_ = pool("vhost", 96);  // fewer than a ring of packets: RX runs dry
    virtio_rx_pool_ = pool("virtio_rx", 1024);
    gen_pool_ = pool("gen", 2048);  // the packets the test sends, from either side
  }
  void TearDown() override {
    for (Port* p : {virtio_.get(), vhost_.get()})
      if (p != nullptr) {
        p->stop();
        p->release_mbufs();
      }
    virtio_.reset();
    vhost_.reset();
    EXPECT_EQ(vhost_pool_->in_use(), 0u);
    EXPECT_EQ(virtio_rx_pool_->in_use(), 0u);
    EXPECT_EQ(gen_pool_->in_use(), 0u);
    ::rmdir(dir_.c_str());
  }

  std::unique_ptr<PktmbufPool> pool(const char* name, std::uint32_t count) {
    PktmbufPool::Options o;
    o.name = name;
    o.count = count;
    o.cache_size = 0;  // the test thread is no lcore: counts must be exact
    auto p = PktmbufPool::create(*arena_, o);
    EXPECT_TRUE(p.has_value()) << p.error().message;
    return std::move(*p);
  }

  // Both ports started and the vhost side ready (the frontend negotiated).
  void start(const std::string& virtio_keys) {
    vhost_ = create("net_vhost0,iface=" + sock_);
    ASSERT_NE(vhost_, nullptr);
    ASSERT_TRUE(vhost_->configure({}));
    ASSERT_TRUE(vhost_->setup_rx_queue(0, {0, vhost_pool_.get()}));
    ASSERT_TRUE(vhost_->setup_tx_queue(0, {}));
    ASSERT_TRUE(vhost_->start());
    virtio_ = create("virtio_user0,path=" + sock_ + virtio_keys);
    ASSERT_NE(virtio_, nullptr);
    ASSERT_TRUE(virtio_->configure({}));
    ASSERT_TRUE(virtio_->setup_rx_queue(0, {0, virtio_rx_pool_.get()}));
    ASSERT_TRUE(virtio_->setup_tx_queue(0, {}));
    auto ok = virtio_->start();
    ASSERT_TRUE(ok) << ok.error().message;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!vhost_->link().up && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(vhost_->link().up);
  }

  // `count` packets of `len` bytes from the generator pool; `segs` segments each.
  std::vector<Mbuf*> packets(std::uint32_t count, std::uint16_t len = 64, std::uint16_t segs = 1) {
    std::vector<Mbuf*> out;
    for (std::uint32_t i = 0; i < count; ++i) {
      Mbuf* head = nullptr;
      Mbuf* tail = nullptr;
      for (std::uint16_t s = 0; s < segs; ++s) {
        Mbuf* m = gen_pool_->alloc();
        EXPECT_NE(m, nullptr);
        m->data_len = len;
        std::memset(m->data(), static_cast<int>(i), len);
        if (head == nullptr) {
          head = tail = m;
        } else {
          tail->next = m;
          tail = m;
          ++head->nb_segs;
        }
        head->pkt_len = static_cast<std::uint32_t>(len) * (s + 1u);
      }
      out.push_back(head);
    }
    return out;
  }

  // tx_burst of `pkts` in bursts of 32 on `port`; what it does not take is freed (the
  // application's drop). Returns how many it took.
  static std::uint32_t send_all(Port& port, std::vector<Mbuf*>& pkts, std::uint32_t& app_dropped) {
    std::uint32_t taken = 0;
    for (std::size_t at = 0; at < pkts.size(); at += 32) {
      const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(32, pkts.size() - at));
      const std::uint16_t k = port.tx_burst(0, pkts.data() + at, n);
      taken += k;
      mbuf_free_bulk(std::span<Mbuf* const>(pkts.data() + at + k, n - k));
      app_dropped += n - k;
    }
    pkts.clear();
    return taken;
  }

  // rx_burst until nothing has come for a while; received mbufs are kept in `held` (or freed
  // at once when it is null).
  static std::uint32_t receive_all(Port& port, std::vector<Mbuf*>* held) {
    std::uint32_t got = 0;
    for (int idle = 0; idle < 200;) {
      Mbuf* pkts[32];
      const std::uint16_t k = port.rx_burst(0, pkts, 32);
      if (held != nullptr) {
        held->insert(held->end(), pkts, pkts + k);
      } else {
        mbuf_free_bulk(std::span<Mbuf* const>(pkts, k));
      }
      got += k;
      if (k == 0) {
        ++idle;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      } else {
        idle = 0;
      }
    }
    return got;
  }
  static void free_all(std::vector<Mbuf*>& held) {
    mbuf_free_bulk(std::span<Mbuf* const>(held.data(), held.size()));
    held.clear();
  }

  std::string dir_, sock_;
  std::unique_ptr<PktmbufPool> vhost_pool_, virtio_rx_pool_, gen_pool_;
  std::unique_ptr<Port> vhost_, virtio_;
};

// virtio_user sends a ring's worth into a vhost side whose pool runs dry: the packets wait in
// the ring (virtio_user's TX takes no more once it is full: the application drops those), vhost
// counts the mbufs it lacked in rx_nombuf, and once mbufs come back every packet taken arrives.
TEST_F(VhostVirtioAccounting, NoMbufsOnTheVhostSideLosesNothingTakenAndCountsMbufs) {
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256"));
  auto pkts = packets(400);
  std::uint32_t app_dropped = 0;
  const std::uint32_t taken = send_all(*virtio_, pkts, app_dropped);
  EXPECT_EQ(taken + app_dropped, 400u);
  EXPECT_GT(app_dropped, 0u) << "a 256-descriptor ring cannot take 400 packets at once";
  std::vector<Mbuf*> held;
  const std::uint32_t first = receive_all(*vhost_, &held);  // until the vhost pool is dry
  EXPECT_LT(first, taken);
  // The pool is dry and nothing is on hand: one more burst of 32 lacks exactly 32 mbufs.
  const std::uint64_t nombuf = vhost_->stats().rx_nombuf;
  EXPECT_GT(nombuf, 0u);
  Mbuf* none[32];
  EXPECT_EQ(vhost_->rx_burst(0, none, 32), 0);
  EXPECT_EQ(vhost_->stats().rx_nombuf, nombuf + 32) << "rx_nombuf counts mbufs, not bursts";
  free_all(held);
  const std::uint32_t rest = receive_all(*vhost_, nullptr);
  EXPECT_EQ(first + rest, taken) << "every packet virtio_user took reached the vhost side";

  const PortStats v = virtio_->stats(), h = vhost_->stats();
  EXPECT_EQ(v.opackets, taken);
  EXPECT_EQ(v.oerrors, 0u);
  EXPECT_EQ(h.ipackets, taken);
  EXPECT_EQ(h.ierrors, 0u);
}

// vhost sends into a virtio_user whose RX pool runs dry: vhost takes what the frontend's RX ring
// has buffers for, the rest is the application's drop; virtio_user counts the mbufs it could not
// post in rx_nombuf; what vhost sent is what virtio_user received.
TEST_F(VhostVirtioAccounting, NoBuffersOnTheVirtioSideIsAFullRingForVhost) {
  virtio_rx_pool_ = pool("virtio_rx_small", 100);  // fewer than its ring: refills fall short
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256"));
  EXPECT_GT(virtio_->stats().rx_nombuf, 0u) << "the first fill lacked mbufs";
  auto pkts = packets(300);
  std::uint32_t app_dropped = 0;
  const std::uint32_t taken = send_all(*vhost_, pkts, app_dropped);
  EXPECT_LE(taken, 100u) << "no more than the buffers the frontend posted";
  EXPECT_EQ(taken + app_dropped, 300u);
  const std::uint32_t got = receive_all(*virtio_, nullptr);
  EXPECT_EQ(got, taken);
  const PortStats v = virtio_->stats(), h = vhost_->stats();
  EXPECT_EQ(h.opackets, taken);
  EXPECT_EQ(h.oerrors, 0u);
  EXPECT_EQ(v.ipackets, taken);
}

// The names dpdk-testpmd 22.11 prints for `show port xstats` of net_virtio_user and net_vhost,
// in its order, ahead of ours; and the size bins and multicast/broadcast counts of the traffic
// both ways. net_vhost's iotlb_* and inflight_* are left out: no IOTLB or inflight tracking here.
TEST_F(VhostVirtioAccounting, XstatsCarryDpdksNamesAndClasses) {
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256"));
  const std::vector<std::string> classes = {"multicast_packets",    "broadcast_packets",     "undersize_packets",
                                            "size_64_packets",      "size_65_127_packets",   "size_128_255_packets",
                                            "size_256_511_packets", "size_512_1023_packets", "size_1024_1518_packets",
                                            "size_1519_max_packets"};
  const std::vector<std::string> generic = {"rx_good_packets", "tx_good_packets",          "rx_good_bytes",
                                            "tx_good_bytes",   "rx_missed_errors",         "rx_errors",
                                            "tx_errors",       "rx_mbuf_allocation_errors"};
  std::vector<std::string> virtio = generic;
  for (const char* dir : {"rx", "tx"}) {
    const std::string p = std::string(dir) + "_q0_";
    virtio.push_back(p + "good_packets");
    virtio.push_back(p + "good_bytes");
    if (dir == std::string("rx")) virtio.push_back(p + "errors");
    for (const auto& c : classes) virtio.push_back(p + c);
  }
  std::vector<std::string> vhost = generic;
  for (const char* n : {"rx_q0_packets", "rx_q0_bytes", "rx_q0_errors", "tx_q0_packets", "tx_q0_bytes"})
    vhost.push_back(n);
  for (const char* dir : {"rx", "tx"}) {
    const std::string p = std::string(dir) + "_q0_";
    vhost.push_back(p + "good_packets");
    vhost.push_back(p + "good_bytes");
    for (const auto& c : classes) vhost.push_back(p + c);
    vhost.push_back(p + "guest_notifications");
  }
  ASSERT_EQ(virtio.size(), 33u) << "dpdk-testpmd 22.11, net_virtio_user, one queue pair";
  ASSERT_EQ(vhost.size(), 47u - 8u) << "dpdk-testpmd 22.11, net_vhost, one queue pair, less iotlb/inflight";

  // Lengths at the bins' edges; every third broadcast, every third but one multicast.
  const std::uint16_t lens[] = {60, 64, 65, 127, 128, 255, 256, 511, 512, 1023, 1024, 1518, 1519, 1800};
  auto make = [&] {
    std::vector<Mbuf*> v;
    for (std::size_t i = 0; i < std::size(lens); ++i) {
      Mbuf* m = packets(1, lens[i])[0];
      std::uint8_t* d = m->data<std::uint8_t>();
      const std::uint8_t dst[3][6] = {{2, 0, 0, 0, 0, 2}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, {1, 0, 0x5e, 0, 0, 1}};
      std::memcpy(d, dst[i % 3], 6);
      v.push_back(m);
    }
    return v;
  };
  const std::map<std::string, std::uint64_t> want = {
      {"multicast_packets", 4},     {"broadcast_packets", 5},         {"undersize_packets", 1},
      {"size_64_packets", 1},       {"size_65_127_packets", 2},       {"size_128_255_packets", 2},
      {"size_256_511_packets", 2},  {"size_512_1023_packets", 2},     {"size_1024_1518_packets", 2},
      {"size_1519_max_packets", 2}, {"good_packets", std::size(lens)}};
  auto check = [&](const Port& port, const std::vector<std::string>& names, const char* dir) {
    const auto x = port.xstats();
    ASSERT_GE(x.size(), names.size());
    std::map<std::string, std::uint64_t> by_name;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i < names.size()) EXPECT_EQ(x[i].name, names[i]) << port.name() << " #" << i;
      EXPECT_TRUE(by_name.emplace(x[i].name, x[i].value).second) << port.name() << ": " << x[i].name << " twice";
    }
    for (const auto& [n, v] : want)
      EXPECT_EQ(by_name[std::string(dir) + "_q0_" + n], v) << port.name() << " " << dir << " " << n;
  };

  auto pkts = make();
  std::uint32_t dropped = 0;
  ASSERT_EQ(send_all(*virtio_, pkts, dropped), std::size(lens));
  ASSERT_EQ(receive_all(*vhost_, nullptr), std::size(lens));
  pkts = make();
  ASSERT_EQ(send_all(*vhost_, pkts, dropped), std::size(lens));
  ASSERT_EQ(receive_all(*virtio_, nullptr), std::size(lens));
  check(*virtio_, virtio, "tx");
  check(*virtio_, virtio, "rx");
  check(*vhost_, vhost, "rx");
  check(*vhost_, vhost, "tx");
}

// Taken but not sent: errors, never counted as sent. virtio_user cannot post a packet of more
// segments than a chain may hold; net_vhost cannot fit a packet into buffers too small for it
// (no MRG_RXBUF). Each is dropped, counted in oerrors, and the peer sees nothing of it.
TEST_F(VhostVirtioAccounting, PacketsThePeerCannotTakeAreErrorsNotSent) {
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256,mrg_rxbuf=0"));
  auto long_chain = packets(1, 16, 64);  // 64 segments: more than 63 a chain takes with its header
  auto normal = packets(3);
  long_chain.insert(long_chain.end(), normal.begin(), normal.end());
  std::uint32_t app_dropped = 0;
  EXPECT_EQ(send_all(*virtio_, long_chain, app_dropped), 4u) << "taken (one dropped)";
  EXPECT_EQ(receive_all(*vhost_, nullptr), 3u);
  PortStats v = virtio_->stats();
  EXPECT_EQ(v.opackets, 3u) << "the dropped packet is not counted as sent";
  EXPECT_EQ(v.oerrors, 1u);
  // Three 1500-byte segments: 4500 bytes, more than one RX buffer, and no MRG_RXBUF.
  auto too_big = packets(1, 1500, 3);
  auto after = packets(2);
  too_big.insert(too_big.end(), after.begin(), after.end());
  EXPECT_EQ(send_all(*vhost_, too_big, app_dropped), 3u);
  EXPECT_EQ(receive_all(*virtio_, nullptr), 2u);
  const PortStats h = vhost_->stats();
  EXPECT_EQ(h.opackets, 2u);
  EXPECT_EQ(h.oerrors, 1u);
  EXPECT_EQ(virtio_->stats().ipackets, 2u);
  EXPECT_EQ(app_dropped, 0u);
}

// A stop gives the device a moment to send what TX took: the vhost side starts polling only
// after the stop has begun, and still receives every packet; nothing is counted as an error.
TEST_F(VhostVirtioAccounting, StopWaitsForTheDeviceToSendWhatTxTook) {
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256"));
  auto pkts = packets(64);
  std::uint32_t app_dropped = 0;
  ASSERT_EQ(send_all(*virtio_, pkts, app_dropped), 64u);
  std::uint32_t got = 0;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    got = receive_all(*vhost_, nullptr);
  });
  virtio_->stop();
  late.join();
  virtio_->release_mbufs();
  EXPECT_EQ(got, 64u);
  const PortStats v = virtio_->stats();
  EXPECT_EQ(v.opackets, 64u);
  EXPECT_EQ(v.oerrors, 0u);
}

// A device that never sends them does not hold the stop for long, and the packets it held,
// counted sent when TX took them, are counted as errors when the stop drops them.
TEST_F(VhostVirtioAccounting, StopDropsAndCountsWhatTheDeviceNeverSent) {
  ASSERT_NO_FATAL_FAILURE(start(",queue_size=256"));
  auto pkts = packets(40);
  std::uint32_t app_dropped = 0;
  ASSERT_EQ(send_all(*virtio_, pkts, app_dropped), 40u);
  const auto before = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStderr();
  virtio_->stop();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(2));
  EXPECT_NE(said.find("did not send 40 TX packets within 200 ms of the stop"), std::string::npos) << said;
  virtio_->release_mbufs();
  const PortStats v = virtio_->stats();
  EXPECT_EQ(v.opackets, 40u);
  EXPECT_EQ(v.oerrors, 40u) << "taken, never sent: dropped at the stop";
  EXPECT_EQ(vhost_->stats().ipackets, 0u);
}

// Forwarding, as testpmd's io mode does: what vhost sent comes back through virtio_user's TX,
// each header pushed where the RX one was. The header's num_buffers (1, from net_vhost with
// MRG_RXBUF) is zeroed on TX, or kept with keep_num_buffers=1; either way every packet arrives
// back whole.
TEST_F(VhostVirtioAccounting, ForwardedPacketsKeepNumBuffersOnlyWhenAsked) {
  for (const bool keep : {false, true}) {
    SCOPED_TRACE(keep ? "keep_num_buffers=1" : "keep_num_buffers=0");
    ASSERT_NO_FATAL_FAILURE(start(keep ? ",keep_num_buffers=1" : ""));
    auto pkts = packets(64);
    std::uint32_t app_dropped = 0;
    ASSERT_EQ(send_all(*vhost_, pkts, app_dropped), 64u);
    std::vector<Mbuf*> held;
    ASSERT_EQ(receive_all(*virtio_, &held), 64u);
    auto num_buffers = [](const Mbuf* m) {
      std::uint16_t v;
      std::memcpy(&v, m->data() - 2, sizeof v);  // the header's last field, just before the frame
      return v;
    };
    EXPECT_EQ(num_buffers(held[0]), 1u) << "net_vhost writes it on RX";
    std::uint32_t forwarded = 0;
    for (std::size_t at = 0; at < held.size(); at += 32) forwarded += virtio_->tx_burst(0, held.data() + at, 32);
    ASSERT_EQ(forwarded, 64u);
    // The ring holds the mbufs until a later burst reclaims them: their headers are as sent.
    EXPECT_EQ(num_buffers(held[0]), keep ? 1u : 0u);
    EXPECT_EQ(num_buffers(held[63]), keep ? 1u : 0u);
    std::vector<Mbuf*> back;
    ASSERT_EQ(receive_all(*vhost_, &back), 64u);
    for (std::uint32_t i = 0; i < back.size(); ++i) {
      ASSERT_EQ(back[i]->pkt_len, 64u);
      EXPECT_EQ(back[i]->data<std::uint8_t>()[63], static_cast<std::uint8_t>(i)) << "packet " << i;
    }
    free_all(back);
    EXPECT_EQ(virtio_->stats().oerrors, 0u);
    EXPECT_EQ(vhost_->stats().ierrors, 0u);
    for (Port* p : {virtio_.get(), vhost_.get()}) {
      p->stop();
      p->release_mbufs();
    }
    virtio_.reset();
    vhost_.reset();
  }
}

}  // namespace
}  // namespace ws
