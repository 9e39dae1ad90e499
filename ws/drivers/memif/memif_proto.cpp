// SPDX-License-Identifier: BSD-3-Clause
// memif control messages and the two handshakes (memif_proto.hpp).
#include "ws/drivers/memif/memif_proto.hpp"

#include <algorithm>
#include <cstring>

namespace ws::memif {
namespace {

template <class Body>
void put(std::array<std::byte, message_bytes>& out, const Body& b) {
  std::memcpy(out.data() + 2, &b, sizeof b);
}

template <class Body>
Body take(std::span<const std::byte> in) {
  Body b;
  std::memcpy(&b, in.data() + 2, sizeof b);
  return b;
}

void set_text(char* field, std::size_t size, std::string_view text) {
  std::memset(field, 0, size);
  std::memcpy(field, text.data(), std::min(text.size(), size - 1));  // always NUL-terminated
}

}  // namespace

std::string_view msg_type_name(MsgType t) noexcept {
  static constexpr std::array<std::string_view, 9> names = {
      "NONE", "ACK", "HELLO", "INIT", "ADD_REGION", "ADD_RING", "CONNECT", "CONNECTED", "DISCONNECT"};
  const auto i = static_cast<std::size_t>(t);
  return i < names.size() ? names[i] : "UNKNOWN";
}

std::string field_text(const char* field, std::size_t size) {
  std::string s(field, strnlen(field, size));
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';  // a peer's bytes go into our logs
  return s;
}

Result<Message> decode(std::span<const std::byte> bytes) {
  if (bytes.size() != message_bytes)
    return fail("a control message of {} bytes, expected {}", bytes.size(), message_bytes);
  std::uint16_t type = 0;
  std::memcpy(&type, bytes.data(), 2);
  Message m;
  m.type = static_cast<MsgType>(type);
  switch (m.type) {
    case MsgType::ack:
      break;
    case MsgType::hello:
      m.hello = take<Hello>(bytes);
      break;
    case MsgType::init:
      m.init = take<Init>(bytes);
      break;
    case MsgType::add_region:
      m.add_region = take<AddRegion>(bytes);
      break;
    case MsgType::add_ring:
      m.add_ring = take<AddRing>(bytes);
      break;
    case MsgType::connect:
    case MsgType::connected:
      m.connect = take<Connect>(bytes);
      break;
    case MsgType::disconnect:
      m.disconnect = take<Disconnect>(bytes);
      break;
    default:
      return fail("a control message of unknown type {}", type);
  }
  return m;
}

std::array<std::byte, message_bytes> encode(const Message& m) {
  std::array<std::byte, message_bytes> out{};
  const auto type = static_cast<std::uint16_t>(m.type);
  std::memcpy(out.data(), &type, 2);
  switch (m.type) {
    case MsgType::hello:
      put(out, m.hello);
      break;
    case MsgType::init:
      put(out, m.init);
      break;
    case MsgType::add_region:
      put(out, m.add_region);
      break;
    case MsgType::add_ring:
      put(out, m.add_ring);
      break;
    case MsgType::connect:
    case MsgType::connected:
      put(out, m.connect);
      break;
    case MsgType::disconnect:
      put(out, m.disconnect);
      break;
    default:
      break;
  }
  return out;
}

Message disconnect_message(std::string_view reason) {
  Message m;
  m.type = MsgType::disconnect;
  set_text(m.disconnect.reason, reason_bytes, reason);
  return m;
}

Result<Layout> make_layout(std::uint8_t log2_ring_size, std::uint16_t c2s, std::uint16_t s2c,
                           std::uint32_t buffer_bytes) {
  const Layout l{log2_ring_size, c2s, s2c, buffer_bytes};
  // Descriptor offsets are 32 bits: the last buffer must start and end below 4 GiB.
  if (l.region_bytes() > std::uint64_t{UINT32_MAX})
    return fail("{} rings of {} buffers of {} bytes need {} bytes of memory; memif offsets reach 4 GiB", c2s + s2c,
                l.ring_slots(), buffer_bytes, l.region_bytes());
  return l;
}

// ---- server ----

Message ServerSession::hello() const {
  Message m;
  m.type = MsgType::hello;
  set_text(m.hello.name, name_bytes, config_.name);
  m.hello.min_version = version;
  m.hello.max_version = version;
  m.hello.max_region = max_regions - 1;
  // The most rings of a direction, less one (as DPDK sends it): the client takes one more.
  m.hello.max_c2s_ring = static_cast<std::uint16_t>(config_.c2s - 1);
  m.hello.max_s2c_ring = static_cast<std::uint16_t>(config_.s2c - 1);
  m.hello.max_log2_ring_size = max_log2_ring_size;
  return m;
}

Step ServerSession::ack() const {
  Message m;
  m.type = MsgType::ack;
  return Step{m};
}

Result<Step> ServerSession::on_init(const Init& i) {
  if (i.version != version) return fail("INIT with memif version {:#x}, expected {:#x}", +i.version, version);
  if (i.id != config_.id) return fail("INIT for interface id {}, expected id {}", +i.id, config_.id);
  if (i.mode != 0) return fail("INIT in mode {}, expected 0 (ethernet)", +i.mode);
  // As DPDK: the secret is compared up to its 24 bytes, and one is asked only when we have one.
  if (!config_.secret.empty()) {
    char ours[secret_bytes]{};
    std::memcpy(ours, config_.secret.data(), std::min(config_.secret.size(), secret_bytes - 1));
    if (i.secret[0] == 0) return fail("INIT without a secret, one is required");
    if (strncmp(ours, i.secret, secret_bytes) != 0) return fail("INIT with an incorrect secret");
  }
  peer_ = field_text(i.name, name_bytes);
  state_ = State::setup;
  return ack();
}

Result<Step> ServerSession::on_add_ring(const AddRing& r, bool has_fd) {
  const bool c2s = (r.flags & add_ring_flag_c2s) != 0;
  auto& rings = c2s ? c2s_ : s2c_;
  const std::uint16_t most = c2s ? config_.c2s : config_.s2c;
  const char* dir = c2s ? "C2S" : "S2C";
  if (!has_fd) return fail("ADD_RING {} {} without its interrupt fd", dir, +r.index);
  if (r.index >= most) return fail("ADD_RING {} {}, expected an index below {}", dir, +r.index, most);
  if (rings.size() > r.index && rings[r.index].present) return fail("ADD_RING {} {} twice", dir, +r.index);
  if (r.region >= regions_.size())
    return fail("ADD_RING {} {} in region {}, expected one of the {} added", dir, +r.index, +r.region, regions_.size());
  if (r.log2_ring_size < 1 || r.log2_ring_size > max_log2_ring_size)
    return fail("ADD_RING {} {} of 2^{} slots, expected 2^1 to 2^{}", dir, +r.index, +r.log2_ring_size,
                max_log2_ring_size);
  // The header's head and tail and each descriptor are read as aligned words.
  const std::uint64_t bytes = sizeof(RingHeader) + (std::uint64_t{sizeof(Desc)} << r.log2_ring_size);
  if (r.offset % 16 != 0) return fail("ADD_RING {} {} at offset {}: not 16-byte aligned", dir, +r.index, +r.offset);
  if (std::uint64_t{r.offset} + bytes > regions_[r.region])
    return fail("ADD_RING {} {} of {} bytes at offset {} past region {} of {} bytes", dir, +r.index, bytes, +r.offset,
                +r.region, regions_[+r.region]);
  if (rings.size() <= r.index) rings.resize(r.index + 1u);
  rings[r.index] = {true, r.region, r.offset, r.log2_ring_size};
  return ack();
}

Result<Step> ServerSession::on_connect(const Connect& c) {
  if (std::none_of(c2s_.begin(), c2s_.end(), [](const RingSetup& r) { return r.present; }) ||
      std::none_of(s2c_.begin(), s2c_.end(), [](const RingSetup& r) { return r.present; }))
    return fail("CONNECT without a ring in each direction");
  if (!c2s_[0].present || !s2c_[0].present) return fail("CONNECT without ring 0 in each direction");
  peer_ = field_text(c.if_name, name_bytes);
  state_ = State::connected;
  Message m;
  m.type = MsgType::connected;
  set_text(m.connect.if_name, name_bytes, config_.name);
  Step s{m};
  s.connected = true;
  return s;
}

Result<Step> ServerSession::on_message(const Message& m, bool has_fd) {
  if (m.type == MsgType::disconnect)
    return fail("the client disconnected: {}", field_text(m.disconnect.reason, reason_bytes));
  if (has_fd && m.type != MsgType::add_region && m.type != MsgType::add_ring)
    return fail("{} came with an fd, expected none", msg_type_name(m.type));
  const bool setup = state_ == State::setup;
  switch (m.type) {
    case MsgType::init:
      if (state_ != State::init) break;
      return on_init(m.init);
    case MsgType::add_region:
      if (!setup) break;
      if (!has_fd) return fail("ADD_REGION {} without its memory fd", +m.add_region.index);
      if (m.add_region.index != regions_.size() || regions_.size() >= max_regions)
        return fail("ADD_REGION {}, expected region {}", +m.add_region.index, regions_.size());
      if (m.add_region.size == 0 || m.add_region.size > (std::uint64_t{1} << 40))
        return fail("ADD_REGION {} of {} bytes, expected 1 byte to 1 TiB", +m.add_region.index, +m.add_region.size);
      regions_.push_back(std::uint64_t{m.add_region.size});  // a copy: the field is packed
      return ack();
    case MsgType::add_ring:
      if (!setup) break;
      return on_add_ring(m.add_ring, has_fd);
    case MsgType::connect:
      if (!setup) break;
      return on_connect(m.connect);
    default:
      break;
  }
  return fail("{} out of order (expected {})", msg_type_name(m.type),
              state_ == State::init ? "INIT"
              : setup               ? "ADD_REGION, ADD_RING or CONNECT"
                                    : "nothing once connected");
}

// ---- client ----

Result<Step> ClientSession::on_hello(const Hello& h) {
  if (h.min_version > version || h.max_version < version)
    return fail("HELLO offers memif versions {:#x} to {:#x}, expected {:#x}", +h.min_version, +h.max_version, version);
  // As DPDK: as many rings as both sides have, the smaller of both largest ring sizes.
  const auto c2s = static_cast<std::uint16_t>(std::min<std::uint32_t>(config_.c2s, h.max_c2s_ring + 1u));
  const auto s2c = static_cast<std::uint16_t>(std::min<std::uint32_t>(config_.s2c, h.max_s2c_ring + 1u));
  const auto log2 = std::min(config_.log2_ring_size, h.max_log2_ring_size);
  if (log2 < 1) return fail("HELLO allows rings of 2^{} slots, expected 2^1 or more", +h.max_log2_ring_size);
  auto layout = make_layout(log2, c2s, s2c, config_.buffer_bytes);
  if (!layout) return std::unexpected(layout.error());
  layout_ = *layout;
  peer_ = field_text(h.name, name_bytes);
  state_ = State::acks;
  sent_ = 0;
  Message m;
  m.type = MsgType::init;
  m.init.version = version;
  m.init.id = config_.id;
  set_text(m.init.secret, secret_bytes, config_.secret);
  set_text(m.init.name, name_bytes, config_.name);
  return Step{m};
}

Step ClientSession::next_after_ack() {
  const std::uint32_t rings = layout_.c2s + layout_.s2c;
  Message m;
  Step s;
  if (sent_ == 0) {  // the one region
    m.type = MsgType::add_region;
    m.add_region = {0, layout_.region_bytes()};
    s.fd = Step::Fd::region;
  } else if (sent_ <= rings) {
    const auto ring = static_cast<std::uint16_t>(sent_ - 1);
    const bool s2c = ring >= layout_.c2s;
    const auto index = static_cast<std::uint16_t>(s2c ? ring - layout_.c2s : ring);
    m.type = MsgType::add_ring;
    m.add_ring = {static_cast<std::uint16_t>(s2c ? 0 : add_ring_flag_c2s),
                  index,
                  0,
                  static_cast<std::uint32_t>(layout_.ring_offset(s2c, index)),
                  layout_.log2_ring_size,
                  0};
    s.fd = Step::Fd::ring;
    s.fd_index = ring;
  } else {
    m.type = MsgType::connect;
    set_text(m.connect.if_name, name_bytes, config_.name);
    state_ = State::connected_wait;
  }
  ++sent_;
  s.reply = m;
  return s;
}

Result<Step> ClientSession::on_message(const Message& m) {
  switch (m.type) {
    case MsgType::disconnect:
      return fail("the server disconnected: {}", field_text(m.disconnect.reason, reason_bytes));
    case MsgType::hello:
      if (state_ != State::hello) break;
      return on_hello(m.hello);
    case MsgType::ack:
      if (state_ != State::acks) break;
      return next_after_ack();
    case MsgType::connected: {
      if (state_ != State::connected_wait) break;
      state_ = State::connected;
      Step s;
      s.connected = true;
      return s;
    }
    default:
      break;
  }
  return fail("{} out of order", msg_type_name(m.type));
}

}  // namespace ws::memif
