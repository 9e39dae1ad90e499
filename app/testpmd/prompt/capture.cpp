// SPDX-License-Identifier: BSD-3-Clause
// Capture proxy and pcapng writer (pcapng: draft-ietf-opsawg-pcapng, §4.1 SHB, §4.2 IDB,
// §4.3 EPB). Whole EPBs go out in one fwrite per burst (or per full buffer), so blocks of two
// lcores polling two queues of the same port never interleave (stdio locks the FILE per call).
#include "app/testpmd/prompt/capture.hpp"

#include <pcap/pcap.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <vector>

namespace ws::testpmd {
namespace {

constexpr std::uint32_t snap_bytes = 65535;
constexpr std::uint32_t block_shb = 0x0A0D0D0A, block_idb = 1, block_epb = 6;
constexpr std::uint16_t linktype_ethernet = 1;

void put_bytes(std::vector<std::uint8_t>& b, const void* data, std::size_t n) {
  const std::size_t at = b.size();
  b.resize(at + n);
  if (n) std::memcpy(b.data() + at, data, n);
}
void put32(std::vector<std::uint8_t>& b, std::uint32_t v) { put_bytes(b, &v, 4); }
void put16(std::vector<std::uint8_t>& b, std::uint16_t v) { put_bytes(b, &v, 2); }
void pad4(std::vector<std::uint8_t>& b) { b.resize((b.size() + 3) & ~std::size_t{3}, 0); }

void put_option(std::vector<std::uint8_t>& b, std::uint16_t code, const void* value, std::uint16_t len) {
  put16(b, code);
  put16(b, len);
  put_bytes(b, value, len);
  pad4(b);
}

// A block: type, total length, body, total length again (§3.1).
std::vector<std::uint8_t> block(std::uint32_t type, const std::vector<std::uint8_t>& body) {
  std::vector<std::uint8_t> b;
  const auto total = static_cast<std::uint32_t>(12 + body.size());
  put32(b, type);
  put32(b, total);
  b.insert(b.end(), body.begin(), body.end());
  put32(b, total);
  return b;
}

std::vector<std::uint8_t> header_blocks(const Port& port) {
  std::vector<std::uint8_t> shb;
  put32(shb, 0x1A2B3C4D);  // byte-order magic, written in host order
  put16(shb, 1);
  put16(shb, 0);
  put32(shb, 0xffffffff);  // section length: unknown (-1 as 64 bits)
  put32(shb, 0xffffffff);
  const std::string app = "wirespeed-testpmd";
  put_option(shb, 4, app.data(), static_cast<std::uint16_t>(app.size()));  // shb_userappl
  put_option(shb, 0, nullptr, 0);
  std::vector<std::uint8_t> idb;
  put16(idb, linktype_ethernet);
  put16(idb, 0);
  put32(idb, snap_bytes);
  const std::string name = port.name();
  const std::string description = "wirespeed port " + std::to_string(port.id()) + " (" + port.driver_name() + ")";
  const std::uint8_t tsresol = 9;                                                          // nanoseconds
  put_option(idb, 2, name.data(), static_cast<std::uint16_t>(name.size()));                // if_name
  put_option(idb, 3, description.data(), static_cast<std::uint16_t>(description.size()));  // if_description
  put_option(idb, 9, &tsresol, 1);                                                         // if_tsresol
  put_option(idb, 0, nullptr, 0);
  auto out = block(block_shb, shb);
  const auto i = block(block_idb, idb);
  out.insert(out.end(), i.begin(), i.end());
  return out;
}

// What every queue of one capture shares; read-only after creation except the FILE.
struct CaptureFile {
  std::FILE* file = nullptr;
  std::string path;
  bpf_program filter{};
  bool has_filter = false;
  ~CaptureFile() {
    if (file) std::fclose(file);
    if (has_filter) pcap_freecode(&filter);
  }
};

struct CaptureRxQueue : QueueBase {
  Port* real = nullptr;
  std::uint16_t queue = 0;
  CaptureFile* out = nullptr;
  Counter received, written;

  // On the polling lcore, per packet: the filter; per accepted packet: a copy into this
  // thread's buffer of EPBs. One clock read per burst that keeps something, and one fwrite
  // (one FILE lock) per burst or per full buffer.
  std::uint16_t rx_burst(Mbuf** pkts, std::uint16_t n) noexcept {
    const std::uint16_t got = real->rx_burst(queue, pkts, n);
    if (got == 0) return 0;
    received.add(got);
    static thread_local std::array<std::uint8_t, epb_buffer_bytes> buffer;
    std::size_t used = 0;
    std::uint64_t ns = 0, kept = 0;
    for (std::uint16_t i = 0; i < got; ++i) {
      if (buffer.size() - used < epb_max_bytes) {
        kept += flush(buffer.data(), used);
        used = 0;
      }
      // EPB (§4.3): 28 bytes of header, the data padded to 4, 4 bytes of trailer.
      std::uint8_t* const epb = buffer.data() + used;
      std::uint8_t* const body = epb + 28;
      // One segment (the usual case): filter in place, copy only what is kept.
      const Mbuf* first = pkts[i];
      const std::uint8_t* data = first->data<std::uint8_t>();
      std::uint32_t caplen = std::min<std::uint32_t>(first->data_len, snap_bytes);
      if (first->next) {
        caplen = 0;
        for (const Mbuf* m = first; m && caplen < snap_bytes; m = m->next) {
          const std::uint32_t take = std::min<std::uint32_t>(m->data_len, snap_bytes - caplen);
          std::memcpy(body + caplen, m->data<std::uint8_t>(), take);
          caplen += take;
        }
        data = body;
      }
      pcap_pkthdr h{};
      h.caplen = caplen;
      h.len = first->pkt_len;
      if (out->has_filter && pcap_offline_filter(&out->filter, &h, data) == 0) continue;
      if (ns == 0) ns = now_ns();
      if (data != body) std::memcpy(body, data, caplen);
      const std::uint32_t padded = (caplen + 3) & ~3u;
      std::memset(body + caplen, 0, padded - caplen);
      const std::uint32_t total = 32 + padded;
      const std::uint32_t head[7] = {
          block_epb, total,         0, static_cast<std::uint32_t>(ns >> 32), static_cast<std::uint32_t>(ns),
          caplen,    first->pkt_len};
      std::memcpy(epb, head, sizeof head);
      std::memcpy(body + padded, &total, 4);
      used += total;
    }
    kept += flush(buffer.data(), used);
    written.add(kept);
    return got;
  }

 private:
  static constexpr std::size_t epb_max_bytes = 32 + snap_bytes + 3;
  static constexpr std::size_t epb_buffer_bytes = 4 * epb_max_bytes;

  static std::uint64_t now_ns() noexcept {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(now.tv_nsec);
  }

  // Writes `bytes` of whole EPBs; returns how many packets reached the file (all or none: a
  // short write counts nothing, as the file is then cut mid-block anyway).
  std::uint64_t flush(const std::uint8_t* data, std::size_t bytes) noexcept {
    if (bytes == 0) return 0;
    std::uint64_t blocks = 0;
    for (std::size_t at = 0; at < bytes; ++blocks) {
      std::uint32_t total;
      std::memcpy(&total, data + at + 4, 4);
      at += total;
    }
    return std::fwrite(data, 1, bytes, out->file) == bytes ? blocks : 0;
  }
};

class CapturePort final : public Port {
 public:
  CapturePort(Port& real, std::unique_ptr<CaptureFile> out)
      : Port(real.name() + "(capture)", real.driver_name()),
        real_(real),
        out_(std::move(out)),
        queues_(port_max_queues) {
    set_id(real.id());
    for (std::uint16_t q = 0; q < port_max_queues; ++q) {
      queues_[q].real = &real_;
      queues_[q].queue = q;
      queues_[q].out = out_.get();
    }
  }
  Result<void> setup_rx_queue(std::uint16_t, const RxQueueConfig&) override { return {}; }
  Result<void> setup_tx_queue(std::uint16_t, const TxQueueConfig&) override { return {}; }
  PortInfo info() const override {
    PortInfo i = real_.info();
    i.max_rx_queues = i.max_tx_queues = port_max_queues;
    return i;
  }
  CaptureCounts counts() const {
    CaptureCounts c;
    for (const auto& q : queues_) {
      c.received += q.received.read();
      c.written += q.written.read();
    }
    return c;
  }
  const std::string& path() const { return out_->path; }

 protected:
  // Every possible queue: a later "port config all rxq" cannot outgrow the proxy.
  Result<void> do_start() override {
    for (std::uint16_t q = 0; q < port_max_queues; ++q) publish_rx(q, &queues_[q]);
    return {};
  }
  PortStats read_stats() const override { return {}; }

 private:
  Port& real_;
  std::unique_ptr<CaptureFile> out_;
  std::vector<CaptureRxQueue> queues_;
};

}  // namespace

Result<std::unique_ptr<Port>> make_capture_port(Port& real, const std::string& path, const std::string& filter) {
  auto out = std::make_unique<CaptureFile>();
  out->path = path;
  if (!filter.empty()) {
    pcap_t* dead = pcap_open_dead(DLT_EN10MB, static_cast<int>(snap_bytes));
    if (!dead) return fail("capture: libpcap could not open a compiler handle");
    const int rc = pcap_compile(dead, &out->filter, filter.c_str(), 1, PCAP_NETMASK_UNKNOWN);
    const std::string why = rc < 0 ? pcap_geterr(dead) : "";
    pcap_close(dead);
    if (rc < 0)
      return fail("capture filter '{}': {} (tcpdump syntax, e.g. 'udp port 9' or 'ip src 198.18.0.1')", filter, why);
    out->has_filter = true;
  }
  out->file = std::fopen(path.c_str(), "wb");
  if (!out->file) return fail("capture file '{}': {}", path, std::strerror(errno));
  std::setvbuf(out->file, nullptr, _IOFBF, 1 << 20);
  const auto header = header_blocks(real);
  if (std::fwrite(header.data(), 1, header.size(), out->file) != header.size())
    return fail("capture file '{}': write failed: {}", path, std::strerror(errno));
  auto port = std::make_unique<CapturePort>(real, std::move(out));
  (void)port->configure({port_max_queues, 1});
  (void)port->start();
  return std::unique_ptr<Port>(std::move(port));
}

CaptureCounts capture_counts(const Port& capture) {
  const auto* c = dynamic_cast<const CapturePort*>(&capture);
  return c ? c->counts() : CaptureCounts{};
}

std::string capture_path(const Port& capture) {
  const auto* c = dynamic_cast<const CapturePort*>(&capture);
  return c ? c->path() : std::string{};
}

}  // namespace ws::testpmd
