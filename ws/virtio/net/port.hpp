// SPDX-License-Identifier: BSD-3-Clause
// What a virtio-net driver port is whatever its transport: queue variants picked from the
// negotiated features, ring memory in the arena, start and stop around the transport's device
// setup, statistics and queue health. virtio_user (vhost-user) and net_virtio (PCI) derive from
// it and add only their transport: start_device(), stop_device() and the device's address of
// our memory (dma_addr()).
#pragma once
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ws/core/arena.hpp"
#include "ws/core/log.hpp"
#include "ws/port/intr_fd.hpp"
#include "ws/port/variant.hpp"
#include "ws/virtio/features.hpp"
#include "ws/virtio/net/queues.hpp"

namespace ws::virtio {

// One ring's memory: the areas both formats are laid out in, zeroed at each start.
struct RingMemory {
  RingArea area;
  std::byte* base = nullptr;
  std::size_t bytes = 0;
};

template <QueueTransport T>
class VirtioNetPort : public Port {
 public:
  template <bool P, bool I, bool M, bool O>
  using Rx = VirtioRx<T, P, I, M, O>;
  template <bool P, bool I, bool O>
  using Tx = VirtioTx<T, P, I, O>;

  VirtioNetPort(std::string name, std::string driver, Arena& arena, std::uint16_t pairs, std::uint32_t queue_size)
      : Port(std::move(name), std::move(driver)), arena_(arena), pairs_(pairs), queue_size_(queue_size) {}

  // Checksum requests are always honoured (in the header when the device took CSUM, else in
  // software); TSO only when the device took HOST_TSO4/6.
  PortInfo info() const override {
    PortInfo i{driver_name(), pairs_, pairs_, 0, 65535};
    i.tx_offload_capa = tx_offload::checksums;
    const HdrOffloads tx = HdrOffloads::driver_tx(features_);
    if (tx.tso4 || tx.tso6) i.tx_offload_capa |= tx_offload::tcp_tso;
    // RX, as DPDK's virtio PMD: mergeable buffers chain long packets; GUEST_CSUM gives the
    // device's checksum verdicts, GUEST_TSO4/6 coalesced TCP packets.
    if (has(features_, feature::mrg_rxbuf)) i.rx_offload_capa |= rx_offload::scatter;
    if (has(features_, feature::guest_csum)) i.rx_offload_capa |= rx_offload::udp_cksum | rx_offload::tcp_cksum;
    if (has(features_, feature::guest_tso4) || has(features_, feature::guest_tso6))
      i.rx_offload_capa |= rx_offload::tcp_lro;
    return i;
  }
  Result<void> do_configure(const PortConfig& c) override {
    if (c.rx_queues != c.tx_queues || c.rx_queues > pairs_)
      return fail("device '{}': {} RX and {} TX queues requested, expected equal counts up to {} (queue pairs)", name(),
                  c.rx_queues, c.tx_queues, pairs_);
    rxq_.clear();
    txq_.clear();
    const bool p = has(features_, feature::ring_packed), io = has(features_, feature::in_order),
               m = has(features_, feature::mrg_rxbuf);
    // Offload variants only where there is something to map: the device's headers may carry
    // state (GUEST_CSUM), ours may carry requests (CSUM), or the application will ask for TX
    // offloads that must then be done in software.
    const HdrOffloads tx_ol = HdrOffloads::driver_tx(features_);
    const bool ol_in = has(features_, feature::guest_csum);
    const bool ol_out = tx_ol.any() || c.tx_offloads != 0;
    for (std::uint16_t q = 0; q < c.rx_queues; ++q) {
      rxq_.push_back(make_rx_variant<RxCommon, Rx>(p, io, m, ol_in));
      txq_.push_back(make_tx_variant<TxCommon, Tx>(p, io, ol_out));
      txq_.back()->offload = tx_ol;
      txq_.back()->keep_num_buffers = keep_num_buffers_;
    }
    return {};
  }
  Result<void> setup_rx_queue(std::uint16_t q, const RxQueueConfig& c) override {
    if (q >= rxq_.size()) return fail("RX queue {} does not exist ({} configured)", q, rxq_.size());
    if (c.pool == nullptr) return fail("device '{}': RX queue {} needs a mempool", name(), q);
    if (!arena_.contains(c.pool->buffers().data(), c.pool->buffers().size()))
      return fail("device '{}': RX queue {} pool '{}' has its buffers outside the shared arena", name(), q,
                  c.pool->mempool().name());
    rxq_[q]->pool = c.pool;
    rxq_[q]->port_id = id();
    if (auto m = ring_memory(2u * q); !m) return std::unexpected(m.error());
    return {};
  }
  Result<void> setup_tx_queue(std::uint16_t q, const TxQueueConfig&) override {
    if (q >= txq_.size()) return fail("TX queue {} does not exist ({} configured)", q, txq_.size());
    if (auto m = ring_memory(2u * q + 1); !m) return std::unexpected(m.error());
    return {};
  }

  Result<void> do_start() override {
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      if (rxq_[q]->pool == nullptr) return fail("RX queue {} was not set up", q);
      txq_[q]->zero_hdr = dma_addr(zero_hdr_);
    }
    // A restart (port stop, port start): what the last run left in the rings goes back to the
    // pools first, RX buffers and TX packets the device never completed, since the rings are
    // zeroed below and would forget them.
    release_mbufs();
    const std::vector<QueueCommon*> queues = ring_queues();
    for (std::uint32_t r = 0; r < queues.size(); ++r) {
      RingMemory& m = *rings_[r];
      std::memset(m.base, 0, m.bytes);  // a restart begins from index 0
      reset_health(*queues[r]);
      queues[r]->init(m.area, has(features_, feature::event_idx));
    }
    for (auto& q : rxq_) q->fill();
    rings_hold_mbufs_ = true;
    if (auto ok = start_device(); !ok) {
      release_mbufs();
      return ok;
    }
    for (std::uint16_t q = 0; q < rxq_.size(); ++q) {
      rxq_[q]->port_id = id();
      publish_rx(q, rxq_[q].entry());
      publish_tx(q, txq_[q].entry());
    }
    return {};
  }
  // The device first gets a moment to send what TX took: its reset drops the chains it has not
  // completed, which were counted sent when the ring took them (a txonly run on a QEMU
  // virtio-net NIC lost its last burst that way, every frame counted and 32 never on the wire).
  void do_stop() override {
    (void)rings_healthy();  // a ring broken since the last look is logged before the stop resets it
    if (const std::uint64_t held = wait_for_tx(tx_stop_timeout); held != 0)
      log(LogLevel::notice,
          "{}: the device did not send {} TX packets within {} ms of the stop; they are dropped "
          "(tx_q<N>_reset_dropped, oerrors)",
          name(), held, tx_stop_timeout.count());
    stop_device();
  }
  // TX packets the device still held are dropped and counted (they were counted sent); filled
  // RX buffers no burst took were never counted received, as in DPDK.
  void release_mbufs() override {
    if (!rings_hold_mbufs_) return;  // never started, or released already: the rings are empty
    for (auto& q : rxq_) q->release_mbufs();
    for (auto& q : txq_) q->reset_dropped.add(q->release_mbufs());
    rings_hold_mbufs_ = false;
  }
  // Packets a ring reset or a stop dropped are errors: TX ones were counted sent when the ring
  // took them.
  PortStats read_stats() const override {
    PortStats s;
    for (const auto& q : rxq_) add_rx(s, q->counters);
    for (const auto& q : txq_) add_tx(s, q->counters);
    for (const auto& q : rxq_) s.ierrors += q->reset_dropped.read();
    for (const auto& q : txq_) s.oerrors += q->reset_dropped.read();
    return s;
  }
  // DPDK 22.11's virtio names first, in its order: the generic port totals (its virtio PMD does
  // not fill rte_ethdev's per-queue ones), each RX queue's, each TX queue's; then ours.
  std::vector<XStat> xstats() const override {
    const PortStats st = stats();
    auto out = generic_xstats(st, false);
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      const std::string p = fmt::format("rx_q{}_", q);
      append_good_xstats(out, p, queue_stat(st.q_ipackets, q), queue_stat(st.q_ibytes, q));
      out.push_back({p + "errors", rxq_[q]->counters.errors.read()});
      rxq_[q]->classes.append_xstats(out, p);
    }
    for (std::size_t q = 0; q < txq_.size(); ++q) {
      const std::string p = fmt::format("tx_q{}_", q);
      append_good_xstats(out, p, queue_stat(st.q_opackets, q), queue_stat(st.q_obytes, q));
      txq_[q]->classes.append_xstats(out, p);
    }
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      out.push_back({fmt::format("rx_q{}_broken", q), rxq_[q]->health.broken() ? 1u : 0u});
      out.push_back({fmt::format("tx_q{}_broken", q), txq_[q]->health.broken() ? 1u : 0u});
      out.push_back({fmt::format("rx_q{}_reset_dropped", q), rxq_[q]->reset_dropped.read()});
      out.push_back({fmt::format("tx_q{}_reset_dropped", q), txq_[q]->reset_dropped.read()});
      for (std::size_t e = 0; e < queue_error_count; ++e) {
        const auto err = static_cast<QueueError>(e);
        if (const std::uint64_t n = rxq_[q]->health.count(err))
          out.push_back({fmt::format("rx_q{}_{}", q, queue_error_name(err)), n});
        if (const std::uint64_t n = txq_[q]->health.count(err))
          out.push_back({fmt::format("tx_q{}_{}", q, queue_error_name(err)), n});
      }
    }
    out.push_back({"features", features_});
    return out;
  }

 protected:
  // The transport: tell the device about the rings (ring_queues(), rings_) and start it; stop it.
  virtual Result<void> start_device() = 0;
  virtual void stop_device() = 0;
  // The address the device uses for `p`, in our arena.
  virtual std::uint64_t dma_addr(const void* p) const = 0;

  // RX interrupts, whatever the transport: arms (on) or disarms RX queue q's ring under its gate
  // and keeps `fd` true to it. A packet that came before the arming makes `fd` readable (the
  // application must not wait for the interrupt then); disarming drains what `fd` held. A closed
  // gate (the queue stopped) changes neither.
  void arm_rx_interrupt(std::uint16_t q, IntrFd& fd, bool on) {
    RxCommon& rq = *rxq_[q];
    if (!rq.gate.enter()) return;
    const bool pending = rq.set_interrupt(on);
    rq.gate.leave();
    if (pending) fd.signal();
    if (!on) fd.drain();
  }

  // Ring order: RX 0, TX 0, RX 1, TX 1 ... (virtio-net's queue numbering, §5.1.2).
  std::vector<QueueCommon*> ring_queues() const {
    std::vector<QueueCommon*> queues;
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      queues.push_back(rxq_[q].get());
      queues.push_back(txq_[q].get());
    }
    return queues;
  }
  bool packed() const { return has(features_, feature::ring_packed); }

  // Whether no ring was broken by the device. A broken ring takes no more work from it until the
  // port restarts: the port is down (link()), and the first look that finds a ring broken logs it,
  // once per break. Control path, any thread (link monitor, prompt, stop): the health is atomic
  // and each ring's log flag is claimed by an exchange.
  bool rings_healthy() const {
    bool healthy = true;
    for (std::size_t q = 0; q < rxq_.size(); ++q) {
      healthy = ring_healthy(*rxq_[q], "RX", q) && healthy;
      healthy = ring_healthy(*txq_[q], "TX", q) && healthy;
    }
    return healthy;
  }

  // How long a stop waits for the device to complete the TX chains it holds: a device that
  // never completes them (a backend gone, a hung NIC) must not hold the stop for long.
  static constexpr std::chrono::milliseconds tx_stop_timeout{200};
  // Until every TX queue's chains are completed, or `timeout`, with the lcores kept out by each
  // queue's gate. Returns the TX chains the device still holds.
  std::uint64_t wait_for_tx(std::chrono::milliseconds timeout) {
    for (auto& q : txq_) q->gate.close();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::uint64_t held = 0;
    for (;;) {
      held = 0;
      for (auto& q : txq_) held += q->reclaim_sent();
      if (held == 0 || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (auto& q : txq_) q->gate.open();
    return held;
  }

  // A packed ring cannot resume where an old device left it: once we reclaimed its used
  // descriptors, the ring no longer shows how far the device got. So, as DPDK's virtio_user on a
  // server-mode reconnection (virtqueue_rxvq/txvq_reset_packed), every ring starts over, with
  // the lcores kept out by each queue's gate: what the old device completed is reclaimed, the
  // chains it still held are freed (TX packets it never completed count as dropped:
  // reset_dropped, oerrors; filled RX buffers no burst took, and a mergeable packet cut short,
  // in ierrors; empty RX buffers go back to the pool), the ring memory is zeroed, the driver
  // engine is back at index 0 with both wrap counters 1, and RX is refilled. Returns the TX
  // packets dropped.
  std::uint64_t reset_rings() {
    (void)rings_healthy();  // what the old device broke is logged before the reset forgets it
    const std::vector<QueueCommon*> queues = ring_queues();
    for (QueueCommon* q : queues) q->gate.close();
    std::uint64_t tx_dropped = 0;
    for (std::uint32_t r = 0; r < queues.size(); ++r) {
      QueueCommon& q = *queues[r];
      const std::uint32_t dropped = q.release_mbufs();
      q.reset_dropped.add(dropped);
      if (r % 2 == 1) tx_dropped += dropped;
      RingMemory& m = *rings_[r];
      std::memset(m.base, 0, m.bytes);
      reset_health(q);  // a ring the old device broke works again with the new one
      q.init(m.area, has(features_, feature::event_idx));
    }
    for (auto& q : rxq_) q->fill();
    rings_hold_mbufs_ = true;
    for (QueueCommon* q : queues) q->gate.open();
    return tx_dropped;
  }

  Arena& arena_;
  std::uint16_t pairs_;
  std::uint32_t queue_size_;
  std::uint64_t features_ = 0;
  bool keep_num_buffers_ = false;  // TX headers leave num_buffers alone (store_tx_net_hdr)
  std::vector<std::unique_ptr<RingMemory>> rings_;
  std::byte* zero_hdr_ = nullptr;
  std::vector<QueueVariant<RxCommon>> rxq_;
  std::vector<QueueVariant<TxCommon>> txq_;
  bool rings_hold_mbufs_ = false;  // filled by a start and not released since

 private:
  bool ring_healthy(const QueueCommon& c, const char* dir, std::size_t q) const {
    if (!c.health.broken()) return true;
    // relaxed: only which thread logs is decided here; the error it logs was published by
    // broken()'s acquire above.
    if (!c.broken_logged.exchange(true, std::memory_order_relaxed))
      log(LogLevel::warning, "{}: {} queue {} was broken by the device: {}; the port is down until it restarts", name(),
          dir, q, queue_error_detail(c.health.first_error(), c.health.first_detail()));
    return false;
  }
  static void reset_health(QueueCommon& c) {
    c.health.reset();
    c.broken_logged.store(false, std::memory_order_relaxed);
  }

  // One block per ring, 4 KiB aligned (within one huge page in pa mode: physically contiguous).
  Result<RingMemory*> ring_memory(std::uint32_t r) {
    if (rings_.size() <= r) rings_.resize(r + 1);
    if (rings_[r]) return rings_[r].get();
    auto mem = std::make_unique<RingMemory>();
    mem->bytes = ring_area_bytes(queue_size_);
    auto block = arena_.allocate(mem->bytes, 4096, fmt::format("{} ring {}", name(), r));
    if (!block) return with_context(block.error(), fmt::format("device '{}'", name()));
    mem->base = static_cast<std::byte*>(*block);
    mem->area = carve_ring_area(mem->base, queue_size_);
    if (!zero_hdr_) {
      auto z = arena_.allocate(64, 64, "virtio-net zero header");
      if (!z) return with_context(z.error(), fmt::format("device '{}'", name()));
      zero_hdr_ = static_cast<std::byte*>(*z);
    }
    rings_[r] = std::move(mem);
    return rings_[r].get();
  }
};

}  // namespace ws::virtio
