// SPDX-License-Identifier: BSD-3-Clause
// Per-packet cost of the virtio-net header offload mapping (net_offload.hpp), the work the
// offload variants add to a burst: TX with no request (the only thing a packet that asks for
// nothing pays), TX checksum request to NEEDS_CSUM, and RX completion of a partial checksum at
// 64 B and 1500 B. Non-offload variants do none of this (if constexpr).
#include <benchmark/benchmark.h>

#include <memory>

#include "ws/core/arena.hpp"
#include "ws/net/packet_builder.hpp"
#include "ws/net/ptype.hpp"
#include "ws/virtio/net/offload.hpp"

namespace ws::virtio {
namespace {

struct Fixture {
  std::unique_ptr<Arena> arena;
  std::unique_ptr<PktmbufPool> pool;
  Mbuf* m = nullptr;
  explicit Fixture(std::uint32_t payload) {
    arena = std::move(*Arena::create({"net_offload_bench", 8u << 20, HugePolicy::never}));
    pool =
        std::move(*PktmbufPool::create(*arena, {.name = "nob", .count = 64, .cache_size = 0, .data_room_bytes = 2048}));
    const BuiltFrame f = build_frame({.l4_proto = ip_proto_tcp, .payload_bytes = payload});
    m = pool->copy_in(f.bytes.data(), static_cast<std::uint32_t>(f.bytes.size()), 0);
    classify(*m);
  }
  ~Fixture() { mbuf_free(m); }
};

void BM_TxNoRequest(benchmark::State& state) {
  Fixture fx(10);
  for (auto _ : state) {
    NetHdr h{};
    benchmark::DoNotOptimize(tx_offload_to_net_hdr(*fx.m, h, {true, true, true}));
    benchmark::DoNotOptimize(h);
  }
}

void BM_TxTcpCsumRequest(benchmark::State& state) {
  Fixture fx(static_cast<std::uint32_t>(state.range(0)));
  fx.m->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_ip_cksum | mbuf_flag::tx_tcp_cksum;
  for (auto _ : state) {
    NetHdr h{};
    benchmark::DoNotOptimize(tx_offload_to_net_hdr(*fx.m, h, {true, true, true}));
    benchmark::DoNotOptimize(h);
  }
}

void BM_RxCompleteCsum(benchmark::State& state) {
  Fixture fx(static_cast<std::uint32_t>(state.range(0)));
  fx.m->ol_flags = mbuf_flag::tx_ipv4 | mbuf_flag::tx_tcp_cksum;
  NetHdr h{};
  tx_offload_to_net_hdr(*fx.m, h, {true, true, true});
  for (auto _ : state) {
    rx_net_hdr_to_offload(h, *fx.m);  // rewrites the same checksum each time
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_TxNoRequest);
BENCHMARK(BM_TxTcpCsumRequest)->Arg(10)->Arg(1446);
BENCHMARK(BM_RxCompleteCsum)->Arg(10)->Arg(1446);

}  // namespace
}  // namespace ws::virtio

BENCHMARK_MAIN();
