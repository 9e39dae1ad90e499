// SPDX-License-Identifier: BSD-3-Clause
// Mempool: a fixed number of fixed-size objects carved from an Arena, handed out and taken back
// in bulk through a per-lcore cache in front of a shared multi-producer/multi-consumer ring.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ws/core/arena.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/ring.hpp"

namespace ws {

/// The largest per-lcore cache a pool may have.
inline constexpr std::uint32_t mempool_cache_max = 512;

/// What Mempool::create makes.
struct MempoolOptions {
  std::string name = "pool";       ///< Names the pool in errors.
  std::uint32_t count = 0;         ///< objects
  std::uint32_t object_bytes = 0;  ///< rounded up to a cache line
  std::uint32_t cache_size = 250;  ///< per lcore, <= mempool_cache_max; 0 disables the cache
};

/// Where `count` objects sit in one block of memory: back to back, except in an arena whose
/// IOVAs are contiguous only within a page, where no object crosses a page boundary (so a device
/// sees each buffer whole): per_unit objects, then the next unit.
struct ObjectLayout {
  std::uint32_t object_bytes = 0;  ///< Object size, rounded up to a cache line.
  std::size_t unit_bytes = 0;      ///< Bytes from one unit of per_unit objects to the next.
  std::uint32_t per_unit = 0;      ///< Objects per unit.
  std::size_t bytes = 0;           ///< Size of the whole block.
  std::size_t align = 0;           ///< Alignment the block needs.
  /// Offset of object i (0 <= i < count) from the block's start.
  std::size_t offset(std::uint32_t i) const noexcept {
    return std::size_t{i / per_unit} * unit_bytes + std::size_t{i % per_unit} * object_bytes;
  }
};

/// Lays out `count` objects of `object_bytes` for memory carved from `arena`, or, when `arena` is
/// null, for private memory (contiguous). `what` names the objects in errors.
Result<ObjectLayout> layout_objects(const Arena* arena, std::uint32_t count, std::uint32_t object_bytes,
                                    std::string_view what);

/// A fixed number of fixed-size objects with per-lcore caches (as rte_mempool).
class Mempool {
 public:
  /// Creates the pool; `init` runs once per object (control path) before it is first handed out.
  static Result<std::unique_ptr<Mempool>> create(Arena& arena, const MempoolOptions& options,
                                                 const std::function<void(void*, std::uint32_t index)>& init = {});
  /// Creates the pool in PrivateMemory of its own (on huge pages when `huge` and some are
  /// free): for objects no peer may see, such as mbuf headers.
  static Result<std::unique_ptr<Mempool>> create_private(
      const MempoolOptions& options, bool huge, const std::function<void(void*, std::uint32_t index)>& init = {});

  /// Get exactly out.size() objects or none; true on success. Lock-free; an lcore uses its own
  /// cache, other threads go to the ring directly.
  [[gnu::hot]] bool get_bulk(std::span<void*> out) noexcept {
    const unsigned lcore = lcore_id();
    const auto n = static_cast<std::uint32_t>(out.size());
    if (lcore >= max_lcores || cache_size_ == 0 || n > mempool_cache_max) [[unlikely]]
      return ring_->dequeue_bulk(out) == n;
    Cache& c = caches_[lcore];
    if (c.len < n) {
      // As DPDK: one ring dequeue brings what is missing plus a cache size, on top of what is
      // cached (at most 2 x mempool_cache_max in all), so a burst larger than the cache size is
      // still served from the cache when the previous burst's objects came back to it. Near
      // exhaustion, only what is missing.
      const std::uint32_t missing = n - c.len;
      const std::uint32_t want = missing + cache_size_;
      if (ring_->dequeue_bulk(std::span<void*>(&c.objs[c.len], want)) == want) {
        c.len += want;
      } else if (ring_->dequeue_bulk(std::span<void*>(&c.objs[c.len], missing)) == missing) [[unlikely]] {
        c.len += missing;
      } else {
        return false;
      }
    }
    // Hand out the most recently returned objects first: they are the warmest.
    c.len -= n;
    copy_burst(out.data(), &c.objs[c.len], n);
    return true;
  }

  /// Return objects to the pool. Lock-free; same cache rules as get_bulk.
  [[gnu::hot]] void put_bulk(std::span<void* const> objs) noexcept {
    const unsigned lcore = lcore_id();
    const auto n = static_cast<std::uint32_t>(objs.size());
    if (lcore >= max_lcores || n > flush_threshold_) [[unlikely]] {
      ring_->enqueue_bulk(objs);  // always fits: the ring holds every object
      return;
    }
    Cache& c = caches_[lcore];
    if (c.len + n > flush_threshold_) {
      // As DPDK: flush the whole cache to the ring and keep only the objects just returned.
      ring_->enqueue_bulk(std::span<void* const>(c.objs.data(), c.len));
      c.len = 0;
    }
    copy_burst(&c.objs[c.len], objs.data(), n);
    c.len += n;
  }

  /// One object, or nullptr when the pool is empty.
  void* get() noexcept {
    void* obj = nullptr;
    return get_bulk(std::span<void*>(&obj, 1)) ? obj : nullptr;
  }
  /// Returns one object.
  void put(void* obj) noexcept { put_bulk(std::span<void* const>(&obj, 1)); }

  /// Objects handed out and not returned. Exact only when no lcore is using the pool.
  std::uint32_t in_use() const noexcept;
  /// Objects available (ring plus caches). Same caveat.
  std::uint32_t available() const noexcept { return count_ - in_use(); }
  /// Move every lcore's cached objects back to the ring (control path, pool quiescent).
  void flush_caches() noexcept;

  std::uint32_t count() const { return count_; }                ///< Objects in the pool.
  std::uint32_t object_bytes() const { return object_bytes_; }  ///< Object size, a multiple of a cache line.
  std::uint32_t cache_size() const { return cache_size_; }      ///< Per-lcore cache size.
  const std::string& name() const { return name_; }             ///< The name given at creation.
  /// True when `p` points at the start of one of this pool's objects.
  bool owns(const void* p) const noexcept;
  /// The object with index i (0 <= i < count), laid out as ObjectLayout says.
  void* object(std::uint32_t i) const noexcept { return base_ + layout_.offset(i); }

 private:
  struct alignas(cache_line_bytes) Cache {
    std::uint32_t len = 0;
    std::array<void*, mempool_cache_max * 2> objs{};
  };

  Mempool(const MempoolOptions& o, const ObjectLayout& layout, std::byte* base, std::unique_ptr<Ring<void*>> ring,
          std::unique_ptr<PrivateMemory> memory);
  static Result<std::unique_ptr<Mempool>> create_in(std::byte* base, const ObjectLayout& layout,
                                                    const MempoolOptions& o, std::unique_ptr<PrivateMemory> memory,
                                                    const std::function<void(void*, std::uint32_t)>& init);
  static Result<void> check(const MempoolOptions& o);

  std::string name_;
  std::uint32_t count_;
  std::uint32_t object_bytes_;
  std::uint32_t cache_size_;
  std::uint32_t flush_threshold_;  // 1.5 x cache size, as DPDK
  std::byte* base_;
  ObjectLayout layout_;
  std::unique_ptr<PrivateMemory> memory_;  // create_private: the pool's own memory
  std::unique_ptr<Ring<void*>> ring_;
  std::unique_ptr<Cache[]> caches_;  // indexed by lcore id
};

}  // namespace ws
