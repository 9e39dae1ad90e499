// SPDX-License-Identifier: BSD-3-Clause
// check_net_hdr: header fields a peer controls are checked against the packet behind them;
// store_net_hdr / store_plain_net_hdr write the header's wire layout.
#include "ws/virtio/net/net_hdr.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstring>

namespace ws::virtio {
namespace {

TEST(NetHdr, ChecksFieldsAgainstThePacket) {
  NetHdr h{};
  EXPECT_EQ(check_net_hdr(h, 64), NetHdrCheck::ok);
  h.flags = NetHdr::f_needs_csum;
  h.csum_start = 34;
  h.csum_offset = 16;
  EXPECT_EQ(check_net_hdr(h, 64), NetHdrCheck::ok);
  EXPECT_EQ(check_net_hdr(h, 51), NetHdrCheck::csum_beyond_packet);
  h.csum_start = 0xffff;
  h.csum_offset = 0xffff;
  EXPECT_EQ(check_net_hdr(h, 1500), NetHdrCheck::csum_beyond_packet) << "no 16-bit overflow";
  h = NetHdr{};
  h.gso_type = NetHdr::gso_tcpv4;
  EXPECT_EQ(check_net_hdr(h, 1500), NetHdrCheck::gso_without_size);
  h.gso_size = 1448;
  h.hdr_len = 54;
  EXPECT_EQ(check_net_hdr(h, 1500), NetHdrCheck::ok);
  h.hdr_len = 2000;
  EXPECT_EQ(check_net_hdr(h, 1500), NetHdrCheck::hdr_len_beyond_packet);
  h.gso_type = 9;
  EXPECT_EQ(check_net_hdr(h, 1500), NetHdrCheck::bad_gso_type);
}

TEST(NetHdr, StoresWriteTheWireLayoutAndNothingAround) {
  NetHdr h{};
  h.flags = NetHdr::f_needs_csum;
  h.gso_type = NetHdr::gso_tcpv6;
  h.hdr_len = 0x0102;
  h.gso_size = 0x0304;
  h.csum_start = 0x0506;
  h.csum_offset = 0x0708;
  h.num_buffers = 0x090a;
  std::array<std::byte, 16> buf;
  buf.fill(std::byte{0xee});
  store_net_hdr(buf.data() + 2, h);
  EXPECT_EQ(std::memcmp(buf.data() + 2, &h, sizeof h), 0);
  EXPECT_EQ(buf[1], std::byte{0xee});
  EXPECT_EQ(buf[14], std::byte{0xee});

  buf.fill(std::byte{0xee});
  store_plain_net_hdr(buf.data() + 2, 3);
  NetHdr plain{};
  plain.num_buffers = 3;
  EXPECT_EQ(std::memcmp(buf.data() + 2, &plain, sizeof plain), 0);
  EXPECT_EQ(buf[1], std::byte{0xee});
  EXPECT_EQ(buf[14], std::byte{0xee});
}

}  // namespace
}  // namespace ws::virtio
