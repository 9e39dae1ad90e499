// SPDX-License-Identifier: BSD-3-Clause
// The shared virtio-net device keys: parsed and checked once for both drivers.
#include "ws/virtio/net/keys.hpp"

#include <fmt/ranges.h>

#include <algorithm>

namespace ws::virtio {

Result<DriverKeys> parse_driver_keys(const DevArgs& args, bool packed_default) {
  auto packed = args.get_bool("packed_vq", packed_default);
  auto in_order = args.get_bool("in_order", true);
  auto mrg = args.get_bool("mrg_rxbuf", true);
  auto event_idx = args.get_bool("event_idx", true);
  auto csum = args.get_bool("csum", false);
  auto tso = args.get_bool("tso", false);
  auto vectorized = args.get_bool("vectorized", false);  // see keys::vectorized: nothing to do
  for (const auto* b : {&packed, &in_order, &mrg, &event_idx, &csum, &tso, &vectorized})
    if (!*b) return std::unexpected(b->error());
  auto speed = args.get_uint("speed", 10000, 0, UINT32_MAX);
  if (!speed) return std::unexpected(speed.error());
  if (std::find(dpdk_link_speeds.begin(), dpdk_link_speeds.end(), *speed) == dpdk_link_speeds.end())
    return fail("device '{}': key 'speed' value {}: expected a link speed in Mbps that DPDK accepts: {}", args.name(),
                *speed, fmt::join(dpdk_link_speeds, ", "));
  if (*tso && !*csum) return fail("device '{}': key 'tso' needs csum=1 (virtio 1.2 §5.1.3.1)", args.name());
  DriverKeys k;
  k.packed = *packed;
  k.in_order = *in_order;
  k.mrg = *mrg;
  k.event_idx = *event_idx;
  k.csum = *csum;
  k.tso = *tso;
  k.speed_mbps = static_cast<std::uint32_t>(*speed);
  return k;
}

}  // namespace ws::virtio
