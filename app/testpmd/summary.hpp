// SPDX-License-Identifier: BSD-3-Clause
// The --summary-json report: per-port and total counts, rates, cycles per packet, pool audit.
#pragma once
#include <string>

#include "app/testpmd/testpmd.hpp"

namespace ws::testpmd {

// True when every packet is accounted for: rx + generated == tx + dropped + consumed.
bool accounting_exact(const FwdTotals& t);
Result<void> write_summary(const Testpmd& tp, const std::string& path, bool pool_ok);

}  // namespace ws::testpmd
