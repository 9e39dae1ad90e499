// SPDX-License-Identifier: BSD-3-Clause
// memif 2.0 as libmemif, VPP and DPDK's net_memif speak it: the shared ring and descriptor
// layouts, the 128-byte control messages, the client's region layout, and the two sides of the
// handshake as pure state machines (no fds, no memory), so that a fuzzer can drive them.
//
//   client                                server
//     connect ------------------------------>  accept
//            <------------------------------- HELLO (versions, most rings, largest ring)
//     INIT (version, id, mode, secret) ----->
//            <------------------------------- ACK
//     ADD_REGION i (size, memfd) ----------->  (one message each, every one ACKed)
//     ADD_RING (dir, index, region, offset,
//               log2 size, eventfd) -------->
//     CONNECT (interface name) ------------->
//            <------------------------------- CONNECTED
//   either side: DISCONNECT (code, reason), then close.
//
// The client creates every region and ring; in each ring the client moves `head` and the server
// `tail`. C2S (client to server): the client fills descriptors and moves head, the server takes
// them and moves tail. S2C: the client hands empty buffers over by moving head, the server fills
// them and moves tail, the client takes them back up to tail.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws/core/result.hpp"

namespace ws::memif {

inline constexpr std::uint32_t ring_cookie = 0x3E31F20;  // MEMIF_COOKIE
inline constexpr std::uint16_t version = 0x0200;         // 2.0
inline constexpr std::size_t message_bytes = 128;
inline constexpr std::size_t name_bytes = 32;
inline constexpr std::size_t secret_bytes = 24;
inline constexpr std::size_t reason_bytes = 96;
inline constexpr std::uint8_t max_log2_ring_size = 14;  // DPDK's ETH_MEMIF_MAX_LOG2_RING_SIZE
inline constexpr std::uint16_t max_rings = 255;         // per direction, DPDK's ETH_MEMIF_MAX_NUM_Q_PAIRS
inline constexpr std::uint16_t max_regions = 256;       // DPDK's ETH_MEMIF_MAX_REGION_NUM
inline constexpr std::uint16_t desc_flag_next = 1;      // MEMIF_DESC_FLAG_NEXT: the packet goes on
inline constexpr std::uint16_t ring_flag_mask_int = 1;  // MEMIF_RING_FLAG_MASK_INT: the reader polls
inline constexpr std::uint16_t add_ring_flag_c2s = 1;   // MEMIF_MSG_ADD_RING_FLAG_C2S

enum class MsgType : std::uint16_t { none, ack, hello, init, add_region, add_ring, connect, connected, disconnect };
std::string_view msg_type_name(MsgType t) noexcept;

// ---- shared memory: what both peers read and write, never a pointer of ours ----

/// One buffer: memif_desc_t.
struct Desc {
  std::uint16_t flags;
  std::uint16_t region;
  std::uint32_t length;
  std::uint32_t offset;
  std::uint32_t metadata;
};
static_assert(sizeof(Desc) == 16);

/// A ring's header (memif_ring_t): head and tail on cache lines of their own, then the
/// descriptors.
struct alignas(64) RingHeader {
  std::uint32_t cookie;
  std::uint16_t flags;
  std::uint16_t head;  // moved by the client
  std::byte pad0[56];
  std::uint16_t tail;  // moved by the server
  std::byte pad1[62];
};
static_assert(sizeof(RingHeader) == 128 && offsetof(RingHeader, head) == 6 && offsetof(RingHeader, tail) == 64);

// ---- control messages (packed, little-endian as every peer on one host) ----
#pragma pack(push, 1)
struct Hello {
  char name[name_bytes];
  std::uint16_t min_version, max_version, max_region, max_s2c_ring, max_c2s_ring;
  std::uint8_t max_log2_ring_size;
};
struct Init {
  std::uint16_t version;
  std::uint32_t id;
  std::uint8_t mode;  // 0: ethernet, the only one here
  char secret[secret_bytes];
  char name[name_bytes];
};
struct AddRegion {
  std::uint16_t index;
  std::uint64_t size;
};
struct AddRing {
  std::uint16_t flags;
  std::uint16_t index;
  std::uint16_t region;
  std::uint32_t offset;
  std::uint8_t log2_ring_size;
  std::uint16_t private_hdr_size;
};
struct Connect {
  char if_name[name_bytes];  // CONNECT and CONNECTED alike
};
struct Disconnect {
  std::uint32_t code;
  char reason[reason_bytes];
};
#pragma pack(pop)
static_assert(sizeof(Hello) == 43 && sizeof(Init) == 63 && sizeof(AddRegion) == 10 && sizeof(AddRing) == 13);
static_assert(2 + sizeof(Disconnect) <= message_bytes);

/// One decoded message: its type and the body of that type (the others zero).
struct Message {
  MsgType type = MsgType::none;
  Hello hello{};
  Init init{};
  AddRegion add_region{};
  AddRing add_ring{};
  Connect connect{};  // CONNECT or CONNECTED
  Disconnect disconnect{};
};

/// Exactly message_bytes with a known type; else an error saying what came.
Result<Message> decode(std::span<const std::byte> bytes);
/// The 128 bytes of `m`.
std::array<std::byte, message_bytes> encode(const Message& m);
/// A DISCONNECT carrying `reason` (cut to fit).
Message disconnect_message(std::string_view reason);
/// A fixed-size text field as a string: up to the first NUL, printable bytes only.
std::string field_text(const char* field, std::size_t size);

// ---- the client's single region: every ring, then every ring's buffers ----

/// Where the client puts rings and buffers (as DPDK's net_memif and libmemif do).
struct Layout {
  std::uint8_t log2_ring_size = 10;
  std::uint16_t c2s = 1, s2c = 1;  // rings per direction
  std::uint32_t buffer_bytes = 2048;

  std::uint32_t ring_slots() const noexcept { return 1u << log2_ring_size; }
  std::uint64_t ring_bytes() const noexcept { return sizeof(RingHeader) + std::uint64_t{sizeof(Desc)} * ring_slots(); }
  /// Ring `index` of direction S2C (`to_client`) or C2S: C2S rings come first.
  std::uint64_t ring_offset(bool to_client, std::uint16_t index) const noexcept {
    return ring_bytes() * (to_client ? std::uint64_t{c2s} + index : index);
  }
  /// The first buffer of that ring; its slot k is buffer_bytes * k further.
  std::uint64_t buffer_offset(bool to_client, std::uint16_t index) const noexcept {
    return ring_bytes() * (c2s + s2c) + std::uint64_t{buffer_bytes} * ring_slots() * (to_client ? c2s + index : index);
  }
  std::uint64_t region_bytes() const noexcept { return buffer_offset(false, c2s + s2c); }
};
/// A layout whose every offset fits the protocol's 32 bits; else an error.
Result<Layout> make_layout(std::uint8_t log2_ring_size, std::uint16_t c2s, std::uint16_t s2c,
                           std::uint32_t buffer_bytes);

// ---- the handshake, one connection each ----

/// What a session wants done after a message: send `reply` (with `fd` when set: a region's or a
/// ring's, by index into the client's list), and whether the connection is now up.
struct Step {
  std::optional<Message> reply;
  enum class Fd : std::uint8_t { none, region, ring } fd = Fd::none;
  std::uint16_t fd_index = 0;  // the region, or the ring (C2S rings first, then S2C)
  bool connected = false;
};

/// A ring the client added, as the server checked it.
struct RingSetup {
  bool present = false;
  std::uint16_t region = 0;
  std::uint32_t offset = 0;
  std::uint8_t log2_ring_size = 0;
};

/// The server side. Every message is checked against the state and the limits; an error is the
/// reason to send in a DISCONNECT before closing.
class ServerSession {
 public:
  struct Config {
    std::uint32_t id = 0;
    std::string secret;              // empty: none asked
    std::uint16_t c2s = 1, s2c = 1;  // our RX and TX queues: the most rings of each direction
    std::string name;                // ours, in CONNECTED
  };
  explicit ServerSession(Config c) : config_(std::move(c)) {}
  /// The greeting the server sends first.
  Message hello() const;
  /// One message from the client; `has_fd`: an fd came with it.
  Result<Step> on_message(const Message& m, bool has_fd);

  /// Regions added so far (their declared sizes).
  const std::vector<std::uint64_t>& regions() const noexcept { return regions_; }
  /// Rings added so far, by direction and index.
  const std::vector<RingSetup>& rings(bool s2c) const noexcept { return s2c ? s2c_ : c2s_; }
  bool connected() const noexcept { return state_ == State::connected; }
  const std::string& peer_name() const noexcept { return peer_; }

 private:
  enum class State : std::uint8_t { init, setup, connected };
  Result<Step> on_init(const Init& i);
  Result<Step> on_add_ring(const AddRing& r, bool has_fd);
  Result<Step> on_connect(const Connect& c);
  Step ack() const;

  Config config_;
  State state_ = State::init;
  std::vector<std::uint64_t> regions_;
  std::vector<RingSetup> c2s_, s2c_;
  std::string peer_;
};

/// The client side: after HELLO it sends INIT, each region, each ring and CONNECT, one per ACK.
class ClientSession {
 public:
  struct Config {
    std::uint32_t id = 0;
    std::string secret;
    std::uint16_t c2s = 1, s2c = 1;  // our TX and RX queues
    std::uint8_t log2_ring_size = 10;
    std::uint32_t buffer_bytes = 2048;
    std::string name;  // ours, in INIT and CONNECT
  };
  explicit ClientSession(Config c) : config_(std::move(c)) {}
  /// One message from the server. After HELLO, layout() holds the rings to create before the
  /// reply (INIT) is sent.
  Result<Step> on_message(const Message& m);
  /// What HELLO settled (valid once HELLO was taken).
  const Layout& layout() const noexcept { return layout_; }
  bool connected() const noexcept { return state_ == State::connected; }
  const std::string& peer_name() const noexcept { return peer_; }

 private:
  enum class State : std::uint8_t { hello, acks, connected_wait, connected };
  Result<Step> on_hello(const Hello& h);
  Step next_after_ack();

  Config config_;
  State state_ = State::hello;
  Layout layout_{};
  std::uint32_t sent_ = 0;  // messages sent after INIT: regions, rings, then CONNECT
  std::string peer_;
};

}  // namespace ws::memif
