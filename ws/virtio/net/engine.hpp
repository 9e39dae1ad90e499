// SPDX-License-Identifier: BSD-3-Clause
// The driver side of a virtqueue behind one interface: SplitDriver and PackedDriver both start
// from a RingArea and post, publish, reclaim and drain the same way, so queue code is written
// once and the ring format is a template parameter (DriverEngine<Packed, InOrder>).
#pragma once
#include <concepts>
#include <cstdint>
#include <type_traits>

#include "ws/virtio/ring/packed_driver.hpp"
#include "ws/virtio/ring/split_driver.hpp"

namespace ws::virtio {

// What queue code may call on a driver engine (hot path: everything but init and drain). A
// burst posts through begin_posts(), Posts::add() and end_posts(); post() is one of those.
template <class E, class Cookie>
concept DriverRingEngine = requires(E& e, const RingArea& area, QueueHealth* health, const Buffer* bufs, Cookie cookie,
                                    Cookie* cookies, std::uint32_t* lens, std::uint16_t n) {
  e.init(area, health, true);
  { e.free_descs() } noexcept -> std::convertible_to<std::uint32_t>;
  { e.post(bufs, n, cookie) } noexcept -> std::same_as<bool>;
  { e.begin_posts().add(bufs, n, cookie) } noexcept -> std::same_as<bool>;
  e.end_posts(e.begin_posts());
  { e.publish() } noexcept -> std::same_as<bool>;  // whether the device wants a notification
  e.suppress_interrupts(true);
  { e.reclaim(cookies, lens, n) } noexcept -> std::same_as<std::uint16_t>;
  { e.outstanding() } noexcept -> std::convertible_to<std::uint32_t>;  // chains posted, not reclaimed
  e.drain([](Cookie) {});
};

template <bool Packed, bool InOrder, class Cookie>
using DriverEngine = std::conditional_t<Packed, PackedDriver<Cookie, InOrder>, SplitDriver<Cookie, InOrder>>;

static_assert(DriverRingEngine<DriverEngine<false, false, void*>, void*>);
static_assert(DriverRingEngine<DriverEngine<false, true, void*>, void*>);
static_assert(DriverRingEngine<DriverEngine<true, false, void*>, void*>);
static_assert(DriverRingEngine<DriverEngine<true, true, void*>, void*>);

}  // namespace ws::virtio
