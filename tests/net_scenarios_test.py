#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Scenarios for ws/net through the real wirespeed-testpmd: csum and 5tswap forwarding over
net_pcap files of TCP/UDP over IPv4/IPv6 with known bad checksums (counted with
--enable-rx-cksum, recomputed on the way out, checked by tshark), over a net_ring pair fed by
--tx-first (txonly's UDP packets), over net_null, and the --rss-ip/--rss-udp options.

tshark is needed for the capture checks: those tests skip without it, and fail when CI is set.

usage: net_scenarios_test.py --binary PATH [unittest options]
"""
import json
import os
import random
import struct
import subprocess
import sys
import unittest

import testpmd_harness

BINARY = None  # set from --binary by testpmd_harness.main
EAL = ["-l", "0-1", "--no-huge"]
MAC = bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1])


def inet_csum(b):
    """RFC 1071 checksum of b (the value to store)."""
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def with_l4_csum(pseudo, proto, l4, bad):
    off = 16 if proto == 6 else 6
    c = inet_csum(pseudo + l4)
    if proto == 17 and c == 0:
        c = 0xffff
    if bad:
        c ^= 0x1234
    return l4[:off] + struct.pack("!H", c) + l4[off + 2:]


def ipv4_frame(proto, l4, bad_ip=False, bad_l4=False, src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2])):
    l4 = with_l4_csum(src + dst + struct.pack("!BBH", 0, proto, len(l4)), proto, l4, bad_l4)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 7, 0, 64, proto, 0, src, dst)
    c = inet_csum(h) ^ (0x0101 if bad_ip else 0)
    return MAC + b"\x08\x00" + h[:10] + struct.pack("!H", c) + h[12:] + l4


def ipv6_frame(proto, l4, bad_l4=False):
    src, dst = bytes(range(16)), bytes(range(16, 32))
    l4 = with_l4_csum(src + dst + struct.pack("!I", len(l4)) + b"\0\0\0" + bytes([proto]), proto, l4, bad_l4)
    return MAC + b"\x86\xdd" + struct.pack("!IHBB", 6 << 28, len(l4), proto, 64) + src + dst + l4


def tcp_segment(rng, n):
    return struct.pack("!HHIIBBHHH", 1000, 80, 1, 0, 0x50, 0x18, 65535, 0, 0) + bytes(rng.randrange(256) for _ in range(n))


def udp_datagram(rng, n):
    return struct.pack("!HHHH", 1000, 53, 8 + n, 0) + bytes(rng.randrange(256) for _ in range(n))


def mixed_frames(count=200):
    """TCP/UDP over IPv4/IPv6 with some bad checksums; returns (frames, bad_ip, bad_l4)."""
    rng = random.Random(1)
    frames, bad_ip, bad_l4 = [], 0, 0
    for i in range(count):
        kind, n = i % 4, rng.randrange(1, 1400)
        bi, bl = i % 7 == 0 and kind < 2, i % 5 == 0
        if kind == 0:
            f = ipv4_frame(6, tcp_segment(rng, n), bi, bl)
        elif kind == 1:
            f = ipv4_frame(17, udp_datagram(rng, n), bi, bl)
        elif kind == 2:
            f = ipv6_frame(6, tcp_segment(rng, n), bl)
        else:
            f = ipv6_frame(17, udp_datagram(rng, n), bl)
        frames.append(f)
        bad_ip += bi
        bad_l4 += bl
    return frames, bad_ip, bad_l4


def tshark_fields(path, fields):
    args = ["tshark", "-r", path, "-o", "ip.check_checksum:TRUE", "-o", "tcp.check_checksum:TRUE",
            "-o", "udp.check_checksum:TRUE", "-T", "fields", "-E", "separator=,"]
    for f in fields:
        args += ["-e", f]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("tshark failed: " + p.stderr)
    return [line.split(",") for line in p.stdout.splitlines()]


class NetCase(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-net-")

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def need_tshark(self):
        testpmd_harness.require_program(self, "tshark", "tshark")

    def run_testpmd(self, eal, app, timeout=60):
        summary = self.path("summary.json")
        if os.path.exists(summary):
            os.remove(summary)
        args = [BINARY] + eal + ["--", "--summary-json", summary] + testpmd_harness.SMALL_POOL + app
        p = subprocess.run(args, input="", capture_output=True, text=True, timeout=timeout)
        desc = "command: {}\nexit: {}\nstdout:\n{}\nstderr:\n{}".format(" ".join(args), p.returncode, p.stdout[-3000:],
                                                                       p.stderr[-3000:])
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr, desc)
        self.assertEqual(p.returncode, 0, desc)
        with open(summary) as f:
            s = json.load(f)
        self.assertTrue(s["accounting_exact"], desc)
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, desc)
        return s, desc

    def run_pcap(self, mode, frames, extra=()):
        inp, out = self.path("in.pcap"), self.path("out.pcap")
        testpmd_harness.write_pcap(inp, frames)
        s, desc = self.run_testpmd(EAL + ["--vdev", "net_pcap0,rx_pcap={},tx_pcap={}".format(inp, out)],
                                   ["--forward-mode=" + mode, "--port-topology=loop", "--auto-start", "--no-flush-rx", "--duration=1"]
                                   + list(extra))
        self.assertEqual(s["totals"]["rx_packets"], len(frames), desc)
        self.assertEqual(s["totals"]["tx_packets"], len(frames), desc)
        return s, inp, out


class CsumMode(NetCase):
    def test_counts_bad_and_recomputes(self):
        """--enable-rx-cksum counts exactly the frames we broke; every frame leaves with good checksums."""
        self.need_tshark()
        frames, bad_ip, bad_l4 = mixed_frames()
        s, inp, out = self.run_pcap("csum", frames, ["--enable-rx-cksum"])
        self.assertEqual(s["totals"]["bad_ip_csum"], bad_ip)
        self.assertEqual(s["totals"]["bad_l4_csum"], bad_l4)
        before = tshark_fields(inp, ["ip.checksum.status", "tcp.checksum.status", "udp.checksum.status"])
        self.assertEqual(sum("0" in row for row in before), sum(1 for i in range(len(frames))
                                                                if (i % 7 == 0 and i % 4 < 2) or i % 5 == 0),
                         "tshark sees the broken input frames")
        after = tshark_fields(out, ["ip.checksum.status", "tcp.checksum.status", "udp.checksum.status"])
        self.assertEqual(len(after), len(frames))
        for i, row in enumerate(after):
            self.assertNotIn("0", row, "frame {} left with a bad checksum: {}".format(i + 1, row))
            self.assertIn("1", row, "frame {}: tshark checked nothing: {}".format(i + 1, row))

    def test_without_rx_cksum_counts_nothing(self):
        """As dpdk-testpmd on a port without RX checksum offload: no verdict, no count."""
        frames, _, _ = mixed_frames(40)
        s, _, _ = self.run_pcap("csum", frames)
        self.assertEqual(s["totals"]["bad_ip_csum"], 0)
        self.assertEqual(s["totals"]["bad_l4_csum"], 0)

    def test_mac_rewrite_and_rss_options(self):
        """--rss-ip/--rss-udp are accepted; addresses are rewritten as in mac mode."""
        self.need_tshark()
        frames, _, _ = mixed_frames(20)
        for opt in ("--rss-ip", "--rss-udp"):
            _, _, out = self.run_pcap("csum", frames, [opt, "--eth-peer=0,02:11:22:33:44:55"])
            rows = tshark_fields(out, ["eth.dst"])
            self.assertEqual({r[0] for r in rows}, {"02:11:22:33:44:55"})

    def test_ring_pair_tx_first(self):
        """txonly's UDP packets circulate between two rings through csum; none is counted bad."""
        s, desc = self.run_testpmd(EAL + ["--vdev", "net_ring0", "--vdev", "net_ring1,peer=net_ring0"],
                                   ["--forward-mode=csum", "--enable-rx-cksum", "--tx-first", "--auto-start",
                                    "--duration=1"])
        self.assertGreater(s["totals"]["rx_packets"], 1000, desc)
        self.assertEqual(s["totals"]["bad_ip_csum"], 0, desc)
        self.assertEqual(s["totals"]["bad_l4_csum"], 0, desc)

    def test_null_ports(self):
        """Zero-filled frames carry no IP header: forwarded untouched, nothing counted."""
        s, desc = self.run_testpmd(EAL + ["--vdev", "net_null0", "--vdev", "net_null1"],
                                   ["--forward-mode=csum", "--enable-rx-cksum", "--auto-start", "--duration=0.5"])
        self.assertGreater(s["totals"]["rx_packets"], 0, desc)
        self.assertEqual(s["totals"]["bad_ip_csum"] + s["totals"]["bad_l4_csum"], 0, desc)


class CsumOffloadCommands(NetCase):
    """csum set ... hw / tso set through --cmdline-file: the TX port (net_pcap, which has no
    offloads of its own) fills the checksums and segments in software; tshark checks the output."""

    def commands(self, lines):
        path = self.path("cmds.txt")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        return path

    def test_hw_checksums_and_tso_done_by_the_port(self):
        self.need_tshark()
        rng = random.Random(3)
        segsz = 800
        payloads = [3000, 100, 2000, 1000, 801]
        frames = [ipv4_frame(6, tcp_segment(rng, payloads[0]), bad_ip=True, bad_l4=True),
                  ipv4_frame(6, tcp_segment(rng, payloads[1]), bad_l4=True),
                  ipv6_frame(6, tcp_segment(rng, payloads[2]), bad_l4=True),
                  ipv4_frame(17, udp_datagram(rng, payloads[3]), bad_ip=True, bad_l4=True),
                  ipv4_frame(6, tcp_segment(rng, payloads[4]))]
        expect_frames = [4, 1, 3, 1, 2]  # TCP cut at 800 bytes of payload; UDP is not
        inp, out = self.path("in.pcap"), self.path("out.pcap")
        testpmd_harness.write_pcap(inp, frames)
        cmds = self.commands(["csum set ip hw 0", "port stop all", "csum set ip hw 0", "csum set udp hw 0",
                              "csum set tcp hw 0", "csum set sctp hw 0", "tso set {} 0".format(segsz), "tso show 0",
                              "csum show 0", "port start all"])
        s, desc = self.run_testpmd(EAL + ["--vdev", "net_pcap0,rx_pcap={},tx_pcap={}".format(inp, out)],
                                   ["--forward-mode=csum", "--port-topology=loop", "--no-flush-rx", "--cmdline-file", cmds,
                                    "--duration=1"])
        for needle in ["Please stop port 0 first", "IP checksum offload is hw", "UDP checksum offload is hw",
                       "TCP checksum offload is hw", "no SCTP CRC32c",
                       "TSO segment size for non-tunneled packets is 800",
                       "Port 0 does ipv4_cksum,udp_cksum,tcp_cksum,tcp_tso in software"]:
            self.assertIn(needle, desc)
        self.assertEqual(s["totals"]["rx_packets"], len(frames), desc)
        self.assertEqual(s["totals"]["tx_packets"], len(frames), "a segmented packet counts once: " + desc)
        rows = tshark_fields(out, ["frame.len", "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status",
                                   "tcp.len", "udp.length"])
        self.assertEqual(len(rows), sum(expect_frames), desc)
        for i, row in enumerate(rows):
            self.assertNotIn("0", row[1:4], "frame {} left with a bad checksum: {}".format(i + 1, row))
            self.assertIn("1", row[1:4], "frame {}: tshark checked nothing: {}".format(i + 1, row))
        tcp_lens = [int(r[4]) for r in rows if r[4]]
        self.assertEqual(sum(tcp_lens), payloads[0] + payloads[1] + payloads[2] + payloads[4])
        self.assertLessEqual(max(tcp_lens), segsz)

    def test_without_commands_nothing_is_segmented(self):
        rng = random.Random(4)
        frames = [ipv4_frame(6, tcp_segment(rng, 3000))]
        s, _, out = self.run_pcap("csum", frames)
        self.assertEqual(s["totals"]["tx_packets"], 1)


MS_KEY = bytes([0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa])


def toeplitz(data, key=MS_KEY):
    """The Microsoft RSS hash, bit by bit (the specification's definition)."""
    k, klen, h = int.from_bytes(key, "big"), len(key) * 8, 0
    for i in range(len(data) * 8):
        if data[i // 8] & (0x80 >> (i % 8)):
            h ^= (k >> (klen - 32 - i)) & 0xffffffff
    return h


class SoftwareRss(NetCase):
    """Two RX queues on a net_pcap port (no hardware hash) and --rss-udp, then "port config all
    rss ip": the port spreads by the Toeplitz hash of the IPv4 addresses through a round-robin
    table; each queue's stream writes its own file. Without an RSS option nothing is spread (as
    dpdk-testpmd, pcap_port's two-queue test)."""

    def test_spread_by_hash(self):
        self.need_tshark()
        rng = random.Random(5)
        frames = [ipv4_frame(17, udp_datagram(rng, 50), src=bytes([10, 1, i // 256, i % 256])) for i in range(64)]
        inp, empty = self.path("in.pcap"), self.path("empty.pcap")
        outs = [self.path("out0.pcap"), self.path("out1.pcap")]
        testpmd_harness.write_pcap(inp, frames)
        testpmd_harness.write_pcap(empty, [])
        cmds = self.path("cmds.txt")
        with open(cmds, "w") as f:
            f.write("show port 0 rss-hash\nport config all rss udp\nport stop all\nport config all rss ip\n"
                    "port start all\n")
        dev = "net_pcap0,rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}".format(inp, empty, *outs)
        s, desc = self.run_testpmd(EAL + ["--vdev", dev], ["--forward-mode=csum", "--port-topology=loop", "--rxq=2",
                                                          "--txq=2", "--rss-udp", "--no-flush-rx", "--cmdline-file", cmds,
                                                          "--duration=1"])
        for needle in ["RSS functions:\n  ipv4 ipv6 ipv4-udp ipv6-udp", "Port 0 hashes in software",
                       "Please stop all ports first", "RSS hash types set to ipv4 ipv6"]:
            self.assertIn(needle, desc)
        self.assertEqual(s["totals"]["tx_packets"], len(frames), desc)
        seen = 0
        for q, out in enumerate(outs):
            rows = tshark_fields(out, ["ip.src", "ip.dst"])
            self.assertGreater(len(rows), 10, "queue {} got {} of 64 flows".format(q, len(rows)))
            for src, dst in rows:
                h = toeplitz(bytes(int(x) for x in (src.split(".") + dst.split("."))))
                self.assertEqual((h & 127) % 2, q, "{} -> {} hashed {:#x}".format(src, dst, h))
            seen += len(rows)
        self.assertEqual(seen, len(frames))


class FiveTupleSwap(NetCase):
    def test_swaps_addresses_and_ports(self):
        self.need_tshark()
        rng = random.Random(2)
        frames = []
        for i in range(40):
            proto = 6 if i % 2 else 17
            l4 = tcp_segment(rng, 100) if proto == 6 else udp_datagram(rng, 100)
            frames.append(ipv4_frame(proto, l4, src=bytes([10, 0, 0, i + 1]), dst=bytes([192, 168, 1, 1]))
                          if i % 4 < 2 else ipv6_frame(proto, l4))
        _, inp, out = self.run_pcap("5tswap", frames)
        fields = ["eth.src", "eth.dst", "ip.src", "ip.dst", "ipv6.src", "ipv6.dst", "tcp.srcport", "tcp.dstport",
                  "udp.srcport", "udp.dstport", "ip.checksum.status", "tcp.checksum.status", "udp.checksum.status"]
        before, after = tshark_fields(inp, fields), tshark_fields(out, fields)
        self.assertEqual(len(after), len(frames))
        for b, a in zip(before, after):
            for k in range(0, 10, 2):
                self.assertEqual((a[k], a[k + 1]), (b[k + 1], b[k]), "field pair {}".format(fields[k]))
            self.assertNotIn("0", a[10:], "checksums stay valid after the swap")

    def test_null_ports(self):
        s, desc = self.run_testpmd(EAL + ["--vdev", "net_null0", "--vdev", "net_null1"],
                                   ["--forward-mode=5tswap", "--auto-start", "--duration=0.5"])
        self.assertGreater(s["totals"]["tx_packets"], 0, desc)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
