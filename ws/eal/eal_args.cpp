// SPDX-License-Identifier: BSD-3-Clause
// EAL option parsing.
#include "ws/eal/eal_args.hpp"

#include <syslog.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <optional>

#include "ws/core/hex.hpp"

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

struct EalSpec {
  std::string_view name;
  std::string_view alias;  // a second spelling ("-a" for "--allow"), or empty
  bool has_value;
  std::string_view help;  // DPDK's words
  OptionStatus status;
  std::string_view why;  // accepted: why it changes nothing here; refused: what is missing
};

constexpr auto H = OptionStatus::honoured;
constexpr auto A = OptionStatus::accepted;
constexpr auto R = OptionStatus::refused;
constexpr std::string_view no_vf_token = "SR-IOV virtual functions are not driven: VFIO takes no VF token";
constexpr std::string_view no_trace = "wirespeed has no trace points; profile with perf instead";

// Every EAL option of DPDK 22.11, in the order of its --help. Honoured ones are parsed in
// parse_eal_args; accepted ones are checked there or below and change nothing; refused ones
// are refused with `why`.
constexpr EalSpec eal_table[] = {
    {"-c", "", true, "COREMASK         Hexadecimal bitmask of cores to run on", H, ""},
    {"-l", "", true, "CORELIST         List of cores to run on", H, ""},
    {"--lcores", "", true, "COREMAP    Map lcore set to physical cpu set", H, ""},
    {"-s", "", true, "SERVICE COREMASK Hexadecimal bitmask of cores to be used as service cores", R,
     "wirespeed has no service cores: every lcore runs the application's loop"},
    {"-S", "", true, "SERVICE CORELIST List of cores to run services on", R,
     "wirespeed has no service cores: every lcore runs the application's loop"},
    {"--main-lcore", "", true, "ID     Core ID that is used as main", H, ""},
    {"--mbuf-pool-ops-name", "", true, "Pool ops name for mbuf to use", A,
     "the pool is always a lock-free ring with per-lcore caches, DPDK's ring_mp_mc, the only name accepted"},
    {"-n", "", true, "CHANNELS         Number of memory channels", A,
     "a placement hint for memory interleaving; the arena is one mapping"},
    {"-m", "", true, "MB               Memory to allocate (see also --socket-mem)", H, ""},
    {"-r", "", true, "RANKS            Force number of memory ranks (don't detect)", A,
     "a placement hint for memory interleaving; the arena is one mapping"},
    {"--block", "-b", true, "Add a device to the blocked list.", H, ""},
    {"--allow", "-a", true, "Add a device to the allow list.", H, ""},
    {"--vdev", "", true, "Add a virtual device.", H, ""},
    {"--iova-mode", "", true, "Set IOVA mode. 'pa' for IOVA_PA 'va' for IOVA_VA", H, ""},
    {"-d", "", true, "LIB.so|DIR       Add a driver or driver directory", R,
     "drivers are built into libwirespeed; no plugins are loaded"},
    {"--vmware-tsc-map", "", false, "Use VMware TSC map instead of native RDTSC", R,
     "the TSC is always read with rdtsc; VMware's pseudo-TSC map is not read"},
    {"--proc-type", "", true, "Type of this process (primary|secondary|auto)", A,
     "wirespeed runs primary processes only: primary and auto are accepted, secondary refused"},
    {"--syslog", "", true, "Set syslog facility", H, ""},
    {"--log-level", "", true, "=<level> Set global log level", H, ""},
    {"--trace", "", true, "=<regex-match> Enable trace based on regular expression trace name.", R, no_trace},
    {"--trace-dir", "", true, "=<directory path> Specify trace directory for trace output.", R, no_trace},
    {"--trace-bufsz", "", true, "=<int> Specify maximum size of allocated memory for trace output", R, no_trace},
    {"--trace-mode", "", true, "=<o[verwrite] | d[iscard]> Specify the mode of update of trace output file.", R,
     no_trace},
    {"-v", "", false, "                  Display version information on startup", H, ""},
    {"--help", "-h", false, "          This help", H, ""},
    {"--in-memory", "", false, "Operate entirely in memory.", A, "wirespeed creates no runtime files"},
    {"--base-virtaddr", "", true, "Base virtual address", A,
     "the arena is shared by file descriptor, and peers map it wherever they like; no secondary process needs it at "
     "one address"},
    {"--telemetry", "", false, "Enable telemetry support (on by default)", H, ""},
    {"--no-telemetry", "", false, "Disable telemetry support", H, ""},
    {"--force-max-simd-bitwidth", "", true, "Force the max SIMD bitwidth", H, ""},
    {"--huge-unlink", "", false, "[=existing|always|never] When to unlink files in hugetlbfs", A,
     "the arena is a memfd: no file in hugetlbfs is ever created, so none is left to unlink"},
    {"--no-huge", "", false, "Use malloc instead of hugetlbfs", H, ""},
    {"--no-pci", "", false, "Disable PCI", H, ""},
    {"--no-hpet", "", false, "Disable HPET", A, "the HPET is never used; time comes from the TSC"},
    {"--no-shconf", "", false, "No shared config (mmap'd files)", A, "wirespeed creates no shared config files"},
    {"--socket-mem", "", true, "Memory to allocate on sockets (comma separated values)", H, ""},
    {"--socket-limit", "", true, "Limit memory allocation on sockets (comma separated values)", A,
     "the arena is sized once at start-up and never grows"},
    {"--huge-dir", "", true, "Directory where hugetlbfs is mounted", A,
     "hugepages come from memfd_create(MFD_HUGETLB), which needs no mount"},
    {"--file-prefix", "", true, "Prefix for hugepage filenames", H, ""},
    {"--create-uio-dev", "", false, "Create /dev/uioX (usually done by hotplug)", A,
     "the /dev/uioN nodes are udev's (or devtmpfs') to create"},
    {"--vfio-intr", "", true, "Interrupt mode for VFIO (legacy|msi|msix)", H, ""},
    {"--vfio-vf-token", "", true, "VF token (UUID) shared between SR-IOV PF and VFs", R, no_vf_token},
    {"--legacy-mem", "", false, "Legacy memory mode (no dynamic allocation, contiguous segments)", A,
     "the arena is always one segment allocated at start-up"},
    {"--single-file-segments", "", false, "Put all hugepage memory in single files", A,
     "the arena is always a single memfd"},
    {"--match-allocations", "", false, "Free hugepages exactly as allocated", A,
     "the arena is allocated once and freed at exit"},
    {"--huge-worker-stack", "", false, "[=size] Allocate worker thread stacks from hugepage memory.", R,
     "lcore threads keep stacks of the system's size"},
};

// The entry for `arg` ("--opt", "--opt=value", or a short option possibly glued to its value).
const EalSpec* find_spec(std::string_view arg) {
  const std::string_view name = arg.substr(0, arg.find('='));
  for (const EalSpec& s : eal_table)
    if (s.name == name || (!s.alias.empty() && s.alias == name)) return &s;
  return nullptr;
}

// "-a 0000:00:04.0,key=value": the address must parse; the keys are the driver's to check.
Result<void> check_pci_devargs(std::string_view option, std::string_view v) {
  const std::string_view addr = v.substr(0, v.find(','));
  auto a = pci::Address::parse(addr);
  if (!a) return fail("{} '{}': {}", option, v, a.error().message);
  return {};
}

// --syslog's facility names, as DPDK's EAL takes them.
Result<int> parse_syslog_facility(std::string_view v) {
  static constexpr std::pair<std::string_view, int> facilities[] = {
      {"auth", LOG_AUTH},     {"cron", LOG_CRON},     {"daemon", LOG_DAEMON}, {"ftp", LOG_FTP},
      {"kern", LOG_KERN},     {"lpr", LOG_LPR},       {"mail", LOG_MAIL},     {"news", LOG_NEWS},
      {"syslog", LOG_SYSLOG}, {"user", LOG_USER},     {"uucp", LOG_UUCP},     {"local0", LOG_LOCAL0},
      {"local1", LOG_LOCAL1}, {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3}, {"local4", LOG_LOCAL4},
      {"local5", LOG_LOCAL5}, {"local6", LOG_LOCAL6}, {"local7", LOG_LOCAL7}};
  for (const auto& [name, f] : facilities)
    if (v == name) return f;
  return fail(
      "--syslog {}: expected a facility: auth, cron, daemon, ftp, kern, lpr, mail, news, syslog, user, uucp, "
      "local0 ... local7",
      v);
}

}  // namespace

std::string_view to_string(OptionStatus s) {
  switch (s) {
    case OptionStatus::honoured:
      return "honoured";
    case OptionStatus::accepted:
      return "accepted";
    case OptionStatus::refused:
      return "refused";
  }
  return "?";
}

std::string eal_usage() {
  std::string out = "EAL options:\n";
  for (const EalSpec& s : eal_table) {
    const std::string names = s.alias.empty() ? std::string(s.name) : fmt::format("{}, {}", s.alias, s.name);
    out += fmt::format("  {} {}", names, s.help);
    if (s.status == OptionStatus::refused) out += fmt::format(" [not available: {}]", s.why);
    out += '\n';
  }
  return out;
}

std::vector<OptionDoc> eal_option_docs() {
  std::vector<OptionDoc> out;
  for (const EalSpec& s : eal_table) {
    out.push_back({s.name, s.status, s.why});
    if (!s.alias.empty()) out.push_back({s.alias, s.status, s.why});
  }
  return out;
}

namespace {

// What parse_eal_args has read so far. Each take_* function below consumes one option of its
// group at the cursor and returns true, returns false when the option is not of its group, or
// fails on a bad value.
struct EalParse {
  EalOptions o;
  ArgCursor c;
  std::string v;  // the value of the option just taken
  bool lcores_set = false;
  bool main_set = false;

  Result<bool> set_lcores(Result<std::vector<LcoreConfig>> r) {
    if (!r) return std::unexpected(r.error());
    if (lcores_set) return fail("lcores given twice: use one of -l, -c, --lcores");
    o.lcores = std::move(*r);
    lcores_set = true;
    return true;
  }
};

// The option's name as the user wrote it, for messages: "--allow" of "--allow=...", "-a" of "-a0000:...".
std::string option_name(const std::string& arg) {
  return arg.starts_with("--") ? arg.substr(0, arg.find('=')) : arg.substr(0, 2);
}

Result<bool> take_lcore_option(EalParse& p) {
  if (p.c.take("-l", p.v)) return p.set_lcores(parse_lcore_list(p.v));
  if (p.c.take("--lcores", p.v)) return p.set_lcores(parse_lcore_map(p.v));
  if (p.c.take("-c", p.v)) return p.set_lcores(parse_core_mask(p.v));
  if (p.c.take("--main-lcore", p.v)) {
    auto n = parse_size("--main-lcore", p.v);
    if (!n) return std::unexpected(n.error());
    p.o.main_lcore = static_cast<unsigned>(*n);
    p.main_set = true;
    return true;
  }
  return false;
}

Result<bool> take_device_option(EalParse& p, const std::string& arg) {
  if (p.c.take("--vdev", p.v)) {
    p.o.vdevs.push_back(p.v);
  } else if (p.c.take("-a", p.v) || p.c.take("-w", p.v) || p.c.take("--allow", p.v) ||
             p.c.take("--pci-whitelist", p.v)) {
    if (auto ok = check_pci_devargs(option_name(arg), p.v); !ok) return std::unexpected(ok.error());
    p.o.pci_allow.push_back(p.v);
  } else if (p.c.take("-b", p.v) || p.c.take("--block", p.v) || p.c.take("--pci-blacklist", p.v)) {
    auto a = pci::Address::parse(p.v);
    if (!a) return fail("{} '{}': {}", option_name(arg), p.v, a.error().message);
    p.o.pci_block.push_back(*a);
  } else if (p.c.take("--no-pci", p.v, false)) {
    p.o.no_pci = true;
  } else if (p.c.take("--iova-mode", p.v)) {
    if (p.v == "pa")
      p.o.iova_mode = IovaMode::pa;
    else if (p.v == "va")
      p.o.iova_mode = IovaMode::va;
    else
      return fail("--iova-mode '{}': expected pa (physical addresses, for devices on uio_pci_generic) or va", p.v);
  } else if (p.c.take("--vfio-intr", p.v)) {
    auto mode = pci::parse_intr_mode(p.v);
    if (!mode) return std::unexpected(mode.error());
    p.o.vfio_intr = *mode;
  } else {
    return false;
  }
  return true;
}

Result<bool> take_memory_option(EalParse& p, const std::string& arg) {
  if (p.c.take("--no-huge", p.v, false)) {
    p.o.huge = HugePolicy::never;
  } else if (p.c.take("-m", p.v) || p.c.take("--socket-mem", p.v)) {
    auto n = arg.starts_with("-m") ? parse_size("-m", p.v) : parse_socket_mem(p.v);
    if (!n) return std::unexpected(n.error());
    p.o.memory_mb = *n;
  } else if (p.c.take("--file-prefix", p.v)) {
    if (p.v.empty() || p.v.find('/') != std::string::npos)
      return fail("--file-prefix '{}': expected a non-empty name without '/'", p.v);
    p.o.file_prefix = p.v;
  } else if (p.c.take("--mbuf-pool-ops-name", p.v)) {
    if (p.v != "ring_mp_mc")
      return fail(
          "--mbuf-pool-ops-name {}: not available: the pool is a lock-free ring with per-lcore caches "
          "(ring_mp_mc)",
          p.v);
  } else if (p.c.take("--base-virtaddr", p.v)) {
    const std::string_view digits =
        std::string_view(p.v).substr(p.v.starts_with("0x") || p.v.starts_with("0X") ? 2 : 0);
    std::uint64_t addr = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), addr, 16);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size())
      return fail("--base-virtaddr {}: expected a hexadecimal address such as 0x100000000", p.v);
  } else if (arg == "--huge-unlink" || arg.starts_with("--huge-unlink=")) {
    const std::string_view value = arg == "--huge-unlink" ? "always" : std::string_view(arg).substr(14);
    if (value != "existing" && value != "always" && value != "never")
      return fail("--huge-unlink={}: expected existing, always or never", value);
    ++p.c.i;
  } else {
    return false;
  }
  return true;
}

Result<bool> take_runtime_option(EalParse& p) {
  if (p.c.take("--force-max-simd-bitwidth", p.v)) {
    auto n = parse_size("--force-max-simd-bitwidth", p.v);
    if (!n) return std::unexpected(n.error());
    if (*n < 64 || *n > 32768 || (*n & (*n - 1)) != 0)
      return fail(
          "--force-max-simd-bitwidth '{}': expected 64, 128, 256 or 512 (a power of two from 64 to 32768; "
          "above 512 means no cap)",
          p.v);
    p.o.max_simd_bitwidth = static_cast<unsigned>(*n);
  } else if (p.c.take("--no-telemetry", p.v, false) || p.c.take("--telemetry", p.v, false)) {
    p.o.telemetry = p.c.args[p.c.i - 1] == "--telemetry";
  } else if (p.c.take("--proc-type", p.v)) {
    if (p.v != "primary" && p.v != "auto")
      return fail("--proc-type {}: not available: wirespeed runs primary processes only (primary or auto)", p.v);
  } else if (p.c.take("-h", p.v, false) || p.c.take("--help", p.v, false)) {
    p.o.help = true;
  } else if (p.c.take("-v", p.v, false)) {
    p.o.version = true;
  } else {
    return false;
  }
  return true;
}

Result<bool> take_log_option(EalParse& p) {
  if (p.c.take("--log-level", p.v)) {
    // DPDK also takes "pattern:level"; the level after the last ':' applies to us.
    const std::string_view level =
        std::string_view(p.v).substr(p.v.rfind(':') == std::string::npos ? 0 : p.v.rfind(':') + 1);
    if (!parse_log_level(level, p.o.log_level))
      return fail("--log-level '{}': expected a level 1-8 or emerg|alert|crit|err|warning|notice|info|debug", p.v);
    return true;
  }
  if (p.c.take("--syslog", p.v)) {
    auto f = parse_syslog_facility(p.v);
    if (!f) return std::unexpected(f.error());
    p.o.syslog_facility = *f;
    return true;
  }
  return false;
}

// DPDK's options we take without effect, or refuse with the reason (eal_table).
Result<void> take_listed_option(EalParse& p, const std::string& arg) {
  const EalSpec* spec = find_spec(arg);
  if (spec == nullptr) {
    if (p.c.error) return {};
    return fail("unknown EAL option '{}' (wirespeed-testpmd --help lists the options)", arg);
  }
  if (spec->status == OptionStatus::refused)
    return fail("EAL option {} is not available in wirespeed: {}", spec->name, spec->why);
  if (spec->status != OptionStatus::accepted || !p.c.take(arg.substr(0, arg.find('=')), p.v, spec->has_value)) {
    if (!p.c.error) return fail("EAL option '{}' is malformed (wirespeed-testpmd --help lists the options)", arg);
  }
  return {};
}

Result<void> take_option(EalParse& p) {
  const std::string arg = p.c.args[p.c.i];
  Result<bool> taken = take_lcore_option(p);
  if (taken && !*taken) taken = take_device_option(p, arg);
  if (taken && !*taken) taken = take_memory_option(p, arg);
  if (taken && !*taken) taken = take_runtime_option(p);
  if (taken && !*taken) taken = take_log_option(p);
  if (!taken) return std::unexpected(taken.error());
  if (!*taken && !p.c.error) {
    if (auto ok = take_listed_option(p, arg); !ok) return ok;
  }
  if (p.c.error) return std::unexpected(*p.c.error);
  return {};
}

// The checks across options, and DPDK's defaults for what was not given.
Result<EalOptions> finish_eal_options(EalParse& p) {
  EalOptions& o = p.o;
  if (!o.pci_allow.empty() && !o.pci_block.empty())
    return fail(
        "-a (allow) and -b (block) cannot be used together, as in DPDK: give the devices to use with -a, or "
        "those to leave with -b");
  if (o.no_pci && !o.pci_allow.empty())
    return fail("--no-pci and -a {} together: --no-pci leaves every PCI device alone", o.pci_allow.front());
  if (!p.lcores_set) {
    // DPDK's default: every CPU we may run on.
    for (unsigned cpu : available_cpus()) o.lcores.push_back({cpu, {cpu}});
  }
  if (!p.main_set) {
    o.main_lcore = o.lcores.front().id;
  } else if (std::none_of(o.lcores.begin(), o.lcores.end(),
                          [&](const LcoreConfig& l) { return l.id == o.main_lcore; })) {
    return fail("--main-lcore {}: not one of the lcores given", o.main_lcore);
  }
  return std::move(o);
}

}  // namespace

Result<EalOptions> parse_eal_args(std::span<const std::string> args) {
  EalParse p;
  p.c.args = args;
  while (!p.c.done())
    if (auto ok = take_option(p); !ok) return std::unexpected(ok.error());
  return finish_eal_options(p);
}

Result<std::vector<std::uint16_t>> parse_port_mask(std::string_view text, std::uint16_t port_count) {
  const auto parsed = parse_hex_mask(text);
  if (!parsed) return fail("port mask '{}': expected a hexadecimal mask such as 0x3 (bit i: port i)", text);
  const std::uint64_t mask = *parsed;
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
