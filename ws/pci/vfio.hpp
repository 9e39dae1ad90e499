// SPDX-License-Identifier: BSD-3-Clause
// VFIO (Linux's Documentation/driver-api/vfio.rst): a PCI device bound to vfio-pci is reached
// through three fds. The container (/dev/vfio/vfio) holds one IOMMU address space, the type 1
// IOMMU, into which we map what the device may DMA to; the group (/dev/vfio/N) is the smallest
// set of devices the IOMMU can isolate, and is only usable ("viable") when every device in it is
// bound to vfio-pci or to no driver; the device fd gives the config space and the BARs as
// regions. The device then reaches nothing but what the container maps, at the IOVAs we chose.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"

namespace ws::pci::vfio {

inline constexpr std::string_view driver_name = "vfio-pci";
inline constexpr std::string_view container_path = "/dev/vfio/vfio";

/// One range of IOVAs the IOMMU translates, first and last included (the kernel's form).
struct IovaRange {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};

/// The IOVA ranges in a VFIO_IOMMU_GET_INFO reply (struct vfio_iommu_type1_info and its
/// capability chain), from VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE. Each offset is checked against
/// the buffer and must grow, so a chain that loops or points outside is refused; empty when the
/// kernel (before 5.4) gives no such capability. `who` names the device in errors.
Result<std::vector<IovaRange>> parse_iova_ranges(std::span<const std::uint8_t> info, std::string_view who);

/// The lowest IOVA at or above `floor`, aligned to `align` (a power of two), where `size` bytes
/// fit inside one of `ranges` (all of 64 bits when empty). The error lists the ranges.
Result<std::uint64_t> choose_iova(const std::vector<IovaRange>& ranges, std::uint64_t size, std::uint64_t align,
                                  std::uint64_t floor, std::string_view who);

/// The IOMMU group of the PCI device whose sysfs directory is `device_path` (the number its
/// iommu_group link names). No link: the kernel runs without an IOMMU; the error says what to do.
Result<int> iommu_group(const std::string& device_path, std::string_view who);

/// The devices of the group that `device_path` belongs to that keep it from being viable: bound
/// to a driver other than vfio-pci (or pci-stub, or pcieport for a bridge), as
/// "0000:00:10.1 (bound to virtio-pci)".
std::vector<std::string> group_blockers(const std::string& device_path);

/// A device's fd: its config space and BARs as VFIO regions.
class DeviceFd {
 public:
  DeviceFd(int fd, std::string who) : fd_(fd), who_(std::move(who)) {}
  ~DeviceFd();
  DeviceFd(const DeviceFd&) = delete;
  DeviceFd& operator=(const DeviceFd&) = delete;

  int fd() const noexcept { return fd_; }
  /// Reads up to `len` bytes of config space (VFIO_PCI_CONFIG_REGION_INDEX) from `offset`.
  Result<std::vector<std::uint8_t>> read_config(std::size_t offset, std::size_t len) const;
  Result<void> write_config(std::size_t offset, const void* data, std::size_t len) const;
  /// Maps BAR `index` whole (MAP_SHARED on the device fd at the region's offset); returns its
  /// base and size. Refused when smaller than `min_bytes` or not mappable.
  Result<std::pair<std::byte*, std::size_t>> map_bar(unsigned index, std::size_t min_bytes,
                                                     std::string_view what) const;

 private:
  int fd_;
  std::string who_;
};

/// The process's container: one IOMMU address space shared by every device we drive, and the
/// DMA mappings into it. Destroying it unmaps them and closes the groups.
class Container {
 public:
  /// Opens /dev/vfio/vfio and checks the API version and the type 1 IOMMU driver. `who` is the
  /// first device, named in errors (the modules to load).
  static Result<std::unique_ptr<Container>> open(std::string_view who);
  ~Container();
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;

  /// The device at `address` ("0000:00:04.0"), sysfs directory `device_path`: its group opened,
  /// checked viable and put in this container (the first group sets the IOMMU type), then the
  /// device's fd.
  Result<std::shared_ptr<DeviceFd>> add_device(const std::string& address, const std::string& device_path,
                                               std::string_view who);
  /// Maps [va, va + size) for DMA, readable and writable by the devices, at an IOVA chosen
  /// inside the IOMMU's aperture (VFIO_IOMMU_GET_INFO), above what was mapped before; returns it.
  Result<std::uint64_t> map_dma(void* va, std::size_t size, std::string_view what);

 private:
  explicit Container(int fd) : fd_(fd) {}
  Result<void> set_iommu(std::string_view who);
  Result<int> open_group(int group, const std::string& device_path, std::string_view who);

  int fd_;
  bool iommu_set_ = false;
  std::map<int, int> groups_;  // group number -> fd
  std::vector<IovaRange> ranges_;
  std::uint64_t next_iova_ = 0;
  struct Mapping {
    std::uint64_t iova, size;
  };
  std::vector<Mapping> mappings_;
};

}  // namespace ws::pci::vfio
