// SPDX-License-Identifier: BSD-3-Clause
// EAL option parsing.
#include "ws/eal/eal_args.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <optional>

namespace ws {
namespace {

// Splits "--opt=value" or takes the next argument as the value.
struct ArgCursor {
  std::span<const std::string> args;
  std::size_t i = 0;

  bool done() const { return i >= args.size(); }
  std::optional<Error> error;  // set when an option is missing its value

  // If args[i] is `name` or `name=...`, consume it (and its value) into `value`.
  bool take(std::string_view name, std::string& value, bool has_value = true) {
    const std::string& a = args[i];
    if (a == name) {
      if (!has_value) {
        ++i;
        return true;
      }
      if (i + 1 >= args.size()) {
        error = Error{fmt::format("option {} needs a value", name)};
        return false;
      }
      value = args[i + 1];
      i += 2;
      return true;
    }
    if (has_value && a.size() > name.size() && a.starts_with(name) && a[name.size()] == '=') {
      value = a.substr(name.size() + 1);
      ++i;
      return true;
    }
    // Short options may be glued to their value: -l0-1
    if (has_value && name.size() == 2 && name[0] == '-' && name[1] != '-' && a.size() > 2 && a.starts_with(name)) {
      value = a.substr(2);
      ++i;
      return true;
    }
    return false;
  }
};

Result<std::size_t> parse_size(std::string_view option, std::string_view v) {
  std::size_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc{} || end != v.data() + v.size())
    return fail("{} '{}': expected a number of megabytes", option, v);
  return n;
}

// --socket-mem 1024,0 -> total across sockets (our arena is not per socket).
Result<std::size_t> parse_socket_mem(std::string_view v) {
  std::size_t total = 0;
  while (!v.empty()) {
    const auto comma = v.find(',');
    auto n = parse_size("--socket-mem", v.substr(0, comma));
    if (!n) return n;
    total += *n;
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
  }
  return total;
}

// Options whose effect we provide by construction; accepting them keeps scripts unchanged.
constexpr std::string_view satisfied_flags[] = {
    "--in-memory",            // we create no runtime files
    "--single-file-segments", // the arena is always a single memfd
    "--no-shconf", "--no-hpet", "--legacy-mem",
};
constexpr std::string_view satisfied_with_value[] = {
    "-n",              // memory channels: a placement hint for hardware we do not use
    "--huge-dir",      // hugetlb comes from memfd, no mount needed
    "--proc-type",     // only primary processes exist
    "--socket-limit",
};

// "-a 0000:00:04.0,key=value": the address must parse; the keys are the driver's to check.
Result<void> check_pci_devargs(std::string_view option, std::string_view v) {
  const std::string_view addr = v.substr(0, v.find(','));
  auto a = pci::Address::parse(addr);
  if (!a) return fail("{} '{}': {}", option, v, a.error().message);
  return {};
}

}  // namespace

std::string eal_usage() {
  return "EAL options: -l LIST | -c MASK | --lcores MAP, --main-lcore N, --vdev DEVICE (repeatable), "
         "-a|-w PCI_ADDRESS[,key=value...] (repeatable), -b PCI_ADDRESS (repeatable), --no-pci, --iova-mode pa|va, "
         "--no-huge, -m MB | --socket-mem MB[,MB], --file-prefix NAME, --log-level LEVEL, --force-max-simd-bitwidth "
         "64|128|256|512, and accepted for "
         "compatibility: --in-memory, --single-file-segments, -n N, --huge-dir DIR";
}

Result<EalOptions> parse_eal_args(std::span<const std::string> args) {
  EalOptions o;
  bool lcores_set = false;
  bool main_set = false;
  ArgCursor c{args, 0, std::nullopt};
  std::string v;
  auto set_lcores = [&](Result<std::vector<LcoreConfig>> r) -> Result<bool> {
    if (!r) return std::unexpected(r.error());
    if (lcores_set) return fail("lcores given twice: use one of -l, -c, --lcores");
    o.lcores = std::move(*r);
    lcores_set = true;
    return true;
  };
  while (!c.done()) {
    const std::string arg = args[c.i];
    if (c.take("-l", v)) {
      if (auto r = set_lcores(parse_lcore_list(v)); !r) return std::unexpected(r.error());
    } else if (c.take("--lcores", v)) {
      if (auto r = set_lcores(parse_lcore_map(v)); !r) return std::unexpected(r.error());
    } else if (c.take("-c", v)) {
      if (auto r = set_lcores(parse_core_mask(v)); !r) return std::unexpected(r.error());
    } else if (c.take("--main-lcore", v)) {
      auto n = parse_size("--main-lcore", v);
      if (!n) return std::unexpected(n.error());
      o.main_lcore = static_cast<unsigned>(*n);
      main_set = true;
    } else if (c.take("--vdev", v)) {
      o.vdevs.push_back(v);
    } else if (c.take("-a", v) || c.take("-w", v) || c.take("--allow", v) || c.take("--pci-whitelist", v)) {
      if (auto ok = check_pci_devargs(arg.starts_with("--") ? arg.substr(0, arg.find('=')) : arg.substr(0, 2), v); !ok)
        return std::unexpected(ok.error());
      o.pci_allow.push_back(v);
    } else if (c.take("-b", v) || c.take("--block", v) || c.take("--pci-blacklist", v)) {
      auto a = pci::Address::parse(v);
      if (!a) return fail("{} '{}': {}", arg.starts_with("--") ? arg.substr(0, arg.find('=')) : arg.substr(0, 2), v,
                          a.error().message);
      o.pci_block.push_back(*a);
    } else if (c.take("--no-pci", v, false)) {
      o.no_pci = true;
    } else if (c.take("--iova-mode", v)) {
      if (v == "pa") {
        o.iova_mode = IovaMode::pa;
      } else if (v == "va") {
        o.iova_mode = IovaMode::va;
      } else {
        return fail("--iova-mode '{}': expected pa (physical addresses, for devices on uio_pci_generic) or va", v);
      }
    } else if (c.take("--force-max-simd-bitwidth", v)) {
      auto n = parse_size("--force-max-simd-bitwidth", v);
      if (!n) return std::unexpected(n.error());
      if (*n < 64 || *n > 32768 || (*n & (*n - 1)) != 0)
        return fail("--force-max-simd-bitwidth '{}': expected 64, 128, 256 or 512 (a power of two from 64 to 32768; "
                    "above 512 means no cap)",
                    v);
      o.max_simd_bitwidth = static_cast<unsigned>(*n);
    } else if (c.take("--no-telemetry", v, false)) {
      o.telemetry = false;
    } else if (c.take("--no-huge", v, false)) {
      o.huge = HugePolicy::never;
    } else if (c.take("-m", v)) {
      auto n = parse_size("-m", v);
      if (!n) return std::unexpected(n.error());
      o.memory_mb = *n;
    } else if (c.take("--socket-mem", v)) {
      auto n = parse_socket_mem(v);
      if (!n) return std::unexpected(n.error());
      o.memory_mb = *n;
    } else if (c.take("--file-prefix", v)) {
      if (v.empty() || v.find('/') != std::string::npos)
        return fail("--file-prefix '{}': expected a non-empty name without '/'", v);
      o.file_prefix = v;
    } else if (c.take("--log-level", v)) {
      // DPDK also takes "pattern:level"; the level after the last ':' applies to us.
      const std::string_view level = std::string_view(v).substr(v.rfind(':') == std::string::npos ? 0 : v.rfind(':') + 1);
      if (!parse_log_level(level, o.log_level))
        return fail("--log-level '{}': expected a level 1-8 or emerg|alert|crit|err|warning|notice|info|debug", v);
    } else if (std::find(std::begin(satisfied_flags), std::end(satisfied_flags), arg) != std::end(satisfied_flags)) {
      ++c.i;
    } else if (auto it = std::find_if(std::begin(satisfied_with_value), std::end(satisfied_with_value),
                                      [&](std::string_view n) { return arg == n || arg.starts_with(std::string(n) + "="); });
               it != std::end(satisfied_with_value)) {
      c.take(*it, v);
    } else if (!c.error) {
      return fail("unsupported EAL option '{}' ({})", arg, eal_usage());
    }
    if (c.error) return std::unexpected(*c.error);
  }
  if (!o.pci_allow.empty() && !o.pci_block.empty())
    return fail("-a (allow) and -b (block) cannot be used together, as in DPDK: give the devices to use with -a, or "
                "those to leave with -b");
  if (o.no_pci && !o.pci_allow.empty())
    return fail("--no-pci and -a {} together: --no-pci leaves every PCI device alone", o.pci_allow.front());
  if (!lcores_set) {
    // DPDK's default: every CPU we may run on.
    for (unsigned cpu : available_cpus()) o.lcores.push_back({cpu, {cpu}});
  }
  if (!main_set) {
    o.main_lcore = o.lcores.front().id;
  } else if (std::none_of(o.lcores.begin(), o.lcores.end(), [&](const LcoreConfig& l) { return l.id == o.main_lcore; })) {
    return fail("--main-lcore {}: not one of the lcores given", o.main_lcore);
  }
  return o;
}

Result<std::vector<std::uint16_t>> parse_port_mask(std::string_view text, std::uint16_t port_count) {
  std::string_view digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
  std::uint64_t mask = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), mask, 16);
  if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
    return fail("port mask '{}': expected a hexadecimal mask such as 0x3 (bit i: port i)", text);
  if (mask == 0) return fail("port mask '{}' names no port (bit i: port i; {} port(s) exist)", text, port_count);
  const std::uint64_t all = port_count >= 64 ? ~0ULL : (1ULL << port_count) - 1;
  if (mask & ~all) {
    const unsigned missing = static_cast<unsigned>(std::countr_zero(mask & ~all));
    return fail("port mask '{}' names port {}, which does not exist ({} port(s): mask {:#x} at most)", text, missing,
                port_count, all);
  }
  std::vector<std::uint16_t> ports;
  for (std::uint16_t p = 0; p < port_count && p < 64; ++p)
    if (mask >> p & 1) ports.push_back(p);
  return ports;
}

}  // namespace ws
