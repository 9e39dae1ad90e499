// SPDX-License-Identifier: BSD-3-Clause
// Stateful libFuzzer target for net_vhost: a sequence of vhost-user messages (raw, or well-formed
// ones with fuzzed fields), writes into the frontend's memory between bursts, and dequeue and
// enqueue bursts on the rings as the port runs them (the real VhostBackend, start_slot() and
// burst variants: split and packed, in order, mergeable, indirect, offloads). No crash, no UB,
// no mbuf lost, no fd leaked.
//
// The input is a list of operations, each a tag byte and its arguments (see the `Op` cases).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <span>

#include "ws/core/arena.hpp"
#include "ws/drivers/vhost/vhost_ring.hpp"

namespace {

using namespace ws;
using namespace ws::virtio;
using namespace ws::vhost_pmd;
namespace vu = ws::virtio::vhost_user;

constexpr std::size_t guest_bytes = 64 * 1024;
constexpr std::uint64_t guest_base = 0x100000;  // guest and frontend-virtual address of the region
constexpr std::uint32_t rings = 4;              // two queue pairs

// What lives across inputs: the frontend's memory, our mbuf pool, and the memory the rings' slots
// are built in (a quarter MiB: allocated per input, it cost fresh pages and their faults every
// time, most of an input's run time).
struct World {
  int memfd = -1;
  std::byte* guest = nullptr;  // the frontend's own view of its memory
  std::unique_ptr<Arena> arena;
  std::unique_ptr<PktmbufPool> pool;
  RingSlot* slot_memory =
      static_cast<RingSlot*>(::operator new[](sizeof(RingSlot) * rings, std::align_val_t{alignof(RingSlot)}));
  World() {
    memfd = ::memfd_create("vhost-stateful-fuzz", MFD_CLOEXEC);
    if (memfd < 0 || ::ftruncate(memfd, guest_bytes) != 0) std::abort();
    guest = static_cast<std::byte*>(::mmap(nullptr, guest_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0));
    if (guest == MAP_FAILED) std::abort();
    auto a = Arena::create({"fuzz", 16u << 20, HugePolicy::never});
    if (!a) std::abort();
    arena = std::move(*a);
    PktmbufPool::Options o;
    o.count = 1024;
    o.cache_size = 0;
    auto p = PktmbufPool::create(*arena, o);
    if (!p) std::abort();
    pool = std::move(*p);
  }
};

World& world() {
  static World w;
  return w;
}

int open_fds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// The port's side of the backend, as VhostPort runs it, minus sockets and threads.
struct Device final : RingListener {
  // Declared first: built before the backend, destroyed after it (which may stop rings).
  struct Slots {
    RingSlot* p = make_slots();
    Slots() = default;
    Slots(const Slots&) = delete;
    Slots& operator=(const Slots&) = delete;
    ~Slots() { std::destroy_n(p, rings); }
    RingSlot& operator[](std::uint32_t r) const { return p[r]; }
  } slots;
  VhostBackend backend{BackendOptions{.name = "fuzz", .queue_pairs = rings / 2}, this};
  SlotOptions options;
  // The port's queues on those rings; a burst calls what the port's table would hold.
  RxQ rxq[rings / 2];
  TxQ txq[rings / 2];
  Device() {
    for (std::uint32_t q = 0; q < rings / 2; ++q) {
      rxq[q].slot = &slots[2 * q + 1];
      rxq[q].stash = std::make_unique<MbufStash>(world().pool.get());
      txq[q].slot = &slots[2 * q];
    }
  }
  void ring_started(std::uint32_t r, bool fresh) override {
    start_slot(slots[r], backend, r, fresh, options);
    slots[r].start();
    slots[r].enabled.store(true, std::memory_order_relaxed);
  }
  std::uint16_t ring_stopped(std::uint32_t r) override {
    stop_slot(slots[r]);
    return last_avail_idx(slots[r], backend.packed());
  }
  void ring_call_changed(std::uint32_t, int) override {}
  // One thread plays the lcore and the control thread: the gates need no membarrier (which
  // costs more than the rest of an input).
  static RingSlot* make_slots() {
    RingSlot* s = world().slot_memory;
    std::uninitialized_value_construct_n(s, rings);
    for (std::uint32_t r = 0; r < rings; ++r) s[r].gate.set_asymmetric(false);
    return s;
  }
};

// Reads the input front to back; past its end every read gives zeros.
struct Input {
  const std::uint8_t* p;
  std::size_t left;
  std::uint8_t u8() {
    if (left == 0) return 0;
    --left;
    return *p++;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return u16() | (std::uint32_t{u16()} << 16); }
  std::uint64_t u64() { return u32() | (std::uint64_t{u32()} << 32); }
};

// Decodes and applies one message as the port's control thread does; a refused message closes
// the connection: the backend is reset, as a disconnect resets it.
void deliver(Device& d, std::span<const std::byte> bytes, std::size_t nfds) {
  vu::FdSet fds;
  for (std::size_t i = 0; i < nfds; ++i) fds.push(::dup(world().memfd));
  auto msg = vu::decode(bytes, fds);
  if (!msg) {
    if (fds.size() != 0 || msg.error().message.empty()) std::abort();
    return;
  }
  vu::Message reply;
  auto r = d.backend.handle(*msg, fds, reply);
  if (fds.size() != 0) std::abort();  // every fd taken or closed
  if (!r) {
    if (r.error().message.empty()) std::abort();
    d.backend.reset();
  } else if (*r && reply.header.size > vu::max_payload) {
    std::abort();
  }
}

// A well-formed message of `request` with `payload` (and the memfd when `with_fd`).
void send(Device& d, vu::Request request, const void* payload, std::uint32_t size, bool with_fd = false) {
  std::byte buf[sizeof(vu::Header) + vu::max_payload];
  const vu::Header h{static_cast<std::uint32_t>(request), vu::flag_version, size};
  std::memcpy(buf, &h, sizeof h);
  std::memcpy(buf + sizeof h, payload, size);
  deliver(d, std::span(buf, sizeof h + size), with_fd ? 1 : 0);
}

void send_u64(Device& d, vu::Request request, std::uint64_t v) { send(d, request, &v, 8); }
void send_state(Device& d, vu::Request request, std::uint32_t index, std::uint32_t num) {
  const vu::VringState s{index, num};
  send(d, request, &s, sizeof s);
}

void dequeue_burst(Device& d, Input& in) {
  const std::uint32_t q = in.u8() % (rings / 2);  // on the frontend's TX ring 2q+1
  const std::uint16_t n = static_cast<std::uint16_t>(1 + in.u8() % mbuf_max_burst);
  Mbuf* pkts[mbuf_max_burst];
  const std::uint16_t got = published_rx(*d.rxq[q].slot)(&d.rxq[q], pkts, n);
  if (got > n) std::abort();
  for (std::uint16_t i = 0; i < got; ++i)
    if (pkts[i]->pkt_len > max_packet_bytes) std::abort();
  mbuf_free_bulk(std::span<Mbuf* const>(pkts, got));
}

void enqueue_burst(Device& d, Input& in) {
  const std::uint32_t q = in.u8() % (rings / 2);  // on the frontend's RX ring 2q
  const std::uint16_t n = static_cast<std::uint16_t>(1 + in.u8() % 16);
  PktmbufPool& pool = *world().pool;
  Mbuf* pkts[16];
  std::uint16_t made = 0;
  for (; made < n; ++made) {  // a packet of 1..4 segments, 1..2000 bytes each, maybe with offloads
    const std::uint8_t shape = in.u8();
    Mbuf* head = pool.alloc();
    if (head == nullptr) break;
    Mbuf* tail = head;
    for (int seg = 0; seg <= (shape & 3); ++seg) {
      Mbuf* m = seg == 0 ? head : pool.alloc();
      if (m == nullptr) break;
      m->data_len = static_cast<std::uint16_t>(1 + in.u16() % 2000);
      std::memset(m->data(), shape, m->data_len);
      if (seg > 0) {
        tail->next = m;
        tail = m;
        ++head->nb_segs;
      }
      head->pkt_len += m->data_len;
    }
    if (shape & 0x80) {  // checksum/TSO requests with fuzzed header lengths
      head->ol_flags = in.u64() & (mbuf_flag::tx_tcp_seg | mbuf_flag::tx_l4_mask | mbuf_flag::tx_ip_cksum |
                                   mbuf_flag::tx_ipv4 | mbuf_flag::tx_ipv6 | mbuf_flag::tx_vlan);
      head->tx_offload = in.u64();  // l2/l3/l4 lengths, TSO segment size
    }
    pkts[made] = head;
  }
  const std::uint16_t taken = published_tx(*d.txq[q].slot)(&d.txq[q], pkts, made);
  if (taken > made) std::abort();
  mbuf_free_bulk(std::span<Mbuf* const>(pkts + taken, made - taken));
}

// One operation of the input.
void step(Device& d, Input& in) {
  const std::uint8_t tag = in.u8();
  switch (tag % 12) {
    case 0: {  // a raw message: 0-2 fds, up to 300 bytes
      const std::size_t nfds = in.u8() % 3;
      std::size_t len = in.u16() % 300;
      if (len > in.left) len = in.left;
      deliver(d, std::span(reinterpret_cast<const std::byte*>(in.p), len), nfds);
      in.p += len;
      in.left -= len;
      break;
    }
    case 1: {  // the frontend writes its memory (descriptors, indices, flags, headers, data)
      const std::uint32_t at = in.u16() % guest_bytes;
      std::uint32_t len = in.u8();
      if (len > guest_bytes - at) len = guest_bytes - at;
      for (std::uint32_t i = 0; i < len; ++i) world().guest[at + i] = std::byte{in.u8()};
      break;
    }
    case 2:
      dequeue_burst(d, in);
      break;
    case 3:
      enqueue_burst(d, in);
      break;
    case 4:
      send_u64(d, vu::Request::set_features, (in.u64() & backend_offered) | bit(feature::version_1));
      break;
    case 5: {  // the whole region, as virtio_user shares it (guest address = user address)
      vu::MemTable t{};
      t.count = 1;
      t.regions[0] = {guest_base, guest_bytes, guest_base, 0};
      send(d, vu::Request::set_mem_table, &t, 8 + 32, true);
      break;
    }
    case 6:
      send_state(d, vu::Request::set_vring_num, in.u8() % rings, 1u << (in.u8() % 9));
      break;
    case 7: {  // ring areas inside the region, 64-byte aligned
      vu::VringAddr a{};
      a.index = in.u8() % rings;
      a.desc = guest_base + (in.u16() % (guest_bytes / 64)) * 64;
      a.used = guest_base + (in.u16() % (guest_bytes / 64)) * 64;
      a.avail = guest_base + (in.u16() % (guest_bytes / 64)) * 64;
      send(d, vu::Request::set_vring_addr, &a, sizeof a);
      break;
    }
    case 8:
      send_state(d, vu::Request::set_vring_base, in.u8() % rings, in.u16());
      break;
    case 9:
      send_u64(d, vu::Request::set_vring_kick, (in.u8() % rings) | vu::vring_nofd);
      break;
    case 10:
      send_state(d, vu::Request::set_vring_enable, in.u8() % rings, in.u8() & 1);
      break;
    default: {  // a flags word flipped, as a frontend racing us does (packed AVAIL/USED, NEXT...)
      const std::uint32_t at = (in.u16() % (guest_bytes / 2)) * 2;
      const std::uint16_t v = in.u16();
      std::memcpy(world().guest + at, &v, 2);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  const int fds_before = open_fds();
  const std::size_t in_use_before = w.pool->in_use();
  std::memset(w.guest, 0, guest_bytes);
  {
    Device d;
    d.options.legacy_ol = size > 0 && (data[0] & 0x40);
    d.options.linear = size > 0 && (data[0] & 0x20);
    Input in{data, size};
    for (int ops = 0; in.left > 0 && ops < 256; ++ops) step(d, in);
    d.backend.reset();  // the frontend goes: rings stopped, memory unmapped, fds closed
    for (RxQ& q : d.rxq) q.stash->release();
  }
  if (w.pool->in_use() != in_use_before) std::abort();  // no mbuf lost
  if (open_fds() != fds_before) std::abort();           // no fd leaked
  return 0;
}
