// SPDX-License-Identifier: BSD-3-Clause
// Interrupt vectors over VFIO (VFIO_DEVICE_GET_IRQ_INFO, VFIO_DEVICE_SET_IRQS with eventfds) and
// over uio_pci_generic (/dev/uioN).
#include "ws/pci/irq.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "ws/pci/vfio.hpp"

namespace ws::pci {
namespace {

unsigned vfio_index(IntrMode m) {
  switch (m) {
    case IntrMode::legacy:
      return VFIO_PCI_INTX_IRQ_INDEX;
    case IntrMode::msi:
      return VFIO_PCI_MSI_IRQ_INDEX;
    case IntrMode::msix:
      return VFIO_PCI_MSIX_IRQ_INDEX;
  }
  return VFIO_PCI_INTX_IRQ_INDEX;
}

// Vectors VFIO offers for `mode` with eventfd signalling; 0 when none.
unsigned vfio_vectors(int fd, IntrMode mode) {
  vfio_irq_info info{};
  info.argsz = sizeof info;
  info.index = vfio_index(mode);
  if (::ioctl(fd, VFIO_DEVICE_GET_IRQ_INFO, &info) != 0 || (info.flags & VFIO_IRQ_INFO_EVENTFD) == 0) return 0;
  return info.count;
}

// VFIO_DEVICE_SET_IRQS on `index` for vectors [0, fds.size()): eventfds, or none (disable).
int vfio_set_irqs(int fd, unsigned index, std::uint32_t action, const std::vector<int>& fds, bool data) {
  std::vector<std::uint8_t> buf(sizeof(vfio_irq_set) + fds.size() * sizeof(int));
  vfio_irq_set set{};
  set.argsz = static_cast<std::uint32_t>(buf.size());
  set.flags = action | (data ? VFIO_IRQ_SET_DATA_EVENTFD : VFIO_IRQ_SET_DATA_NONE);
  set.index = index;
  set.start = 0;
  set.count = data || action != VFIO_IRQ_SET_ACTION_TRIGGER ? static_cast<std::uint32_t>(fds.size()) : 0;
  std::memcpy(buf.data(), &set, sizeof set);
  if (data) std::memcpy(buf.data() + sizeof set, fds.data(), fds.size() * sizeof(int));
  return ::ioctl(fd, VFIO_DEVICE_SET_IRQS, buf.data());
}

// The command register's INTx disable bit set or cleared.
Result<void> set_intx_disable(const Device& dev, bool disable) {
  auto c = dev.config();
  if (!c) return std::unexpected(c.error());
  auto command = static_cast<std::uint16_t>((*c)[reg::command] | (*c)[reg::command + 1] << 8);
  command = disable ? command | reg::command_intx_disable : command & ~reg::command_intx_disable;
  return dev.write_config(reg::command, &command, sizeof command);
}

}  // namespace

Result<IntrMode> parse_intr_mode(std::string_view text) {
  if (text == "legacy") return IntrMode::legacy;
  if (text == "msi") return IntrMode::msi;
  if (text == "msix") return IntrMode::msix;
  return fail("--vfio-intr '{}': expected legacy, msi or msix", text);
}

std::string_view intr_mode_name(IntrMode mode) {
  return mode == IntrMode::msix ? "msix" : mode == IntrMode::msi ? "msi" : "legacy";
}

Result<std::unique_ptr<Interrupts>> Interrupts::enable(const Device& dev, std::optional<IntrMode> wanted,
                                                       unsigned vectors) {
  if (dev.vfio_fd() == nullptr) {
    if (wanted && *wanted != IntrMode::legacy)
      return fail("PCI device {} is on {}, which gives INTx only: --vfio-intr={} needs vfio-pci", dev.describe(),
                  dev.driver().empty() ? "no driver" : dev.driver(), intr_mode_name(*wanted));
    auto irq = std::unique_ptr<Interrupts>(new Interrupts(dev, IntrMode::legacy));
    if (auto ok = irq->enable_uio(); !ok) return std::unexpected(ok.error());
    return irq;
  }
  const int fd = dev.vfio_fd()->fd();
  IntrMode mode = IntrMode::legacy;
  if (wanted) {
    mode = *wanted;
    if (vfio_vectors(fd, mode) == 0)
      return fail("PCI device {}: --vfio-intr={}: the device has no such interrupt (VFIO_DEVICE_GET_IRQ_INFO): use {}",
                  dev.describe(), intr_mode_name(mode),
                  vfio_vectors(fd, IntrMode::msix)  ? "msix"
                  : vfio_vectors(fd, IntrMode::msi) ? "msi"
                                                    : "legacy");
  } else if (vfio_vectors(fd, IntrMode::msix) != 0) {
    mode = IntrMode::msix;
  } else if (vfio_vectors(fd, IntrMode::msi) != 0) {
    mode = IntrMode::msi;
  }
  auto irq = std::unique_ptr<Interrupts>(new Interrupts(dev, mode));
  if (auto ok = irq->enable_vfio(vectors); !ok) return std::unexpected(ok.error());
  return irq;
}

Result<void> Interrupts::enable_vfio(unsigned vectors) {
  const int fd = dev_.vfio_fd()->fd();
  const unsigned offered = vfio_vectors(fd, mode_);
  const unsigned n = mode_ == IntrMode::msix ? std::min(vectors, offered) : 1;
  for (unsigned v = 0; v < n; ++v) {
    const int e = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e < 0) return fail("PCI device {}: eventfd: {}", dev_.describe(), std::strerror(errno));
    fds_.push_back(e);
  }
  if (mode_ == IntrMode::legacy)  // vfio-pci keeps INTx masked while the guest-visible bit is set
    if (auto ok = set_intx_disable(dev_, false); !ok) return ok;
  if (vfio_set_irqs(fd, vfio_index(mode_), VFIO_IRQ_SET_ACTION_TRIGGER, fds_, true) != 0)
    return fail("PCI device {}: VFIO_DEVICE_SET_IRQS ({}, {} vectors): {}", dev_.describe(), intr_mode_name(mode_), n,
                std::strerror(errno));
  return {};
}

Result<void> Interrupts::enable_uio() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string name;
  for (const auto& e : fs::directory_iterator(fs::path(dev_.path()) / "uio", ec)) name = e.path().filename().string();
  if (name.empty())
    return fail("PCI device {}: no uio device under {}/uio: is uio_pci_generic bound to it?", dev_.describe(),
                dev_.path());
  const std::string path = "/dev/" + name;
  const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return fail("PCI device {}: cannot open {}: {}", dev_.describe(), path, std::strerror(errno));
  fds_.push_back(fd);
  uio_ = true;
  unmask_intx();
  return {};
}

void Interrupts::unmask_intx() const noexcept {
  if (uio_) {  // uio_pci_generic has no irqcontrol (a write to /dev/uioN fails): config space it is
    (void)set_intx_disable(dev_, false);
  } else if (mode_ == IntrMode::legacy) {
    (void)vfio_set_irqs(dev_.vfio_fd()->fd(), VFIO_PCI_INTX_IRQ_INDEX, VFIO_IRQ_SET_ACTION_UNMASK, {0}, false);
  }
}

void Interrupts::ack(unsigned v) const noexcept {
  std::uint64_t count = 0;  // an eventfd's 8-byte count; uio's is 4 bytes
  (void)!::read(fds_[v], &count, uio_ ? sizeof(std::uint32_t) : sizeof count);
  if (mode_ == IntrMode::legacy) unmask_intx();
}

Interrupts::~Interrupts() {
  if (uio_) {
    (void)set_intx_disable(dev_, true);  // polled again
  } else if (dev_.vfio_fd() != nullptr) {
    (void)vfio_set_irqs(dev_.vfio_fd()->fd(), vfio_index(mode_), VFIO_IRQ_SET_ACTION_TRIGGER, {}, false);
  }
  for (int fd : fds_) ::close(fd);
}

}  // namespace ws::pci
