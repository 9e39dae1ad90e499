// SPDX-License-Identifier: BSD-3-Clause
// Eal: arena, drivers, ports from --vdev, main lcore and launching on lcores.
#include "ws/eal/eal.hpp"

#include <algorithm>

#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/drivers/builtin.hpp"

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

Result<std::unique_ptr<Eal>> Eal::create(EalOptions options, std::size_t arena_bytes) {
  apply_log_options(options);
  if (auto ok = apply_simd_option(options); !ok) return std::unexpected(ok.error());
  auto eal = std::unique_ptr<Eal>(new Eal(std::move(options)));
  const EalOptions& o = eal->options_;
  // PCI devices need physical addresses and their own start-up order (wirespeed-testpmd's
  // find_pci_devices); until Eal does the same, it refuses them rather than ignore them.
  if (!o.pci_allow.empty() || (o.iova_mode && *o.iova_mode == IovaMode::pa))
    return fail("{}: ws::Eal drives virtual devices (--vdev) only; PCI devices and --iova-mode=pa are "
                "wirespeed-testpmd's for now",
                !o.pci_allow.empty() ? "-a " + o.pci_allow.front() : std::string("--iova-mode=pa"));
  const auto main = std::find_if(o.lcores.begin(), o.lcores.end(), [&](const LcoreConfig& l) { return l.id == o.main_lcore; });
  if (main == o.lcores.end()) return fail("main lcore {} is not one of the lcores given", o.main_lcore);
  set_lcore_id(main->id);
  if (auto ok = pin_current_thread(main->cpus); !ok) log(LogLevel::warning, "main lcore: {}", ok.error().message);
  arena_bytes += driver_arena_bytes;
  const std::size_t requested = o.memory_mb << 20;
  if (requested != 0 && requested < arena_bytes)
    return fail("-m/--socket-mem {} MiB is too small: this application needs {} MiB; raise -m", o.memory_mb,
                (arena_bytes + (1u << 20) - 1) >> 20);
  auto arena = Arena::create({o.file_prefix, std::max(requested, arena_bytes), o.huge});
  if (!arena) return std::unexpected(arena.error());
  eal->arena_ = std::move(*arena);
  register_builtin_drivers(eal->drivers_);
  for (const auto& dev : o.vdevs)
    if (auto port = eal->create_port(dev); !port) return std::unexpected(port.error());
  return eal;
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
  auto port = drivers_.create_port(device, {arena_.get(), static_cast<unsigned>(options_.lcores.size())});
  if (!port) return std::unexpected(port.error());
  (*port)->set_id(static_cast<std::uint16_t>(ports_.size()));
  ports_.push_back(std::move(*port));
  return ports_.back().get();
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
