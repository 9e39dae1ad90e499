// SPDX-License-Identifier: BSD-3-Clause
// DPDK telemetry v2 for wirespeed-testpmd: a SOCK_SEQPACKET unix socket at the path DPDK uses
// for the file prefix, answering DPDK's JSON commands (/, /info, /help, /eal/params,
// /ethdev/list|info|stats|xstats|link_status) so that dpdk-telemetry.py works unchanged.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

// DPDK 22.11's runtime directory (eal_create_runtime_dir): $RUNTIME_DIRECTORY, else /var/run
// as root, else $XDG_RUNTIME_DIR or /tmp; then /dpdk/<file-prefix>.
std::string dpdk_runtime_dir(const std::string& file_prefix);

// One reply, as DPDK writes it: {"<command>":<data>} or {"<command>":null}. Takes
// tp.control_mutex() for port commands.
std::string telemetry_reply(Testpmd& tp, std::string_view request, const std::vector<std::string>& eal_args,
                            const std::vector<std::string>& app_args);

class TelemetryServer {
 public:
  // Binds <runtime dir>/dpdk_telemetry.v2 (":1", ":2", ... when another process holds it, as
  // DPDK) and serves it from one control thread until destroyed.
  static Result<std::unique_ptr<TelemetryServer>> start(Testpmd& tp, std::vector<std::string> eal_args,
                                                        std::vector<std::string> app_args);
  ~TelemetryServer();  // stops the thread, closes clients, removes the socket file
  const std::string& path() const { return path_; }

 private:
  TelemetryServer(Testpmd& tp) : tp_(tp) {}
  void serve();

  Testpmd& tp_;
  std::vector<std::string> eal_args_, app_args_;
  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: written by the destructor to end serve()
  std::thread thread_;
};

}  // namespace ws::testpmd
