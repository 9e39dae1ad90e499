// SPDX-License-Identifier: BSD-3-Clause
// virtio PCI modern transport: capabilities, BARs, status, features, queues.
#include "ws/virtio/transport/pci.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "ws/virtio/features.hpp"

namespace ws::virtio {
namespace {

// struct virtio_pci_common_cfg (§4.1.4.3), byte offsets. A reset sets msix_config and every
// queue_msix_vector to no vector, which a polling driver keeps.
namespace common {
inline constexpr std::size_t device_feature_select = 0, device_feature = 4, driver_feature_select = 8,
                             driver_feature = 12, msix_config = 16, num_queues = 18, device_status = 20,
                             config_generation = 21, queue_select = 22, queue_size = 24, queue_msix_vector = 26,
                             queue_enable = 28, queue_notify_off = 30, queue_desc = 32, queue_driver = 40,
                             queue_device = 48, bytes = 56;
}  // namespace common
inline constexpr std::uint16_t no_vector = 0xffff;  // VIRTIO_MSI_NO_VECTOR

std::uint32_t le32(const std::vector<std::uint8_t>& c, std::size_t off) {
  return static_cast<std::uint32_t>(c[off]) | static_cast<std::uint32_t>(c[off + 1]) << 8 |
         static_cast<std::uint32_t>(c[off + 2]) << 16 | static_cast<std::uint32_t>(c[off + 3]) << 24;
}

}  // namespace

Result<PciLayout> parse_virtio_caps(const std::vector<std::uint8_t>& config, std::string_view who) {
  auto caps = pci::Device::parse_capabilities(config, who);
  if (!caps) return std::unexpected(caps.error());
  PciLayout l;
  for (const pci::Capability& c : *caps) {
    if (c.id != pci::cap::vendor) continue;
    // struct virtio_pci_cap: vndr, next, len, cfg_type, bar, id, pad[2], offset, length.
    if (c.offset + 16u > config.size())
      return fail("PCI device {}: virtio capability at {:#x} runs past the config space", who, c.offset);
    const std::uint8_t len = config[c.offset + 2u], type = config[c.offset + 3u], bar = config[c.offset + 4u];
    if (len < 16)
      return fail("PCI device {}: virtio capability at {:#x} is {} bytes, less than 16", who, c.offset, len);
    PciCapRegion r{bar, le32(config, c.offset + 8u), le32(config, c.offset + 12u), true};
    PciCapRegion* slot = type == pci_cap::common   ? &l.common
                         : type == pci_cap::notify ? &l.notify
                         : type == pci_cap::isr    ? &l.isr
                         : type == pci_cap::device ? &l.device
                                                   : nullptr;
    if (slot == nullptr || slot->present) continue;  // §4.1.4: the first of each type is the one to use
    if (bar > 5) return fail("PCI device {}: virtio capability at {:#x} names BAR {}", who, c.offset, bar);
    if (type == pci_cap::notify) {
      if (len < 20 || c.offset + 20u > config.size())
        return fail("PCI device {}: the notify capability at {:#x} has no notify_off_multiplier", who, c.offset);
      l.notify_off_multiplier = le32(config, c.offset + 16u);
    }
    *slot = r;
  }
  if (!l.common.present || !l.notify.present || !l.device.present)
    return fail(
        "PCI device {}: no virtio 1.x {} capability: not a modern virtio device (a legacy-only device, "
        "or QEMU's virtio-net-pci with disable-modern=on, is not supported)",
        who,
        !l.common.present   ? "common configuration"
        : !l.notify.present ? "notify"
                            : "device configuration");
  if (l.common.length < common::bytes)
    return fail("PCI device {}: the common configuration is {} bytes; virtio 1.0 gives it {}", who, l.common.length,
                common::bytes);
  return l;
}

Result<std::unique_ptr<PciTransport>> PciTransport::open(const pci::Device& dev) {
  auto config = dev.config();
  if (!config) return std::unexpected(config.error());
  auto layout = parse_virtio_caps(*config, dev.describe());
  if (!layout) return std::unexpected(layout.error());
  auto t = std::unique_ptr<PciTransport>(new PciTransport());
  t->name_ = dev.name();
  t->layout_ = *layout;
  // Each BAR the structures use, mapped once, large enough for all of them.
  std::map<std::uint8_t, std::size_t> need;
  for (const PciCapRegion* r : {&layout->common, &layout->notify, &layout->isr, &layout->device})
    if (r->present) need[r->bar] = std::max<std::size_t>(need[r->bar], std::size_t{r->offset} + r->length);
  for (const auto& [bar, bytes] : need) {
    auto mapped = dev.map_bar(bar, bytes, "virtio structures");
    if (!mapped) return std::unexpected(mapped.error());
    t->bars_.emplace(bar, std::move(*mapped));
  }
  t->common_ = t->at(layout->common);
  t->notify_ = t->at(layout->notify);
  t->device_cfg_ = t->at(layout->device);
  return t;
}

std::uint16_t PciTransport::set_config_vector(std::uint16_t vector) const {
  common_write<std::uint16_t>(common::msix_config, vector);
  return common_read<std::uint16_t>(common::msix_config);
}

std::uint16_t PciTransport::set_queue_vector(std::uint16_t q, std::uint16_t vector) const {
  common_write<std::uint16_t>(common::queue_select, q);
  common_write<std::uint16_t>(common::queue_msix_vector, vector);
  return common_read<std::uint16_t>(common::queue_msix_vector);
}

std::uint8_t PciTransport::read_isr() const {
  if (!layout_.isr.present) return 0;
  return *reinterpret_cast<const volatile std::uint8_t*>(at(layout_.isr));
}

Result<void> PciTransport::reset(std::chrono::milliseconds timeout) {
  common_write<std::uint8_t>(common::device_status, 0);
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (common_read<std::uint8_t>(common::device_status) != 0) {
    if (std::chrono::steady_clock::now() > end)
      return fail("PCI device {}: the virtio device did not finish its reset (device_status still {:#x} after {} ms)",
                  name_, common_read<std::uint8_t>(common::device_status), timeout.count());
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return {};
}

void PciTransport::add_status(std::uint8_t bits) {
  common_write<std::uint8_t>(common::device_status, static_cast<std::uint8_t>(status() | bits));
}

std::uint8_t PciTransport::status() const { return common_read<std::uint8_t>(common::device_status); }

std::uint64_t PciTransport::device_features() const {
  common_write<std::uint32_t>(common::device_feature_select, 0);
  const std::uint64_t lo = common_read<std::uint32_t>(common::device_feature);
  common_write<std::uint32_t>(common::device_feature_select, 1);
  const std::uint64_t hi = common_read<std::uint32_t>(common::device_feature);
  return lo | hi << 32;
}

Result<void> PciTransport::set_features(std::uint64_t features) {
  common_write<std::uint32_t>(common::driver_feature_select, 0);
  common_write<std::uint32_t>(common::driver_feature, static_cast<std::uint32_t>(features));
  common_write<std::uint32_t>(common::driver_feature_select, 1);
  common_write<std::uint32_t>(common::driver_feature, static_cast<std::uint32_t>(features >> 32));
  add_status(status::features_ok);
  if ((status() & status::features_ok) == 0)
    return fail("PCI device {}: the device refused features {:#x} (FEATURES_OK did not stay set)", name_, features);
  return {};
}

std::uint16_t PciTransport::num_queues() const { return common_read<std::uint16_t>(common::num_queues); }

std::uint16_t PciTransport::max_queue_size(std::uint16_t q) const {
  common_write<std::uint16_t>(common::queue_select, q);
  return common_read<std::uint16_t>(common::queue_size);
}

Result<volatile std::uint16_t*> PciTransport::setup_queue(std::uint16_t q, std::uint16_t size, std::uint64_t desc,
                                                          std::uint64_t driver, std::uint64_t device) {
  common_write<std::uint16_t>(common::queue_select, q);
  const std::uint16_t max = common_read<std::uint16_t>(common::queue_size);
  if (max == 0 || size > max)
    return fail("PCI device {}: queue {} takes {} descriptors at most, {} asked", name_, q, max, size);
  common_write<std::uint16_t>(common::queue_size, size);
  common_write<std::uint16_t>(common::queue_msix_vector, no_vector);  // polled: no interrupt
  // 64-bit fields as two 32-bit writes, low half first (§4.1.3.1).
  for (const auto& [off, v] : {std::pair{common::queue_desc, desc}, std::pair{common::queue_driver, driver},
                               std::pair{common::queue_device, device}}) {
    common_write<std::uint32_t>(off, static_cast<std::uint32_t>(v));
    common_write<std::uint32_t>(off + 4, static_cast<std::uint32_t>(v >> 32));
  }
  const std::uint64_t at =
      std::uint64_t{common_read<std::uint16_t>(common::queue_notify_off)} * layout_.notify_off_multiplier;
  if (at + 2 > layout_.notify.length)
    return fail("PCI device {}: queue {}'s notify address (offset {:#x}) is outside the notify structure ({} bytes)",
                name_, q, at, layout_.notify.length);
  common_write<std::uint16_t>(common::queue_enable, 1);
  return reinterpret_cast<volatile std::uint16_t*>(notify_ + at);
}

Result<void> PciTransport::read_device_config(std::size_t offset, void* out, std::size_t len) const {
  if (offset + len > layout_.device.length)
    return fail("PCI device {}: device configuration of {} bytes has no field at {} ({} bytes)", name_,
                layout_.device.length, offset, len);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint8_t before = common_read<std::uint8_t>(common::config_generation);
    auto* dst = static_cast<std::uint8_t*>(out);
    for (std::size_t i = 0; i < len; ++i)
      dst[i] = *reinterpret_cast<const volatile std::uint8_t*>(device_cfg_ + offset + i);
    if (common_read<std::uint8_t>(common::config_generation) == before) return {};
  }
  return fail("PCI device {}: the device configuration kept changing while read", name_);
}

Result<std::uint16_t> PciTransport::read_device_config16(std::size_t offset) const {
  if (offset % 2 != 0 || offset + 2 > layout_.device.length)
    return fail("PCI device {}: device configuration of {} bytes has no 16-bit field at {}", name_,
                layout_.device.length, offset);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint8_t before = common_read<std::uint8_t>(common::config_generation);
    const std::uint16_t v = *reinterpret_cast<const volatile std::uint16_t*>(device_cfg_ + offset);
    if (common_read<std::uint8_t>(common::config_generation) == before) return v;
  }
  return fail("PCI device {}: the device configuration kept changing while read", name_);
}

}  // namespace ws::virtio
