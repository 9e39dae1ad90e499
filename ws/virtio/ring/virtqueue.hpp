// SPDX-License-Identifier: BSD-3-Clause
// What split and packed virtqueues share: descriptor flags, the chain a device-side walk
// produces (host segments, already translated and validated), and the per-queue health record
// (named error counters and the sticky `broken` state a hostile peer sets), what a device-side
// pop returns and the buffer a driver posts.
#pragma once
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ws::virtio {

// Descriptor flags (virtio 1.2 §2.7.5 split, §2.8.1 packed).
namespace desc_flag {
inline constexpr std::uint16_t next = 1;
inline constexpr std::uint16_t write = 2;  // device writes (RX buffer)
inline constexpr std::uint16_t indirect = 4;
inline constexpr std::uint16_t avail = 1 << 7;  // packed only
inline constexpr std::uint16_t used = 1 << 15;  // packed only
}  // namespace desc_flag

// The three areas of one virtqueue as the driver lays them out in its memory (virtio 1.2 §2.6:
// Descriptor Area, Driver Area, Device Area), whichever the format: a split ring reads them as
// descriptor table, available ring and used ring (§2.7), a packed ring as descriptor ring,
// driver and device event suppression (§2.8). Both driver engines start from one of these.
struct RingArea {
  std::uint32_t size = 0;
  std::byte* desc = nullptr;    // 16-byte aligned
  std::byte* driver = nullptr;  // 4-byte aligned (2 for split, 4 for packed)
  std::byte* device = nullptr;  // 4-byte aligned
};

// Bytes one ring of `n` entries needs for either format (the split sizes, each area on its own
// 64-byte line), and the areas carved from `base` (zeroed by the caller).
constexpr std::size_t ring_area_line(std::size_t n) { return (n + 63) & ~std::size_t{63}; }
constexpr std::size_t ring_area_bytes(std::uint32_t n) {
  return ring_area_line(16u * n) + ring_area_line(2u * (3u + n)) + 6u + 8u * n;
}
inline RingArea carve_ring_area(std::byte* base, std::uint32_t n) {
  const std::size_t desc = ring_area_line(16u * n);
  return {n, base, base + desc, base + desc + ring_area_line(2u * (3u + n))};
}

// Largest queue size a vhost-user frontend may configure (virtio 1.2 §2.6: Queue Size ≤ 32768).
inline constexpr std::uint32_t queue_size_max = 32768;

// Why a device-side walk refused a chain. Each has an xstat named by queue_error_name().
enum class QueueError : std::uint8_t {
  head_out_of_range,     // avail ring / packed id names a descriptor >= size
  next_out_of_range,     // a NEXT link >= size (or beyond an indirect table)
  chain_loop,            // more descriptors than the ring (or table) holds
  indirect_bad_length,   // zero, not a multiple of 16, larger than the ring
  indirect_nested,       // INDIRECT inside an indirect table
  indirect_with_next,    // INDIRECT together with NEXT
  indirect_disabled,     // INDIRECT without the negotiated feature
  bad_address,           // not inside one mapped region, or addr+len overflows
  read_after_write,      // a device-readable descriptor after a writable one
  too_many_segments,     // more than a chain can hold
  avail_index_jump,      // split: avail idx moved by more than the ring size
  packed_bad_id,         // packed: buffer id >= size
  packed_bad_wrap,       // packed: a chain's later descriptor not available with the same wrap
  too_many_taken,        // packed: more descriptors taken and not yet returned than the ring holds
                         // (the driver made a slot we hold available again)
  used_bad_id,           // driver side: device returned an id we never posted
  used_index_jump,       // driver side: used idx moved by more than was outstanding
  used_bad_length,       // driver side: an RX length beyond the buffer posted, or shorter than the
                         // virtio-net header
  used_bad_num_buffers,  // driver side: a mergeable packet of zero buffers, or of more than the
                         // ring holds (it could never be whole, and would hoard our mbufs)
  count_
};
inline constexpr std::size_t queue_error_count = static_cast<std::size_t>(QueueError::count_);

// Stable xstat name for an error ("rx_q0_bad_address" is built from it by drivers).
std::string_view queue_error_name(QueueError e) noexcept;
// The first error with what was seen, for a log line: "avail_index_jump (avail idx 7 with 25
// taken)"; the bare name for errors that report no detail.
std::string queue_error_detail(QueueError e, std::uint32_t detail);
// Packs a report() detail for an index jump: the index seen, and how many were taken before it.
constexpr std::uint32_t index_detail(std::uint16_t seen, std::uint16_t taken) noexcept {
  return (std::uint32_t{seen} << 16) | taken;
}

// Health of one virtqueue: written by the lcore polling it, read by any thread (xstats).
// Once broken, the engine refuses all further work until reset() (control path, queue stopped).
class QueueHealth {
 public:
  // `detail`: what was seen, for the first error's message (see queue_error_detail).
  void report(QueueError e, std::uint32_t detail = 0) noexcept {
    auto& c = counts_[static_cast<std::size_t>(e)];
    // relaxed: statistics; single writer (the polling lcore). Pairs with the loads in count().
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (!broken_.load(std::memory_order_relaxed)) {
      first_.store(static_cast<std::uint8_t>(e), std::memory_order_relaxed);
      first_detail_.store(detail, std::memory_order_relaxed);
      // release: a reader that sees broken also sees first_error(). Pairs with broken()'s acquire.
      broken_.store(true, std::memory_order_release);
    }
  }
  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }
  QueueError first_error() const noexcept { return static_cast<QueueError>(first_.load(std::memory_order_relaxed)); }
  std::uint32_t first_detail() const noexcept { return first_detail_.load(std::memory_order_relaxed); }
  std::uint64_t count(QueueError e) const noexcept {
    return counts_[static_cast<std::size_t>(e)].load(std::memory_order_relaxed);
  }
  std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (const auto& c : counts_) t += c.load(std::memory_order_relaxed);
    return t;
  }
  // Control path only (queue stopped): clears broken, keeps the counters.
  void reset() noexcept { broken_.store(false, std::memory_order_relaxed); }

 private:
  std::array<std::atomic<std::uint64_t>, queue_error_count> counts_{};
  std::atomic<bool> broken_{false};
  std::atomic<std::uint8_t> first_{0};
  std::atomic<std::uint32_t> first_detail_{0};
};

// One translated piece of a chain.
struct Segment {
  std::byte* host;
  std::uint32_t len;
};

// A descriptor chain taken by the device: readable segments first, then writable ones.
// Every segment was copied from guest memory once, validated, and translated (double fetch safe).
template <std::size_t MaxSegments>
struct Chain {
  std::uint16_t id = 0;              // split: head index; packed: buffer id
  std::uint16_t ring_descs = 0;      // descriptors the chain used in the ring (packed: used skip)
  std::uint16_t readable = 0;        // segments [0, readable) are device-readable
  std::uint16_t segments = 0;        // segments [readable, segments) are device-writable
  std::uint64_t readable_bytes = 0;  // up to 64 segments of 4 GiB: no overflow
  std::uint64_t writable_bytes = 0;
  std::array<Segment, MaxSegments> seg;
};

// Segments a device-side chain may hold; longer chains are refused (too_many_segments).
inline constexpr std::size_t default_max_segments = 64;
using DefaultChain = Chain<default_max_segments>;

// Split-ring event index rule (virtio 1.2 §2.7.7.2): notify when the other side's event index
// lies in (old, new]. Wrapping 16-bit arithmetic.
constexpr bool need_event(std::uint16_t event_idx, std::uint16_t new_idx, std::uint16_t old_idx) noexcept {
  return static_cast<std::uint16_t>(new_idx - event_idx - 1) < static_cast<std::uint16_t>(new_idx - old_idx);
}

namespace detail {
// One relaxed load per field of shared memory: the peer may rewrite it while we read, so we read
// it once and never look at that memory for it again (double fetch).
template <class T>
inline T load_once(const T* p) noexcept {
  return __atomic_load_n(p, __ATOMIC_RELAXED);
}
}  // namespace detail

// What a device-side pop found: a chain to use, nothing new, or a ring the peer broke.
enum class Pop : std::uint8_t { chain, empty, broken };

// A buffer the driver posts: the address the device uses for it (our virtual address for a
// vhost-user backend, the IOVA for a PCI device) and who writes it.
struct Buffer {
  std::uint64_t addr;
  std::uint32_t len;
  bool device_writes;
};

}  // namespace ws::virtio
