// SPDX-License-Identifier: BSD-3-Clause
// VhostBackend: vhost-user requests applied to the device state, every field checked.
#include "ws/virtio/vhost_user/backend.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ws/virtio/ring/packed.hpp"
#include "ws/virtio/ring/split.hpp"

namespace ws::virtio {

using namespace vhost_user;

VhostBackend::VhostBackend(BackendOptions options, RingListener* listener)
    : options_(std::move(options)), listener_(listener), rings_(2 * options_.queue_pairs) {}

VhostBackend::~VhostBackend() { reset(); }

void VhostBackend::reset() {
  for (std::uint32_t i = 0; i < rings_.size(); ++i) {
    stop_ring(i);
    VringSetup& r = rings_[i];
    if (r.call_fd >= 0 && listener_ != nullptr) listener_->ring_call_changed(i, -1);
    close_fd(r.kick_fd);
    close_fd(r.call_fd);
    close_fd(r.err_fd);
    r = VringSetup{};
  }
  unmap();
  features_ = protocol_ = 0;
  features_set_ = owner_ = false;
  status_ = 0;
}

void VhostBackend::close_fd(int& fd) noexcept {
  if (fd >= 0 && options_.reaper != nullptr) {
    options_.reaper->close(fd);
  } else if (fd >= 0) {
    ::close(fd);
  }
  fd = -1;
}

void VhostBackend::unmap() {
  memory_.clear();
  for (Mapping& m : mappings_) {
    m.guard.release();
    ::munmap(m.base, m.len);
  }
  mappings_.clear();
  memory_lost_.store(false, std::memory_order_release);
}

void VhostBackend::stop_ring(std::uint32_t i) {
  VringSetup& r = rings_[i];
  if (!r.started) return;
  if (listener_ != nullptr) r.base = listener_->ring_stopped(i);
  r.started = false;
  r.desc = r.avail = r.used = nullptr;
}

bool VhostBackend::device_ready() const {
  if (rings_.size() < 2) return false;
  for (std::uint32_t i = 0; i < 2; ++i) {
    const VringSetup& r = rings_[i];
    if (!r.started || !r.enabled || r.kick_fd < 0 || r.call_fd < 0) return false;
  }
  if (has(protocol_, protocol::status) && !(status_ & status::driver_ok)) return false;
  return true;
}

Result<std::uint32_t> VhostBackend::ring_index(const Message& msg, std::uint64_t index) const {
  if (index >= rings_.size())
    return fail("{}: vhost-user {} for ring {}, expected a ring below {} (queues={})", options_.name,
                request_name(msg.header.request), index, rings_.size(), options_.queue_pairs);
  return static_cast<std::uint32_t>(index);
}

Result<void> VhostBackend::set_mem_table(const MemTable& t, FdSet& fds) {
  if (auto ok = check_mem_total(t); !ok) return ok;
  GuestMemory next;
  std::vector<Mapping> maps;
  for (std::uint32_t i = 0; i < t.count; ++i) {
    if (auto ok = map_region(t.regions[i], i, fds.take(i), next, maps); !ok) {
      unmap_all(maps);
      return ok;
    }
  }
  return use_memory(next, std::move(maps));
}

Result<void> VhostBackend::check_mem_total(const MemTable& t) const {
  // Each size fits 64 bits (decode checked offset + size), their sum need not: two regions of
  // 2^63 sum to 0. Each is compared with what is left of the limit before it is added.
  std::uint64_t total = 0;
  for (std::uint32_t i = 0; i < t.count; ++i) {
    const std::uint64_t size = t.regions[i].size;
    if (size > options_.max_mem_bytes - total)
      return fail(
          "{}: SET_MEM_TABLE shares more than the {} MiB allowed (key '{}'): region {} of {} adds {} MiB to {} MiB",
          options_.name, options_.max_mem_bytes >> 20, options_.max_mem_key, i, t.count, size >> 20, total >> 20);
    total += size;
  }
  return {};
}

// Region i of a SET_MEM_TABLE, from `fd` (closed here whatever happens), mapped into `maps` and
// added to `next`. On failure the caller unmaps what `maps` holds.
Result<void> VhostBackend::map_region(const MemRegionDesc& d, std::uint32_t i, int fd, GuestMemory& next,
                                      std::vector<Mapping>& maps) {
  const std::uint64_t end = d.mmap_offset + d.size;  // decode checked the sum
  // A region beyond the end of its file would fault (SIGBUS) when the data path touches it.
  // (fstat cannot block here: check_fds let only tmpfs and hugetlbfs files through.)
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < end) {
    close_fd(fd);
    return fail("{}: SET_MEM_TABLE region {} (offset {:#x} + size {:#x}) extends beyond its fd ({} bytes)",
                options_.name, i, d.mmap_offset, d.size, fd < 0 ? 0 : st.st_size);
  }
  // Only the pages the region covers, aligned as the file wants them (st_blksize: the huge page
  // size on hugetlbfs), and not populated: the frontend chooses offsets and sizes, and a tiny
  // region at the end of a sparse file must cost us a tiny mapping.
  const std::uint64_t align = std::max<std::uint64_t>(static_cast<std::uint64_t>(st.st_blksize), 4096);
  const std::uint64_t map_off = d.mmap_offset & ~(align - 1);
  const std::uint64_t map_len = (end - map_off + align - 1) & ~(align - 1);
  void* base = ::mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(map_off));
  const int err = errno;
  close_fd(fd);  // the mapping keeps the memory
  if (base == MAP_FAILED)
    return fail("{}: SET_MEM_TABLE region {} (size {:#x}, offset {:#x}) cannot be mapped: {}", options_.name, i, d.size,
                d.mmap_offset, std::strerror(err));
  auto guard = MappingGuard::guard(base, map_len, &memory_lost_);
  if (!guard) {
    ::munmap(base, map_len);
    return with_context(guard.error(), options_.name + ": SET_MEM_TABLE");
  }
  maps.push_back({base, map_len, std::move(*guard)});
  auto added = next.add({d.guest_addr, d.user_addr, d.size, static_cast<std::byte*>(base) + (d.mmap_offset - map_off)});
  if (!added) return with_context(added.error(), options_.name + ": SET_MEM_TABLE");
  return {};
}

void VhostBackend::unmap_all(std::vector<Mapping>& maps) noexcept {
  for (Mapping& m : maps) {
    m.guard.release();
    ::munmap(m.base, m.len);
  }
}

Result<void> VhostBackend::use_memory(const GuestMemory& next, std::vector<Mapping> maps) {
  // The new table replaces the old one: no ring may use the old mappings past this point, and
  // every ring that is set up (running, or kicked before the table came) starts against it.
  for (std::uint32_t i = 0; i < rings_.size(); ++i) stop_ring(i);
  unmap();
  memory_ = next;
  mappings_ = std::move(maps);
  memory_lost_.store(false, std::memory_order_release);
  for (std::uint32_t i = 0; i < rings_.size(); ++i)
    if (auto ok = start_ring_when_ready(i); !ok) return ok;
  return {};
}

Result<void> VhostBackend::set_features(std::uint64_t f) {
  const auto& name = options_.name;
  if (f & ~options_.features)
    return fail("{}: SET_FEATURES {:#x} has bits {:#x} that were never offered (offered {:#x})", name, f,
                f & ~options_.features, options_.features);
  if ((f & required) != required)
    return fail("{}: SET_FEATURES {:#x} lacks VERSION_1 (bit 32): legacy virtio is not supported", name, f);
  if (features_set_ && f == features_) return {};
  for (const VringSetup& r : rings_)
    if (r.started && has(f, feature::ring_packed) != packed())
      return fail("{}: SET_FEATURES changes the ring layout while rings run", name);
  // New features take effect at once: running rings restart with the variants they pick, and
  // rings kicked before the first SET_FEATURES start now.
  for (std::uint32_t i = 0; i < rings_.size(); ++i) stop_ring(i);
  features_ = f;
  features_set_ = true;
  for (std::uint32_t i = 0; i < rings_.size(); ++i)
    if (auto ok = start_ring_when_ready(i); !ok) return ok;
  return {};
}

Result<void> VhostBackend::start_ring_when_ready(std::uint32_t i) {
  const VringSetup& r = rings_[i];
  // vhost-user lets a frontend send these in any order (QEMU and DPDK differ); the ring starts
  // once the last has come, never before SET_FEATURES (the variants depend on them).
  if (!r.kick_set || r.num == 0 || !r.addr_set || memory_.size() == 0 || !features_set_) return {};
  stop_ring(i);
  return start_ring(i);
}

void VhostBackend::reset_device() {
  for (VringSetup& r : rings_) r.fresh = true;
}

Result<void> VhostBackend::start_ring(std::uint32_t i) {
  VringSetup& r = rings_[i];
  std::size_t desc_len, avail_len, used_len;
  if (packed()) {
    desc_len = packed_desc_bytes(r.num);
    avail_len = used_len = sizeof(EventSuppress);
  } else {
    desc_len = split_desc_bytes(r.num);
    avail_len = split_avail_bytes(r.num);
    used_len = split_used_bytes(r.num);
  }
  // DPDK translates ring addresses when the ring starts (vhost-user: frontend virtual addresses).
  r.desc = memory_.translate_user(r.addr.desc, desc_len);
  r.avail = memory_.translate_user(r.addr.avail, avail_len);
  r.used = memory_.translate_user(r.addr.used, used_len);
  if (r.desc == nullptr || r.avail == nullptr || r.used == nullptr)
    return fail("{}: ring {} addresses (desc {:#x}, avail {:#x}, used {:#x}, size {}) are not inside one mapped region",
                options_.name, i, r.addr.desc, r.addr.avail, r.addr.used, r.num);
  Result<void> layout;
  if (packed()) {
    layout = check_packed_ring({r.num, reinterpret_cast<PackedDesc*>(r.desc), reinterpret_cast<EventSuppress*>(r.avail),
                                reinterpret_cast<EventSuppress*>(r.used)});
  } else {
    layout = check_split_ring({r.num, reinterpret_cast<SplitDesc*>(r.desc), reinterpret_cast<std::uint16_t*>(r.avail),
                               reinterpret_cast<std::uint16_t*>(r.used)});
  }
  if (!layout) return with_context(layout.error(), fmt::format("{}: ring {}", options_.name, i));
  r.started = true;
  if (listener_ != nullptr) listener_->ring_started(i, r.fresh);
  r.fresh = false;
  return {};
}

Result<void> VhostBackend::check_fds(const Message& msg, const FdSet& fds) const {
  const auto request = request_name(msg.header.request);
  switch (msg.request()) {
    case Request::set_vring_kick:
    case Request::set_vring_call:
    case Request::set_vring_err:
      // Written (call, err) and polled (kick) by our threads: any other type could block them.
      if (fds.size() == 0) return {};
      if (auto ok = expect_eventfd(fds.at(0)); !ok)
        return fail("{}: {} ring {}: {}", options_.name, request, msg.payload.u64 & vring_index_mask,
                    ok.error().message);
      return {};
    case Request::set_mem_table:
      // Mapped and touched by the lcores: a page fault must never wait on a file system.
      for (std::size_t i = 0; i < fds.size(); ++i)
        if (auto ok = expect_shared_memory(fds.at(i)); !ok)
          return fail("{}: {} region {}: {}", options_.name, request, i, ok.error().message);
      return {};
    default:
      return {};  // decode() let no fd through with any other request
  }
}

Result<bool> VhostBackend::handle(const Message& msg, FdSet& fds, Message& reply) {
  reply = Message{};
  reply.header.request = msg.header.request;
  reply.header.flags = flag_version | flag_reply;
  auto checked = check_fds(msg, fds);
  auto result = checked ? apply(msg, fds, reply) : Result<bool>(std::unexpected(checked.error()));
  fds.close_all();  // whatever a request did not take
  const bool ack = has(protocol_, protocol::reply_ack) && msg.need_reply();
  if (!result) {
    if (ack) {
      reply.header.size = 8;
      reply.payload.u64 = 1;  // failure; the caller sends it, then closes
    }
    return result;
  }
  if (*result) return true;
  if (ack) {
    reply.header.size = 8;
    reply.payload.u64 = 0;
    return true;
  }
  return false;
}

namespace {

// A request answered with a u64.
bool reply_u64(Message& reply, std::uint64_t value) {
  reply.header.size = 8;
  reply.payload.u64 = value;
  return true;
}

// A request with no answer of its own (a REPLY_ACK at most): its result, as apply returns it.
Result<bool> no_reply(const Result<void>& done) {
  if (!done) return std::unexpected(done.error());
  return false;
}

}  // namespace

// True: `reply` is to be sent.
Result<bool> VhostBackend::apply(const Message& msg, FdSet& fds, Message& reply) {
  const std::uint64_t u64 = msg.payload.u64;
  switch (msg.request()) {
    case Request::get_features:
      return reply_u64(reply, options_.features);
    case Request::set_features:
      return no_reply(set_features(u64));
    case Request::get_protocol_features:
      return reply_u64(reply, options_.protocol_features);
    case Request::set_protocol_features:
      return no_reply(set_protocol_features(u64));
    case Request::set_owner:
      owner_ = true;
      return false;
    case Request::reset_owner:
      reset_owner();
      return false;
    case Request::get_queue_num:
      return reply_u64(reply, options_.queue_pairs);
    case Request::set_status:
      return no_reply(set_status(u64));
    case Request::get_status:
      return reply_u64(reply, status_);
    case Request::set_mem_table:
      return no_reply(set_mem_table(msg.payload.mem, fds));
    case Request::set_vring_num:
      return no_reply(set_vring_num(msg));
    case Request::set_vring_addr:
      return no_reply(set_vring_addr(msg));
    case Request::set_vring_base:
      return no_reply(set_vring_base(msg));
    case Request::get_vring_base:
      return get_vring_base(msg, reply);
    case Request::set_vring_kick:
    case Request::set_vring_call:
    case Request::set_vring_err:
      return no_reply(set_vring_fd(msg, fds));
    case Request::set_vring_enable:
      return no_reply(set_vring_enable(msg));
    default:
      return fail("{}: vhost-user request {} ({}) is not supported", options_.name, msg.header.request,
                  request_name(msg.header.request));
  }
}

Result<void> VhostBackend::set_protocol_features(std::uint64_t f) {
  if (f & ~options_.protocol_features)
    return fail("{}: SET_PROTOCOL_FEATURES {:#x} has bits {:#x} that were never offered", options_.name, f,
                f & ~options_.protocol_features);
  protocol_ = f;
  return {};
}

void VhostBackend::reset_owner() {
  const std::uint64_t protocol = protocol_;
  reset();
  protocol_ = protocol;  // the connection stays; its protocol negotiation too
}

Result<void> VhostBackend::set_status(std::uint64_t s) {
  if (s > 0xff) return fail("{}: SET_STATUS {:#x}, expected a status byte", options_.name, s);
  status_ = static_cast<std::uint8_t>(s);
  if (status_ == 0) reset_device();  // virtio 1.2 §2.1: writing 0 resets the device
  return {};
}

Result<void> VhostBackend::set_vring_num(const Message& msg) {
  const auto& name = options_.name;
  const VringState& st = msg.payload.state;
  auto i = ring_index(msg, st.index);
  if (!i) return std::unexpected(i.error());
  const bool pow2 = (st.num & (st.num - 1)) == 0;
  if (st.num == 0 || st.num > queue_size_max || (!packed() && !pow2))
    return fail("{}: SET_VRING_NUM ring {} size {}, expected {} up to {}", name, *i, st.num,
                packed() ? "1" : "a power of two", queue_size_max);
  if (rings_[*i].started) return fail("{}: SET_VRING_NUM on running ring {}", name, *i);
  rings_[*i].num = st.num;
  return start_ring_when_ready(*i);
}

Result<void> VhostBackend::set_vring_addr(const Message& msg) {
  auto i = ring_index(msg, msg.payload.addr.index);
  if (!i) return std::unexpected(i.error());
  if (rings_[*i].started) return fail("{}: SET_VRING_ADDR on running ring {}", options_.name, *i);
  rings_[*i].addr = msg.payload.addr;
  rings_[*i].addr_set = true;
  return start_ring_when_ready(*i);
}

Result<void> VhostBackend::set_vring_base(const Message& msg) {
  const auto& name = options_.name;
  const VringState& st = msg.payload.state;
  auto i = ring_index(msg, st.index);
  if (!i) return std::unexpected(i.error());
  // Packed: bits 0-14 the avail index, 15 its wrap counter, and from QEMU bits 16-30 the used
  // index, 31 its wrap counter (vhost-user.rst). Our rings return every chain they take before
  // they stop, so used = avail; the used half is checked and, as DPDK does, not used.
  if (!packed() && st.num > 0xffff)
    return fail("{}: SET_VRING_BASE ring {} base {:#x}, expected 16 bits", name, *i, st.num);
  for (const std::uint32_t index : {st.num & 0x7fff, (st.num >> 16) & 0x7fff})
    if (packed() && rings_[*i].num != 0 && index >= rings_[*i].num)
      return fail("{}: SET_VRING_BASE ring {} index {} beyond ring size {}", name, *i, index, rings_[*i].num);
  if (rings_[*i].started) return fail("{}: SET_VRING_BASE on running ring {}", name, *i);
  rings_[*i].base = static_cast<std::uint16_t>(st.num);
  return start_ring_when_ready(*i);
}

Result<bool> VhostBackend::get_vring_base(const Message& msg, Message& reply) {
  auto i = ring_index(msg, msg.payload.state.index);
  if (!i) return std::unexpected(i.error());
  stop_ring(*i);  // GET_VRING_BASE stops the ring
  close_fd(rings_[*i].kick_fd);
  rings_[*i].kick_set = false;
  reply.header.size = sizeof(VringState);
  // Packed: the used index and wrap counter (equal to avail's, see SET_VRING_BASE) in bits
  // 16-31, where QEMU reads them.
  const std::uint32_t base = rings_[*i].base;
  reply.payload.state = {*i, packed() ? base | base << 16 : base};
  return true;
}

// SET_VRING_KICK, SET_VRING_CALL or SET_VRING_ERR: the ring's eventfd (none with vring_nofd).
Result<void> VhostBackend::set_vring_fd(const Message& msg, FdSet& fds) {
  const std::uint64_t u64 = msg.payload.u64;
  auto i = ring_index(msg, u64 & vring_index_mask);
  if (!i) return std::unexpected(i.error());
  VringSetup& r = rings_[*i];
  int& slot = msg.request() == Request::set_vring_kick   ? r.kick_fd
              : msg.request() == Request::set_vring_call ? r.call_fd
                                                         : r.err_fd;
  close_fd(slot);
  slot = (u64 & vring_nofd) ? -1 : fds.take(0);
  if (msg.request() == Request::set_vring_call && listener_ != nullptr) listener_->ring_call_changed(*i, slot);
  if (msg.request() == Request::set_vring_kick) {
    r.kick_set = true;
    return start_ring_when_ready(*i);
  }
  return {};
}

Result<void> VhostBackend::set_vring_enable(const Message& msg) {
  auto i = ring_index(msg, msg.payload.state.index);
  if (!i) return std::unexpected(i.error());
  rings_[*i].enabled = msg.payload.state.num == 1;
  return {};
}

}  // namespace ws::virtio
