// SPDX-License-Identifier: BSD-3-Clause
// net_memif without a peer process: the control messages and both handshakes (order, limits,
// secrets), the client's layout, the device keys, and the rings against a peer that scribbles
// (indices that jump, descriptors outside the regions, lengths past the buffer), ours with ours
// in one process through a region both queues see.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ws/drivers/memif/memif_proto.hpp"
#include "ws/drivers/memif/memif_rxtx.hpp"
#include "ws/testing/port_fixture.hpp"

namespace ws {
namespace {

using namespace memif;
using memif_pmd::MemifRing;
using memif_pmd::RingError;

Message of(MsgType t) {
  Message m;
  m.type = t;
  return m;
}

Message add_ring(bool c2s, std::uint16_t index, std::uint32_t offset, std::uint8_t log2 = 4) {
  Message m = of(MsgType::add_ring);
  m.add_ring = {static_cast<std::uint16_t>(c2s ? add_ring_flag_c2s : 0), index, 0, offset, log2, 0};
  return m;
}

TEST(MemifProto, MessagesRoundTripAndStrangersAreRefused) {
  Message m = add_ring(true, 3, 4096, 10);
  auto back = decode(encode(m));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->type, MsgType::add_ring);
  EXPECT_EQ(+back->add_ring.offset, 4096u);
  EXPECT_EQ(+back->add_ring.log2_ring_size, 10);
  auto bytes = encode(m);
  EXPECT_NE(decode(std::span(bytes).first(127)).error().message.find("127 bytes"), std::string::npos);
  bytes[0] = std::byte{42};
  EXPECT_NE(decode(bytes).error().message.find("unknown type 42"), std::string::npos);
}

class Server : public ::testing::Test {
 protected:
  ServerSession s{{7, "", 2, 2, "ours"}};
  Message init() {
    Message m = of(MsgType::init);
    m.init.version = version;
    m.init.id = 7;
    return m;
  }
  void to_setup() {
    ASSERT_TRUE(s.on_message(init(), false).has_value());
    Message r = of(MsgType::add_region);
    r.add_region = {0, 1 << 20};
    ASSERT_TRUE(s.on_message(r, true).has_value());
  }
};

TEST_F(Server, TheHandshakeInDpdksOrder) {
  EXPECT_EQ(+s.hello().hello.max_c2s_ring, 1);  // our two RX queues, less one
  ASSERT_NO_FATAL_FAILURE(to_setup());
  ASSERT_TRUE(s.on_message(add_ring(true, 0, 0), true).has_value());
  ASSERT_TRUE(s.on_message(add_ring(false, 0, 4096), true).has_value());
  auto c = s.on_message(of(MsgType::connect), false);
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_TRUE(c->connected);
  EXPECT_EQ(c->reply->type, MsgType::connected);
}

TEST_F(Server, OutOfOrderAndBadValuesAreRefusedWithTheReason) {
  auto early = s.on_message(add_ring(true, 0, 0), true);
  EXPECT_NE(early.error().message.find("out of order (expected INIT)"), std::string::npos);
  Message wrong = init();
  wrong.init.id = 8;
  EXPECT_NE(s.on_message(wrong, false).error().message.find("expected id 7"), std::string::npos);
  ASSERT_NO_FATAL_FAILURE(to_setup());
  EXPECT_NE(s.on_message(init(), false).error().message.find("INIT out of order"), std::string::npos);
  EXPECT_NE(s.on_message(add_ring(true, 2, 0), true).error().message.find("below 2"), std::string::npos);
  EXPECT_NE(s.on_message(add_ring(true, 0, 0), false).error().message.find("without its interrupt fd"),
            std::string::npos);
  EXPECT_NE(s.on_message(add_ring(true, 0, (1 << 20) - 64), true).error().message.find("past region 0"),
            std::string::npos);
  EXPECT_NE(s.on_message(add_ring(true, 0, 8), true).error().message.find("16-byte aligned"), std::string::npos);
  EXPECT_NE(s.on_message(add_ring(true, 0, 0, 15), true).error().message.find("2^15"), std::string::npos);
  ASSERT_TRUE(s.on_message(add_ring(true, 0, 0), true).has_value());
  EXPECT_NE(s.on_message(add_ring(true, 0, 0), true).error().message.find("twice"), std::string::npos);
  EXPECT_NE(s.on_message(of(MsgType::connect), false).error().message.find("each direction"), std::string::npos);
  Message region = of(MsgType::add_region);
  region.add_region = {5, 4096};
  EXPECT_NE(s.on_message(region, true).error().message.find("expected region 1"), std::string::npos);
}

TEST(MemifProto, ASecretIsCheckedWhenTheServerHasOne) {
  ServerSession s{{0, "sesame", 1, 1, "ours"}};
  Message m = of(MsgType::init);
  m.init.version = version;
  EXPECT_NE(s.on_message(m, false).error().message.find("without a secret"), std::string::npos);
  std::memcpy(m.init.secret, "sesamx", 6);
  EXPECT_NE(s.on_message(m, false).error().message.find("incorrect secret"), std::string::npos);
  std::memcpy(m.init.secret, "sesame", 6);
  EXPECT_TRUE(s.on_message(m, false).has_value());
}

TEST(MemifProto, TheClientSendsRegionRingsAndConnectOnePerAck) {
  ClientSession c{{3, "", 2, 1, 12, 2048, "ours"}};
  Message hello = of(MsgType::hello);
  hello.hello = {{}, version, version, 255, 0, 255, 10};  // the server: one S2C ring, 2^10 at most
  auto first = c.on_message(hello);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  EXPECT_EQ(first->reply->type, MsgType::init);
  EXPECT_EQ(+first->reply->init.id, 3u);
  EXPECT_EQ(c.layout().c2s, 2);
  EXPECT_EQ(c.layout().s2c, 1);
  EXPECT_EQ(c.layout().log2_ring_size, 10);
  std::vector<MsgType> sent;
  for (int i = 0; i < 5; ++i) {
    auto s = c.on_message(of(MsgType::ack));
    ASSERT_TRUE(s.has_value());
    sent.push_back(s->reply->type);
    if (s->reply->type == MsgType::add_ring) {
      EXPECT_EQ(+s->reply->add_ring.offset, c.layout().ring_offset(s->fd_index >= 2, s->fd_index % 2));
    }
  }
  EXPECT_EQ(sent, (std::vector{MsgType::add_region, MsgType::add_ring, MsgType::add_ring, MsgType::add_ring,
                               MsgType::connect}));
  EXPECT_FALSE(c.on_message(of(MsgType::ack)).has_value());  // nothing left to acknowledge
  EXPECT_TRUE(c.on_message(of(MsgType::connected))->connected);
}

TEST(MemifProto, LayoutsBeyondThirtyTwoBitOffsetsAreRefused) {
  EXPECT_TRUE(make_layout(10, 1, 1, 2048).has_value());
  EXPECT_FALSE(make_layout(14, 64, 64, 65535).has_value());
}

// ---- rings: a region in our memory, a hostile peer played by the test ----

class Rings : public testing::PortFixture {
 protected:
  static constexpr std::uint8_t log2 = 4;
  void SetUp() override {
    open_arena_and_pool("memif_test", 4u << 20, {.count = 256, .cache_size = 0});
    layout_ = *make_layout(log2, 1, 1, 2048);
    mem_.assign(layout_.region_bytes() + 64, std::byte{0});
    base_ = mem_.data() + (64 - reinterpret_cast<std::uintptr_t>(mem_.data()) % 64) % 64;
    region_ = {base_, layout_.region_bytes()};
  }
  // Server-side queue over the C2S ring; descriptors point into the region.
  void server_rx(memif_pmd::MemifRx<true>& q) {
    attach(q.ring, false);
    q.ring.regions = &region_;
    q.ring.region_count = 1;
    q.pool = pool_.get();
  }
  void client_tx(memif_pmd::MemifTx<false>& q) {
    attach(q.ring, false);
    q.ring.buffer_bytes = 2048;
    q.ring.buffer_offset = static_cast<std::uint32_t>(layout_.buffer_offset(false, 0));
    q.ring.buffers = base_ + q.ring.buffer_offset;
  }
  void attach(MemifRing& r, bool s2c) {
    r.header = reinterpret_cast<RingHeader*>(base_ + layout_.ring_offset(s2c, 0));
    r.desc = reinterpret_cast<Desc*>(reinterpret_cast<std::byte*>(r.header) + sizeof(RingHeader));
    r.mask = (1u << log2) - 1;
    r.gate.open();
  }
  std::vector<Mbuf*> packets(std::size_t n, std::uint16_t len) {
    std::vector<Mbuf*> v(n);
    EXPECT_TRUE(pool_->alloc_bulk(v));
    for (Mbuf* m : v) std::memset(m->append(len), 0xab, len);
    return v;
  }
  Layout layout_;
  std::vector<std::byte> mem_;
  std::byte* base_ = nullptr;
  memif_pmd::Region region_;
};

TEST_F(Rings, OursToOursThroughTheSharedRing) {
  memif_pmd::MemifTx<false> tx;
  memif_pmd::MemifRx<true> rx;
  client_tx(tx);
  server_rx(rx);
  auto pkts = packets(20, 1500);
  EXPECT_EQ(tx.tx_burst(pkts.data(), 20), 16);  // the ring holds 16
  Mbuf* got[32];
  EXPECT_EQ(rx.rx_burst(got, 32), 16);
  EXPECT_EQ(got[0]->pkt_len, 1500u);
  EXPECT_EQ(got[15]->data<std::uint8_t>()[1499], 0xab);
  mbuf_free_bulk(std::span<Mbuf* const>(got, 16));
  EXPECT_EQ(tx.tx_burst(pkts.data() + 16, 4), 4);
  EXPECT_EQ(rx.rx_burst(got, 32), 4);
  mbuf_free_bulk(std::span<Mbuf* const>(got, 4));
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(Rings, AServerBreaksOnAHeadThatJumpsOrADescriptorOutsideTheRegion) {
  for (int kind = 0; kind < 3; ++kind) {
    memif_pmd::MemifRx<true> rx;
    server_rx(rx);
    Desc* d = rx.ring.desc;
    d[0] = {0, 0, 64, static_cast<std::uint32_t>(layout_.buffer_offset(false, 0)), 0};
    if (kind == 1) d[0].region = 1;
    if (kind == 2) d[0].offset = static_cast<std::uint32_t>(layout_.region_bytes() - 32);
    rx.ring.header->head = kind == 0 ? 17 : 1;  // 17 filled slots in a ring of 16
    Mbuf* got[32];
    EXPECT_EQ(rx.rx_burst(got, 32), 0);
    EXPECT_TRUE(rx.ring.broken.load());
    const RingError want[] = {RingError::index_jump, RingError::bad_region, RingError::bad_buffer};
    EXPECT_EQ(rx.ring.errors[static_cast<int>(want[kind])].read(), 1u);
    EXPECT_EQ(rx.rx_burst(got, 32), 0);  // broken stays broken until the connection goes
    EXPECT_EQ(pool_->in_use(), 0u);
  }
}

TEST_F(Rings, AClientBreaksOnATailPastItsHeadAndALengthPastTheBuffer) {
  memif_pmd::MemifTx<false> tx;
  client_tx(tx);
  auto pkts = packets(2, 64);
  ASSERT_EQ(tx.tx_burst(pkts.data(), 2), 2);
  tx.ring.header->tail = 3;  // the server claims a slot we never filled
  auto more = packets(1, 64);
  EXPECT_EQ(tx.tx_burst(more.data(), 1), 0);
  EXPECT_EQ(tx.ring.errors[static_cast<int>(RingError::index_jump)].read(), 1u);
  mbuf_free_bulk(more);

  memif_pmd::MemifRx<false> rx;
  attach(rx.ring, true);
  rx.ring.buffer_bytes = 2048;
  rx.ring.buffers = base_ + layout_.buffer_offset(true, 0);
  rx.pool = pool_.get();
  Mbuf* got[32];
  EXPECT_EQ(rx.rx_burst(got, 32), 0);  // hands every buffer over
  EXPECT_EQ(rx.ring.header->head, 16);
  rx.ring.desc[0].length = 4096;  // past our 2048-byte buffer
  rx.ring.header->tail = 1;
  EXPECT_EQ(rx.rx_burst(got, 32), 0);
  EXPECT_EQ(rx.ring.errors[static_cast<int>(RingError::bad_length)].read(), 1u);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(Rings, DeviceKeysAreDpdksAndRefusalsNameTheKey) {
  EXPECT_NE(create_error("net_memif0,zero-copy=yes").find("key 'zero-copy'"), std::string::npos);
  EXPECT_NE(create_error("net_memif0,rsize=15").find("rsize"), std::string::npos);
  EXPECT_NE(create_error("net_memif0,role=both").find("expected server or client"), std::string::npos);
  EXPECT_NE(create_error("net_memif0,mac=zz").find("key 'mac'"), std::string::npos);
  EXPECT_NE(create_error("net_memif0,secret=0123456789abcdef01234567").find("23 at most"), std::string::npos);
  EXPECT_NE(create_error("net_memif0,ring-size=10").find("rsize"), std::string::npos);  // the known keys listed
  auto port = create("net_memif0,role=client,socket=/nonexistent/memif.sock,socket-abstract=no,mac=02:00:00:00:00:01");
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->mac().to_string(), "02:00:00:00:00:01");
  EXPECT_FALSE(port->link().up);
}

}  // namespace
}  // namespace ws
