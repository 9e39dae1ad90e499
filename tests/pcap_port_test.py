#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""net_pcap with tshark as the independent reader: files the test writes (pcap with microsecond
and nanosecond timestamps, pcapng converted by Wireshark's editcap, text2pcap output) go through
net_pcap -> io forwarding -> tx_pcap, and tshark must read back every packet byte for byte; bad
files (wrong magic, truncated header or record, empty, impossible lengths) are refused with an
error naming the file; infinite_rx replays; phy_mac=1 gives the port the interface's address
(a veth in the test's own namespace); and the end-to-end gate: txonly -> tx_pcap capture ->
io forwarding -> tx_pcap, checked by tshark for count and content.

usage: pcap_port_test.py --binary PATH [unittest options]
"""
import json
import os
import struct
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
EAL = ["-l", "0-1", "--no-huge"]


def frames(count):
    """Ethernet/IPv4/UDP frames of varied lengths (60..1514 bytes) with distinct payloads."""
    out = []
    for i in range(count):
        length = 60 + (i * 97) % 1455
        payload = bytes((i + k) & 0xff for k in range(length - 42))
        eth = bytes.fromhex("020000000002" "020000000001" "0800")
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, length - 14, i, 0, 64, 17, 0,
                         bytes([10, 99, 0, 1]), bytes([10, 99, 0, 2]))
        udp = struct.pack("!HHHH", 1000 + i, 2000, length - 34, 0)
        out.append(eth + ip + udp + payload)
    return out


def write_pcap(path, packets, nano=False, snaplen=65535, magic=None):
    with open(path, "wb") as f:
        m = magic if magic is not None else (0xa1b23c4d if nano else 0xa1b2c3d4)
        f.write(struct.pack("<IHHiIII", m, 2, 4, 0, 0, snaplen, 1))
        for i, p in enumerate(packets):
            frac = (i * 1001) % (1000000000 if nano else 1000000)
            f.write(struct.pack("<IIII", 1700000000 + i, frac, len(p), len(p)))
            f.write(p)


def tshark_frames(path):
    """Every frame's bytes as tshark reads them (its hex dump: one block per frame)."""
    p = subprocess.run(["tshark", "-r", path, "-x", "--hexdump", "noascii"], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("tshark cannot read {}: {}".format(path, p.stderr))
    out, cur = [], None
    for line in p.stdout.splitlines():
        if not line.strip():
            if cur is not None:
                out.append(bytes(cur))
            cur = None
            continue
        tokens = line.split()
        if tokens[0] == "0000" or cur is None:
            if cur is not None:
                out.append(bytes(cur))
            cur = bytearray()
        cur += bytes(int(t, 16) for t in tokens[1:])
    if cur is not None:
        out.append(bytes(cur))
    return out


def tshark_fields(path, *fields):
    args = ["tshark", "-r", path, "-T", "fields", "-E", "separator=,"]
    for f in fields:
        args += ["-e", f]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("tshark cannot read {}: {}".format(path, p.stderr))
    return [line.split(",") for line in p.stdout.splitlines()]


class PcapCase(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        for tool in ("tshark", "editcap", "text2pcap"):
            testpmd_harness.require_program(self, tool, "tshark")
        self.tmp = testpmd_harness.temp_dir(self, "ws-pcap-")

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def run_testpmd(self, vdevs, app, timeout=60):
        summary = self.path("summary.json")
        if os.path.exists(summary):
            os.unlink(summary)
        args = [BINARY] + EAL
        for v in vdevs:
            args += ["--vdev", v]
        args += ["--", "--summary-json", summary] + testpmd_harness.SMALL_POOL + app
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        where = "command: {}\nexit: {}\nstdout:\n{}\nstderr:\n{}".format(" ".join(args), p.returncode,
                                                                          p.stdout[-3000:], p.stderr[-3000:])
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr, where)
        self.assertGreaterEqual(p.returncode, 0, "killed by a signal\n" + where)
        data = None
        if os.path.exists(summary):
            with open(summary) as f:
                data = json.load(f)
        return p, data, where

    def forward_file(self, source, expect):
        out = self.path("out.pcap")
        p, s, where = self.run_testpmd(["net_pcap0,rx_pcap={},tx_pcap={}".format(source, out)],
                                       ["--forward-mode=io", "--no-flush-rx", "--duration", "0.5"])
        self.assertEqual(p.returncode, 0, where)
        self.assertEqual(s["ports"][0]["rx_packets"], len(expect), where)
        self.assertEqual(s["ports"][0]["tx_packets"], len(expect), where)
        self.assertEqual(s["ports"][0]["rx_errors"], 0, where)
        got = tshark_frames(out)
        self.assertEqual(len(got), len(expect))
        for i, (g, e) in enumerate(zip(got, expect)):
            self.assertEqual(g, e, "packet {} differs".format(i + 1))
        return out


class RoundTrip(PcapCase):
    def test_microsecond_pcap(self):
        pkts = frames(200)
        write_pcap(self.path("in.pcap"), pkts)
        self.assertEqual(tshark_frames(self.path("in.pcap")), pkts, "the test's own file is what tshark reads")
        out = self.forward_file(self.path("in.pcap"), pkts)
        with open(out, "rb") as f:
            self.assertEqual(struct.unpack("<I", f.read(4))[0], 0xa1b23c4d, "tx_pcap writes nanosecond pcap")

    def test_nanosecond_pcap(self):
        pkts = frames(150)
        write_pcap(self.path("in_ns.pcap"), pkts, nano=True)
        self.forward_file(self.path("in_ns.pcap"), pkts)

    def test_pcapng_from_editcap(self):
        pkts = frames(120)
        write_pcap(self.path("in.pcap"), pkts)
        subprocess.run(["editcap", "-F", "pcapng", self.path("in.pcap"), self.path("in.pcapng")], check=True,
                       capture_output=True, timeout=60)
        with open(self.path("in.pcapng"), "rb") as f:
            self.assertEqual(f.read(4), b"\x0a\x0d\x0d\x0a", "editcap wrote pcapng")
        self.forward_file(self.path("in.pcapng"), pkts)

    def test_text2pcap_file(self):
        pkts = frames(20)
        with open(self.path("in.txt"), "w") as f:
            for p in pkts:
                for off in range(0, len(p), 16):
                    f.write("{:06x} {}\n".format(off, " ".join("{:02x}".format(b) for b in p[off:off + 16])))
        subprocess.run(["text2pcap", "-q", self.path("in.txt"), self.path("t2p.pcap")], check=True,
                       capture_output=True, timeout=60)
        self.forward_file(self.path("t2p.pcap"), pkts)

    def test_snaplen_larger_than_frames(self):
        pkts = frames(30)
        write_pcap(self.path("big_snap.pcap"), pkts, snaplen=262144)
        self.forward_file(self.path("big_snap.pcap"), pkts)

    def test_jumbo_records_span_segments(self):
        # 9000-byte frames do not fit one 2 KiB mbuf: RX chains segments, TX writes them whole.
        pkts = [bytes(range(256)) * 35 + bytes(40 + i) for i in range(5)]
        write_pcap(self.path("jumbo.pcap"), pkts)
        self.forward_file(self.path("jumbo.pcap"), pkts)

    def test_two_queues_from_two_files(self):
        a, b = frames(10), frames(7)
        write_pcap(self.path("a.pcap"), a)
        write_pcap(self.path("b.pcap"), b)
        dev = "net_pcap0,rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}".format(
            self.path("a.pcap"), self.path("b.pcap"), self.path("oa.pcap"), self.path("ob.pcap"))
        p, s, where = self.run_testpmd([dev], ["--forward-mode=io", "--rxq=2", "--txq=2", "--no-flush-rx", "--duration", "0.5"])
        self.assertEqual(p.returncode, 0, where)
        self.assertEqual(s["ports"][0]["rx_packets"], 17, where)
        self.assertEqual(tshark_frames(self.path("oa.pcap")), a)
        self.assertEqual(tshark_frames(self.path("ob.pcap")), b)

    def test_infinite_rx_replays(self):
        pkts = frames(3)
        write_pcap(self.path("three.pcap"), pkts)
        p, s, where = self.run_testpmd(["net_pcap0,rx_pcap={},infinite_rx=1".format(self.path("three.pcap"))],
                                       ["--forward-mode=rxonly", "--duration", "0.5"])
        self.assertEqual(p.returncode, 0, where)
        self.assertGreater(s["ports"][0]["rx_packets"], 3000, where)
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, where)


def mixed_frames():
    """One ARP, two IPv4/TCP, one IPv4/ICMP, one IPv4 fragment, one VLAN-tagged IPv4/UDP, one IPv6/UDP."""
    mac = bytes.fromhex("020000000002" "020000000001")

    def ipv4(proto, payload, frag=0):
        return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, frag, 64, proto, 0,
                           bytes([10, 99, 0, 1]), bytes([10, 99, 0, 2])) + payload
    tcp = struct.pack("!HHIIBBHHH", 1, 2, 0, 0, 0x50, 0x02, 1024, 0, 0)
    udp = struct.pack("!HHHH", 1, 2, 8 + 18, 0) + bytes(18)
    icmp = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + bytes(18)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac[6:], bytes([10, 99, 0, 1]), bytes(6),
                      bytes([10, 99, 0, 2]))
    ipv6 = struct.pack("!IHBB16s16s", 0x60000000, len(udp), 17, 64, bytes(15) + b"\1", bytes(15) + b"\2") + udp
    return [mac + b"\x08\x06" + arp + bytes(18),
            mac + b"\x08\x00" + ipv4(6, tcp + bytes(6)),
            mac + b"\x08\x00" + ipv4(6, tcp + bytes(6)),
            mac + b"\x08\x00" + ipv4(1, icmp),
            mac + b"\x08\x00" + ipv4(17, udp, frag=0x0020),
            mac + b"\x81\x00\x00\x05\x08\x00" + ipv4(17, udp),
            mac + b"\x86\xdd" + ipv6]


class PacketTypes(PcapCase):
    def test_rxonly_counts_packet_types_per_port(self):
        write_pcap(self.path("mixed.pcap"), mixed_frames())
        p, s, where = self.run_testpmd(["net_pcap0,rx_pcap=" + self.path("mixed.pcap")],
                                       ["--forward-mode=rxonly", "--rx-ptype-counts", "--no-flush-rx", "--duration", "0.5"])
        self.assertEqual(p.returncode, 0, where)
        types = s["ports"][0]["ptypes"]
        expect = {"ether": 5, "arp": 1, "vlan": 1, "ipv4": 5, "ipv6": 1, "tcp": 2, "udp": 2, "icmp": 1, "frag": 1,
                  "vxlan": 0, "unknown": 0}
        self.assertEqual(types, expect, where)
        self.assertIn("Packet types: ether 5 arp 1 vlan 1 ipv4 5 ipv6 1 tcp 2 udp 2 icmp 1 frag 1", p.stdout, where)
        # Without the option, rxonly does not classify (as dpdk-testpmd).
        p, s, where = self.run_testpmd(["net_pcap0,rx_pcap=" + self.path("mixed.pcap")],
                                       ["--forward-mode=rxonly", "--no-flush-rx", "--duration", "0.3"])
        self.assertNotIn("ptypes", s["ports"][0], where)


class BadFiles(PcapCase):
    def expect_refused(self, name, contents, *words):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(contents)
        p, _, where = self.run_testpmd(["net_pcap0,rx_pcap={},tx_pcap={}".format(path, self.path("o.pcap"))],
                                       ["--forward-mode=io", "--duration", "0.2"])
        self.assertNotEqual(p.returncode, 0, where)
        self.assertIn("net_pcap0", p.stderr, where)
        self.assertIn("rx_pcap", p.stderr, where)
        self.assertIn(path, p.stderr, where)
        for w in words:
            self.assertIn(w, p.stderr, where)

    def good_file(self):
        write_pcap(self.path("good.pcap"), frames(30))
        with open(self.path("good.pcap"), "rb") as f:
            return f.read()

    def test_wrong_magic(self):
        self.expect_refused("magic.pcap", b"\xde\xad\xbe\xef" + self.good_file()[4:], "unknown file format")

    def test_truncated_header(self):
        self.expect_refused("hdr.pcap", self.good_file()[:10], "truncated")

    def test_truncated_record(self):
        data = self.good_file()
        self.expect_refused("rec.pcap", data[:len(data) - 100], "truncated", "record 30")

    def test_empty_file(self):
        self.expect_refused("empty.pcap", b"", "truncated")

    def test_impossible_capture_length(self):
        hdr = struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1)
        rec = struct.pack("<IIII", 1, 0, 0x7fffffff, 0x7fffffff) + b"\0" * 64
        self.expect_refused("len.pcap", hdr + rec, "record 1")

    def test_missing_file_and_bad_keys(self):
        p, _, where = self.run_testpmd(["net_pcap0,rx_pcap=" + self.path("nope.pcap")], ["--duration", "0.2"])
        self.assertNotEqual(p.returncode, 0, where)
        self.assertIn("No such file", p.stderr, where)
        p, _, where = self.run_testpmd(["net_pcap0,rx_pcapp=x"], ["--duration", "0.2"])
        self.assertNotEqual(p.returncode, 0, where)
        self.assertIn("rx_pcapp", p.stderr, where)
        p, _, where = self.run_testpmd(["net_pcap0,tx_pcap={},infinite_rx=1".format(self.path("o.pcap"))],
                                       ["--duration", "0.2"])
        self.assertNotEqual(p.returncode, 0, where)
        self.assertIn("infinite_rx", p.stderr, where)
        p, _, where = self.run_testpmd(["net_pcap0,tx_pcap=/nonexistent-dir/o.pcap"], ["--duration", "0.2"])
        self.assertNotEqual(p.returncode, 0, where)
        self.assertIn("tx_pcap", p.stderr, where)


class PhyMac(unittest.TestCase):
    def port_mac(self, ns, vdev):
        p = netns.sh(BINARY, *EAL, "--vdev", vdev, "--", "--duration", "0.2", *testpmd_harness.SMALL_POOL, ns=ns,
                     check=False)
        where = "{}\nexit {}\nstdout:\n{}\nstderr:\n{}".format(vdev, p.returncode, p.stdout[-2000:], p.stderr[-2000:])
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr, where)
        return p, where

    def test_phy_mac_takes_the_interface_address(self):
        netns.require_root(self)
        net = netns.Netns("i4pm")
        self.addCleanup(net.delete)
        ns = net.ns("a")
        net.veth("wsi4ma", ns, "wsi4mb", ns)
        mac = json.loads(netns.sh("ip", "-j", "link", "show", "wsi4ma", ns=ns).stdout)[0]["address"]
        p, where = self.port_mac(ns, "net_pcap0,iface=wsi4ma,phy_mac=1")
        self.assertEqual(p.returncode, 0, where)
        self.assertIn("Port 0: " + mac.upper(), p.stdout, where)
        p, where = self.port_mac(ns, "net_pcap0,iface=wsi4ma,phy_mac=0")
        self.assertEqual(p.returncode, 0, where)
        self.assertIn("Port 0: 02:70:63:61:70:", p.stdout, "without phy_mac: the PMD's own address\n" + where)
        self.assertNotIn(mac.upper(), p.stdout, where)

    def test_phy_mac_needs_iface(self):
        p = subprocess.run([BINARY] + EAL + ["--vdev", "net_pcap0,rx_iface=lo,phy_mac=1", "--", "--duration", "0.2"]
                           + testpmd_harness.SMALL_POOL,
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        for w in ("net_pcap0", "phy_mac", "iface="):
            self.assertIn(w, p.stderr)
        p = subprocess.run([BINARY] + EAL + ["--vdev", "net_pcap0,iface=lo,phy_mac=2", "--", "--duration", "0.2"]
                           + testpmd_harness.SMALL_POOL,
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("phy_mac", p.stderr)


class EndToEndGate(PcapCase):
    def test_txonly_capture_io_forward_capture(self):
        gen, out = self.path("gen.pcap"), self.path("out.pcap")
        # 1. txonly writes its packets into a capture.
        # The shortest run that sends anything: on a loaded machine the forwarding lcore may not
        # run at all within 0.1 ms, so the duration grows until packets were sent.
        for duration in ("0.0001", "0.001", "0.01", "0.1"):
            p, s, where = self.run_testpmd(["net_pcap0,tx_pcap=" + gen],
                                           ["--forward-mode=txonly", "--txpkts=64", "--duration", duration])
            self.assertEqual(p.returncode, 0, where)
            sent = s["ports"][0]["tx_packets"]
            if sent > 0:
                break
        self.assertGreater(sent, 0, where)
        rows = tshark_fields(gen, "frame.len", "ip.src", "ip.dst", "udp.srcport", "udp.dstport", "ip.checksum.status")
        self.assertEqual(len(rows), sent, "tshark counts what txonly sent")
        for row in rows[:2000]:
            self.assertEqual(row[:5], ["64", "198.18.0.1", "198.18.0.2", "9", "9"])
        # 2. io forwarding from that capture into another.
        p, s, where = self.run_testpmd(["net_pcap0,rx_pcap={},tx_pcap={}".format(gen, out)],
                                       ["--forward-mode=io", "--no-flush-rx", "--duration", "0.5"])
        self.assertEqual(p.returncode, 0, where)
        self.assertEqual(s["ports"][0]["rx_packets"], sent, where)
        self.assertEqual(s["ports"][0]["tx_packets"], sent, where)
        # 3. tshark: the same count, every frame identical.
        a, b = tshark_frames(gen), tshark_frames(out)
        self.assertEqual(len(b), sent)
        self.assertEqual(a, b)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
