// SPDX-License-Identifier: BSD-3-Clause
// Mbuf and PktmbufPool: the state alloc hands out, append/prepend/adj/trim bounds, chains,
// clones (indirect mbufs sharing a direct buffer), reference counts, and bulk free across pools.
// Every test ends by proving through in_use() that nothing leaked.
#include "ws/core/mbuf.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace ws {
namespace {

class MbufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = Arena::create({"mbuf_test", 8u << 20, HugePolicy::never});
    ASSERT_TRUE(a.has_value()) << a.error().message;
    arena_ = std::move(*a);
    pool_ = make("pool_a", 64);
    ASSERT_TRUE(pool_);
  }
  void TearDown() override { set_lcore_id(no_lcore); }

  std::unique_ptr<PktmbufPool> make(std::string name, std::uint32_t count, std::uint16_t priv = 0) {
    PktmbufPool::Options o;
    o.name = std::move(name);
    o.count = count;
    o.cache_size = count >= 8 ? 8 : 0;
    o.priv_bytes = priv;
    auto p = PktmbufPool::create(*arena_, o);
    EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
    return p ? std::move(*p) : nullptr;
  }

  // A one-segment packet holding `len` bytes of `fill`.
  Mbuf* packet(PktmbufPool& pool, std::uint16_t len, std::uint8_t fill) {
    Mbuf* m = pool.alloc();
    EXPECT_NE(m, nullptr);
    if (!m) return nullptr;
    std::uint8_t* p = m->append(len);
    EXPECT_NE(p, nullptr);
    if (p) std::memset(p, fill, len);
    return m;
  }

  std::unique_ptr<Arena> arena_;
  std::unique_ptr<PktmbufPool> pool_;
};

TEST_F(MbufTest, CreateRefusesADataRoomSmallerThanTheHeadroom) {
  PktmbufPool::Options o;
  o.name = "tiny";
  o.count = 4;
  o.cache_size = 0;
  o.data_room_bytes = mbuf_default_headroom - 1;
  auto p = PktmbufPool::create(*arena_, o);
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("mbuf pool 'tiny'"), std::string::npos) << p.error().message;
  EXPECT_NE(p.error().message.find("headroom"), std::string::npos) << p.error().message;
}

TEST_F(MbufTest, AllocHandsOutAResetDirectMbuf) {
  Mbuf* m = pool_->alloc();
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(pool_->mempool().owns(m));
  EXPECT_EQ(pool_->in_use(), 1u);
  EXPECT_EQ(m->pool, &pool_->mempool());
  EXPECT_EQ(m->next, nullptr);
  EXPECT_EQ(m->nb_segs, 1);
  EXPECT_EQ(m->refcnt.load(), 1);
  EXPECT_EQ(m->pkt_len, 0u);
  EXPECT_EQ(m->data_len, 0);
  EXPECT_EQ(m->ol_flags, 0u);
  EXPECT_FALSE(m->is_indirect());
  EXPECT_EQ(m->port, 0xffff);
  EXPECT_EQ(m->buf_addr, m->own_buffer());
  EXPECT_TRUE(arena_->contains(m->buf_addr, m->buf_len));
  EXPECT_EQ(m->buf_len, mbuf_default_data_room);
  EXPECT_EQ(m->headroom(), mbuf_default_headroom);
  EXPECT_EQ(m->tailroom(), mbuf_default_data_room - mbuf_default_headroom);
  EXPECT_EQ(m->data(), m->buf_addr + mbuf_default_headroom);

  // reset() undoes what a user did to the metadata.
  m->append(100);
  m->prepend(10);
  m->ol_flags = mbuf_flag::tx_ipv4;
  m->port = 3;
  m->vlan_tci = 7;
  m->l2_len = 14;
  m->reset();
  EXPECT_EQ(m->data_len, 0);
  EXPECT_EQ(m->pkt_len, 0u);
  EXPECT_EQ(m->headroom(), mbuf_default_headroom);
  EXPECT_EQ(m->ol_flags, 0u);
  EXPECT_EQ(m->port, 0xffff);
  EXPECT_EQ(m->vlan_tci, 0);
  EXPECT_EQ(m->tx_offload, 0u);
  mbuf_free(m);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufTest, PrivateAreaFollowsTheMbufAndTheBufferIsInTheArena) {
  auto pool = make("priv", 4, 64);
  ASSERT_TRUE(pool);
  Mbuf* m = pool->alloc();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->priv_size, 64);
  EXPECT_EQ(m->priv(), static_cast<void*>(m + 1));
  EXPECT_LE(sizeof(Mbuf) + 64, pool->mempool().object_bytes());
  // The buffer is in the arena, whole; the header is not, so a peer that maps the arena never
  // sees our pointers.
  EXPECT_TRUE(arena_->contains(m->buf_addr, m->buf_len));
  EXPECT_FALSE(arena_->contains(m, sizeof(Mbuf)));
  EXPECT_TRUE(arena_->contains(pool->buffers().data(), pool->buffers().size()));
  EXPECT_EQ(m->buf_addr, m->own_buffer());
  mbuf_free(m);
  EXPECT_EQ(pool->in_use(), 0u);
}

TEST_F(MbufTest, BuffersAreDistinctAndHeadersPointAtTheirOwn) {
  auto pool = make("distinct", 100, 0);
  ASSERT_TRUE(pool);
  std::set<std::uint8_t*> seen;
  const Mempool& mp = pool->mempool();
  for (std::uint32_t i = 0; i < mp.count(); ++i) {
    auto* m = static_cast<Mbuf*>(mp.object(i));
    EXPECT_EQ(m->pool, &pool->mempool());
    EXPECT_TRUE(seen.insert(m->own_buf_addr).second) << "buffer " << i << " is shared";
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m->own_buf_addr) % cache_line_bytes, 0u);
  }
}

TEST_F(MbufTest, AppendRefusesBeyondTheTailroom) {
  Mbuf* m = pool_->alloc();
  ASSERT_NE(m, nullptr);
  const std::uint16_t room = m->tailroom();
  std::uint8_t* p = m->append(100);
  ASSERT_EQ(p, m->data());
  EXPECT_EQ(m->data_len, 100);
  EXPECT_EQ(m->pkt_len, 100u);
  EXPECT_EQ(m->append(static_cast<std::uint16_t>(room - 100 + 1)), nullptr);
  EXPECT_EQ(m->data_len, 100) << "a refused append must change nothing";
  EXPECT_EQ(m->pkt_len, 100u);
  std::uint8_t* q = m->append(static_cast<std::uint16_t>(room - 100));
  EXPECT_EQ(q, m->data() + 100);
  EXPECT_EQ(m->tailroom(), 0);
  EXPECT_EQ(m->append(1), nullptr);
  EXPECT_NE(m->append(0), nullptr);
  mbuf_free(m);
}

TEST_F(MbufTest, PrependRefusesBeyondTheHeadroom) {
  Mbuf* m = packet(*pool_, 10, 0xab);
  ASSERT_NE(m, nullptr);
  std::uint8_t* old = m->data();
  EXPECT_EQ(m->prepend(mbuf_default_headroom + 1), nullptr);
  EXPECT_EQ(m->data(), old);
  EXPECT_EQ(m->data_len, 10);
  std::uint8_t* p = m->prepend(14);
  EXPECT_EQ(p, old - 14);
  EXPECT_EQ(m->data(), p);
  EXPECT_EQ(m->data_len, 24);
  EXPECT_EQ(m->pkt_len, 24u);
  EXPECT_EQ(m->prepend(mbuf_default_headroom - 14), m->buf_addr);
  EXPECT_EQ(m->headroom(), 0);
  EXPECT_EQ(m->prepend(1), nullptr);
  EXPECT_EQ(m->pkt_len, mbuf_default_headroom + 10u);
  mbuf_free(m);
}

TEST_F(MbufTest, AdjAndTrimRefuseBeyondTheData) {
  Mbuf* m = packet(*pool_, 40, 0);
  ASSERT_NE(m, nullptr);
  for (std::uint8_t i = 0; i < 40; ++i) m->data()[i] = i;
  EXPECT_EQ(m->adj(41), nullptr);
  EXPECT_EQ(m->data_len, 40);
  std::uint8_t* p = m->adj(4);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p[0], 4);
  EXPECT_EQ(m->data_len, 36);
  EXPECT_EQ(m->pkt_len, 36u);
  EXPECT_EQ(m->headroom(), mbuf_default_headroom + 4);

  EXPECT_FALSE(m->trim(37));
  EXPECT_EQ(m->data_len, 36);
  EXPECT_TRUE(m->trim(6));
  EXPECT_EQ(m->data_len, 30);
  EXPECT_EQ(m->pkt_len, 30u);
  EXPECT_EQ(m->data()[29], 33);
  EXPECT_TRUE(m->trim(30));
  EXPECT_EQ(m->pkt_len, 0u);
  EXPECT_NE(m->adj(0), nullptr);
  mbuf_free(m);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufTest, CopyInChainsWhatExceedsOneMbuf) {
  std::vector<std::uint8_t> bytes(5000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
  Mbuf* m = pool_->copy_in(bytes.data(), 5000, 3);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->pkt_len, 5000u);
  EXPECT_EQ(m->nb_segs, 3);  // 2048 + 2048 + 904 bytes of data room
  EXPECT_EQ(m->port, 3);
  std::vector<std::uint8_t> back;
  for (Mbuf* s = m; s; s = s->next) back.insert(back.end(), s->data(), s->data() + s->data_len);
  EXPECT_EQ(back, bytes);
  mbuf_free(m);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufTest, CopyInGivesBackEverythingWhenThePoolRunsDry) {
  auto small = make("pool_small", 2);
  ASSERT_TRUE(small);
  std::vector<std::uint8_t> bytes(5000, 0xab);
  EXPECT_EQ(small->copy_in(bytes.data(), 5000, 0), nullptr) << "needs 3 mbufs, the pool has 2";
  EXPECT_EQ(small->in_use(), 0u);
}

TEST_F(MbufTest, ChainsAddSegmentsAndFreeAsOne) {
  Mbuf* a = packet(*pool_, 100, 1);
  Mbuf* b = packet(*pool_, 200, 2);
  Mbuf* c = packet(*pool_, 300, 3);
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(b->chain(c));  // b is now a two-segment packet
  EXPECT_EQ(b->nb_segs, 2);
  EXPECT_EQ(b->pkt_len, 500u);
  ASSERT_TRUE(a->chain(b));
  EXPECT_EQ(a->nb_segs, 3);
  EXPECT_EQ(a->pkt_len, 600u);
  EXPECT_EQ(a->next, b);
  EXPECT_EQ(b->next, c);
  EXPECT_EQ(a->last_segment(), c);
  EXPECT_EQ(b->pkt_len, 200u) << "a segment that is not first carries its own length";
  EXPECT_EQ(b->nb_segs, 1);

  // Tail edits go to the last segment, head edits to the first.
  ASSERT_NE(a->append(20), nullptr);
  EXPECT_EQ(c->data_len, 320);
  EXPECT_EQ(a->pkt_len, 620u);
  EXPECT_FALSE(a->trim(321)) << "trim works on the last segment only";
  EXPECT_TRUE(a->trim(20));
  EXPECT_EQ(c->data_len, 300);
  ASSERT_NE(a->prepend(8), nullptr);
  EXPECT_EQ(a->data_len, 108);
  EXPECT_EQ(a->pkt_len, 608u);

  // nb_segs is 16 bits: a chain that would overflow it is refused and left alone.
  Mbuf* d = packet(*pool_, 1, 4);
  ASSERT_NE(d, nullptr);
  a->nb_segs = 0xffff;
  EXPECT_FALSE(a->chain(d));
  EXPECT_EQ(c->next, nullptr);
  a->nb_segs = 3;
  mbuf_free(d);

  EXPECT_EQ(pool_->in_use(), 3u);
  mbuf_free(a);
  EXPECT_EQ(pool_->in_use(), 0u);
  // Segments come back as free mbufs: no stale links.
  std::vector<Mbuf*> all(64);
  ASSERT_TRUE(pool_->raw_alloc_bulk(all));
  for (Mbuf* m : all) {
    EXPECT_EQ(m->next, nullptr);
    EXPECT_EQ(m->nb_segs, 1);
    EXPECT_EQ(m->refcnt.load(), 1);
  }
  mbuf_free_bulk(all);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// A two-segment packet and its clone from `clone_pool`.
struct Cloned {
  Mbuf* original;
  Mbuf* clone;
};

class MbufCloneTest : public MbufTest {
 protected:
  Cloned clone_two_segments(PktmbufPool& clone_pool) {
    Mbuf* a = packet(*pool_, 60, 0x11);
    Mbuf* b = packet(*pool_, 40, 0x22);
    EXPECT_TRUE(a && b && a->chain(b));
    a->port = 5;
    a->packet_type = 0x23;
    a->rss_hash = 0xdeadbeef;
    Mbuf* c = clone_pool.clone(a);
    EXPECT_NE(c, nullptr);
    return {a, c};
  }

  void expect_shares(const Cloned& k) {
    Mbuf* c = k.clone;
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->nb_segs, 2);
    EXPECT_EQ(c->pkt_len, 100u);
    EXPECT_EQ(c->port, 5);
    EXPECT_EQ(c->packet_type, 0x23u);
    EXPECT_EQ(c->rss_hash, 0xdeadbeefu);
    Mbuf* o = k.original;
    for (Mbuf* s = c; s; s = s->next, o = o->next) {
      ASSERT_NE(o, nullptr);
      EXPECT_TRUE(s->is_indirect());
      EXPECT_EQ(s->direct, o);
      EXPECT_EQ(s->data(), o->data()) << "a clone shares the data, it does not copy it";
      EXPECT_EQ(s->data_len, o->data_len);
      EXPECT_EQ(o->refcnt.load(), 2);
      EXPECT_EQ(s->refcnt.load(), 1);
    }
    EXPECT_EQ(o, nullptr);
    // A write through the original is seen through the clone.
    k.original->data()[0] = 0x99;
    EXPECT_EQ(c->data()[0], 0x99);
  }
};

TEST_F(MbufCloneTest, FreeingOriginalFirstReturnsEverything) {
  Cloned k = clone_two_segments(*pool_);
  expect_shares(k);
  EXPECT_EQ(pool_->in_use(), 4u);
  mbuf_free(k.original);
  // The direct mbufs stay alive for the clone.
  EXPECT_EQ(pool_->in_use(), 4u);
  EXPECT_EQ(k.clone->direct->refcnt.load(), 1);
  EXPECT_EQ(k.clone->data()[0], 0x99);
  EXPECT_EQ(k.clone->next->data()[0], 0x22);
  mbuf_free(k.clone);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufCloneTest, FreeingCloneFirstReturnsEverything) {
  Cloned k = clone_two_segments(*pool_);
  expect_shares(k);
  mbuf_free(k.clone);
  EXPECT_EQ(pool_->in_use(), 2u);
  EXPECT_EQ(k.original->refcnt.load(), 1);
  EXPECT_EQ(k.original->next->refcnt.load(), 1);
  EXPECT_EQ(k.original->nb_segs, 2);
  EXPECT_EQ(k.original->pkt_len, 100u);
  mbuf_free(k.original);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufCloneTest, CloneFromAnotherPoolAndCloneOfClone) {
  auto clones = make("pool_b", 16);
  ASSERT_TRUE(clones);
  Cloned k = clone_two_segments(*clones);
  expect_shares(k);
  EXPECT_TRUE(clones->mempool().owns(k.clone));
  EXPECT_EQ(clones->in_use(), 2u);
  // A clone of a clone points at the same direct mbufs.
  Mbuf* cc = clones->clone(k.clone);
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(cc->direct, k.original);
  EXPECT_EQ(cc->next->direct, k.original->next);
  EXPECT_EQ(k.original->refcnt.load(), 3);
  EXPECT_EQ(cc->pkt_len, 100u);

  mbuf_free(k.original);
  mbuf_free(k.clone);
  EXPECT_EQ(pool_->in_use(), 2u);
  EXPECT_EQ(clones->in_use(), 2u);
  mbuf_free(cc);
  EXPECT_EQ(pool_->in_use(), 0u);
  EXPECT_EQ(clones->in_use(), 0u);

  // Former clones come back as direct mbufs with their own buffer.
  std::vector<Mbuf*> all(16);
  ASSERT_TRUE(clones->alloc_bulk(all));
  for (Mbuf* m : all) {
    EXPECT_FALSE(m->is_indirect());
    EXPECT_EQ(m->direct, nullptr);
    EXPECT_EQ(m->buf_addr, m->own_buffer());
    EXPECT_EQ(m->buf_len, m->own_buf_len);
    EXPECT_EQ(m->headroom(), mbuf_default_headroom);
  }
  mbuf_free_bulk(all);
  EXPECT_EQ(clones->in_use(), 0u);
}

TEST_F(MbufCloneTest, FailedCloneLeavesNothingBehind) {
  auto clones = make("pool_small", 1);  // room for one clone segment, not two
  ASSERT_TRUE(clones);
  Mbuf* a = packet(*pool_, 60, 1);
  Mbuf* b = packet(*pool_, 60, 2);
  ASSERT_TRUE(a && b && a->chain(b));
  EXPECT_EQ(clones->clone(a), nullptr);
  EXPECT_EQ(clones->in_use(), 0u);
  EXPECT_EQ(a->refcnt.load(), 1);
  EXPECT_EQ(b->refcnt.load(), 1);
  mbuf_free(a);
  EXPECT_EQ(pool_->in_use(), 0u);
}

// The clone's holder reads the shared data on another thread and drops its reference; the
// original's holder then sees refcnt == 1, frees without an atomic decrement and reuses the
// buffer. Only the refcount orders the two threads' buffer accesses (checked under TSan).
TEST_F(MbufCloneTest, CloneReleasedOnAnotherThreadThenBufferReused) {
  auto pool = make("pool_t", 16);
  ASSERT_TRUE(pool);
  set_lcore_id(0);  // LIFO cache: the next alloc returns the mbuf just freed
  for (int round = 0; round < 50; ++round) {
    Mbuf* m = pool->alloc();
    ASSERT_NE(m, nullptr);
    std::memset(m->append(64), round, 64);
    Mbuf* c = pool->clone(m);
    ASSERT_NE(c, nullptr);
    std::atomic<std::uint64_t> seen{0};
    std::jthread holder([&] {
      // Whole-word accesses on both sides: GCC's TSan misses some races between byte loops.
      std::uint64_t word;
      std::memcpy(&word, c->data(), sizeof word);
      seen.store(word, std::memory_order_relaxed);
      mbuf_free(c);
    });
    // relaxed: deliberately no synchronisation of our own, the library's must suffice.
    while (m->refcnt.load(std::memory_order_relaxed) != 1) std::this_thread::yield();
    mbuf_free(m);
    Mbuf* again = pool->alloc();
    ASSERT_EQ(again, m);
    const std::uint64_t ones = ~0ULL;
    std::memcpy(again->append(64), &ones, sizeof ones);
    holder.join();
    EXPECT_EQ(seen.load(), 0x0101010101010101ULL * static_cast<std::uint64_t>(round));
    mbuf_free(again);
  }
  EXPECT_EQ(pool->in_use(), 0u);
}

TEST_F(MbufTest, RefcountBumpNeedsOneFreePerReference) {
  Mbuf* m = packet(*pool_, 64, 7);
  Mbuf* tail = packet(*pool_, 64, 8);
  ASSERT_TRUE(m && tail && m->chain(tail));
  // Another holder (e.g. a retransmit queue) takes a reference on every segment.
  for (Mbuf* s = m; s; s = s->next) s->refcnt.fetch_add(1);
  mbuf_free(m);
  EXPECT_EQ(pool_->in_use(), 2u);
  EXPECT_EQ(m->refcnt.load(), 1);
  EXPECT_EQ(m->next, tail) << "the chain must survive while referenced";
  EXPECT_EQ(m->data()[0], 7);
  mbuf_free(m);
  EXPECT_EQ(pool_->in_use(), 0u);
}

TEST_F(MbufTest, FreeBulkAcrossTwoPools) {
  auto other = make("pool_b", 128);
  ASSERT_TRUE(other);
  std::vector<Mbuf*> pkts;
  for (int i = 0; i < 100; ++i) {  // more than free_bulk's 64-entry batch
    PktmbufPool& p = (i % 3 == 0) ? *other : *pool_;
    if (&p == pool_.get() && pool_->in_use() >= 60) continue;
    Mbuf* m = packet(p, 10, static_cast<std::uint8_t>(i));
    ASSERT_NE(m, nullptr);
    pkts.push_back(m);
  }
  // One packet whose segments come from both pools.
  Mbuf* mixed = packet(*pool_, 10, 0);
  Mbuf* seg = packet(*other, 10, 0);
  ASSERT_TRUE(mixed && seg && mixed->chain(seg));
  pkts.push_back(mixed);
  // And a clone: its direct mbufs stay until the original goes too.
  Mbuf* orig = packet(*other, 10, 0);
  ASSERT_NE(orig, nullptr);
  Mbuf* cl = pool_->clone(orig);
  ASSERT_NE(cl, nullptr);
  pkts.push_back(cl);
  pkts.push_back(orig);

  EXPECT_GT(pool_->in_use(), 0u);
  EXPECT_GT(other->in_use(), 0u);
  mbuf_free_bulk(pkts);
  EXPECT_EQ(pool_->in_use(), 0u);
  EXPECT_EQ(other->in_use(), 0u);
  mbuf_free_bulk({});
}

// flowgen's clones: the same mbuf n times in a row in one burst, its reference count n. A run is
// released in one step; one whose mbuf is also held elsewhere leaves it to the last holder.
TEST_F(MbufTest, FreeBulkReleasesARunOfTheSameMbufAtOnce) {
  Mbuf* a = packet(*pool_, 10, 1);
  Mbuf* b = packet(*pool_, 10, 2);
  Mbuf* c = packet(*pool_, 10, 3);
  ASSERT_TRUE(a && b && c);
  a->refcnt.store(3);
  b->refcnt.store(5);  // 3 references in the burst, 2 held elsewhere
  std::vector<Mbuf*> burst = {a, a, a, b, b, b, c};
  mbuf_free_bulk(burst);
  EXPECT_EQ(pool_->in_use(), 1u) << "a and c went back; b is still held";
  EXPECT_EQ(b->refcnt.load(), 2u);
  std::vector<Mbuf*> rest = {b, b};
  mbuf_free_bulk(rest);
  EXPECT_EQ(pool_->in_use(), 0u);
  Mbuf* again = pool_->alloc();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->refcnt.load(), 1u) << "a freed mbuf holds 1";
  mbuf_free(again);
  // Not adjacent: each reference is dropped on its own.
  Mbuf* d = packet(*pool_, 10, 4);
  Mbuf* e = packet(*pool_, 10, 5);
  ASSERT_TRUE(d && e);
  d->refcnt.store(2);
  std::vector<Mbuf*> apart = {d, e, d};
  mbuf_free_bulk(apart);
  EXPECT_EQ(pool_->in_use(), 0u);
}

}  // namespace
}  // namespace ws
