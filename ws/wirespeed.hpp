// SPDX-License-Identifier: BSD-3-Clause
// Every public header of the installed library in one include: what an application needs to
// make ports from device strings, pools of mbufs, lcores and route tables (docs/api.md).
#pragma once

#include "ws/core/arena.hpp"
#include "ws/core/cpu.hpp"
#include "ws/core/devargs.hpp"
#include "ws/core/lcore.hpp"
#include "ws/core/log.hpp"
#include "ws/core/mbuf.hpp"
#include "ws/core/mempool.hpp"
#include "ws/core/result.hpp"
#include "ws/core/ring.hpp"
#include "ws/core/simd.hpp"
#include "ws/drivers/builtin.hpp"
#include "ws/eal/eal.hpp"
#include "ws/eal/eal_args.hpp"
#include "ws/lpm/lpm.hpp"
#include "ws/lpm/routes.hpp"
#include "ws/net/checksum.hpp"
#include "ws/net/ether.hpp"
#include "ws/net/headers.hpp"
#include "ws/net/ptype.hpp"
#include "ws/net/rss.hpp"
#include "ws/port/driver.hpp"
#include "ws/port/port.hpp"
#include "ws/port/stats.hpp"
#include "ws/version.hpp"
