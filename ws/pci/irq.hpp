// SPDX-License-Identifier: BSD-3-Clause
// A PCI device's interrupts as fds a thread can wait on (epoll), for the drivers' RX-queue and
// link-state interrupts. Over vfio-pci: eventfds handed to VFIO_DEVICE_SET_IRQS for MSI-X, MSI
// or INTx, chosen by DPDK's --vfio-intr (MSI-X when the device has it, by default). Over
// uio_pci_generic: INTx only, the fd being /dev/uioN (read() gives the interrupt count), whose
// kernel handler masks the interrupt (the command register's INTx disable bit) each time it
// fires; we clear that bit again through config space, as uio_pci_generic has no irqcontrol.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"
#include "ws/pci/device.hpp"
#include "ws/pci/intr_mode.hpp"

namespace ws::pci {

/// The interrupt vectors of one device, each an fd readable when the vector fired. Destroying
/// it disables them (VFIO) or masks INTx again (uio).
class Interrupts {
 public:
  /// Up to `vectors` vectors of `dev` (MSI-X gives as many as its table holds, MSI and INTx
  /// one: the driver then puts every cause on vector 0). `wanted` empty: MSI-X, else MSI, else
  /// INTx, as the device offers (uio_pci_generic: INTx, and any other choice is refused).
  static Result<std::unique_ptr<Interrupts>> enable(const Device& dev, std::optional<IntrMode> wanted,
                                                    unsigned vectors);
  ~Interrupts();
  Interrupts(const Interrupts&) = delete;
  Interrupts& operator=(const Interrupts&) = delete;

  IntrMode mode() const noexcept { return mode_; }
  unsigned count() const noexcept { return static_cast<unsigned>(fds_.size()); }
  /// Vector `v`'s fd (v < count()).
  int fd(unsigned v) const noexcept { return fds_[v]; }
  /// After vector `v` fired and the driver cleared the device's cause: reads the fd's count and,
  /// for INTx (which the kernel masked), unmasks it. Control path or the lcore's wait loop.
  void ack(unsigned v) const noexcept;

 private:
  Interrupts(const Device& dev, IntrMode mode) : dev_(dev), mode_(mode) {}
  Result<void> enable_vfio(unsigned vectors);
  Result<void> enable_uio();
  void unmask_intx() const noexcept;

  const Device& dev_;
  IntrMode mode_;
  std::vector<int> fds_;
  bool uio_ = false;
};

}  // namespace ws::pci
