// SPDX-License-Identifier: BSD-3-Clause
// --metrics-addr 127.0.0.1:PORT: per-port and per-queue counters in Prometheus' text exposition
// format (version 0.0.4) over plain HTTP, on loopback only, served by one control thread.
#pragma once
#include <memory>
#include <string>
#include <thread>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

// The metrics page, as served. Takes tp.control_mutex().
std::string prometheus_text(Testpmd& tp);

class MetricsServer {
 public:
  // addr: "127.x.y.z:PORT" (PORT 0: any free port). Anything not on loopback is refused.
  static Result<std::unique_ptr<MetricsServer>> start(Testpmd& tp, const std::string& addr);
  ~MetricsServer();  // stops the thread and closes the socket
  std::uint16_t port() const { return port_; }

 private:
  explicit MetricsServer(Testpmd& tp) : tp_(tp) {}
  void serve();
  void answer(int client);

  Testpmd& tp_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace ws::testpmd
