// check_net_hdr: header fields a peer controls are checked against the packet behind them.
#include "ws/virtio/net_hdr.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ws::virtio
