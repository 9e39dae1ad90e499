// SPDX-License-Identifier: BSD-3-Clause
// The device keys both virtio-net drivers take (net_virtio_user and net_virtio): the ring
// layout, the features to negotiate, the offloads and the link speed. One table and one parser,
// so that a key means the same on either driver and is refused with the same message.
#pragma once
#include <array>
#include <cstdint>

#include "ws/core/devargs.hpp"
#include "ws/core/result.hpp"
#include "ws/virtio/features.hpp"

namespace ws::virtio {

/// What the shared keys choose: the features to ask for, and the link speed to report.
struct DriverKeys : DriverChoices {
  std::uint32_t speed_mbps = 10000;  ///< speed=, one of dpdk_link_speeds
};

/// The link speeds DPDK's virtio drivers accept for speed=, in Mbps.
inline constexpr std::array<std::uint32_t, 8> dpdk_link_speeds = {10000, 20000, 25000,  40000,
                                                                  50000, 56000, 100000, 200000};

/// The shared keys' entries, for each driver's ParamSpec table.
namespace keys {
inline constexpr ParamSpec packed_vq_off{"packed_vq", "bool", "0",
                                         "use packed rings (virtio 1.2 §2.8) if the device offers them"};
inline constexpr ParamSpec packed_vq_on{"packed_vq", "bool", "1",
                                        "use packed rings (virtio 1.2 §2.8) if the device offers them"};
inline constexpr ParamSpec in_order{"in_order", "bool", "1", "negotiate IN_ORDER if the device offers it"};
inline constexpr ParamSpec mrg_rxbuf{"mrg_rxbuf", "bool", "1", "negotiate MRG_RXBUF if the device offers it"};
inline constexpr ParamSpec event_idx{"event_idx", "bool", "1",
                                     "negotiate EVENT_IDX if the device offers it (notifications by index)"};
inline constexpr ParamSpec csum{"csum", "bool", "0",
                                "negotiate CSUM/GUEST_CSUM: TX checksum requests and RX checksum state in the header"};
inline constexpr ParamSpec tso{"tso", "bool", "0",
                               "negotiate HOST_TSO4/6 and GUEST_TSO4/6 (with csum=1): TCP segmentation in the header"};
inline constexpr ParamSpec speed{"speed", "uint", "10000",
                                 "link speed in Mbps reported by link status (DPDK's values: 10000 20000 25000 "
                                 "40000 50000 56000 100000 200000)"};
inline constexpr ParamSpec vectorized{"vectorized", "bool", "0",
                                      "accepted for DPDK compatibility: there is no separate vector path here; every "
                                      "ring variant is the one batched path"};
}  // namespace keys

/// Reads the shared keys from `args` (packed_vq defaulting to `packed_default`, as the two
/// drivers' defaults differ, as DPDK's do). Errors name the device, the key and what it takes.
Result<DriverKeys> parse_driver_keys(const DevArgs& args, bool packed_default);

}  // namespace ws::virtio
