// SPDX-License-Identifier: BSD-3-Clause
// parse_eal_args: DPDK's EAL option names, both value forms, its defaults, and errors that name
// the option, the value and what is accepted.
#include "ws/eal/eal_args.hpp"

#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <syslog.h>

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "ws/testing/require.hpp"

namespace ws {
namespace {

std::vector<std::string> argv(std::initializer_list<const char*> words) { return {words.begin(), words.end()}; }

EalOptions eal_ok(std::initializer_list<const char*> words) {
  const auto args = argv(words);
  auto r = parse_eal_args(args);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : EalOptions{};
}

// The error text for args that must be refused.
std::string eal_error(const std::vector<std::string>& args) {
  auto r = parse_eal_args(args);
  EXPECT_FALSE(r.has_value()) << "accepted: " << fmt::format("{}", fmt::join(args, " "));
  return r ? std::string() : r.error().message;
}

#define EXPECT_HAS(text, needle) \
  EXPECT_NE(std::string(text).find(needle), std::string::npos) << "'" << (text) << "' lacks '" << (needle) << "'"

bool have_cpus(unsigned n) { return available_cpus().size() >= n && available_cpus()[n - 1] == n - 1; }

std::vector<unsigned> ids(const EalOptions& o) {
  std::vector<unsigned> out;
  for (const auto& l : o.lcores) out.push_back(l.id);
  return out;
}

// ---------------------------------------------------------------- EAL: lcores

TEST(EalArgs, LcoreListRangesAndSingles) {
  WS_REQUIRE(have_cpus(2), "needs CPUs 0 and 1");
  const EalOptions o = eal_ok({"-l", "0-1"});
  EXPECT_EQ(ids(o), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(o.lcores[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ(o.lcores[1].cpus, std::vector<unsigned>{1});
  EXPECT_EQ(o.main_lcore, 0u);
  EXPECT_EQ(ids(eal_ok({"-l", "0,1"})), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(ids(eal_ok({"-l=1"})), std::vector<unsigned>{1});
  EXPECT_EQ(ids(eal_ok({"-l0-1"})), (std::vector<unsigned>{0, 1}));  // glued, as getopt allows
  EXPECT_EQ(eal_ok({"-l", "1"}).main_lcore, 1u);
}

TEST(EalArgs, LcoreMapPutsSeveralLcoresOnOneCpu) {
  const EalOptions o = eal_ok({"--lcores", "0@0,1@0"});
  ASSERT_EQ(ids(o), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(o.lcores[0].cpus, std::vector<unsigned>{0});
  EXPECT_EQ(o.lcores[1].cpus, std::vector<unsigned>{0});
  // Lcore ids beyond the CPUs are fine when mapped onto CPUs that exist.
  const EalOptions big = eal_ok({"--lcores=0@0,7@0,(8-9)@0"});
  EXPECT_EQ(ids(big), (std::vector<unsigned>{0, 7, 8, 9}));
  for (const auto& l : big.lcores) EXPECT_EQ(l.cpus, std::vector<unsigned>{0});
  if (have_cpus(2)) {
    const EalOptions m = eal_ok({"--lcores", "0@0,1@0,2@1"});
    EXPECT_EQ(ids(m), (std::vector<unsigned>{0, 1, 2}));
    EXPECT_EQ(m.lcores[2].cpus, std::vector<unsigned>{1});
    EXPECT_EQ(eal_ok({"--lcores", "(0-1)@(0-1)"}).lcores[1].cpus, (std::vector<unsigned>{0, 1}));
  }
}

TEST(EalArgs, CoreMask) {
  EXPECT_EQ(ids(eal_ok({"-c", "0x1"})), std::vector<unsigned>{0});
  EXPECT_EQ(ids(eal_ok({"-c", "1"})), std::vector<unsigned>{0});
  if (have_cpus(2)) {
    EXPECT_EQ(ids(eal_ok({"-c", "0x3"})), (std::vector<unsigned>{0, 1}));
  }
  const std::string e = eal_error({"-c", "0x0"});
  EXPECT_HAS(e, "-c");
  EXPECT_HAS(e, "0x3");
  EXPECT_HAS(eal_error({"-c", "zz"}), "hexadecimal");
}

TEST(EalArgs, DefaultLcoresAreEveryAvailableCpu) {
  const EalOptions o = eal_ok({"--vdev", "net_null0"});
  EXPECT_EQ(ids(o), available_cpus());
  EXPECT_EQ(o.main_lcore, available_cpus().front());
}

TEST(EalArgs, MainLcore) {
  WS_REQUIRE(have_cpus(2), "needs CPUs 0 and 1");
  EXPECT_EQ(eal_ok({"-l", "0-1", "--main-lcore", "1"}).main_lcore, 1u);
  EXPECT_EQ(eal_ok({"-l", "0-1", "--main-lcore=1"}).main_lcore, 1u);
  const std::string e = eal_error(argv({"-l", "0-1", "--main-lcore", "5"}));
  EXPECT_HAS(e, "--main-lcore");
  EXPECT_HAS(e, "5");
}

TEST(EalArgs, LcoreListNamingAMissingCpuPointsToLcores) {
  const unsigned missing = available_cpus().back() + 1;
  WS_REQUIRE(missing < max_lcores, "a CPU-less lcore id, but every lcore id is a CPU here");
  const std::string list = fmt::format("0-{}", missing);
  const std::string e = eal_error({"-l", list});
  EXPECT_HAS(e, "-l");
  EXPECT_HAS(e, list);
  EXPECT_HAS(e, fmt::format("CPU {}", missing));
  EXPECT_HAS(e, "available");
  EXPECT_HAS(e, "--lcores");
  if (available_cpus().size() < 64) {
    const std::string e63 = eal_error(argv({"-l", "0-63"}));
    EXPECT_HAS(e63, "'0-63'");
    EXPECT_HAS(e63, "--lcores '0@0,1@0'");
  }
  // The same in a mask and in a --lcores map (there the CPU itself must exist).
  EXPECT_HAS(eal_error({"-c", fmt::format("{:#x}", 1ull << missing % 64)}), "--lcores");
  const std::string m = eal_error({"--lcores", fmt::format("0@{}", missing)});
  EXPECT_HAS(m, "--lcores");
  EXPECT_HAS(m, fmt::format("CPU {}", missing));
}

TEST(EalArgs, BadLcoreSyntax) {
  EXPECT_HAS(eal_error(argv({"-l", "a-b"})), "not a number");
  EXPECT_HAS(eal_error(argv({"-l", "1-0"})), "backwards");
  EXPECT_HAS(eal_error(argv({"-l", "0-500"})), "maximum lcore id");
  EXPECT_HAS(eal_error(argv({"--lcores", "(0@0"})), "unbalanced");
  EXPECT_HAS(eal_error(argv({"-l", "0,0"})), "twice");
  const std::string twice = eal_error(argv({"-l", "0", "--lcores", "0@0"}));
  EXPECT_HAS(twice, "-l");
  EXPECT_HAS(twice, "--lcores");
}

// ---------------------------------------------------------------- EAL: devices, memory, logs

TEST(EalArgs, VdevRepeatsInOrderInBothForms) {
  const EalOptions o =
      eal_ok({"--vdev", "net_null0,size=128", "--vdev=net_ring0", "--vdev", "net_ring1,peer=net_ring0"});
  EXPECT_EQ(o.vdevs, (std::vector<std::string>{"net_null0,size=128", "net_ring0", "net_ring1,peer=net_ring0"}));
  // The value keeps its own '=' signs.
  EXPECT_EQ(eal_ok({"--vdev=virtio_user0,path=/tmp/vhost0,queues=4"}).vdevs,
            std::vector<std::string>{"virtio_user0,path=/tmp/vhost0,queues=4"});
}

TEST(EalArgs, MemoryOptions) {
  const EalOptions d = eal_ok({});
  EXPECT_EQ(d.huge, HugePolicy::automatic);
  EXPECT_EQ(d.memory_mb, 0u);
  EXPECT_EQ(d.file_prefix, "rte");
  EXPECT_EQ(d.log_level, LogLevel::notice);
  EXPECT_TRUE(d.vdevs.empty());

  EXPECT_EQ(eal_ok({"--no-huge"}).huge, HugePolicy::never);
  EXPECT_EQ(eal_ok({"-m", "512"}).memory_mb, 512u);
  EXPECT_EQ(eal_ok({"-m=256"}).memory_mb, 256u);
  EXPECT_EQ(eal_ok({"-m64"}).memory_mb, 64u);
  EXPECT_EQ(eal_ok({"--socket-mem", "1024,0"}).memory_mb, 1024u);
  EXPECT_EQ(eal_ok({"--socket-mem=512,512"}).memory_mb, 1024u);
  EXPECT_EQ(eal_ok({"--socket-mem", "2048"}).memory_mb, 2048u);

  std::string e = eal_error(argv({"-m", "lots"}));
  EXPECT_HAS(e, "-m");
  EXPECT_HAS(e, "lots");
  EXPECT_HAS(e, "megabytes");
  e = eal_error(argv({"--socket-mem", "1024,x"}));
  EXPECT_HAS(e, "--socket-mem");
  EXPECT_HAS(e, "megabytes");
}

TEST(EalArgs, FilePrefix) {
  EXPECT_EQ(eal_ok({"--file-prefix=vhost"}).file_prefix, "vhost");
  EXPECT_EQ(eal_ok({"--file-prefix", "virtio-user"}).file_prefix, "virtio-user");
  const std::string e = eal_error(argv({"--file-prefix", "a/b"}));
  EXPECT_HAS(e, "--file-prefix");
  EXPECT_HAS(e, "without '/'");
  EXPECT_HAS(eal_error(argv({"--file-prefix="})), "non-empty");
}

TEST(EalArgs, LogLevelNamesNumbersAndPatterns) {
  EXPECT_EQ(eal_ok({"--log-level", "debug"}).log_level, LogLevel::debug);
  EXPECT_EQ(eal_ok({"--log-level=info"}).log_level, LogLevel::info);
  EXPECT_EQ(eal_ok({"--log-level=error"}).log_level, LogLevel::err);
  EXPECT_EQ(eal_ok({"--log-level", "8"}).log_level, LogLevel::debug);
  EXPECT_EQ(eal_ok({"--log-level", "1"}).log_level, LogLevel::emerg);
  EXPECT_EQ(eal_ok({"--log-level", "pmd.net.*:8"}).log_level, LogLevel::debug);
  EXPECT_EQ(eal_ok({"--log-level=lib.eal:warning"}).log_level, LogLevel::warning);
  for (const char* bad : {"loud", "9", "0", "pmd.net.*:", "pmd.net.*:99"}) {
    const std::string e = eal_error(argv({"--log-level", bad}));
    EXPECT_HAS(e, "--log-level");
    EXPECT_HAS(e, bad);
    EXPECT_HAS(e, "1-8");
    EXPECT_HAS(e, "debug");
  }
}

TEST(EalArgs, CompatibilityFlagsAreAccepted) {
  const EalOptions o =
      eal_ok({"--no-pci", "--single-file-segments", "-n", "4", "--in-memory", "--huge-dir", "/dev/hugepages",
              "--iova-mode=va", "--proc-type", "primary", "--no-telemetry", "--vdev", "net_null0"});
  // Value-taking compat flags consume their value, so what follows still parses.
  EXPECT_EQ(o.vdevs, std::vector<std::string>{"net_null0"});
  EXPECT_EQ(eal_ok({"-n=4", "--vdev=net_null0"}).vdevs, std::vector<std::string>{"net_null0"});
}

TEST(EalArgs, ScenarioCommandLinesParse) {
  // The virtio side of the vhost/virtio-user pair (docs/scenarios.md) on a 2-core machine.
  const EalOptions o =
      eal_ok({"--lcores", "0@0,1@0", "--socket-mem", "1024,0", "--single-file-segments", "--file-prefix=virtio-user",
              "--vdev=virtio_user0,path=/tmp/vhost0,queues=4,in_order=1,packed_vq=1"});
  EXPECT_EQ(o.lcores.size(), 2u);
  EXPECT_EQ(o.memory_mb, 1024u);
  EXPECT_EQ(o.file_prefix, "virtio-user");
  ASSERT_EQ(o.vdevs.size(), 1u);
}

// ---------------------------------------------------------------- EAL: PCI devices

TEST(EalArgs, PciAllowListKeepsDevargsAndAcceptsDpdksForms) {
  const EalOptions o = eal_ok({"-a", "0000:00:04.0,rxd=512", "-w", "00:05.0", "--allow=0000:00:06.1", "-a0000:00:07.0",
                               "--iova-mode", "pa", "--vdev", "net_null0"});
  EXPECT_EQ(o.pci_allow, (std::vector<std::string>{"0000:00:04.0,rxd=512", "00:05.0", "0000:00:06.1", "0000:00:07.0"}));
  EXPECT_EQ(o.iova_mode, IovaMode::pa);
  EXPECT_EQ(o.vdevs, std::vector<std::string>{"net_null0"});
  const EalOptions b = eal_ok({"-b", "0000:00:03.0", "--block=0000:00:04.0", "--iova-mode=va"});
  ASSERT_EQ(b.pci_block.size(), 2u);
  EXPECT_EQ(b.pci_block[1].to_string(), "0000:00:04.0");
  EXPECT_EQ(b.iova_mode, IovaMode::va);
  EXPECT_TRUE(eal_ok({"--no-pci"}).no_pci);
  EXPECT_FALSE(eal_ok({}).iova_mode.has_value());
  EXPECT_EQ(eal_ok({"--vfio-intr", "legacy"}).vfio_intr, pci::IntrMode::legacy);
  EXPECT_EQ(eal_ok({"--vfio-intr=msi"}).vfio_intr, pci::IntrMode::msi);
  EXPECT_EQ(eal_ok({"--vfio-intr=msix"}).vfio_intr, pci::IntrMode::msix);
  EXPECT_FALSE(eal_ok({}).vfio_intr.has_value()) << "unset: the driver takes MSI-X when the device has it";
}

TEST(EalArgs, BadPciAddressesAreRefusedWithTheForm) {
  for (const char* bad : {"0000:00:04", "0000:00:4.0", "0000:00:20.0", "zz:00.0", "net_null0", "0000:00:04.0x"}) {
    const std::string e = eal_error(argv({"-a", bad}));
    EXPECT_HAS(e, "-a");
    EXPECT_HAS(e, bad);
    EXPECT_HAS(e, "0000:00:04.0");  // the expected form
    EXPECT_HAS(eal_error(argv({"-b", bad})), "-b");
  }
  EXPECT_HAS(eal_error(argv({"--iova-mode", "dc"})), "pa");
  EXPECT_HAS(eal_error(argv({"--vfio-intr", "intx"})), "--vfio-intr 'intx': expected legacy, msi or msix");
  EXPECT_HAS(eal_error(argv({"-a", "0000:00:04.0", "-b", "0000:00:05.0"})), "cannot be used together");
  EXPECT_HAS(eal_error(argv({"--no-pci", "-a", "0000:00:04.0"})), "--no-pci");
}

// ---------------------------------------------------------------- EAL: errors

TEST(EalArgs, UnknownOptionIsRefusedNamingIt) {
  for (const char* bad : {"--bogus", "--master-lcore=0"}) {
    const std::string e = eal_error(argv({bad}));
    EXPECT_HAS(e, std::string("'") + bad + "'");
    EXPECT_HAS(e, "unknown EAL option");
    EXPECT_HAS(e, "--help");
  }
  // A stray positional argument (e.g. a forgotten "--") is refused too.
  EXPECT_HAS(eal_error(argv({"--vdev", "net_null0", "--forward-mode=io"})), "--forward-mode");
}

// A command line for each EAL option of DPDK 22.11: accepted (honoured or accepted) or refused
// naming what is missing, as eal_option_docs() says. An option without a line here fails.
TEST(EalArgs, EveryOptionIsTakenAsItsStatusSays) {
  const std::map<std::string_view, std::vector<std::string>> samples = {
      {"-c", {"-c", "0x1"}},
      {"-l", {"-l", "0"}},
      {"--lcores", {"--lcores", "0@0"}},
      {"-s", {"-s", "0x2"}},
      {"-S", {"-S", "1"}},
      {"--main-lcore", {"-l", "0", "--main-lcore", "0"}},
      {"--mbuf-pool-ops-name", {"--mbuf-pool-ops-name", "ring_mp_mc"}},
      {"-n", {"-n", "4"}},
      {"-m", {"-m", "512"}},
      {"-r", {"-r", "2"}},
      {"--block", {"--block", "0000:00:04.0"}},
      {"-b", {"-b", "0000:00:04.0"}},
      {"--allow", {"--allow", "0000:00:04.0"}},
      {"-a", {"-a", "0000:00:04.0"}},
      {"--vdev", {"--vdev", "net_null0"}},
      {"--iova-mode", {"--iova-mode", "va"}},
      {"-d", {"-d", "librte_net_null.so"}},
      {"--vmware-tsc-map", {"--vmware-tsc-map"}},
      {"--proc-type", {"--proc-type", "primary"}},
      {"--syslog", {"--syslog", "daemon"}},
      {"--log-level", {"--log-level", "pmd.net.vhost:debug"}},
      {"--trace", {"--trace=.*"}},
      {"--trace-dir", {"--trace-dir=/tmp"}},
      {"--trace-bufsz", {"--trace-bufsz=2M"}},
      {"--trace-mode", {"--trace-mode=o"}},
      {"-v", {"-v"}},
      {"--help", {"--help"}},
      {"-h", {"-h"}},
      {"--in-memory", {"--in-memory"}},
      {"--base-virtaddr", {"--base-virtaddr", "0x100000000"}},
      {"--telemetry", {"--telemetry"}},
      {"--no-telemetry", {"--no-telemetry"}},
      {"--force-max-simd-bitwidth", {"--force-max-simd-bitwidth", "64"}},
      {"--huge-unlink", {"--huge-unlink=never"}},
      {"--no-huge", {"--no-huge"}},
      {"--no-pci", {"--no-pci"}},
      {"--no-hpet", {"--no-hpet"}},
      {"--no-shconf", {"--no-shconf"}},
      {"--socket-mem", {"--socket-mem", "512,0"}},
      {"--socket-limit", {"--socket-limit", "1024"}},
      {"--huge-dir", {"--huge-dir", "/dev/hugepages"}},
      {"--file-prefix", {"--file-prefix", "wp"}},
      {"--create-uio-dev", {"--create-uio-dev"}},
      {"--vfio-intr", {"--vfio-intr", "msix"}},
      {"--vfio-vf-token", {"--vfio-vf-token", "14d63f20-8445-11ea-8900-1f9ce7d5650d"}},
      {"--legacy-mem", {"--legacy-mem"}},
      {"--single-file-segments", {"--single-file-segments"}},
      {"--match-allocations", {"--match-allocations"}},
      {"--huge-worker-stack", {"--huge-worker-stack"}},
  };
  for (const OptionDoc& d : eal_option_docs()) {
    const auto it = samples.find(d.name);
    ASSERT_NE(it, samples.end()) << d.name << " has no sample command line in this test";
    auto r = parse_eal_args(it->second);
    if (d.status == OptionStatus::refused) {
      ASSERT_FALSE(r.has_value()) << d.name << " is documented as refused but was accepted";
      EXPECT_HAS(r.error().message, "not available");
      EXPECT_HAS(r.error().message, d.why);
    } else {
      EXPECT_TRUE(r.has_value()) << d.name << ": " << (r ? "" : r.error().message);
    }
  }
  EXPECT_TRUE(eal_ok({"-h"}).help);
  EXPECT_TRUE(eal_ok({"--help"}).help);
  EXPECT_TRUE(eal_ok({"-v"}).version);
  EXPECT_EQ(eal_ok({"--syslog", "local3"}).syslog_facility, LOG_LOCAL3);
  EXPECT_FALSE(eal_ok({"--no-telemetry", "--telemetry"}).telemetry == false);
  EXPECT_HAS(eal_error(argv({"--syslog", "nope"})), "facility");
  EXPECT_HAS(eal_error(argv({"--proc-type", "secondary"})), "primary processes only");
  EXPECT_HAS(eal_error(argv({"--mbuf-pool-ops-name", "stack"})), "ring_mp_mc");
  EXPECT_HAS(eal_error(argv({"--huge-unlink=sometimes"})), "existing, always or never");
  EXPECT_HAS(eal_error(argv({"--base-virtaddr", "zz"})), "hexadecimal");
}

TEST(EalArgs, MissingValueNamesTheOption) {
  for (const char* opt : {"-l", "--lcores", "-c", "--vdev", "-m", "--socket-mem", "--file-prefix", "--log-level",
                          "--main-lcore", "-n", "-a", "-w", "-b", "--iova-mode"}) {
    const std::string e = eal_error(argv({"--no-huge", opt}));
    EXPECT_HAS(e, opt);
    EXPECT_HAS(e, "needs a value");
  }
}

// ---------------------------------------------------------------- -p PORTMASK

TEST(PortMask, HexWithOrWithoutPrefix) {
  EXPECT_EQ(parse_port_mask("0x3", 2).value(), (std::vector<std::uint16_t>{0, 1}));
  EXPECT_EQ(parse_port_mask("5", 4).value(), (std::vector<std::uint16_t>{0, 2}));
  EXPECT_EQ(parse_port_mask("0XA", 4).value(), (std::vector<std::uint16_t>{1, 3}));
}

TEST(PortMask, RefusalsNameTheValue) {
  EXPECT_HAS(parse_port_mask("0x0", 2).error().message, "port mask '0x0' names no port");
  EXPECT_HAS(parse_port_mask("0x4", 2).error().message,
             "port mask '0x4' names port 2, which does not exist (2 port(s): mask 0x3 at most)");
  EXPECT_HAS(parse_port_mask("0x1", 0).error().message, "port mask '0x1' names port 0, which does not exist");
  for (const char* bad : {"", "0x", "0xg", "3 ", "-1", "zz"})
    EXPECT_HAS(parse_port_mask(bad, 2).error().message, "expected a hexadecimal mask");
}

}  // namespace
}  // namespace ws
