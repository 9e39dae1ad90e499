// SPDX-License-Identifier: BSD-3-Clause
// VFIO container, groups and device fds; the IOVA capability chain; choosing IOVAs.
#include "ws/pci/vfio.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/vfio.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>

#include "ws/core/log.hpp"

namespace ws::pci::vfio {
namespace {

namespace fs = std::filesystem;

// The drivers that leave a group viable (the kernel's vfio_dev_driver_allowed, and bridges).
bool leaves_group_viable(std::string_view driver) {
  return driver.empty() || driver == driver_name || driver == "pci-stub" || driver == "pcieport";
}

std::string driver_of(const fs::path& device_dir) {
  std::error_code ec;
  const fs::path link = device_dir / "driver";
  if (!fs::is_symlink(link, ec)) return "";
  return fs::read_symlink(link, ec).filename().string();
}

// VFIO_DEVICE_GET_REGION_INFO for region `index` (a BAR, or the config space).
Result<vfio_region_info> region_info(int fd, unsigned index, std::string_view who, std::string_view what) {
  vfio_region_info info{};
  info.argsz = sizeof info;
  info.index = index;
  if (::ioctl(fd, VFIO_DEVICE_GET_REGION_INFO, &info) != 0)
    return fail("PCI device {}: VFIO_DEVICE_GET_REGION_INFO ({}): {}", who, what, std::strerror(errno));
  return info;
}

std::string ranges_text(const std::vector<IovaRange>& ranges) {
  std::string out;
  for (const IovaRange& r : ranges) out += fmt::format("{}{:#x}-{:#x}", out.empty() ? "" : ", ", r.first, r.last);
  return out.empty() ? "none" : out;
}

}  // namespace

Result<std::vector<IovaRange>> parse_iova_ranges(std::span<const std::uint8_t> info, std::string_view who) {
  vfio_iommu_type1_info head{};
  if (info.size() < sizeof head)
    return fail("PCI device {}: VFIO_IOMMU_GET_INFO returned {} bytes, less than its {}-byte header", who, info.size(),
                sizeof head);
  std::memcpy(&head, info.data(), sizeof head);
  std::vector<IovaRange> ranges;
  if ((head.flags & VFIO_IOMMU_INFO_CAPS) == 0) return ranges;
  // Each capability lies after the header and after the one before it: offsets only grow.
  std::size_t floor = sizeof head;
  for (std::size_t off = head.cap_offset; off != 0;) {
    vfio_info_cap_header cap{};
    if (off < floor || off % 4 != 0 || off > info.size() || info.size() - off < sizeof cap)
      return fail("PCI device {}: VFIO_IOMMU_GET_INFO capability at offset {} lies outside {}..{} of the reply", who,
                  off, floor, info.size());
    std::memcpy(&cap, info.data() + off, sizeof cap);
    if (cap.id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE) {
      vfio_iommu_type1_info_cap_iova_range list{};
      if (info.size() - off < sizeof list) return fail("PCI device {}: IOVA range capability is truncated", who);
      std::memcpy(&list, info.data() + off, sizeof list);
      const std::size_t bytes = std::size_t{list.nr_iovas} * sizeof(vfio_iova_range);
      if (list.nr_iovas == 0 || info.size() - off - sizeof list < bytes)
        return fail("PCI device {}: IOVA range capability of {} ranges does not fit the {}-byte reply", who,
                    list.nr_iovas, info.size());
      for (std::uint32_t i = 0; i < list.nr_iovas; ++i) {
        vfio_iova_range r{};
        std::memcpy(&r, info.data() + off + sizeof list + i * sizeof r, sizeof r);
        if (r.start > r.end)
          return fail("PCI device {}: IOVA range {:#x}-{:#x} ends before it starts", who, r.start, r.end);
        ranges.push_back({r.start, r.end});
      }
    }
    floor = off + sizeof cap;
    off = cap.next;
  }
  std::sort(ranges.begin(), ranges.end(), [](const IovaRange& a, const IovaRange& b) { return a.first < b.first; });
  return ranges;
}

Result<std::uint64_t> choose_iova(const std::vector<IovaRange>& ranges, std::uint64_t size, std::uint64_t align,
                                  std::uint64_t floor, std::string_view who) {
  const std::vector<IovaRange> all{{0, ~std::uint64_t{0}}};
  for (const IovaRange& r : ranges.empty() ? all : ranges) {
    const std::uint64_t lowest = std::max(r.first, floor);
    if (lowest > ~std::uint64_t{0} - (align - 1)) continue;
    const std::uint64_t start = (lowest + align - 1) & ~(align - 1);
    if (size != 0 && start <= r.last && r.last - start >= size - 1) return start;
  }
  return fail("PCI device {}: no IOVA range of the IOMMU holds {} bytes aligned to {:#x} above {:#x} (ranges: {})", who,
              size, align, floor, ranges_text(ranges));
}

Result<int> iommu_group(const std::string& device_path, std::string_view who) {
  std::error_code ec;
  const fs::path link = fs::path(device_path) / "iommu_group";
  if (!fs::is_symlink(link, ec))
    return fail(
        "PCI device {} is in no IOMMU group ({} is missing): this kernel runs without an IOMMU. Enable it in "
        "the firmware and boot with intel_iommu=on (or amd_iommu=on), or drive the device without one: bind "
        "it to uio_pci_generic and use --iova-mode=pa",
        who, link.string());
  const std::string name = fs::read_symlink(link, ec).filename().string();
  int n = -1;
  auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), n);
  if (err != std::errc{} || end != name.data() + name.size() || n < 0)
    return fail("PCI device {}: {} names '{}', not a group number", who, link.string(), name);
  return n;
}

std::vector<std::string> group_blockers(const std::string& device_path) {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path members = fs::canonical(fs::path(device_path) / "iommu_group", ec) / "devices";
  if (ec) return out;
  for (const auto& entry : fs::directory_iterator(members, ec)) {
    const std::string driver = driver_of(entry.path());
    if (!leaves_group_viable(driver))
      out.push_back(fmt::format("{} (bound to {})", entry.path().filename().string(), driver));
  }
  std::sort(out.begin(), out.end());
  return out;
}

DeviceFd::~DeviceFd() { ::close(fd_); }

Result<std::vector<std::uint8_t>> DeviceFd::read_config(std::size_t offset, std::size_t len) const {
  auto info = region_info(fd_, VFIO_PCI_CONFIG_REGION_INDEX, who_, "config space");
  if (!info) return std::unexpected(info.error());
  std::vector<std::uint8_t> bytes(std::min<std::size_t>(len, info->size > offset ? info->size - offset : 0));
  const ssize_t n = ::pread(fd_, bytes.data(), bytes.size(), static_cast<off_t>(info->offset + offset));
  if (n < 0) return fail("PCI device {}: reading config space through VFIO: {}", who_, std::strerror(errno));
  bytes.resize(static_cast<std::size_t>(n));
  return bytes;
}

Result<void> DeviceFd::write_config(std::size_t offset, const void* data, std::size_t len) const {
  auto info = region_info(fd_, VFIO_PCI_CONFIG_REGION_INDEX, who_, "config space");
  if (!info) return std::unexpected(info.error());
  const ssize_t n = ::pwrite(fd_, data, len, static_cast<off_t>(info->offset + offset));
  if (n != static_cast<ssize_t>(len))
    return fail("PCI device {}: writing {} bytes at {:#x} of config space through VFIO: {}", who_, len, offset,
                n < 0 ? std::strerror(errno) : "short write");
  return {};
}

Result<std::pair<std::byte*, std::size_t>> DeviceFd::map_bar(unsigned index, std::size_t min_bytes,
                                                             std::string_view what) const {
  auto got = region_info(fd_, index, who_, fmt::format("BAR {}, {}", index, what));
  if (!got) return std::unexpected(got.error());
  const vfio_region_info& info = *got;
  if (info.size < min_bytes)
    return fail("PCI device {}: BAR {} ({}) is {} bytes; the driver needs at least {}", who_, index, what, info.size,
                min_bytes);
  if ((info.flags & VFIO_REGION_INFO_FLAG_MMAP) == 0)
    return fail("PCI device {}: vfio-pci does not let BAR {} ({}) be mapped (region flags {:#x})", who_, index, what,
                info.flags);
  void* p = ::mmap(nullptr, info.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, static_cast<off_t>(info.offset));
  if (p == MAP_FAILED)
    return fail("PCI device {}: mmap of BAR {} ({}, {} bytes) through VFIO: {}", who_, index, what, info.size,
                std::strerror(errno));
  return std::pair{static_cast<std::byte*>(p), static_cast<std::size_t>(info.size)};
}

Result<std::unique_ptr<Container>> Container::open(std::string_view who) {
  const int fd = ::open(container_path.data(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail("PCI device {} is bound to vfio-pci, but {} cannot be opened: {} (load the modules: modprobe vfio-pci)",
                who, container_path, std::strerror(errno));
  auto c = std::unique_ptr<Container>(new Container(fd));
  if (const int v = ::ioctl(fd, VFIO_GET_API_VERSION); v != VFIO_API_VERSION)
    return fail("PCI device {}: {} speaks VFIO API version {}, we speak {}", who, container_path, v, VFIO_API_VERSION);
  if (::ioctl(fd, VFIO_CHECK_EXTENSION, VFIO_TYPE1v2_IOMMU) != 1)
    return fail(
        "PCI device {}: the kernel's VFIO has no type 1 IOMMU driver: the vfio_iommu_type1 module is not loaded "
        "(modprobe vfio_iommu_type1)",
        who);
  return c;
}

Container::~Container() {
  for (const Mapping& m : mappings_) {
    vfio_iommu_type1_dma_unmap unmap{};
    unmap.argsz = sizeof unmap;
    unmap.iova = m.iova;
    unmap.size = m.size;
    if (::ioctl(fd_, VFIO_IOMMU_UNMAP_DMA, &unmap) != 0)
      log(LogLevel::warning, "VFIO: unmapping IOVA {:#x} ({} bytes): {}", m.iova, m.size, std::strerror(errno));
  }
  for (const auto& [n, fd] : groups_) ::close(fd);
  ::close(fd_);
}

Result<int> Container::open_group(int group, const std::string& device_path, std::string_view who) {
  if (auto it = groups_.find(group); it != groups_.end()) return it->second;
  const std::string path = fmt::format("/dev/vfio/{}", group);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return fail("PCI device {}: cannot open its IOMMU group {}: {}{}", who, path, std::strerror(errno),
                errno == EBUSY ? " (another process holds the group: one process drives a group at a time)" : "");
  groups_[group] = fd;
  vfio_group_status status{};
  status.argsz = sizeof status;
  if (::ioctl(fd, VFIO_GROUP_GET_STATUS, &status) != 0)
    return fail("PCI device {}: VFIO_GROUP_GET_STATUS on {}: {}", who, path, std::strerror(errno));
  if ((status.flags & VFIO_GROUP_FLAGS_VIABLE) == 0) {
    std::string names;
    for (const std::string& b : group_blockers(device_path)) names += (names.empty() ? "" : ", ") + b;
    return fail(
        "PCI device {}: its IOMMU group {} is not viable: every device in the group must be bound to vfio-pci "
        "or to no driver, and these are not: {}. Bind them to vfio-pci too, or unbind them (echo ADDRESS > "
        "/sys/bus/pci/devices/ADDRESS/driver/unbind), or move the device to a slot of its own",
        who, group, names.empty() ? "(unknown: see /sys/kernel/iommu_groups)" : names);
  }
  if (::ioctl(fd, VFIO_GROUP_SET_CONTAINER, &fd_) != 0)
    return fail("PCI device {}: VFIO_GROUP_SET_CONTAINER on {}: {}", who, path, std::strerror(errno));
  return fd;
}

Result<void> Container::set_iommu(std::string_view who) {
  if (::ioctl(fd_, VFIO_SET_IOMMU, VFIO_TYPE1v2_IOMMU) != 0)
    return fail("PCI device {}: VFIO_SET_IOMMU (type 1 v2): {}", who, std::strerror(errno));
  // The reply grows by its capabilities: ask once for the size, then for the whole of it.
  std::vector<std::uint8_t> buf(sizeof(vfio_iommu_type1_info));
  for (int pass = 0; pass < 2; ++pass) {
    vfio_iommu_type1_info head{};
    head.argsz = static_cast<std::uint32_t>(buf.size());
    std::memcpy(buf.data(), &head, sizeof head);
    if (::ioctl(fd_, VFIO_IOMMU_GET_INFO, buf.data()) != 0)
      return fail("PCI device {}: VFIO_IOMMU_GET_INFO: {}", who, std::strerror(errno));
    std::memcpy(&head, buf.data(), sizeof head);
    if (head.argsz <= buf.size()) break;
    buf.assign(std::min<std::size_t>(head.argsz, 1u << 20), 0);
  }
  auto ranges = parse_iova_ranges(buf, who);
  if (!ranges) return std::unexpected(ranges.error());
  ranges_ = std::move(*ranges);
  iommu_set_ = true;
  log(LogLevel::info, "VFIO: type 1 IOMMU, IOVA ranges {}", ranges_text(ranges_));
  return {};
}

Result<std::shared_ptr<DeviceFd>> Container::add_device(const std::string& address, const std::string& device_path,
                                                        std::string_view who) {
  auto group = iommu_group(device_path, who);
  if (!group) return std::unexpected(group.error());
  auto gfd = open_group(*group, device_path, who);
  if (!gfd) return std::unexpected(gfd.error());
  if (!iommu_set_)
    if (auto ok = set_iommu(who); !ok) return std::unexpected(ok.error());
  const int fd = ::ioctl(*gfd, VFIO_GROUP_GET_DEVICE_FD, address.c_str());
  if (fd < 0)
    return fail("PCI device {}: VFIO_GROUP_GET_DEVICE_FD: {}{}", who, std::strerror(errno),
                errno == EBUSY ? " (another process drives it)" : "");
  return std::make_shared<DeviceFd>(fd, std::string(who));
}

namespace {
std::string map_dma_hint(int err) {
  if (err == ENOMEM) return " (the pages are pinned: raise the locked-memory limit, ulimit -l, or run as root)";
  // vfio_iommu_type1 counts the mappings of a container against its dma_entry_limit parameter.
  if (err == ENOSPC)
    return " (vfio_iommu_type1 allows no more DMA mappings in this container: raise its limit, e.g. echo 65535 > "
           "/sys/module/vfio_iommu_type1/parameters/dma_entry_limit, or load it with dma_entry_limit=65535)";
  return "";
}
}  // namespace

Result<std::uint64_t> Container::map_dma(void* va, std::size_t size, std::string_view what) {
  // 2 MiB alignment lets the IOMMU use large pages; IOVA 0 stays unmapped, so that a descriptor
  // left zeroed points at nothing.
  constexpr std::uint64_t align = 2u << 20;
  auto iova = choose_iova(ranges_, size, align, std::max(next_iova_, align), what);
  if (!iova) return std::unexpected(iova.error());
  vfio_iommu_type1_dma_map map{};
  map.argsz = sizeof map;
  map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
  map.vaddr = reinterpret_cast<std::uint64_t>(va);
  map.iova = *iova;
  map.size = size;
  if (::ioctl(fd_, VFIO_IOMMU_MAP_DMA, &map) != 0)
    return fail("{}: VFIO_IOMMU_MAP_DMA of {} bytes at IOVA {:#x}: {}{}", what, size, *iova, std::strerror(errno),
                map_dma_hint(errno));
  mappings_.push_back({*iova, size});
  next_iova_ = *iova + size;
  log(LogLevel::info, "VFIO: {} ({} bytes) mapped for DMA at IOVA {:#x}", what, size, *iova);
  return *iova;
}

}  // namespace ws::pci::vfio
