// SPDX-License-Identifier: BSD-3-Clause
// One mechanism for every driver whose queues come in variants (feature choices made template
// parameters, so a burst never tests them): make_rx_variant/make_tx_variant instantiate the
// template for the run-time flags and return the queue with the burst function of its exact
// type. Publishing it (Port::publish_rx(queue, v.entry())) then needs no cast and no search.
#pragma once
#include <array>
#include <cstddef>
#include <memory>

#include "ws/port/port.hpp"

namespace ws {

template <class Base>
struct QueueVariant {
  std::unique_ptr<Base> queue;
  BurstFn burst = nullptr;  // rx_burst_fn/tx_burst_fn of the instance's own type, for the SIMD level

  Base* operator->() const noexcept { return queue.get(); }
  Base& operator*() const noexcept { return *queue; }
  Base* get() const noexcept { return queue.get(); }
  BurstEntry entry() const noexcept { return {burst, queue.get()}; }
};

namespace detail {

enum class Way { rx, tx };

// Walks the flags one by one at compile time (2^N instances), returning the one they name.
template <class Base, Way W, template <bool...> class Q, std::size_t N, bool... Bs>
QueueVariant<Base> pick_variant(const std::array<bool, N>& flags) {
  if constexpr (sizeof...(Bs) == N) {
    using T = Q<Bs...>;
    static_assert(std::is_base_of_v<Base, T>, "every variant derives from the common base");
    QueueVariant<Base> v;
    v.queue = std::make_unique<T>();
    if constexpr (W == Way::rx) {
      v.burst = rx_burst_fn<T>(simd_level());
    } else {
      v.burst = tx_burst_fn<T>(simd_level());
    }
    return v;
  } else {
    return flags[sizeof...(Bs)] ? pick_variant<Base, W, Q, N, Bs..., true>(flags)
                                : pick_variant<Base, W, Q, N, Bs..., false>(flags);
  }
}

}  // namespace detail

// Q<flags...> as an RX queue (Q must satisfy RxQueue for every combination), e.g.
//   make_rx_variant<RxCommon, VirtioRx>(packed, in_order, mergeable, offload)
// An alias template fixes the parameters that are not flags.
template <class Base, template <bool...> class Q, class... Flags>
QueueVariant<Base> make_rx_variant(Flags... flags) {
  return detail::pick_variant<Base, detail::Way::rx, Q, sizeof...(Flags)>(
      std::array<bool, sizeof...(Flags)>{static_cast<bool>(flags)...});
}
template <class Base, template <bool...> class Q, class... Flags>
QueueVariant<Base> make_tx_variant(Flags... flags) {
  return detail::pick_variant<Base, detail::Way::tx, Q, sizeof...(Flags)>(
      std::array<bool, sizeof...(Flags)>{static_cast<bool>(flags)...});
}

}  // namespace ws
