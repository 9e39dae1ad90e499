// SPDX-License-Identifier: BSD-3-Clause
// One rtnetlink traffic-control request in a fixed buffer, for net_tap's remote= rules
// (tap_remote.cpp) and its flow rule offload (tap_flow.cpp).
#pragma once
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace ws::tap_pmd {

// One rtnetlink request in a fixed buffer: header, tcmsg, then attributes (nested ones are
// opened with begin() and closed with end(), which writes their length).
class TcRequest {
 public:
  TcRequest(std::uint16_t type, std::uint16_t flags, int ifindex, std::uint32_t parent, std::uint32_t handle,
            std::uint32_t info) {
    auto* h = header();
    h->nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
    h->nlmsg_type = type;
    h->nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | NLM_F_ACK | flags);
    h->nlmsg_seq = 1;
    auto* t = reinterpret_cast<tcmsg*>(buf_.data() + NLMSG_HDRLEN);
    t->tcm_family = AF_UNSPEC;
    t->tcm_ifindex = ifindex;
    t->tcm_parent = parent;
    t->tcm_handle = handle;
    t->tcm_info = info;
  }

  void put(std::uint16_t type, const void* data, std::size_t len) {
    auto* a = reinterpret_cast<rtattr*>(buf_.data() + NLMSG_ALIGN(header()->nlmsg_len));
    a->rta_type = type;
    a->rta_len = static_cast<std::uint16_t>(RTA_LENGTH(len));
    if (len) std::memcpy(reinterpret_cast<char*>(a) + RTA_LENGTH(0), data, len);
    header()->nlmsg_len = NLMSG_ALIGN(header()->nlmsg_len) + RTA_ALIGN(a->rta_len);
  }
  void put_string(std::uint16_t type, const char* s) { put(type, s, std::strlen(s) + 1); }
  std::uint32_t begin(std::uint16_t type) {
    const std::uint32_t at = NLMSG_ALIGN(header()->nlmsg_len);
    put(type, nullptr, 0);
    return at;
  }
  void end(std::uint32_t at) {
    reinterpret_cast<rtattr*>(buf_.data() + at)->rta_len = static_cast<std::uint16_t>(header()->nlmsg_len - at);
  }

  // Sends the request and waits for the kernel's acknowledgement: 0 or a positive errno. With
  // `kernel_says`, a refusal's extended-ack text goes there (empty when the kernel gave none):
  // an errno alone does not tell which of a filter's modules or attributes the kernel refused.
  int send(std::string* kernel_says = nullptr) const {
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) return errno;
    const int on = 1;  // extended acks, without the request echoed back (older kernels: neither)
    (void)::setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &on, sizeof on);
    (void)::setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &on, sizeof on);
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    int result = 0;
    if (::sendto(fd, buf_.data(), header()->nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
      result = errno;
    } else {
      alignas(nlmsghdr) std::array<char, 4096> reply{};
      const ssize_t n = ::recv(fd, reply.data(), reply.size(), 0);
      const auto* r = reinterpret_cast<const nlmsghdr*>(reply.data());
      if (n < 0) {
        result = errno;
      } else if (static_cast<std::size_t>(n) < NLMSG_HDRLEN + sizeof(nlmsgerr) || r->nlmsg_type != NLMSG_ERROR) {
        result = EPROTO;
      } else {
        nlmsgerr e{};
        std::memcpy(&e, reply.data() + NLMSG_HDRLEN, sizeof e);
        result = -e.error;
        if (result != 0 && kernel_says != nullptr)
          *kernel_says = ack_message({reply.data(), std::min<std::size_t>(static_cast<std::size_t>(n), r->nlmsg_len)});
      }
    }
    ::close(fd);
    return result;
  }

 private:
  // NLMSGERR_ATTR_MSG from the attributes after an error acknowledgement (`ack`: the message as
  // received); every length read is checked against what was received.
  static std::string ack_message(std::span<const char> ack) {
    if (ack.size() < NLMSG_HDRLEN + sizeof(nlmsgerr)) return {};
    nlmsghdr h{};
    nlmsgerr e{};
    std::memcpy(&h, ack.data(), sizeof h);
    std::memcpy(&e, ack.data() + NLMSG_HDRLEN, sizeof e);
    if ((h.nlmsg_flags & NLM_F_ACK_TLVS) == 0) return {};
    // Without NLM_F_CAPPED the request follows the error's copy of its header.
    std::size_t at = NLMSG_HDRLEN + sizeof e;
    if ((h.nlmsg_flags & NLM_F_CAPPED) == 0) {
      if (e.msg.nlmsg_len < sizeof(nlmsghdr)) return {};
      at += NLMSG_ALIGN(e.msg.nlmsg_len - sizeof(nlmsghdr));
    }
    while (at + sizeof(nlattr) <= ack.size()) {
      nlattr a{};
      std::memcpy(&a, ack.data() + at, sizeof a);
      if (a.nla_len < sizeof a || a.nla_len > ack.size() - at) return {};
      if ((a.nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG)
        return std::string(ack.data() + at + sizeof a, ::strnlen(ack.data() + at + sizeof a, a.nla_len - sizeof a));
      at += NLA_ALIGN(a.nla_len);
    }
    return {};
  }

  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  const nlmsghdr* header() const { return reinterpret_cast<const nlmsghdr*>(buf_.data()); }
  alignas(nlmsghdr) std::array<char, 1024> buf_{};
};

// Creates the clsact qdisc; false in `created` when one was there already.
inline int add_clsact(int ifindex, bool& created) {
  TcRequest r(RTM_NEWQDISC, NLM_F_CREATE | NLM_F_EXCL, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  r.put_string(TCA_KIND, "clsact");
  const int e = r.send();
  created = e == 0;
  return e == EEXIST ? 0 : e;
}

inline void delete_clsact(int ifindex) {
  TcRequest r(RTM_DELQDISC, 0, ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0), 0);
  r.put_string(TCA_KIND, "clsact");
  (void)r.send();
}

}  // namespace ws::tap_pmd
