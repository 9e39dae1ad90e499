// SPDX-License-Identifier: BSD-3-Clause
// The telemetry v2 server: the socket, the client loop, and DPDK's command set and JSON shapes
// (lib/telemetry/telemetry.c and lib/ethdev/rte_ethdev.c of DPDK 22.11).
#include "app/testpmd/telemetry.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ws/core/log.hpp"
#include "ws/core/simd.hpp"

namespace ws::testpmd {
namespace {

using Json = nlohmann::ordered_json;  // DPDK keeps insertion order

constexpr int max_output_len = 16 * 1024;  // DPDK's MAX_OUTPUT_LEN
constexpr std::size_t max_request_len = 1024;
constexpr std::size_t max_clients = 10;          // DPDK's MAX_CONNECTIONS
constexpr std::size_t queue_stat_counters = 16;  // RTE_ETHDEV_QUEUE_STAT_CNTRS
const char* const version_text = "wirespeed-testpmd (DPDK telemetry v2)";

struct TelemetryCommand {
  std::string_view name;
  std::string_view help;
};

// Registration order, which "/" reports.
constexpr TelemetryCommand commands[] = {
    {"/", "Returns list of available commands, Takes no parameters"},
    {"/info", "Returns DPDK Telemetry information. Takes no parameters"},
    {"/help", "Returns help text for a command. Parameters: string command"},
    {"/eal/params", "Returns EAL commandline parameters used. Takes no parameters"},
    {"/eal/app_params", "Returns app commandline parameters used. Takes no parameters"},
    {"/ethdev/list", "Returns list of available ethdev ports. Takes no parameters"},
    {"/ethdev/info", "Returns the device info for a port. Parameters: int port_id"},
    {"/ethdev/stats", "Returns the common stats for a port. Parameters: int port_id"},
    {"/ethdev/xstats", "Returns the extended stats for a port. Parameters: int port_id"},
    {"/ethdev/link_status", "Returns the link status for a port. Parameters: int port_id"},
    {"/wirespeed/simd", "Returns the SIMD level dispatch uses and the CPU's widest. Takes no parameters"},
};

Json info_json() { return Json{{"version", version_text}, {"pid", getpid()}, {"max_output_len", max_output_len}}; }

// DPDK's port parameter: digits (strtoul base 0), an existing port; anything else is null.
const Port* port_param(const Testpmd& tp, std::string_view param) {
  if (param.empty() || !std::isdigit(static_cast<unsigned char>(param[0]))) return nullptr;
  const std::string text(param);
  char* end = nullptr;
  const unsigned long id = std::strtoul(text.c_str(), &end, 0);
  if (id >= tp.ports().size() || tp.detached(static_cast<std::uint16_t>(id))) return nullptr;
  return tp.ports()[id].get();
}

Json queue_array(const std::vector<std::uint64_t>& v) {
  Json a = Json::array();
  for (std::size_t q = 0; q < queue_stat_counters; ++q) a.push_back(q < v.size() ? v[q] : 0);
  return a;
}

Json port_stats(const Port& p) {
  const PortStats s = p.stats();
  return Json{{"ipackets", s.ipackets},
              {"opackets", s.opackets},
              {"ibytes", s.ibytes},
              {"obytes", s.obytes},
              {"imissed", s.imissed},
              {"ierrors", s.ierrors},
              {"oerrors", s.oerrors},
              {"rx_nombuf", s.rx_nombuf},
              {"q_ipackets", queue_array(s.q_ipackets)},
              {"q_opackets", queue_array(s.q_opackets)},
              {"q_ibytes", queue_array(s.q_ibytes)},
              {"q_obytes", queue_array(s.q_obytes)},
              {"q_errors", queue_array(s.q_errors)}};
}

Json port_info(const Testpmd& tp, const Port& p) {
  const PortConfig& c = p.config();
  Json rxq = Json::array(), txq = Json::array();
  for (std::uint16_t q = 0; q < c.rx_queues; ++q) rxq.push_back(p.started() ? 1 : 0);  // RTE_ETH_QUEUE_STATE_*
  for (std::uint16_t q = 0; q < c.tx_queues; ++q) txq.push_back(p.started() ? 1 : 0);
  return Json{{"name", p.name()},
              {"state", 1},  // RTE_ETH_DEV_ATTACHED
              {"nb_rx_queues", c.rx_queues},
              {"nb_tx_queues", c.tx_queues},
              {"port_id", p.id()},
              {"mtu", 1500},
              {"rx_mbuf_size_min", tp.pool().data_room_bytes()},
              {"rx_mbuf_alloc_fail", p.stats().rx_nombuf},
              {"mac_addr", p.mac().to_string()},
              {"promiscuous", p.promiscuous() ? 1 : 0},
              {"scattered_rx", 0},
              {"all_multicast", 0},
              {"dev_started", p.started() ? 1 : 0},
              {"lro", 0},
              {"dev_configured", 1},
              {"rxq_state", rxq},
              {"txq_state", txq},
              {"numa_node", -1},
              {"dev_flags", "0x0"},
              {"rx_offloads", "0x0"},
              {"tx_offloads", fmt::format("{:#x}", p.config().tx_offloads)},
              {"ethdev_rss_hf", "0x0"},
              {"driver_name", p.driver_name()}};
}

Json link_status(const Port& p) {
  const LinkStatus l = p.link();
  if (!l.up) return Json{{"status", "DOWN"}};
  return Json{{"status", "UP"}, {"speed", l.speed_mbps}, {"duplex", l.full_duplex ? "full-duplex" : "half-duplex"}};
}

// The data for one command, or nullopt for DPDK's null reply (unknown command, bad parameter).
std::optional<Json> answer(Testpmd& tp, std::string_view cmd, std::optional<std::string_view> param,
                           const std::vector<std::string>& eal_args, const std::vector<std::string>& app_args) {
  if (cmd == "/") {
    Json list = Json::array();
    for (const auto& c : commands) list.push_back(c.name);
    return list;
  }
  if (cmd == "/info") return info_json();
  if (cmd == "/help") {
    const std::string_view lookup = param ? *param : cmd;
    for (const auto& c : commands)
      if (c.name == lookup) return param ? Json{{std::string(*param), c.help}} : Json(c.help);
    return std::nullopt;
  }
  if (cmd == "/eal/params" || cmd == "/eal/app_params") return Json(cmd == "/eal/params" ? eal_args : app_args);
  if (cmd == "/wirespeed/simd")
    return Json{{"level", simd_name(simd_level())},
                {"bits", simd_bits(simd_level())},
                {"cpu_level", simd_name(cpu_simd_level())},
                {"cpu_bits", simd_bits(cpu_simd_level())}};
  std::lock_guard lock(tp.control_mutex());  // a port may be reconfigured from the prompt
  if (cmd == "/ethdev/list") {
    Json ids = Json::array();
    for (const auto& p : tp.ports())
      if (!tp.detached(p->id())) ids.push_back(p->id());
    return ids;
  }
  const bool port_command =
      cmd == "/ethdev/info" || cmd == "/ethdev/stats" || cmd == "/ethdev/xstats" || cmd == "/ethdev/link_status";
  if (!port_command) return std::nullopt;
  const Port* p = port_param(tp, param.value_or(""));
  if (!p) return std::nullopt;
  if (cmd == "/ethdev/info") return port_info(tp, *p);
  if (cmd == "/ethdev/stats") return port_stats(*p);
  if (cmd == "/ethdev/link_status") return link_status(*p);
  Json x = Json::object();
  for (const XStat& s : tp.port_xstats(p->id())) x[s.name] = s.value;
  return x;
}

bool send_text(int fd, const std::string& text) {
  return ::send(fd, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
}

// As DPDK's create_socket: bind, or replace a stale socket file nobody listens on.
// -EADDRINUSE when a live process holds the path.
int bind_socket(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.size() >= sizeof sun.sun_path) {
    ::close(fd);
    return -ENAMETOOLONG;
  }
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  auto* addr = reinterpret_cast<sockaddr*>(&sun);
  if (::bind(fd, addr, sizeof sun) < 0) {
    const int err = errno;
    struct stat st{};
    if (err != EADDRINUSE || ::stat(path.c_str(), &st) < 0 || !S_ISSOCK(st.st_mode)) {
      ::close(fd);
      return -err;
    }
    const int probe = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && ::connect(probe, addr, sizeof sun) == 0;
    if (probe >= 0) ::close(probe);
    if (live || ::unlink(path.c_str()) < 0 || ::bind(fd, addr, sizeof sun) < 0) {
      ::close(fd);
      return live ? -EADDRINUSE : -errno;
    }
  }
  if (::listen(fd, 1) < 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return -err;
  }
  return fd;
}

}  // namespace

std::string dpdk_runtime_dir(const std::string& file_prefix) {
  const char* dir = std::getenv("RUNTIME_DIRECTORY");  // systemd's RuntimeDirectory=
  if (!dir) {
    if (getuid() == 0) {
      dir = "/var/run";
    } else {
      dir = std::getenv("XDG_RUNTIME_DIR");
      if (!dir) dir = "/tmp";
    }
  }
  return std::string(dir) + "/dpdk/" + file_prefix;
}

std::string telemetry_reply(Testpmd& tp, std::string_view request, const std::vector<std::string>& eal_args,
                            const std::vector<std::string>& app_args) {
  // DPDK: strtok(buffer, ",") for the command, the rest is the parameter.
  const auto comma = request.find(',');
  const std::string_view cmd = request.substr(0, comma);
  std::optional<std::string_view> param;
  if (comma != std::string_view::npos && comma + 1 < request.size()) param = request.substr(comma + 1);
  std::optional<Json> data;
  try {
    data = answer(tp, cmd, param, eal_args, app_args);
  } catch (const std::exception&) {  // e.g. a port name that is not UTF-8
    data.reset();
  }
  Json reply = Json::object();
  reply[std::string(cmd)] = data ? *data : Json(nullptr);
  std::string text = reply.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > static_cast<std::size_t>(max_output_len)) text = Json{{std::string(cmd), nullptr}}.dump();
  return text;
}

Result<std::unique_ptr<TelemetryServer>> TelemetryServer::start(Testpmd& tp, std::vector<std::string> eal_args,
                                                                std::vector<std::string> app_args) {
  auto server = std::unique_ptr<TelemetryServer>(new TelemetryServer(tp));
  server->eal_args_ = std::move(eal_args);
  server->app_args_ = std::move(app_args);
  const std::string dir = dpdk_runtime_dir(tp.eal().file_prefix);
  // mkdir step by step, as DPDK: <runtime>/dpdk, then <runtime>/dpdk/<prefix>.
  const std::string parent = dir.substr(0, dir.rfind('/'));
  for (const std::string& d : {parent, dir})
    if (::mkdir(d.c_str(), 0700) < 0 && errno != EEXIST)
      return fail("telemetry: cannot create {}: {}", d, std::strerror(errno));
  const std::string base = dir + "/dpdk_telemetry.v2";
  int fd = -EADDRINUSE;
  for (int suffix = 0; fd == -EADDRINUSE && suffix < 100; ++suffix) {
    server->path_ = suffix == 0 ? base : fmt::format("{}:{}", base, suffix);
    fd = bind_socket(server->path_);
  }
  if (fd < 0) return fail("telemetry: cannot listen on {}: {}", server->path_, std::strerror(-fd));
  server->listen_fd_ = fd;
  server->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (server->wake_fd_ < 0) return fail("telemetry: eventfd: {}", std::strerror(errno));
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

TelemetryServer::~TelemetryServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

// One thread serves every client: requests are small and answers quick, so a poll loop is
// enough (DPDK uses a thread per client).
void TelemetryServer::serve() {
  std::vector<pollfd> fds = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  std::string buffer(max_request_len, '\0');
  while (true) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    for (std::size_t i = fds.size(); i-- > 2;) {
      if (!fds[i].revents) continue;
      const ssize_t n = ::recv(fds[i].fd, buffer.data(), buffer.size(), 0);
      if (n <= 0 ||
          !send_text(fds[i].fd, telemetry_reply(tp_, std::string_view(buffer.data(), static_cast<std::size_t>(n)),
                                                eal_args_, app_args_))) {
        ::close(fds[i].fd);
        fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    if (fds[1].revents & POLLIN) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        if (fds.size() - 2 >= max_clients || !send_text(client, info_json().dump())) {
          ::close(client);
        } else {
          fds.push_back({client, POLLIN, 0});
        }
      }
    }
  }
  for (std::size_t i = 2; i < fds.size(); ++i) ::close(fds[i].fd);
}

}  // namespace ws::testpmd
