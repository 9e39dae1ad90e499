// SPDX-License-Identifier: BSD-3-Clause
// The virtio 1.x PCI transport (virtio 1.2 §4.1), driver side: the vendor capabilities that
// locate the common, notify, ISR and device configuration structures in the BARs, device reset
// and status, feature negotiation, queue setup and the per-queue notify address, the MSI-X
// vectors of configuration changes and of queues. Modern devices only (1af4:1041, and a
// transitional 1af4:1000 through its modern interface). A queue is set up with no vector (we
// poll); a driver asked for interrupts gives it one.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ws/core/result.hpp"
#include "ws/pci/device.hpp"
#include "ws/virtio/net/queues.hpp"

namespace ws::virtio {

// A PCI device's hot path: buffers by their IOVA (the device DMAs), and a notification is a
// 16-bit store of the queue's index at its notify address (§4.1.5.2, no NOTIFICATION_DATA),
// which the polling lcore makes itself: it is our own device's register, no peer's fd.
struct PciHotPath {
  static std::uint64_t buffer_addr(const Mbuf* m) noexcept { return m->buf_iova; }
  static void notify(QueueCommon& q) noexcept {  // none before the queue is set up (RX posted first)
    if (q.notify.doorbell != nullptr) *q.notify.doorbell = static_cast<std::uint16_t>(q.ring);
  }
};

// Capability cfg_type values (§4.1.4).
namespace pci_cap {
inline constexpr std::uint8_t common = 1, notify = 2, isr = 3, device = 4, pci_cfg = 5;
}

// Where one configuration structure is (struct virtio_pci_cap, §4.1.4).
struct PciCapRegion {
  std::uint8_t bar = 0;
  std::uint32_t offset = 0;
  std::uint32_t length = 0;
  bool present = false;
};

// Parses the vendor-specific capabilities of `config` (a device's config space): the first
// structure of each type, the notify multiplier. Errors name `who` and the bad capability.
struct PciLayout {
  PciCapRegion common, notify, isr, device;
  std::uint32_t notify_off_multiplier = 0;
};
Result<PciLayout> parse_virtio_caps(const std::vector<std::uint8_t>& config, std::string_view who);

class PciTransport {
 public:
  // Finds the structures, maps the BARs they are in (each must hold them), checks that the
  // common configuration is the size virtio 1.0 gives it.
  static Result<std::unique_ptr<PciTransport>> open(const pci::Device& dev);

  // Writes 0 to device_status and waits for it to read 0 (§4.1.4.3.2).
  Result<void> reset(std::chrono::milliseconds timeout);
  void add_status(std::uint8_t bits);
  std::uint8_t status() const;
  std::uint64_t device_features() const;
  // Writes the driver's features, sets FEATURES_OK and checks the device kept it (§3.1.1).
  Result<void> set_features(std::uint64_t features);
  std::uint16_t num_queues() const;
  // The largest size queue `q` takes (0: no such queue).
  std::uint16_t max_queue_size(std::uint16_t q) const;
  // Programs queue `q` (size and the areas' IOVAs), enables it, and returns its notify address.
  Result<volatile std::uint16_t*> setup_queue(std::uint16_t q, std::uint16_t size, std::uint64_t desc,
                                              std::uint64_t driver, std::uint64_t device);
  // Device-specific configuration: `len` bytes at `offset` (8-bit fields, e.g. a MAC), or one
  // 16-bit field, each read until the configuration generation is the same before and after
  // (§2.5.1), with the access width the field has (§4.1.3.1).
  Result<void> read_device_config(std::size_t offset, void* out, std::size_t len) const;
  Result<std::uint16_t> read_device_config16(std::size_t offset) const;
  // The MSI-X vector of configuration changes (msix_config, §4.1.4.3); returns the value read
  // back: 0xffff (VIRTIO_MSI_NO_VECTOR) when the device refused it. A reset clears it.
  std::uint16_t set_config_vector(std::uint16_t vector) const;
  // The MSI-X vector of queue `q` (queue_msix_vector), the same way: returns the value read back,
  // 0xffff when the device refused it (a vector beyond its table). A reset clears it.
  std::uint16_t set_queue_vector(std::uint16_t q, std::uint16_t vector) const;
  // ISR status (§4.1.4.5): bit 0 a queue interrupt, bit 1 a configuration change; reading it
  // clears both and lowers INTx.
  std::uint8_t read_isr() const;
  const std::string& name() const { return name_; }

 private:
  PciTransport() = default;
  std::byte* at(const PciCapRegion& r) const { return bars_.at(r.bar).base() + r.offset; }
  template <class V>
  V common_read(std::size_t off) const {
    return *reinterpret_cast<const volatile V*>(common_ + off);
  }
  template <class V>
  void common_write(std::size_t off, V v) const {
    *reinterpret_cast<volatile V*>(common_ + off) = v;
  }

  std::string name_;
  std::map<std::uint8_t, pci::Bar> bars_;
  PciLayout layout_;
  std::byte* common_ = nullptr;
  std::byte* notify_ = nullptr;
  std::byte* device_cfg_ = nullptr;
};

}  // namespace ws::virtio
