// SPDX-License-Identifier: BSD-3-Clause
// Software RSS: hashing RX burst functions and the queue-0 distributor (see software_rss.hpp).
#include "ws/port/software_rss.hpp"

#include <algorithm>
#include <bit>

#include "ws/flow/classifier.hpp"

namespace ws {

Result<std::unique_ptr<SoftwareRss>> SoftwareRss::create(const RssConfig& config, std::span<const BurstEntry> driver,
                                                         const FlowClassifier* flows) {
  const auto queues = static_cast<std::uint16_t>(driver.size());
  const std::size_t reta_size = config.reta.empty() ? 128 : config.reta.size();
  auto reta = RssReta::create(queues, reta_size);
  if (!reta) return with_context(reta.error(), "RSS redirection table");
  for (std::size_t i = 0; i < config.reta.size(); ++i)
    if (auto ok = reta->set(i, config.reta[i]); !ok) return with_context(ok.error(), "RSS redirection table");
  std::unique_ptr<SoftwareRss> rss(new SoftwareRss(config, *reta));
  rss->flows_ = flows;
  rss->driver_.assign(driver.begin(), driver.end());
  rss->rings_.resize(queues);
  for (std::uint16_t q = 0; q < queues; ++q) {
    auto sq = std::make_unique<SoftwareRssQueue>();
    sq->rss = rss.get();
    sq->queue = q;
    rss->queues_.push_back(std::move(sq));
    if (q == 0) continue;
    // Producer: queue 0's lcore; consumer: queue q's. Room for a few bursts of the largest size.
    auto ring = Ring<Mbuf*>::create("software RSS", {.size = 2048, .producer = Sync::single, .consumer = Sync::single});
    if (!ring) return std::unexpected(ring.error());
    rss->rings_[q] = std::move(*ring);
  }
  return rss;
}

SoftwareRss::~SoftwareRss() { drain(); }

void SoftwareRss::drain() noexcept {
  Mbuf* pkts[64];
  for (auto& r : rings_) {
    if (!r) continue;
    while (const std::uint32_t n = r->dequeue_burst(pkts)) mbuf_free_bulk(std::span<Mbuf* const>(pkts, n));
  }
}

// The rules' verdicts over the burst: drops freed and closed up, queues overriding `target`.
std::uint16_t SoftwareRss::apply_flows(const FlowClassifier& flows, Mbuf** pkts, std::uint16_t got,
                                       std::uint16_t* target) noexcept {
  std::uint16_t verdict[mbuf_max_burst];
  flows.classify(pkts, got, verdict);
  std::uint16_t kept = 0;
  for (std::uint16_t i = 0; i < got; ++i) {
    if (verdict[i] == flow_drop) {
      mbuf_free(pkts[i]);
      continue;
    }
    target[kept] = verdict[i] == flow_keep ? target[i] : verdict[i];
    pkts[kept++] = pkts[i];
  }
  if (kept < got) flows.add_dropped(static_cast<std::uint16_t>(got - kept));
  return kept;
}

BurstEntry SoftwareRss::entry(std::uint16_t q) {
  BurstFn fn = driver_.size() == 1 ? &hash_only_rx : q == 0 ? &distributor_rx : &spread_rx;
  return {fn, queues_[q].get()};
}

std::uint16_t SoftwareRss::hash_only_rx(QueueBase* base, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& q = *static_cast<SoftwareRssQueue*>(base);
  SoftwareRss& rss = *q.rss;
  const BurstEntry& d = rss.driver_[0];
  if (rss.flows_) n = std::min(n, mbuf_max_burst);  // the size of the verdict array
  const std::uint16_t got = d(pkts, n);
  if (rss.types_)
    for (std::uint16_t i = 0; i < got; ++i) soft_rss(*pkts[i], rss.key_, rss.types_);
  if (rss.flows_ == nullptr || got == 0) return got;
  // One queue: a rule's queue can only be 0; drop is what matters.
  std::uint16_t verdict[mbuf_max_burst];
  rss.flows_->classify(pkts, got, verdict);
  std::uint16_t kept = 0;
  for (std::uint16_t i = 0; i < got; ++i) {
    if (verdict[i] == flow_drop)
      mbuf_free(pkts[i]);
    else
      pkts[kept++] = pkts[i];
  }
  if (kept < got) rss.flows_->add_dropped(static_cast<std::uint16_t>(got - kept));
  return kept;
}

std::uint16_t SoftwareRss::distributor_rx(QueueBase* base, Mbuf** pkts, std::uint16_t n) noexcept {
  SoftwareRss& rss = *static_cast<SoftwareRssQueue*>(base)->rss;
  n = std::min(n, mbuf_max_burst);  // the size of the arrays below
  // Every driver queue in turn, up to n packets in all: queue 0's share then fits in pkts.
  // Without a hash, a packet stays on the queue it came from (target[i]) unless a rule moves it.
  std::uint16_t target[mbuf_max_burst];
  std::uint16_t got = 0;
  for (std::uint16_t q = 0; q < rss.driver_.size() && got < n; ++q) {
    const BurstEntry& d = rss.driver_[q];
    const std::uint16_t more = d(pkts + got, static_cast<std::uint16_t>(n - got));
    for (std::uint16_t i = got; i < got + more; ++i) target[i] = q;
    got = static_cast<std::uint16_t>(got + more);
  }
  if (got == 0) return 0;
  if (rss.types_)
    for (std::uint16_t i = 0; i < got; ++i) target[i] = rss.reta_.queue(soft_rss(*pkts[i], rss.key_, rss.types_));
  if (rss.flows_) got = apply_flows(*rss.flows_, pkts, got, target);
  std::uint64_t others = 0;  // bit q: some packet goes to queue q (q < 64 = port_max_queues)
  std::uint16_t kept = 0;
  for (std::uint16_t i = 0; i < got; ++i) others |= target[i] ? 1ULL << target[i] : 0;
  if (others == 0) return got;
  // Queue 0's packets close up in place; the others go to their rings, queue by queue, in order.
  Mbuf* out[mbuf_max_burst];
  for (std::uint64_t bits = others; bits; bits &= bits - 1) {
    const auto t = static_cast<std::uint16_t>(std::countr_zero(bits));
    std::uint16_t k = 0;
    for (std::uint16_t i = 0; i < got; ++i)
      if (target[i] == t) out[k++] = pkts[i];
    const std::uint32_t pushed = rss.rings_[t]->enqueue_burst(std::span<Mbuf* const>(out, k));
    if (pushed < k) [[unlikely]] {
      rss.missed_.add(k - pushed);
      mbuf_free_bulk(std::span<Mbuf* const>(out + pushed, k - pushed));
    }
  }
  for (std::uint16_t i = 0; i < got; ++i)
    if (target[i] == 0) pkts[kept++] = pkts[i];
  return kept;
}

std::uint16_t SoftwareRss::spread_rx(QueueBase* base, Mbuf** pkts, std::uint16_t n) noexcept {
  auto& q = *static_cast<SoftwareRssQueue*>(base);
  return static_cast<std::uint16_t>(q.rss->rings_[q.queue]->dequeue_burst(std::span<Mbuf*>(pkts, n)));
}

}  // namespace ws
