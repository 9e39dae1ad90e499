// SPDX-License-Identifier: BSD-3-Clause
// vhost-user messages (QEMU docs/interop/vhost-user.rst): the 12-byte header, the payloads we
// handle, a strict decoder (size per request, fd count per request, ranges) and SCM_RIGHTS
// socket I/O. Fds travel in FdSet, which closes whatever nobody took.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ws/core/result.hpp"

namespace ws::virtio {
class FdReaper;  // peer_fd.hpp
}

namespace ws::virtio::vhost_user {

enum class Request : std::uint32_t {
  get_features = 1,
  set_features = 2,
  set_owner = 3,
  reset_owner = 4,
  set_mem_table = 5,
  set_log_base = 6,
  set_log_fd = 7,
  set_vring_num = 8,
  set_vring_addr = 9,
  set_vring_base = 10,
  get_vring_base = 11,
  set_vring_kick = 12,
  set_vring_call = 13,
  set_vring_err = 14,
  get_protocol_features = 15,
  set_protocol_features = 16,
  get_queue_num = 17,
  set_vring_enable = 18,
  send_rarp = 19,
  net_set_mtu = 20,
  set_status = 39,
  get_status = 40,
};
std::string_view request_name(std::uint32_t request) noexcept;

namespace protocol {  // protocol feature bits
inline constexpr unsigned mq = 0;
inline constexpr unsigned log_shmfd = 1;
inline constexpr unsigned rarp = 2;
inline constexpr unsigned reply_ack = 3;
inline constexpr unsigned net_mtu = 4;
inline constexpr unsigned backend_req = 5;
inline constexpr unsigned status = 16;
}  // namespace protocol

inline constexpr std::uint32_t flag_version = 1;  // bits 0-1
inline constexpr std::uint32_t flag_reply = 1u << 2;
inline constexpr std::uint32_t flag_need_reply = 1u << 3;
inline constexpr std::uint64_t vring_index_mask = 0xff;  // SET_VRING_KICK/CALL/ERR payload
inline constexpr std::uint64_t vring_nofd = 1u << 8;

struct Header {
  std::uint32_t request;
  std::uint32_t flags;
  std::uint32_t size;  // payload bytes
};
static_assert(sizeof(Header) == 12);

struct VringState {
  std::uint32_t index;
  std::uint32_t num;
};
static_assert(sizeof(VringState) == 8);

struct VringAddr {
  std::uint32_t index;
  std::uint32_t flags;
  std::uint64_t desc;   // frontend virtual addresses (packed: descriptor ring)
  std::uint64_t used;   // packed: device event area
  std::uint64_t avail;  // packed: driver event area
  std::uint64_t log;
};
static_assert(sizeof(VringAddr) == 40);

struct MemRegionDesc {
  std::uint64_t guest_addr;
  std::uint64_t size;
  std::uint64_t user_addr;
  std::uint64_t mmap_offset;
};
static_assert(sizeof(MemRegionDesc) == 32);

inline constexpr std::uint32_t max_mem_regions = 8;
struct MemTable {
  std::uint32_t count;
  std::uint32_t padding;
  std::array<MemRegionDesc, max_mem_regions> regions;
};
static_assert(sizeof(MemTable) == 8 + 32 * 8);

inline constexpr std::size_t max_fds = 8;
inline constexpr std::size_t max_payload = sizeof(MemTable);

// Fds received with one message; closes those not taken, through `reaper` when there is one (a
// peer's fd may block in close(): see FdReaper).
class FdSet {
 public:
  explicit FdSet(FdReaper* reaper = nullptr) noexcept : reaper_(reaper) {}
  FdSet(const FdSet&) = delete;
  FdSet& operator=(const FdSet&) = delete;
  ~FdSet() { close_all(); }
  bool push(int fd) noexcept;        // false (and fd closed) when full
  int take(std::size_t i) noexcept;  // ownership moves to the caller; -1 if absent
  int at(std::size_t i) const noexcept { return i < count_ ? fds_[i] : -1; }  // still owned here
  std::size_t size() const noexcept { return count_; }
  void close_all() noexcept;

 private:
  void close_one(int fd) noexcept;
  FdReaper* reaper_;
  std::array<int, max_fds> fds_{};
  std::size_t count_ = 0;
};

struct Message {
  Header header{};
  union Payload {
    std::uint64_t u64;
    VringState state;
    VringAddr addr;
    MemTable mem;
    std::array<std::byte, max_payload> raw;
  } payload{};
  bool need_reply() const noexcept { return (header.flags & flag_need_reply) != 0; }
  Request request() const noexcept { return static_cast<Request>(header.request); }
};

// Validates a message that was read whole (header, payload bytes, fds): known request, version 1,
// payload size exactly what the request takes (memory table: 1..8 regions), fd count exactly what
// it takes. On refusal every fd in `fds` is closed. Thread-safe (pure apart from the fds).
Result<Message> decode(std::span<const std::byte> bytes, FdSet& fds);

// Payload bytes and fd count each request takes; false for requests we do not know.
bool expected_size(std::uint32_t request, std::uint32_t& size) noexcept;

// Socket I/O. Never blocks for longer than `timeout_ms` per message, whatever the socket's flags
// (every call is MSG_DONTWAIT, waiting in poll()): a peer that sends half a message, or does
// not read our replies, costs us that long once, then the call fails and the caller closes the
// connection. Sends never raise SIGPIPE (MSG_NOSIGNAL). An error means the connection is
// unusable; a peer that closed it gives a message that says "closed".
inline constexpr int io_timeout_ms = 5000;
// Reads one message and its fds (SCM_RIGHTS) and decodes it. Call it when the socket is readable.
Result<Message> recv_message(int sock, FdSet& fds, int timeout_ms = io_timeout_ms);

// One connection's next message, read as its bytes come: a peer that sends part of a message
// and stops holds nothing but its own connection, and the thread serving it goes on serving
// (other connections, a new frontend) while the rest is awaited. Control thread of the
// connection.
class MessageReader {
 public:
  explicit MessageReader(FdReaper* reaper = nullptr) noexcept : fds_(reaper) {}
  // Reads what `sock` has (never waits) up to the end of one message. A message when it is
  // complete (its fds in fds(), to be handled before the next read()); std::nullopt while
  // bytes are missing; an error when the peer closed the connection, broke the protocol or
  // sent fds beyond max_fds (the fds received are then closed).
  Result<std::optional<Message>> read(int sock);
  FdSet& fds() noexcept { return fds_; }
  // Part of a message came and the rest has not: since when, and how much.
  bool partial() const noexcept { return got_ > 0; }
  std::chrono::steady_clock::time_point started() const noexcept { return started_; }
  // "vhost-user GET_FEATURES: the peer sent 6 of 12 bytes and then nothing for 5000 ms".
  std::string describe_partial(std::chrono::milliseconds waited) const;

 private:
  std::size_t wanted() const noexcept;
  std::array<std::byte, sizeof(Header) + max_payload> buf_;
  std::size_t got_ = 0;
  std::chrono::steady_clock::time_point started_{};
  FdSet fds_;
};

// Frontend side: reads the reply to `request` (REPLY flag, payload exactly `size` bytes, no fds).
Result<Message> recv_reply(int sock, Request request, std::uint32_t size, int timeout_ms = io_timeout_ms);
// Sends header + payload (header.size bytes) with `fds` attached.
Result<void> send_message(int sock, const Message& msg, std::span<const int> fds = {}, int timeout_ms = io_timeout_ms);

// The server side's socket: listening at `path`, which appears only once it accepts connections
// (bound under a temporary name beside it, then renamed into place), so a peer that waits for the
// file and connects at once is never refused, however late this thread runs. A stale socket at
// `path` is replaced; anything else there is an error. Returns the listening fd.
Result<int> listen_unix(const std::string& path);
// The client side's socket: connected to `path` without waiting on a peer that does not accept
// (a full backlog is an error, to be retried). Returns the fd, or an error naming the path.
Result<int> connect_unix(const std::string& path);

}  // namespace ws::virtio::vhost_user
