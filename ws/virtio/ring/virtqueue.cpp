// SPDX-License-Identifier: BSD-3-Clause
// Virtqueue control-path helpers: error names for xstats, ring layout checks.
#include "ws/virtio/ring/virtqueue.hpp"

#include <fmt/format.h>

#include <cstdint>

#include "ws/virtio/ring/packed.hpp"
#include "ws/virtio/ring/split.hpp"

namespace ws::virtio {

std::string_view queue_error_name(QueueError e) noexcept {
  switch (e) {
    case QueueError::head_out_of_range:
      return "head_out_of_range";
    case QueueError::next_out_of_range:
      return "next_out_of_range";
    case QueueError::chain_loop:
      return "chain_loop";
    case QueueError::indirect_bad_length:
      return "indirect_bad_length";
    case QueueError::indirect_nested:
      return "indirect_nested";
    case QueueError::indirect_with_next:
      return "indirect_with_next";
    case QueueError::indirect_disabled:
      return "indirect_disabled";
    case QueueError::bad_address:
      return "bad_address";
    case QueueError::read_after_write:
      return "read_after_write";
    case QueueError::too_many_segments:
      return "too_many_segments";
    case QueueError::avail_index_jump:
      return "avail_index_jump";
    case QueueError::packed_bad_id:
      return "packed_bad_id";
    case QueueError::packed_bad_wrap:
      return "packed_bad_wrap";
    case QueueError::too_many_taken:
      return "too_many_taken";
    case QueueError::used_bad_id:
      return "used_bad_id";
    case QueueError::used_index_jump:
      return "used_index_jump";
    case QueueError::used_bad_length:
      return "used_bad_length";
    case QueueError::used_bad_num_buffers:
      return "used_bad_num_buffers";
    case QueueError::count_:
      break;
  }
  return "unknown";
}

std::string queue_error_detail(QueueError e, std::uint32_t detail) {
  const auto seen = detail >> 16, taken = detail & 0xffff;
  switch (e) {
    case QueueError::avail_index_jump:
      return fmt::format("{} (avail idx {} with {} taken)", queue_error_name(e), seen, taken);
    case QueueError::used_index_jump:
      return fmt::format("{} (used idx {} with {} reclaimed)", queue_error_name(e), seen, taken);
    case QueueError::used_bad_id:
      return fmt::format("{} (id {})", queue_error_name(e), detail);
    case QueueError::used_bad_length:
      return fmt::format("{} (length {})", queue_error_name(e), detail);
    case QueueError::used_bad_num_buffers:
      return fmt::format("{} (num_buffers {})", queue_error_name(e), detail);
    default:
      return std::string(queue_error_name(e));
  }
}

namespace {
bool aligned(const void* p, std::uintptr_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }
}  // namespace

Result<void> check_split_ring(const SplitRing& r) {
  if (r.size == 0 || r.size > queue_size_max || (r.size & (r.size - 1)) != 0)
    return fail("split ring: size {} refused, expected a power of two in 1..{}", r.size, queue_size_max);
  if (r.desc == nullptr || r.avail == nullptr || r.used == nullptr) return fail("split ring: an area is not mapped");
  if (!aligned(r.desc, 16) || !aligned(r.avail, 2) || !aligned(r.used, 4))
    return fail(
        "split ring: misaligned areas (desc {}, avail {}, used {}), expected 16/2/4-byte alignment (virtio 1.2 §2.7)",
        static_cast<const void*>(r.desc), static_cast<const void*>(r.avail), static_cast<const void*>(r.used));
  return {};
}

Result<void> check_packed_ring(const PackedRing& r) {
  if (r.size == 0 || r.size > queue_size_max)
    return fail("packed ring: size {} refused, expected 1..{}", r.size, queue_size_max);
  if (r.desc == nullptr || r.driver_event == nullptr || r.device_event == nullptr)
    return fail("packed ring: an area is not mapped");
  if (!aligned(r.desc, 16) || !aligned(r.driver_event, 4) || !aligned(r.device_event, 4))
    return fail("packed ring: misaligned areas, expected 16/4/4-byte alignment (virtio 1.2 §2.8.10)");
  return {};
}

}  // namespace ws::virtio
