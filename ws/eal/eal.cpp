// SPDX-License-Identifier: BSD-3-Clause
// Eal: options applied, PCI devices found, arena, drivers, ports, main lcore, launching on lcores.
#include "ws/eal/eal.hpp"

#include <algorithm>

#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/drivers/builtin.hpp"
#include "ws/pci/device.hpp"
#include "ws/pci/vfio.hpp"

namespace ws {
namespace {

// What drivers take from the arena themselves (virtio-user's rings, a few pages per queue).
constexpr std::size_t driver_arena_bytes = 4u << 20;

}  // namespace

SplitArgs split_args(int argc, const char* const* argv) {
  SplitArgs out;
  bool after = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (!after && a == "--") {
      after = true;
      continue;
    }
    (after ? out.app : out.eal).push_back(std::move(a));
  }
  return out;
}

Result<SimdLevel> apply_simd_option(const EalOptions& options) {
  if (options.max_simd_bitwidth != 0) {
    if (auto ok = set_max_simd_bitwidth(options.max_simd_bitwidth); !ok) return std::unexpected(ok.error());
  }
  const SimdLevel level = simd_level();
  log(LogLevel::info, "EAL: SIMD level {} ({} bits; this CPU has {}{})", simd_name(level), simd_bits(level),
      simd_name(cpu_simd_level()), options.max_simd_bitwidth ? ", capped by --force-max-simd-bitwidth" : "");
  return level;
}

void apply_log_options(const EalOptions& options) {
  set_log_level(options.log_level);
  if (options.syslog_facility >= 0) set_log_syslog(options.syslog_facility);
  if (options.version) log_line(LogLevel::info, "EAL: RTE Version: 'wirespeed " WS_VERSION_STRING "'");
}

struct Eal::PciPort {
  pci::Device device;
  std::string devargs;  // "0000:00:04.0[,key=value...]"
};

struct Eal::Vfio {
  std::unique_ptr<pci::vfio::Container> container;
};

Eal::Eal(EalOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<Eal>> Eal::create(EalOptions options, std::size_t arena_bytes, std::string_view memory_for,
                                         const std::function<Result<void>(Eal&)>& before_ports) {
  apply_log_options(options);
  if (auto ok = apply_simd_option(options); !ok) return std::unexpected(ok.error());
  auto eal = std::unique_ptr<Eal>(new Eal(std::move(options)));
  const EalOptions& o = eal->options_;
  const auto main =
      std::find_if(o.lcores.begin(), o.lcores.end(), [&](const LcoreConfig& l) { return l.id == o.main_lcore; });
  if (main == o.lcores.end()) return fail("main lcore {} is not one of the lcores given", o.main_lcore);
  set_lcore_id(main->id);
  if (auto ok = pin_current_thread(main->cpus); !ok) log(LogLevel::warning, "main lcore: {}", ok.error().message);
  register_builtin_drivers(eal->drivers_);
  if (auto ok = eal->find_pci_devices(); !ok) return std::unexpected(ok.error());
  if (auto ok = eal->create_memory(arena_bytes, memory_for); !ok) return std::unexpected(ok.error());
  if (before_ports)
    if (auto ok = before_ports(*eal); !ok) return std::unexpected(ok.error());
  if (auto ok = eal->create_ports(); !ok) return std::unexpected(ok.error());
  return eal;
}

// As DPDK's PCI bus: with -a, those devices (each must exist, have a driver and be ours to
// drive); otherwise every device bound to vfio-pci or uio_pci_generic that a driver takes, but
// those of -b.
// Checked before anything is allocated, so a bad device starts nothing.
Result<void> Eal::find_pci_devices() {
  const EalOptions& o = options_;
  if (o.no_pci) return {};
  if (!o.pci_allow.empty()) {
    for (const std::string& devargs : o.pci_allow) {
      auto addr = pci::Address::parse(std::string_view(devargs).substr(0, devargs.find(',')));
      if (!addr) return std::unexpected(addr.error());
      if (std::any_of(pci_.begin(), pci_.end(), [&](const PciPort& p) { return p.device.address() == *addr; }))
        return fail("-a {}: the device is given twice", addr->to_string());
      auto dev = pci::Device::open(*addr);
      if (!dev) return std::unexpected(dev.error());
      if (!drivers_.find_for_pci(dev->id()))
        return fail("-a {}: no driver takes PCI device {} (drivers of PCI devices: {})", devargs, dev->describe(),
                    drivers_.describe_pci_ids());
      if (auto ok = dev->check_binding(); !ok) return std::unexpected(ok.error());
      // The device string names it as DPDK prints it, whichever form was given.
      const auto comma = devargs.find(',');
      pci_.push_back({std::move(*dev), addr->to_string() + (comma == std::string::npos ? "" : devargs.substr(comma))});
    }
    std::sort(pci_.begin(), pci_.end(),
              [](const PciPort& a, const PciPort& b) { return a.device.address() < b.device.address(); });
  } else {
    for (pci::Device& dev : pci::scan()) {
      const bool blocked = std::find(o.pci_block.begin(), o.pci_block.end(), dev.address()) != o.pci_block.end();
      const bool ours = dev.driver() == "uio_pci_generic" || dev.on_vfio();
      if (blocked || !ours || !drivers_.find_for_pci(dev.id())) continue;
      std::string name = dev.name();
      pci_.push_back({std::move(dev), std::move(name)});
    }
  }
  return open_vfio();
}

// One IOVA mode serves the whole arena: IOVAs the IOMMU translates for devices on vfio-pci,
// physical addresses for those on uio_pci_generic (or on no driver), which no IOMMU translates.
// So the devices of one run are all on vfio-pci or none is. Their container and device fds are
// opened here, before any memory: a group that is not viable starts nothing.
Result<void> Eal::open_vfio() {
  const auto vfio = std::find_if(pci_.begin(), pci_.end(), [](const PciPort& p) { return p.device.on_vfio(); });
  const auto other = std::find_if(pci_.begin(), pci_.end(), [](const PciPort& p) { return !p.device.on_vfio(); });
  if (vfio != pci_.end() && other != pci_.end())
    return fail(
        "PCI device {} is on vfio-pci and PCI device {} on {}: one run drives its devices through the IOMMU "
        "or without it, not both; bind {} to vfio-pci too: {}",
        vfio->device.describe(), other->device.describe(),
        other->device.driver().empty() ? "no driver" : other->device.driver(), other->device.name(),
        pci::bind_commands(other->device.address(), other->device.driver(), pci::vfio::driver_name));
  if (other != pci_.end() && options_.iova_mode == IovaMode::va)
    return fail(
        "--iova-mode=va: PCI device {} is on {}, which has no IOMMU, so the device needs physical addresses: use "
        "--iova-mode=pa (the default with uio_pci_generic), or put the device behind the IOMMU: {}",
        other->device.describe(), other->device.driver().empty() ? "no driver" : other->device.driver(),
        pci::bind_commands(other->device.address(), other->device.driver(), pci::vfio::driver_name));
  if (vfio == pci_.end()) return {};
  if (options_.iova_mode == IovaMode::pa)
    return fail(
        "--iova-mode=pa: PCI device {} is on vfio-pci, behind the IOMMU, which translates the IOVAs we choose "
        "inside its aperture: drop --iova-mode (va is the default with vfio-pci)",
        vfio->device.describe());
  auto container = pci::vfio::Container::open(vfio->device.describe());
  if (!container) return std::unexpected(container.error());
  vfio_ = std::make_unique<Vfio>(Vfio{std::move(*container)});
  for (PciPort& p : pci_) {
    auto fd = vfio_->container->add_device(p.device.name(), p.device.path(), p.device.describe());
    if (!fd) return std::unexpected(fd.error());
    p.device.attach_vfio(std::move(*fd));
  }
  return {};
}

Result<void> Eal::create_memory(std::size_t arena_bytes, std::string_view memory_for) {
  const EalOptions& o = options_;
  const IovaMode iova = o.iova_mode.value_or(pci_.empty() || vfio_ ? IovaMode::va : IovaMode::pa);
  std::size_t needed = arena_bytes + driver_arena_bytes;
  // Physical addresses: blocks of many objects start on a page (what each page loses to the
  // objects that do not fit is in PktmbufPool::memory_bytes()).
  if (iova == IovaMode::pa) needed += 4u << 20;
  const std::size_t requested = o.memory_mb << 20;
  if (requested != 0 && requested < needed)
    return fail("-m/--socket-mem {} MiB is too small: {} MiB are needed for {}", o.memory_mb,
                (needed + (1u << 20) - 1) >> 20, memory_for);
  auto arena = Arena::create({o.file_prefix, std::max(requested, needed), o.huge, iova});
  if (!arena) return std::unexpected(arena.error());
  arena_ = std::move(*arena);
  if (vfio_) {  // the arena holds rings and packet buffers only (mbuf headers are private)
    auto at = vfio_->container->map_dma(arena_->base(), arena_->size_bytes(), fmt::format("arena '{}'", o.file_prefix));
    if (!at) {
      std::string devices;
      for (const PciPort& p : pci_) devices += (devices.empty() ? "" : ", ") + p.device.describe();
      return with_context(at.error(), fmt::format("PCI device {} (vfio-pci)", devices));
    }
    arena_->set_iova_base(*at);
  }
  return {};
}

Result<void> Eal::create_ports() {
  for (const PciPort& p : pci_) {  // PCI ports first, as DPDK probes its PCI bus before vdevs
    PortEnv env = port_env();
    auto port = drivers_.create_pci_port(p.device, p.devargs, env);
    if (!port) return std::unexpected(port.error());
    place_port(static_cast<std::uint16_t>(ports_.size()), std::move(*port));
  }
  for (const auto& dev : options_.vdevs)
    if (auto port = create_port(dev); !port) return std::unexpected(port.error());
  return {};
}

Eal::~Eal() {
  for (auto& p : ports_) {
    if (p->started()) p->stop();
    p->release_mbufs();
  }
  ports_.clear();
  pools_.clear();
}

Result<PktmbufPool*> Eal::create_pktmbuf_pool(const PktmbufPool::Options& options) {
  auto pool = PktmbufPool::create(*arena_, options);
  if (!pool) return std::unexpected(pool.error());
  pools_.push_back(std::move(*pool));
  return pools_.back().get();
}

Result<Port*> Eal::create_port(std::string_view device) {
  if (ports_.size() >= 0xffff) return fail("{}: too many ports ({})", device, ports_.size());
  auto port = drivers_.create_port(device, port_env());
  if (!port) return std::unexpected(port.error());
  return &place_port(static_cast<std::uint16_t>(ports_.size()), std::move(*port));
}

Port& Eal::place_port(std::uint16_t id, std::unique_ptr<Port> port) {
  port->set_id(id);
  if (id == ports_.size()) {
    ports_.push_back(std::move(port));
  } else {
    ports_.at(id) = std::move(port);
  }
  return *ports_[id];
}

std::vector<unsigned> Eal::lcore_ids() const {
  std::vector<unsigned> ids;
  for (const auto& l : options_.lcores) ids.push_back(l.id);
  return ids;
}

bool Eal::has_lcore(unsigned id) const noexcept {
  return std::any_of(options_.lcores.begin(), options_.lcores.end(), [&](const LcoreConfig& l) { return l.id == id; });
}

void Eal::run_on_lcores(const std::function<void(unsigned lcore)>& body) {
  std::vector<LcoreThread> workers;
  workers.reserve(options_.lcores.size());
  for (const auto& l : options_.lcores)
    if (l.id != options_.main_lcore) workers.emplace_back(l, [&body, id = l.id] { body(id); });
  body(options_.main_lcore);
  for (auto& w : workers) w.join();
}

}  // namespace ws
