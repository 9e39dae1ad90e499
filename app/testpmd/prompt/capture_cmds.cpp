// SPDX-License-Identifier: BSD-3-Clause
// Prompt commands for live capture: capture start <port> <file> [filter], capture stop.
// Starting or stopping a capture pauses the forwarding lcores only for the swap of the port's
// receive proxy; counters and forwarding go on.
#include <cstdio>

#include "app/testpmd/prompt.hpp"
#include "app/testpmd/prompt/capture.hpp"
#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

void stop_capture(Testpmd& tp, std::uint16_t port) {
  auto old = tp.swap_rx_tap(port, nullptr);
  const CaptureCounts c = capture_counts(*old);
  const std::string path = capture_path(*old);
  old.reset();  // flushes and closes the file
  std::printf("Capture of port %u stopped: %llu packets written to %s (%llu received)\n", port,
              static_cast<unsigned long long>(c.written), path.c_str(), static_cast<unsigned long long>(c.received));
}

Result<void> start_capture(Testpmd& tp, std::string_view port_text, const std::string& path,
                           const std::string& filter) {
  auto port = parse_port(tp, port_text);
  if (!port) return std::unexpected(port.error());
  if (!*port) return fail("capture start: give one port id, not 'all'");
  if (const Port* t = tp.rx_tap(**port))
    return fail("port {} is already captured to {}; 'capture stop {}' first", **port, capture_path(*t), **port);
  auto cap = make_capture_port(*tp.ports()[**port], path, filter);
  if (!cap) return std::unexpected(cap.error());
  tp.swap_rx_tap(**port, std::move(*cap));
  std::printf("Capturing port %u to %s%s%s\n", **port, path.c_str(),
              filter.empty() ? "" : " with filter: ", filter.c_str());
  return {};
}

}  // namespace

Result<void> start_capture_option(Testpmd& tp, std::string_view spec) {
  const auto first = spec.find(',');
  const auto second = spec.find(',', first + 1);
  const std::string path(
      spec.substr(first + 1, second == std::string_view::npos ? std::string_view::npos : second - first - 1));
  const std::string filter(second == std::string_view::npos ? std::string_view{} : spec.substr(second + 1));
  if (auto ok = start_capture(tp, spec.substr(0, first), path, filter); !ok)
    return fail("--capture={}: {}", spec, ok.error().message);
  return {};
}

std::span<const Command> capture_commands() {
  static const Command table[] = {
      {{"capture", "start"},
       "<port> <file> [<filter>...]",
       "write what a port receives to a pcapng file; filter in tcpdump syntax (e.g. udp port 9)",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         std::string filter;
         for (std::size_t i = 2; i < a.size(); ++i) filter += (i > 2 ? " " : "") + a[i];
         return start_capture(tp, a[0], a[1], filter);
       }},
      {{"capture", "stop"},
       "[all|<port>]",
       "stop captures (default: all) and close their files",
       [](Testpmd& tp, CommandArgs a) -> Result<void> {
         std::optional<std::uint16_t> port;
         if (!a.empty()) {
           auto p = parse_port(tp, a[0]);
           if (!p) return std::unexpected(p.error());
           port = *p;
         }
         bool any = false;
         for (auto id : selected_ports(tp, port)) {
           if (!tp.rx_tap(id)) continue;
           stop_capture(tp, id);
           any = true;
         }
         if (!any) std::printf("No capture running%s\n", port ? " on that port" : "");
         return {};
       }},
  };
  return table;
}

}  // namespace ws::testpmd
