// SPDX-License-Identifier: BSD-3-Clause
// Starting a ring of the frontend on a RingSlot: the engine set up from what the frontend sent
// (VhostBackend) and the burst variant picked from the negotiated features, once per start.
// Shared by the port (on the control thread) and the stateful fuzzer.
#pragma once
#include <cstdint>

#include "ws/drivers/vhost/vhost_queues.hpp"
#include "ws/virtio/vhost_user/backend.hpp"

namespace ws::vhost_pmd {

// What the device string and the application decide beyond the frontend's features.
struct SlotOptions {
  bool linear = false;            // linear-buffer=1
  bool legacy_ol = false;         // legacy-ol-flags=1
  std::uint64_t tx_offloads = 0;  // PortConfig::tx_offloads
};

// A burst variant: its function for the burst table and its number (RingSlot::variant).
struct Variant {
  BurstFn fn;
  std::uint8_t id;
};
template <bool Packed, bool Mergeable, bool Offload>
Variant tx_variant_of() noexcept {
  return {&tx_burst<Packed, Mergeable, Offload>, tx_variant<Packed, Mergeable, Offload>};
}
template <bool Packed, bool InOrder, HdrIn In, bool Linear>
Variant rx_variant_of() noexcept {
  return {&rx_burst<Packed, InOrder, In, Linear>, rx_variant<Packed, InOrder, In, Linear>};
}

template <bool Packed>
Variant pick_enqueue(bool mergeable, bool offload) noexcept {
  if (offload) return mergeable ? tx_variant_of<Packed, true, true>() : tx_variant_of<Packed, false, true>();
  return mergeable ? tx_variant_of<Packed, true, false>() : tx_variant_of<Packed, false, false>();
}

// In order, chains are returned in batches: only on the frontend's TX ring of a packed layout
// (its RX ring needs each buffer's length; split rings return every used entry).
template <bool Packed, bool InOrder, HdrIn In>
Variant pick_dequeue(bool linear) noexcept {
  return linear ? rx_variant_of<Packed, InOrder, In, true>() : rx_variant_of<Packed, InOrder, In, false>();
}
template <bool Packed, bool InOrder>
Variant pick_dequeue(HdrIn in, bool linear) noexcept {
  switch (in) {
    case HdrIn::compliant:
      return pick_dequeue<Packed, InOrder, HdrIn::compliant>(linear);
    case HdrIn::legacy:
      return pick_dequeue<Packed, InOrder, HdrIn::legacy>(linear);
    case HdrIn::ignore:
      break;
  }
  return pick_dequeue<Packed, InOrder, HdrIn::ignore>(linear);
}
template <bool Packed>
Variant pick_dequeue(bool in_order, HdrIn in, bool linear) noexcept {
  if constexpr (Packed) {
    if (in_order) return pick_dequeue<true, true>(in, linear);
  }
  return pick_dequeue<Packed, false>(in, linear);
}

// Where a ring started, as the caller logs it: a split ring resumes at the used index it holds,
// which differs from the frontend's base only when the ring ran on without us (see
// SplitDevice::init); a packed ring starts at its base.
struct SlotStart {
  std::uint16_t base = 0;     // what SET_VRING_BASE sent
  std::uint16_t resumed = 0;  // split: next avail entry taken and next used entry written
  bool resynced() const noexcept { return resumed != base; }
};

// Control path, slot stopped: sets `s` up for ring `r` of `be` (started there) and picks its
// variant: dequeue on the frontend's TX rings (odd), enqueue on its RX rings (even). The caller
// publishes s.burst in the port's table, then opens the slot (start()). `fresh` (the first start
// since the device was reset) clears a broken state: a ring a frontend broke stays broken across
// its kicks.
inline SlotStart start_slot(RingSlot& s, const virtio::VhostBackend& be, std::uint32_t r, bool fresh,
                            const SlotOptions& o) noexcept {
  if (fresh) {
    s.health.reset();
    s.broken_logged = false;
  }
  const virtio::VringSetup& v = be.ring(r);
  const std::uint64_t f = be.features();
  const bool indirect = virtio::has(f, virtio::feature::indirect_desc);
  const bool mrg = virtio::has(f, virtio::feature::mrg_rxbuf);
  const bool event_idx = virtio::has(f, virtio::feature::event_idx);  // §2.7.10 / §2.8.10
  // Offload variants only where there is something to map: the frontend's headers carry
  // requests (CSUM/HOST_TSO), ours may (GUEST_*), or the application will ask for TX offloads
  // that must then be done in software (as DPDK's net_vhost tx_sw_csum).
  s.offload = virtio::HdrOffloads::device_tx(f);
  const HdrIn in = !virtio::has(f, virtio::feature::csum) ? HdrIn::ignore
                   : o.legacy_ol                          ? HdrIn::legacy
                                                          : HdrIn::compliant;
  const bool ol_out = s.offload.any() || o.tx_offloads != 0;
  const bool in_order = virtio::has(f, virtio::feature::in_order);
  const bool rx = r % 2 == 1;
  SlotStart where{v.base, v.base};
  Variant picked{};
  s.packed_ring = be.packed();
  if (be.packed()) {
    s.packed.init({v.num, reinterpret_cast<virtio::PackedDesc*>(v.desc),
                   reinterpret_cast<virtio::EventSuppress*>(v.avail), reinterpret_cast<virtio::EventSuppress*>(v.used)},
                  &be.memory(), &s.health, indirect, event_idx, v.base);
    s.packed.suppress_kicks(true);
    picked = rx ? pick_dequeue<true>(in_order, in, o.linear) : pick_enqueue<true>(mrg, ol_out);
  } else {
    where.resumed = s.split.init({v.num, reinterpret_cast<virtio::SplitDesc*>(v.desc),
                                  reinterpret_cast<std::uint16_t*>(v.avail), reinterpret_cast<std::uint16_t*>(v.used)},
                                 &be.memory(), &s.health, indirect, event_idx);
    s.split.suppress_kicks(true);
    picked = rx ? pick_dequeue<false>(in_order, in, o.linear) : pick_enqueue<false>(mrg, ol_out);
  }
  s.variant = picked.id;
  s.burst.store(picked.fn, std::memory_order_release);
  return where;
}

// Control path: closes the slot (no lcore inside once this returns) and forgets its variant; the
// caller publishes the stopped function.
inline void stop_slot(RingSlot& s) noexcept {
  s.stop();
  s.burst.store(nullptr, std::memory_order_release);
}

// GET_VRING_BASE's answer for a stopped slot: the next avail index (packed: bit 15 the wrap).
inline std::uint16_t last_avail_idx(const RingSlot& s, bool packed) noexcept {
  return packed ? s.packed.last_avail_idx() : s.split.last_avail_idx();
}

}  // namespace ws::vhost_pmd
