#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Checksum offload through the virtio-net header, with real peers.

Each run has a sender and a receiver joined by vhost-user. The sender reads TCP and UDP packets
over IPv4 and IPv6 (correct checksums, written by this test) from a pcap port and forwards them
in csum mode with the checksums requested from the virtio port (`--tx-offloads` for
wirespeed-testpmd, `csum set tcp|udp hw` for dpdk-testpmd): its L4 checksum fields then hold
only the pseudo-header sum and the virtio-net header says NEEDS_CSUM. The receiver forwards in
io mode to a pcap file. The test checks that every packet arrived (exact counts), that the bytes
behind the Ethernet addresses are exactly the original packets (the receiver completed each
checksum) and that tshark finds every IPv4, TCP and UDP checksum good.

Pairings: ours with ours both ways (split and packed), and both mixed pairings with Debian's
dpdk-testpmd both ways. DPDK parts need root (hugepages) and dpdk-testpmd: skipped without,
failed under CI.

usage: vhost_offload_test.py --binary PATH [unittest options]
"""
import argparse
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402  (peers, pools, hugepages, summaries)

TSHARK = shutil.which("tshark")
COUNT = 200
CSUM, GUEST_CSUM, EVENT_IDX = 1 << 0, 1 << 1, 1 << 29  # virtio-net feature bits


def negotiated(out):
    """Features our side logged: net_vhost's "device ready (..., features X)" or virtio_user's
    "negotiated X" (--log-level info)."""
    found = re.findall(r"(?:features|negotiated) (0x[0-9a-f]+)\)?\n", out)
    return int(found[-1], 16) if found else None


def inet_sum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def packet(i):
    """Ethernet / IPv4 or IPv6 / TCP or UDP with a payload of varying length, checksums right."""
    ipv6, tcp = bool(i & 2), bool(i & 1)
    payload = bytes((i * 7 + k) & 0xFF for k in range(18 + (i * 37) % 1300))
    sport, dport = 1000 + i, 2000
    if tcp:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1000 + i, 0, 5 << 4, 0x18, 8192, 0, 0) + payload
        proto, off = 6, 16
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
        proto, off = 17, 6
    if ipv6:
        src, dst = bytes([0x20, 0x01] + [0] * 13 + [1]), bytes([0x20, 0x01] + [0] * 13 + [2])
        pseudo = src + dst + struct.pack("!IxxxB", len(l4), proto)
        ip = struct.pack("!IHBB", 6 << 28, len(l4), proto, 64) + src + dst
        ethertype = 0x86DD
    else:
        src, dst = bytes([192, 168, 0, 1]), bytes([192, 168, 0, 2])
        pseudo = src + dst + struct.pack("!xBH", proto, len(l4))
        ip = struct.pack("!BBHHHBBH", 0x45, 0, 20 + len(l4), i, 0, 64, proto, 0) + src + dst
        ip = ip[:10] + struct.pack("!H", inet_sum(ip)) + ip[12:]
        ethertype = 0x0800
    c = inet_sum(pseudo + l4)
    if c == 0 and not tcp:
        c = 0xFFFF
    l4 = l4[:off] + struct.pack("!H", c) + l4[off + 2:]
    return bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]) + struct.pack("!H", ethertype) + ip + l4


class OffloadBase(vp.PairBase):
    def setUp(self):
        super().setUp()
        testpmd_harness.require(self, TSHARK, "tshark is not installed (scripts/install-deps)")
        self.frames = [packet(i) for i in range(COUNT)]
        self.pcap_in = os.path.join(self.tmp.name, "in.pcap")
        self.pcap_out = os.path.join(self.tmp.name, "out.pcap")
        testpmd_harness.write_pcap(self.pcap_in, self.frames)

    def tearDown(self):
        super().tearDown()
        for prefix in ("wsofh", "wsofu"):  # dpdk-testpmd's runtime directories of this test
            shutil.rmtree(os.path.join("/var/run/dpdk", "{}{}".format(prefix, os.getpid())), ignore_errors=True)

    def rx_pcap(self):
        return "net_pcap0,rx_pcap=" + self.pcap_in

    def tx_pcap(self):
        return "net_pcap0,tx_pcap=" + self.pcap_out

    # ---- the two roles, for either program ----
    def our_sender(self, lcores, vdev, tag):
        """Interactive: forwarding starts when the prompt says so (the peer is connected)."""
        return self.start([vp.BINARY, "--no-huge", "--log-level", "info"] + lcores + ["--vdev", vdev, "--vdev", self.rx_pcap(), "--",
                                                                "-i", "--forward-mode=csum", "--tx-offloads=0xe", "--no-flush-rx",
                                                                "--nb-cores=1", "--summary-json",
                                                                os.path.join(self.tmp.name, tag + ".json")]
                          + vp.POOL, stdin=subprocess.PIPE)

    def our_receiver(self, lcores, vdev, tag, duration, app=()):
        return self.start([vp.BINARY, "--no-huge", "--log-level", "info"] + lcores + ["--vdev", vdev, "--vdev", self.tx_pcap(), "--",
                                                                "--forward-mode=io", "--auto-start", "--nb-cores=1",
                                                                "--duration", str(duration), "--summary-json",
                                                                os.path.join(self.tmp.name, tag + ".json")]
                          + vp.POOL + list(app))

    def stop_receiver(self, rx):
        """Our receiver, once the sender has quit (everything sent was taken): stopped, not left
        to run out its --duration (a cap); returns its output."""
        rx.send_signal(signal.SIGINT)
        return self.finish(rx)

    def dpdk_args(self, lcores, vdevs, app, prefix, huge):
        mem = ["-m", "512", "--in-memory"] if huge else ["--no-huge", "-m", "512"]
        args = (vp.LINE_BUFFERED + [vp.DPDK] + mem + lcores
                + ["--file-prefix=" + prefix, "--no-pci", "--single-file-segments"])
        for v in vdevs:
            args += ["--vdev", v]
        return args + ["--"] + app + vp.POOL

    def dpdk_sender(self, lcores, vdev, prefix, huge):
        return self.start(self.dpdk_args(lcores, [vdev, self.rx_pcap()], ["-i", "--nb-cores=1", "--no-flush-rx"], prefix, huge),
                          stdin=subprocess.PIPE)

    def dpdk_receiver(self, lcores, vdev, prefix, huge):
        return self.start(self.dpdk_args(lcores, [vdev, self.tx_pcap()],
                                         ["--forward-mode=io", "--auto-start", "--nb-cores=1"], prefix, huge),
                          stdin=subprocess.PIPE)

    @staticmethod
    def say(p, *lines, pause=0.0):
        for line in lines:
            p.stdin.write(line + "\n")
            p.stdin.flush()
            time.sleep(pause)

    def send_all(self, p, timeout=30.0):
        """Starts interactive sender p (either program) and stops it once port 0 has sent all
        COUNT packets (asked with `show port stats 0`, whose layout both share), then quits."""
        self.say(p, "start")
        end = time.time() + timeout
        asked, sent = 0, 0
        while sent < COUNT and time.time() < end:
            time.sleep(0.2)
            self.say(p, "show port stats 0")
            asked += 1
            self.read_until(p, "TX-packets:", count=asked, timeout=5.0)
            counts = re.findall(r"TX-packets:\s+(\d+)", self.early.get(p.pid, ""))
            sent = int(counts[-1]) if counts else 0
        # The receiver polls: what the sender's ring holds is taken within microseconds, but it
        # must be taken before the sender's memory goes away with it.
        time.sleep(0.3)
        self.say(p, "stop", "quit")

    def run_dpdk_sender(self, p):
        # dpdk-testpmd's csum engine requests from the TX port what its offloads say; they
        # change only on a stopped port, which renegotiates CSUM with the peer on restart (let
        # the peer see the new rings before traffic starts).
        self.say(p, "port stop 0", "csum set tcp hw 0", "csum set udp hw 0", "port start 0", "set fwd csum")
        time.sleep(1.0)
        self.send_all(p)

    # ---- the verdict ----
    def check_delivered(self, context):
        out = testpmd_harness.read_pcap(self.pcap_out) if os.path.exists(self.pcap_out) else []
        self.assertEqual(len(out), COUNT, "{}: packets delivered".format(context))
        for k, (got, want) in enumerate(zip(out, self.frames)):
            self.assertEqual(got[12:], want[12:], "{}: packet {} differs behind the MAC addresses".format(context, k))
        r = subprocess.run([TSHARK, "-r", self.pcap_out, "-o", "ip.check_checksum:TRUE", "-o",
                            "tcp.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE", "-T", "fields",
                            "-e", "ip.checksum.status", "-e", "tcp.checksum.status", "-e", "udp.checksum.status"],
                           capture_output=True, text=True, check=True)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), COUNT, r.stderr)
        for k, line in enumerate(lines):
            verdicts = [v for v in line.split("\t") if v]
            self.assertTrue(verdicts and all(v == "1" for v in verdicts),
                            "{}: tshark's checksum verdicts for packet {}: {!r} (1 = good)".format(context, k, line))

    def check_ours(self, tag, out, rx=None, tx=None):
        s = self.summary(tag)
        self.check_side(s, out, tag)
        if rx is not None:
            self.assertEqual(s["ports"][0]["rx_packets"], rx, tag)
        if tx is not None:
            self.assertEqual(s["ports"][0]["tx_packets"], tx, tag)
        self.assertEqual(s["ports"][0]["rx_errors"] + s["ports"][0]["tx_errors"], 0, tag)
        return s


class OursWithOurs(OffloadBase):
    def virtio_user_to_vhost(self, vhost_dev, virtio_dev, context, receiver_app=()):
        """Our virtio_user (csum=1) sends the frames, our net_vhost receives them into the pcap."""
        rx = self.our_receiver(vp.VHOST_LCORES, vhost_dev, "vhost", 6, app=receiver_app)
        self.assertTrue(vp.wait_for_socket(self.sock, rx))
        tx = self.our_sender(vp.VIRTIO_LCORES, virtio_dev, "virtio")
        self.send_all(tx)
        tout, rout = self.finish(tx), self.stop_receiver(rx)
        self.check_ours("virtio", tout, tx=COUNT)
        self.check_ours("vhost", rout, rx=COUNT)
        self.assertTrue(negotiated(tout) & CSUM, tout[-2000:])
        self.check_delivered(context)

    def test_virtio_user_sends_vhost_completes(self):
        for packed in (0, 1):
            with self.subTest(packed=packed):
                self.virtio_user_to_vhost("net_vhost0,iface=" + self.sock,
                                          "virtio_user0,path={},csum=1,packed_vq={}".format(self.sock, packed),
                                          "virtio_user -> net_vhost, packed={}".format(packed))
                self.tearDown()
                self.setUp()

    def test_legacy_ol_flags_leave_checksums_to_the_next_port(self):
        """net_vhost legacy-ol-flags=1 (DPDK's legacy mode): the frontend's NEEDS_CSUM becomes a
        TX checksum request on the mbuf, and the pcap port the receiver forwards to (asked for
        checksum offloads, done in software) completes it: the pcap is right only if every
        request was turned into the right flags and lengths."""
        self.virtio_user_to_vhost("eth_vhost0,iface={},legacy-ol-flags=1".format(self.sock),
                                  "net_virtio_user0,path={},csum=1,packed_vq=1".format(self.sock),
                                  "virtio_user -> net_vhost legacy-ol-flags=1 -> pcap",
                                  receiver_app=["--tx-offloads=0xe"])

    def test_vhost_sends_virtio_user_completes(self):
        for packed in (0, 1):
            with self.subTest(packed=packed):
                tx = self.our_sender(vp.VHOST_LCORES, "net_vhost0,iface=" + self.sock, "vhost")
                self.assertTrue(vp.wait_for_socket(self.sock, tx))
                rx = self.our_receiver(vp.VIRTIO_LCORES, "virtio_user0,path={},csum=1,packed_vq={}".format(
                    self.sock, packed), "virtio", 4)
                time.sleep(1.0)
                self.send_all(tx)
                tout, rout = self.finish(tx), self.stop_receiver(rx)
                self.check_ours("vhost", tout, tx=COUNT)
                self.check_ours("virtio", rout, rx=COUNT)
                self.assertTrue(negotiated(rout) & GUEST_CSUM, rout[-2000:])
                self.check_delivered("net_vhost -> virtio_user, packed={}".format(packed))
                self.tearDown()
                self.setUp()


class OursWithDpdk(OffloadBase):
    def test_our_virtio_user_to_dpdk_vhost(self):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        rx = self.dpdk_receiver(vp.VHOST_LCORES, "net_vhost0,iface={}".format(self.sock),
                                "wsofh{}".format(os.getpid()), False)
        self.assertTrue(vp.wait_for_socket(self.sock, rx), "dpdk-testpmd did not create its socket")
        tx = self.our_sender(vp.VIRTIO_LCORES, "virtio_user0,path={},csum=1".format(self.sock), "virtio")
        self.send_all(tx)
        tout = self.finish(tx)
        self.say(rx, "")
        rout = self.finish(rx)
        self.check_ours("virtio", tout, tx=COUNT)
        self.assertTrue(negotiated(tout) & CSUM, tout[-2000:])
        self.assertTrue(negotiated(tout) & EVENT_IDX, "DPDK's vhost offers EVENT_IDX: we take it")
        self.assertEqual(vp.dpdk_totals(rout)[0], COUNT, rout[-3000:])
        self.check_delivered("our virtio_user -> DPDK net_vhost")

    def test_dpdk_vhost_to_our_virtio_user(self):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        tx = self.dpdk_sender(vp.VHOST_LCORES, "net_vhost0,iface={}".format(self.sock),
                              "wsofh{}".format(os.getpid()), False)
        self.assertTrue(vp.wait_for_socket(self.sock, tx), "dpdk-testpmd did not create its socket")
        rx = self.our_receiver(vp.VIRTIO_LCORES, "virtio_user0,path={},csum=1".format(self.sock), "virtio", 9)
        time.sleep(1.0)
        self.run_dpdk_sender(tx)
        tout = self.finish(tx)
        rout = self.stop_receiver(rx)
        self.check_ours("virtio", rout, rx=COUNT)
        self.assertTrue(negotiated(rout) & GUEST_CSUM, rout[-2000:])
        self.check_delivered("DPDK net_vhost -> our virtio_user\n" + tout[-2000:])

    def test_dpdk_virtio_user_to_our_vhost(self):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        with vp.Hugepages():
            rx = self.our_receiver(vp.VHOST_LCORES, "net_vhost0,iface=" + self.sock, "vhost", 9)
            self.assertTrue(vp.wait_for_socket(self.sock, rx))
            tx = self.dpdk_sender(vp.VIRTIO_LCORES, "virtio_user0,path={}".format(self.sock),
                                  "wsofu{}".format(os.getpid()), True)
            time.sleep(1.0)
            self.run_dpdk_sender(tx)
            tout = self.finish(tx)
            rout = self.stop_receiver(rx)
            self.check_ours("vhost", rout, rx=COUNT)
            self.assertTrue(negotiated(rout) & CSUM, "DPDK's virtio renegotiated CSUM\n" + rout[-2000:])
            self.check_delivered("DPDK virtio_user -> our net_vhost\n" + tout[-2000:])

    def test_our_vhost_to_dpdk_virtio_user(self):
        """DPDK's virtio PMD takes GUEST_CSUM only with RX checksum offload, and then leaves the
        checksum partial (RTE_MBUF_F_RX_L4_CKSUM_NONE): without it we complete in software."""
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        with vp.Hugepages():
            tx = self.our_sender(vp.VHOST_LCORES, "net_vhost0,iface=" + self.sock, "vhost")
            self.assertTrue(vp.wait_for_socket(self.sock, tx))
            rx = self.dpdk_receiver(vp.VIRTIO_LCORES, "virtio_user0,path={}".format(self.sock),
                                    "wsofu{}".format(os.getpid()), True)
            self.dpdk_forwards(rx, 0)  # connected and polling
            self.send_all(tx)
            tout = self.finish(tx)
            self.say(rx, "")
            rout = self.finish(rx)
            self.check_ours("vhost", tout, tx=COUNT)
            self.assertFalse(negotiated(tout) & GUEST_CSUM, "the software path is what this checks")
            self.assertEqual(vp.dpdk_totals(rout)[0], COUNT, rout[-3000:])
            self.check_delivered("our net_vhost -> DPDK virtio_user")


def main():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    vp.BINARY = os.path.abspath(args.binary)
    if not os.access(vp.BINARY, os.X_OK):
        sys.exit("not an executable: " + vp.BINARY)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
