// SPDX-License-Identifier: BSD-3-Clause
// Mempool creation and audit.
#include "ws/core/mempool.hpp"

#include <algorithm>
#include <bit>

namespace ws {

Result<std::unique_ptr<Mempool>> Mempool::create(Arena& arena, const MempoolOptions& o,
                                                 const std::function<void(void*, std::uint32_t)>& init) {
  if (o.count == 0) return fail("mempool '{}': object count must be > 0", o.name);
  if (o.object_bytes == 0) return fail("mempool '{}': object size must be > 0", o.name);
  if (o.cache_size > mempool_cache_max)
    return fail("mempool '{}': cache size {} is over the maximum {}", o.name, o.cache_size, mempool_cache_max);
  if (o.cache_size > o.count)
    return fail("mempool '{}': cache size {} is larger than the pool ({} objects)", o.name, o.cache_size, o.count);
  MempoolOptions rounded = o;
  rounded.object_bytes = static_cast<std::uint32_t>((o.object_bytes + cache_line_bytes - 1) & ~(cache_line_bytes - 1));
  // Contiguous IOVAs: one run of objects. Otherwise whole pages, each holding per_page objects.
  std::uint32_t per_page = rounded.count;
  std::size_t page = std::size_t{rounded.count} * rounded.object_bytes;
  std::size_t align = cache_line_bytes;
  if (!arena.iova_contiguous()) {
    if (rounded.object_bytes > arena.page_bytes())
      return fail("mempool '{}': objects of {} bytes do not fit one {} byte page of arena '{}'", o.name,
                  rounded.object_bytes, arena.page_bytes(), arena.name());
    page = arena.page_bytes();
    align = page;
    per_page = static_cast<std::uint32_t>(page / rounded.object_bytes);
  }
  const std::size_t pages = (rounded.count + per_page - 1) / per_page;
  const std::size_t bytes = pages == 1 ? std::size_t{rounded.count} * rounded.object_bytes : pages * page;
  auto mem = arena.allocate(bytes, align,
                            fmt::format("mempool '{}' ({} objects of {} bytes)", o.name, o.count, rounded.object_bytes));
  if (!mem) return std::unexpected(mem.error());
  // A ring has at least 2 slots; a pool of one object still needs one.
  auto ring = Ring<void*>::create(o.name, {std::max(2u, std::bit_ceil(rounded.count)), Sync::multi, Sync::multi});
  if (!ring) return std::unexpected(ring.error());
  auto pool = std::unique_ptr<Mempool>(
      new Mempool(rounded, static_cast<std::byte*>(*mem), std::move(*ring), page, per_page));
  for (std::uint32_t i = 0; i < pool->count_; ++i) {
    void* obj = pool->object(i);
    if (init) init(obj, i);
    pool->ring_->enqueue(obj);
  }
  return pool;
}

Mempool::Mempool(const MempoolOptions& o, std::byte* base, std::unique_ptr<Ring<void*>> ring,
                 std::size_t page_bytes, std::uint32_t per_page)
    : name_(o.name),
      count_(o.count),
      object_bytes_(o.object_bytes),
      cache_size_(o.cache_size),
      flush_threshold_(o.cache_size * 3 / 2),
      base_(base),
      page_bytes_(page_bytes),
      per_page_(per_page),
      ring_(std::move(ring)),
      caches_(new Cache[max_lcores]) {}

std::uint32_t Mempool::in_use() const noexcept {
  std::uint32_t free = ring_->count();
  for (unsigned i = 0; i < max_lcores; ++i) free += caches_[i].len;
  return count_ - free;
}

void Mempool::flush_caches() noexcept {
  for (unsigned i = 0; i < max_lcores; ++i) {
    Cache& c = caches_[i];
    ring_->enqueue_bulk(std::span<void* const>(c.objs.data(), c.len));
    c.len = 0;
  }
}

bool Mempool::owns(const void* p) const noexcept {
  const auto* b = static_cast<const std::byte*>(p);
  if (b < base_) return false;
  const std::size_t off = static_cast<std::size_t>(b - base_);
  const std::size_t page = off / page_bytes_, in_page = off % page_bytes_;
  if (in_page % object_bytes_ != 0 || in_page / object_bytes_ >= per_page_) return false;
  return page * per_page_ + in_page / object_bytes_ < count_;
}

}  // namespace ws
