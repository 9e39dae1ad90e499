// SPDX-License-Identifier: BSD-3-Clause
// The capture command group of a build configured with -DWS_CAPTURE=OFF: the same commands and
// --capture option, answering that live capture is not built in. capture.cpp (the proxy port,
// the pcapng writer and the libpcap filter) is not compiled, so the binary carries none of it.
#include "app/testpmd/prompt.hpp"
#include "app/testpmd/prompt/command.hpp"

namespace ws::testpmd {
namespace {

constexpr std::string_view not_built =
    "live capture is not built in (this wirespeed-testpmd was configured with -DWS_CAPTURE=OFF)";

Result<void> refuse(Testpmd&, std::span<const std::string>) { return fail("{}", not_built); }

}  // namespace

Result<void> start_capture_option(Testpmd&, std::string_view spec) { return fail("--capture={}: {}", spec, not_built); }

std::span<const Command> capture_commands() {
  static const Command table[] = {
      {{"capture", "start"}, "<port> <file> [<filter>...]", "not built in (-DWS_CAPTURE=OFF)", refuse},
      {{"capture", "stop"}, "[all|<port>]", "not built in (-DWS_CAPTURE=OFF)", refuse},
  };
  return table;
}

}  // namespace ws::testpmd
