// SPDX-License-Identifier: BSD-3-Clause
// The Prometheus endpoint: a tiny HTTP/1.0 responder for GET /metrics.
#include "app/testpmd/telemetry_metrics.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace ws::testpmd {
namespace {

struct Metric {
  std::string_view name;
  std::string_view help;
  std::uint64_t PortStats::* field;
};

constexpr Metric port_metrics[] = {
    {"rx_packets", "Packets received", &PortStats::ipackets},
    {"tx_packets", "Packets sent", &PortStats::opackets},
    {"rx_bytes", "Bytes received", &PortStats::ibytes},
    {"tx_bytes", "Bytes sent", &PortStats::obytes},
    {"rx_missed", "Packets the device dropped for lack of room", &PortStats::imissed},
    {"rx_errors", "Erroneous received packets", &PortStats::ierrors},
    {"tx_errors", "Failed transmissions", &PortStats::oerrors},
    {"rx_nombuf", "RX mbuf allocation failures", &PortStats::rx_nombuf},
};

struct QueueMetric {
  std::string_view name;
  std::string_view help;
  std::vector<std::uint64_t> PortStats::* field;
};

constexpr QueueMetric queue_metrics[] = {
    {"rx_queue_packets", "Packets received per RX queue", &PortStats::q_ipackets},
    {"rx_queue_bytes", "Bytes received per RX queue", &PortStats::q_ibytes},
    {"tx_queue_packets", "Packets sent per TX queue", &PortStats::q_opackets},
    {"tx_queue_bytes", "Bytes sent per TX queue", &PortStats::q_obytes},
    {"tx_queue_errors", "Failed transmissions per TX queue", &PortStats::q_errors},
};

// Loopback only: the endpoint has no authentication.
Result<sockaddr_in> parse_loopback(const std::string& addr) {
  const auto colon = addr.rfind(':');
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  unsigned port = 0;
  const std::string host = addr.substr(0, colon == std::string::npos ? 0 : colon);
  const char* p = colon == std::string::npos ? nullptr : addr.c_str() + colon + 1;
  const char* end = addr.c_str() + addr.size();
  if (!p || p == end || std::from_chars(p, end, port).ptr != end || port > 65535 ||
      inet_pton(AF_INET, host.c_str(), &sin.sin_addr) != 1)
    return fail("--metrics-addr {}: expected 127.0.0.1:PORT", addr);
  if ((ntohl(sin.sin_addr.s_addr) >> 24) != 127)
    return fail(
        "--metrics-addr {}: only loopback addresses (127.0.0.0/8) are served; the endpoint has no "
        "authentication",
        addr);
  sin.sin_port = htons(static_cast<std::uint16_t>(port));
  return sin;
}

}  // namespace

std::string prometheus_text(Testpmd& tp) {
  std::vector<PortStats> stats;
  std::vector<std::string> labels;
  {
    std::lock_guard lock(tp.control_mutex());
    for (const auto& p : tp.ports()) {
      stats.push_back(p->stats());
      labels.push_back(fmt::format("port=\"{}\",name=\"{}\",driver=\"{}\"", p->id(), p->name(), p->driver_name()));
    }
  }
  std::string out;
  for (const Metric& m : port_metrics) {
    out += fmt::format("# HELP wirespeed_port_{}_total {}.\n# TYPE wirespeed_port_{}_total counter\n", m.name, m.help,
                       m.name);
    for (std::size_t i = 0; i < stats.size(); ++i)
      out += fmt::format("wirespeed_port_{}_total{{{}}} {}\n", m.name, labels[i], stats[i].*m.field);
  }
  for (const QueueMetric& m : queue_metrics) {
    out += fmt::format("# HELP wirespeed_{}_total {}.\n# TYPE wirespeed_{}_total counter\n", m.name, m.help, m.name);
    for (std::size_t i = 0; i < stats.size(); ++i) {
      const auto& v = stats[i].*m.field;
      for (std::size_t q = 0; q < v.size(); ++q)
        out += fmt::format("wirespeed_{}_total{{{},queue=\"{}\"}} {}\n", m.name, labels[i], q, v[q]);
    }
  }
  return out;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(Testpmd& tp, const std::string& addr) {
  auto sin = parse_loopback(addr);
  if (!sin) return std::unexpected(sin.error());
  auto server = std::unique_ptr<MetricsServer>(new MetricsServer(tp));
  server->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return fail("--metrics-addr {}: socket: {}", addr, std::strerror(errno));
  const int one = 1;
  ::setsockopt(server->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(server->listen_fd_, reinterpret_cast<const sockaddr*>(&*sin), sizeof *sin) < 0 ||
      ::listen(server->listen_fd_, 8) < 0)
    return fail("--metrics-addr {}: {}", addr, std::strerror(errno));
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  ::getsockname(server->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  server->port_ = ntohs(bound.sin_port);
  server->wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (server->wake_fd_ < 0) return fail("--metrics-addr: eventfd: {}", std::strerror(errno));
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

MetricsServer::~MetricsServer() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void MetricsServer::serve() {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
  while (true) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    answer(client);
    ::close(client);
  }
}

// One request per connection (HTTP/1.0 style). A client gets one second to send its request
// line, so that a silent one cannot hold the thread.
void MetricsServer::answer(int client) {
  std::string request;
  char buf[1024];
  while (request.find("\r\n\r\n") == std::string::npos && request.find("\n\n") == std::string::npos &&
         request.size() < 8192) {
    pollfd p{client, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) return;
    const ssize_t n = ::recv(client, buf, sizeof buf, 0);
    if (n <= 0) break;
    request.append(buf, static_cast<std::size_t>(n));
  }
  std::string status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8", body;
  if (request.starts_with("GET /metrics ") || request.starts_with("GET / ")) {
    body = prometheus_text(tp_);
  } else if (request.starts_with("GET ")) {
    status = "404 Not Found";
    body = "wirespeed-testpmd serves /metrics\n";
  } else {
    status = "405 Method Not Allowed";
    body = "only GET /metrics\n";
  }
  const std::string response =
      fmt::format("HTTP/1.0 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status, type,
                  body.size(), body);
  std::size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace ws::testpmd
