// SPDX-License-Identifier: BSD-3-Clause
// Mempool creation and audit.
#include "ws/core/mempool.hpp"

#include <algorithm>
#include <bit>

namespace ws {

Result<ObjectLayout> layout_objects(const Arena* arena, std::uint32_t count, std::uint32_t object_bytes,
                                    std::string_view what) {
  ObjectLayout l;
  l.object_bytes = static_cast<std::uint32_t>((object_bytes + cache_line_bytes - 1) & ~(cache_line_bytes - 1));
  l.per_unit = count;
  l.unit_bytes = std::size_t{count} * l.object_bytes;
  l.align = cache_line_bytes;
  if (arena != nullptr && !arena->iova_contiguous()) {
    if (l.object_bytes > arena->page_bytes())
      return fail("{}: objects of {} bytes do not fit one {} byte page of arena '{}'", what, l.object_bytes,
                  arena->page_bytes(), arena->name());
    l.unit_bytes = arena->page_bytes();
    l.align = l.unit_bytes;
    l.per_unit = static_cast<std::uint32_t>(l.unit_bytes / l.object_bytes);
  }
  const std::size_t units = (std::size_t{count} + l.per_unit - 1) / l.per_unit;
  l.bytes = units == 1 ? std::size_t{count} * l.object_bytes : units * l.unit_bytes;
  return l;
}

Result<void> Mempool::check(const MempoolOptions& o) {
  if (o.count == 0) return fail("mempool '{}': object count must be > 0", o.name);
  if (o.object_bytes == 0) return fail("mempool '{}': object size must be > 0", o.name);
  if (o.cache_size > mempool_cache_max)
    return fail("mempool '{}': cache size {} is over the maximum {}", o.name, o.cache_size, mempool_cache_max);
  if (o.cache_size > o.count)
    return fail("mempool '{}': cache size {} is larger than the pool ({} objects)", o.name, o.cache_size, o.count);
  return {};
}

Result<std::unique_ptr<Mempool>> Mempool::create(Arena& arena, const MempoolOptions& o,
                                                 const std::function<void(void*, std::uint32_t)>& init) {
  if (auto ok = check(o); !ok) return std::unexpected(ok.error());
  auto layout = layout_objects(&arena, o.count, o.object_bytes, fmt::format("mempool '{}'", o.name));
  if (!layout) return std::unexpected(layout.error());
  auto mem =
      arena.allocate(layout->bytes, layout->align,
                     fmt::format("mempool '{}' ({} objects of {} bytes)", o.name, o.count, layout->object_bytes));
  if (!mem) return std::unexpected(mem.error());
  return create_in(static_cast<std::byte*>(*mem), *layout, o, nullptr, init);
}

Result<std::unique_ptr<Mempool>> Mempool::create_private(const MempoolOptions& o, bool huge,
                                                         const std::function<void(void*, std::uint32_t)>& init) {
  if (auto ok = check(o); !ok) return std::unexpected(ok.error());
  auto layout = layout_objects(nullptr, o.count, o.object_bytes, fmt::format("mempool '{}'", o.name));
  if (!layout) return std::unexpected(layout.error());
  auto mem = PrivateMemory::create(layout->bytes, huge, fmt::format("mempool '{}'", o.name));
  if (!mem) return std::unexpected(mem.error());
  std::byte* base = (*mem)->base();
  return create_in(base, *layout, o, std::move(*mem), init);
}

Result<std::unique_ptr<Mempool>> Mempool::create_in(std::byte* base, const ObjectLayout& layout,
                                                    const MempoolOptions& o, std::unique_ptr<PrivateMemory> memory,
                                                    const std::function<void(void*, std::uint32_t)>& init) {
  // A ring has at least 2 slots; a pool of one object still needs one.
  auto ring = Ring<void*>::create(o.name, {std::max(2u, std::bit_ceil(o.count)), Sync::multi, Sync::multi});
  if (!ring) return std::unexpected(ring.error());
  auto pool = std::unique_ptr<Mempool>(new Mempool(o, layout, base, std::move(*ring), std::move(memory)));
  for (std::uint32_t i = 0; i < pool->count_; ++i) {
    void* obj = pool->object(i);
    if (init) init(obj, i);
    pool->ring_->enqueue(obj);
  }
  return pool;
}

Mempool::Mempool(const MempoolOptions& o, const ObjectLayout& layout, std::byte* base,
                 std::unique_ptr<Ring<void*>> ring, std::unique_ptr<PrivateMemory> memory)
    : name_(o.name),
      count_(o.count),
      object_bytes_(layout.object_bytes),
      cache_size_(o.cache_size),
      flush_threshold_(o.cache_size * 3 / 2),
      base_(base),
      layout_(layout),
      memory_(std::move(memory)),
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
  const std::size_t unit = off / layout_.unit_bytes, in_unit = off % layout_.unit_bytes;
  if (in_unit % object_bytes_ != 0 || in_unit / object_bytes_ >= layout_.per_unit) return false;
  return unit * layout_.per_unit + in_unit / object_bytes_ < count_;
}

}  // namespace ws
