// SPDX-License-Identifier: BSD-3-Clause
// Software RSS for ports whose device computes no hash (net_ring, net_pcap, net_vhost...): the
// port hashes what its RX queues receive (Toeplitz, ws/net/rss.hpp) and, with several RX
// queues, spreads packets over them through a redirection table.
//
// Spreading without locks: RX queue 0's burst function is the distributor. It alone polls
// every driver RX queue (so each keeps a single consumer), hashes each packet, keeps queue 0's
// share and pushes the others' into one single-producer single-consumer ring per queue, from
// which RX queue q's burst function takes them. A full ring drops the packet and counts it as
// missed. The driver's per-queue counters describe where packets came from, not where they
// were spread to.
//
// Flow rules (ws/flow) ride on the same path: with a classifier, each burst is matched once
// after the hash, and a rule's queue or rss action overrides the table's queue, drop frees the
// packet. A port with rules but no software hash gets a SoftwareRss with no hash types, whose
// queues keep what they received unless a rule moves it.
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "ws/core/ring.hpp"
#include "ws/net/rss.hpp"
#include "ws/port/burst.hpp"
#include "ws/port/stats.hpp"

namespace ws {

class SoftwareRss;
class FlowClassifier;

// What RX queue q's entry points to.
struct alignas(cache_line_bytes) SoftwareRssQueue : QueueBase {
  SoftwareRss* rss = nullptr;
  std::uint16_t queue = 0;
};

class SoftwareRss {
 public:
  // For `driver` (the driver's RX burst entries, one per queue), hashing config.types (0: no
  // hash) and matching `flows` (nullptr: none). Errors name the bad reta entry.
  static Result<std::unique_ptr<SoftwareRss>> create(const RssConfig& config, std::span<const BurstEntry> driver,
                                                     const FlowClassifier* flows);
  ~SoftwareRss();  // frees what the spreading rings still hold

  // The entry to publish for RX queue q in place of the driver's.
  BurstEntry entry(std::uint16_t q);
  // Where the driver's entry for RX queue q is kept (Port::republish_rx writes its function).
  BurstEntry& driver(std::uint16_t q) noexcept { return driver_[q]; }
  // Packets dropped because a queue's spreading ring was full.
  std::uint64_t missed() const noexcept { return missed_.read(); }
  // Frees every packet waiting in the spreading rings (port stopped).
  void drain() noexcept;
  // Matches `flows` from the next burst on (control path; lcores not polling the port).
  void set_flows(const FlowClassifier* flows) noexcept { flows_ = flows; }
  // The driver's entries it polls, to put back when the port needs it no more.
  std::span<const BurstEntry> driver_entries() const noexcept { return driver_; }

  // Burst functions (public for the trampolines; `q` is a SoftwareRssQueue).
  static std::uint16_t hash_only_rx(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept;
  static std::uint16_t distributor_rx(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept;
  static std::uint16_t spread_rx(QueueBase* q, Mbuf** pkts, std::uint16_t n) noexcept;
  // The rules over a burst: drops freed and removed, queues overriding target[i]; the count kept.
  static std::uint16_t apply_flows(const FlowClassifier& flows, Mbuf** pkts, std::uint16_t got,
                                   std::uint16_t* target) noexcept;

 private:
  SoftwareRss(const RssConfig& config, RssReta reta)
      : key_(config.key, config.symmetric), reta_(reta), types_(config.types) {}

  Toeplitz key_;
  RssReta reta_;
  std::uint32_t types_;
  const FlowClassifier* flows_ = nullptr;
  std::vector<BurstEntry> driver_;
  std::vector<std::unique_ptr<Ring<Mbuf*>>> rings_;  // [q], q >= 1: queue 0's packets for queue q
  std::vector<std::unique_ptr<SoftwareRssQueue>> queues_;
  Counter missed_;  // written by queue 0's lcore only
};

}  // namespace ws
