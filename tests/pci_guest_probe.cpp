// SPDX-License-Identifier: BSD-3-Clause
// ws-pci-guest-probe: what tests/pci_guest_test.py runs inside its guest besides our testpmd,
// on one PCI port (the EAL options before "--" choose it, as for any application):
//
//   ws-pci-guest-probe stray EAL-OPTIONS
//     The isolation proof (net_e1000_em). A page of ours outside the arena is filled with 0xa5,
//     and the next RX descriptor is given that page's physical address (e1000_testing.hpp).
//     Behind the IOMMU (vfio-pci) that address is no IOVA we mapped, so the device's write must
//     be blocked; with uio_pci_generic it is the page itself, and the write lands. Prints
//     "probe: armed", waits for the device to fill the descriptor (the host sends a frame),
//     then what the page holds, then waits for the next frame, received as usual.
//
//   ws-pci-guest-probe intr EAL-OPTIONS
//     Interrupts through the Port API: RX queue 0's fd armed twice (rx_intr_enable), each time
//     woken by a frame the host sends after "probe: rx armed N"; then the link event fd, woken
//     twice by the host toggling the link (QEMU's set_link) after "probe: link armed N".
//
//   ws-pci-guest-probe intr-quiet EAL-OPTIONS
//     As `intr`, with one more RX step before the link: with the interrupt disabled (after the
//     second wake-up), "probe: rx disabled", then the host's frame is polled from the ring while
//     the fd is watched; "probe: rx quiet: N frames, woken yes|no" (no: the fd stayed quiet, up to
//     100 ms after the frame came).
//
//   ws-pci-guest-probe link EAL-OPTIONS
//     The link event fd alone, as in `intr` (virtio-net: configuration changes).
//
//   ws-pci-guest-probe udp ADDRESS PORT FLOWS COUNT
//     No port: the guest kernel sends COUNT UDP datagrams (32 bytes) to ADDRESS:PORT from each
//     of FLOWS sockets, each with its own source port (so the flows hash apart), round robin;
//     prints "probe: sent N". Busybox has no UDP sender, and the tap flow test needs several
//     flows of one rule in exact numbers.
//
// Lines start with "probe: "; the exit code is 0 when every step happened (the test judges
// what they show), 1 when one timed out, 2 for a bad command line or device.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <ws/wirespeed.hpp>

#include "ws/drivers/e1000/e1000_testing.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t page_bytes = 4096;
constexpr std::uint8_t guard_fill = 0xa5;
constexpr auto step_timeout = std::chrono::seconds(30);

[[noreturn]] void die(int code, const std::string& why) {
  std::fprintf(stderr, "probe: %s\n", why.c_str());
  std::exit(code);
}

std::string hex(const std::uint8_t* p, std::size_t n) {
  std::string s;
  char b[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

// The physical address of the (locked, touched) page at `va`, from /proc/self/pagemap (root).
std::uint64_t physical_address(const void* va) {
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) die(2, "cannot open /proc/self/pagemap");
  std::uint64_t entry = 0;
  const auto off = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(va) / page_bytes * sizeof entry);
  const bool ok = ::pread(fd, &entry, sizeof entry, off) == static_cast<ssize_t>(sizeof entry);
  ::close(fd);
  if (!ok || (entry >> 63) == 0 || (entry & ((1ull << 55) - 1)) == 0) die(2, "no physical address in pagemap (root?)");
  return (entry & ((1ull << 55) - 1)) * page_bytes;
}

// A locked page filled with guard_fill whose physical address is no IOVA of the arena (in va
// mode the arena's IOVAs start low and could cover it: then another page is taken).
std::uint8_t* guard_page(const ws::Arena& arena, std::uint64_t& pa) {
  const std::uint64_t first = arena.iova(arena.base()), last = first + arena.size_bytes();
  for (int tries = 0; tries < 64; ++tries) {
    void* p = ::mmap(nullptr, page_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || ::mlock(p, page_bytes) != 0) die(2, "cannot map and lock a guard page");
    std::memset(p, guard_fill, page_bytes);
    pa = physical_address(p);
    if (arena.iova_mode() == ws::IovaMode::pa || pa + page_bytes <= first || pa >= last)
      return static_cast<std::uint8_t*>(p);
  }
  die(2, "no guard page outside the arena's IOVAs");
}

// Polls `port` until a frame arrives; prints its length and first 64 bytes.
bool receive_one(ws::Port& port) {
  ws::Mbuf* pkts[32];
  for (const auto end = Clock::now() + step_timeout; Clock::now() < end;) {
    const std::uint16_t n = port.rx_burst(0, pkts, 32);
    if (n == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    const auto* data = pkts[0]->data<std::uint8_t>();
    std::printf("probe: received %u bytes, head %s\n", pkts[0]->data_len,
                hex(data, std::min<std::size_t>(64, pkts[0]->data_len)).c_str());
    ws::mbuf_free_bulk({pkts, n});
    return true;
  }
  std::printf("probe: no frame received\n");
  return false;
}

int stray(ws::Eal& eal, ws::Port& port) {
  ws::Mbuf* pkts[32];
  for (int i = 0; i < 50; ++i) {  // nothing received may wait before the stray descriptor
    if (const std::uint16_t n = port.rx_burst(0, pkts, 32); n != 0) ws::mbuf_free_bulk({pkts, n});
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::uint64_t pa = 0;
  std::uint8_t* guard = guard_page(eal.arena(), pa);
  if (auto ok = ws::e1000::testing::post_stray_rx(port, pa); !ok) die(2, ok.error().message);
  std::printf("probe: armed: next RX descriptor -> 0x%llx (a guard page's physical address; arena IOVAs 0x%llx+%zu)\n",
              static_cast<unsigned long long>(pa),
              static_cast<unsigned long long>(eal.arena().iova(eal.arena().base())), eal.arena().size_bytes());
  std::fflush(stdout);
  std::optional<std::uint16_t> len;
  for (const auto end = Clock::now() + step_timeout; !len && Clock::now() < end;) {
    auto done = ws::e1000::testing::take_stray_rx(port);
    if (!done) die(2, done.error().message);
    len = *done;
    if (!len) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!len) {
    std::printf("probe: the device never filled the stray descriptor\n");
    return 1;
  }
  std::size_t changed = 0;
  for (std::size_t i = 0; i < page_bytes; ++i) changed += guard[i] != guard_fill;
  std::printf("probe: stray descriptor done: %u bytes; guard page: %zu bytes changed, head %s\n", *len, changed,
              hex(guard, 64).c_str());
  std::printf("probe: queue errors %llu\n", static_cast<unsigned long long>(port.stats().ierrors));
  std::fflush(stdout);
  return receive_one(port) ? 0 : 1;
}

// Whether `fd` became readable within step_timeout.
bool wait_fd(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(step_timeout).count())) == 1;
}

// Frames polled from RX queue 0 until some came, for up to `limit` (the one that woke us, and
// any behind it).
unsigned poll_frames(ws::Port& port, std::chrono::milliseconds limit = std::chrono::seconds(1)) {
  ws::Mbuf* pkts[32];
  unsigned got = 0;
  for (const auto end = Clock::now() + limit; Clock::now() < end && got == 0;) {
    const std::uint16_t n = port.rx_burst(0, pkts, 32);
    if (n != 0) ws::mbuf_free_bulk({pkts, n});
    got += n;
  }
  return got;
}

int rx_interrupts(ws::Port& port) {
  auto fd = port.rx_intr_fd(0);
  if (!fd) die(2, fd.error().message);
  // The host sends after "rx armed": until then, the link up (a frame sent while it is down may
  // be dropped) and the ring empty.
  for (const auto end = Clock::now() + std::chrono::seconds(2); !port.link().up && Clock::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  (void)poll_frames(port, std::chrono::milliseconds(100));
  for (int round = 0; round < 2; ++round) {
    if (auto ok = port.rx_intr_enable(0); !ok) die(2, ok.error().message);
    std::printf("probe: rx armed %d\n", round);
    std::fflush(stdout);
    if (!wait_fd(*fd)) {
      std::printf("probe: no rx interrupt in round %d\n", round);
      return 1;
    }
    if (auto ok = port.rx_intr_disable(0); !ok) die(2, ok.error().message);
    std::printf("probe: rx interrupt %d: %u frames\n", round, poll_frames(port));
  }
  return 0;
}

// Whether `fd` is readable now.
bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// RX queue 0's interrupt disabled: the frame the host sends is polled, and the fd must not fire.
int rx_quiet(ws::Port& port) {
  auto fd = port.rx_intr_fd(0);
  if (!fd) die(2, fd.error().message);
  std::printf("probe: rx disabled\n");
  std::fflush(stdout);
  ws::Mbuf* pkts[32];
  unsigned frames = 0;
  bool woken = false;
  for (const auto end = Clock::now() + step_timeout; frames == 0 && Clock::now() < end;) {
    const std::uint16_t n = port.rx_burst(0, pkts, 32);
    if (n != 0) ws::mbuf_free_bulk({pkts, n});
    frames += n;
    woken = woken || readable(*fd);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  for (const auto end = Clock::now() + std::chrono::milliseconds(100); frames != 0 && Clock::now() < end;) {
    woken = woken || readable(*fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("probe: rx quiet: %u frames, woken %s\n", frames, woken ? "yes" : "no");
  return frames != 0 ? 0 : 1;
}

int link_events(ws::Port& port) {
  auto fd = port.link_event_fd();
  if (!fd) die(2, fd.error().message);
  for (int round = 0; round < 2; ++round) {
    std::printf("probe: link armed %d (link %s)\n", round, port.link().up ? "up" : "down");
    std::fflush(stdout);
    if (!wait_fd(*fd)) {
      std::printf("probe: no link event in round %d\n", round);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::printf("probe: link event %d: link %s\n", round, port.link().up ? "up" : "down");
  }
  return 0;
}

unsigned number(const char* what, const char* text, unsigned max) {
  char* end = nullptr;
  const unsigned long n = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || n == 0 || n > max)
    die(2, std::string(what) + " '" + text + "': 1 to " + std::to_string(max) + " expected");
  return static_cast<unsigned>(n);
}

// The `udp` mode: argv holds ADDRESS PORT FLOWS COUNT.
int send_udp(char** argv) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(number("PORT", argv[1], 65535)));
  if (::inet_pton(AF_INET, argv[0], &to.sin_addr) != 1) die(2, std::string("not an IPv4 address: ") + argv[0]);
  const unsigned flows = number("FLOWS", argv[2], 64), count = number("COUNT", argv[3], 100000);
  std::vector<int> fds;
  for (unsigned f = 0; f < flows; ++f) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0)
      die(2, std::string("udp socket: ") + std::strerror(errno));
    fds.push_back(fd);
  }
  const char payload[32] = "ws-pci-guest-probe udp";
  unsigned sent = 0;
  for (unsigned i = 0; i < count; ++i)
    for (const int fd : fds) sent += ::send(fd, payload, sizeof payload, 0) == static_cast<ssize_t>(sizeof payload);
  for (const int fd : fds) ::close(fd);
  std::printf("probe: sent %u\n", sent);
  return sent == flows * count ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2)
    die(2, "usage: ws-pci-guest-probe stray|intr|intr-quiet|link EAL-OPTIONS | udp ADDRESS PORT FLOWS COUNT");
  const std::string mode = argv[1];
  if (mode == "udp") {
    if (argc != 6) die(2, "usage: ws-pci-guest-probe udp ADDRESS PORT FLOWS COUNT");
    return send_udp(argv + 2);
  }
  const ws::SplitArgs args = ws::split_args(argc - 1, argv + 1);
  auto options = ws::parse_eal_args(args.eal);
  if (!options) die(2, options.error().message);
  const ws::PktmbufPool::Options pool_options{.name = "probe", .count = 1024};
  auto eal = ws::Eal::create(std::move(*options), ws::PktmbufPool::memory_bytes(pool_options));
  if (!eal) die(2, eal.error().message);
  if ((*eal)->port_count() != 1) die(2, "give one port");
  auto pool = (*eal)->create_pktmbuf_pool(pool_options);
  if (!pool) die(2, pool.error().message);
  ws::Port& port = (*eal)->port(0);
  auto ok = port.configure({});
  if (ok) ok = port.setup_rx_queue(0, {256, *pool});
  if (ok) ok = port.setup_tx_queue(0, {256});
  if (ok) ok = port.start();
  if (!ok) die(2, ok.error().message);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (mode == "stray") return stray(**eal, port);
  if (mode == "link") return link_events(port);
  if (mode == "intr" || mode == "intr-quiet") {
    int rc = rx_interrupts(port);
    if (rc == 0 && mode == "intr-quiet") rc = rx_quiet(port);
    return rc != 0 ? rc : link_events(port);
  }
  die(2, "unknown mode '" + mode + "'");
}
