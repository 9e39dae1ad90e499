#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""vhost-user pairs with real peers: wirespeed-testpmd's net_vhost and virtio_user against each
other (split and packed, in_order 0/1, mrg_rxbuf 0/1, 1 and 2 queue pairs, 64 B, 1500 B and
two-segment packets) and against Debian's dpdk-testpmd in both directions; a hostile frontend
written here (it speaks vhost-user, shares a memfd and posts each kind of bad descriptor, split
and packed) that must break only its own ring while another queue pair keeps forwarding;
EVENT_IDX interrupts following used_event; and lifecycle: a frontend killed and restarted, a
net_vhost client=1 reconnecting to virtio_user servers that exit or are killed, and a virtio_user
server=1 (split and packed rings) serving our and DPDK's client=1 backends that go away and come back,
with exact accounting of what a packed ring reset drops.

Tests needing root (hugepages for DPDK) or dpdk-testpmd skip when those are missing, but fail
when the CI environment variable is set.

usage: vhost_pair_test.py --binary PATH [unittest options]
"""
import json
import mmap
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import testpmd_harness

BINARY = None  # set from --binary by testpmd_harness.main
DPDK = shutil.which("dpdk-testpmd")
POOL = ["--total-num-mbufs=16384"]
VHOST_LCORES = ["--lcores", "0@0,1@0"]
VIRTIO_LCORES = ["--lcores", "0@1,1@1"]
CRASH_MARKERS = ["Sanitizer", "runtime error:", "Traceback", "Segmentation fault", "core dumped",
                 "terminate called", "Aborted"]
HUGEPAGES = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
# Seconds of traffic per pairing and per backend or frontend generation: the checks are counts
# that agree and thousands of packets, which half a second gives even under the sanitizers
# (hundreds of thousands there).
WINDOW = 0.5
# dpdk-testpmd's stdout is a pipe here, which stdio would buffer whole: line by line, the test sees
# when it starts forwarding (dpdk_forwards).
LINE_BUFFERED = ["stdbuf", "-oL"]


def wait_for_socket(path, proc, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def dpdk_totals(text):
    """RX/TX packets from dpdk-testpmd's accumulated forward statistics."""
    block = text.split("Accumulated forward statistics for all ports")[-1]
    rx = re.search(r"RX-packets:\s+(\d+)", block)
    tx = re.search(r"TX-packets:\s+(\d+)", block)
    return (int(rx.group(1)) if rx else None, int(tx.group(1)) if tx else None)


class Hugepages:
    """Reserve 2 MiB pages (and mount hugetlbfs) for dpdk-testpmd; restore on exit."""

    def __init__(self, pages=512):
        self.pages = pages
        self.before = None
        self.mounted = False

    def __enter__(self):
        with open(HUGEPAGES) as f:
            self.before = int(f.read())
        with open(HUGEPAGES, "w") as f:
            f.write(str(max(self.before, self.pages)))
        with open("/proc/mounts") as f:
            if not any(line.split()[2] == "hugetlbfs" for line in f if len(line.split()) > 2):
                os.makedirs("/dev/hugepages", exist_ok=True)
                subprocess.run(["mount", "-t", "hugetlbfs", "nodev", "/dev/hugepages"], check=True)
                self.mounted = True
        return self

    def __exit__(self, *exc):
        if self.mounted:
            subprocess.run(["umount", "/dev/hugepages"], check=False)
        with open(HUGEPAGES, "w") as f:
            f.write(str(self.before))


class PairBase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ws-vhost-")
        self.sock = os.path.join(self.tmp.name, "vhost0.sock")
        self.procs = []
        self.early = {}  # pid -> output read by read_until(), given back by finish()

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            for f in (p.stdin, p.stdout):
                if f is not None:
                    f.close()
        self.tmp.cleanup()
        for prefix in ("wsvh", "wsvu"):  # dpdk-testpmd's runtime directories of this test
            shutil.rmtree(os.path.join("/var/run/dpdk", "{}{}".format(prefix, os.getpid())), ignore_errors=True)

    def summary(self, name):
        path = os.path.join(self.tmp.name, name + ".json")
        with open(path) as f:
            return json.load(f)

    # Peers connect as soon as the socket exists, which may be before our side starts forwarding:
    # --no-flush-rx keeps what they sent by then, which dpdk-testpmd's start would discard.
    NO_FLUSH = ["--no-flush-rx"]

    def ours(self, lcores, vdev, app, summary, duration):
        return [BINARY, "--no-huge"] + lcores + ["--vdev", vdev, "--", "--summary-json",
                                                  os.path.join(self.tmp.name, summary + ".json"),
                                                  "--duration", str(duration)] + POOL + self.NO_FLUSH + app

    def start(self, args, stdin=None):
        p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def read_until(self, p, text, count=1, timeout=15.0):
        """Reads p's output while it runs until `text` appeared `count` times (False on timeout
        or exit); finish() returns what was read here too."""
        buf = self.early.get(p.pid, "")
        end = time.time() + timeout
        while buf.count(text) < count and time.time() < end:
            if select.select([p.stdout], [], [], 0.1)[0]:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk.decode(errors="replace")
        self.early[p.pid] = buf
        return buf.count(text) >= count

    def dpdk_forwards(self, p, seconds):
        """Lets dpdk-testpmd `p` (non-interactive, --auto-start) forward for `seconds` once it has
        started: it says "Press enter to exit" then. Its output is kept for finish()."""
        self.assertTrue(self.read_until(p, "Press enter to exit"), "dpdk-testpmd did not start forwarding")
        time.sleep(seconds)

    def finish(self, p, timeout=30):
        out, _ = p.communicate(timeout=timeout)
        out = self.early.pop(p.pid, "") + out
        for marker in CRASH_MARKERS:
            self.assertNotIn(marker, out, "{}\n{}".format(" ".join(p.args), out[-3000:]))
        return out

    def check_side(self, s, out, what):
        self.assertTrue(s["pool_audit_ok"], "{}: pool audit failed\n{}".format(what, out[-2000:]))
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, what)
        self.assertTrue(s["accounting_exact"], "{}: accounting\n{}".format(what, out[-2000:]))


class OursWithOurs(PairBase):
    """Two wirespeed-testpmd processes: vhost side io, virtio side mac --tx-first."""

    def pair(self, packed=0, in_order=1, mrg=1, queues=1, txpkts="64", queue_size=256):
        q = ["--rxq={}".format(queues), "--txq={}".format(queues)]
        vhost = self.start(self.ours(VHOST_LCORES, "net_vhost0,iface={},queues={}".format(self.sock, queues),
                                     ["--forward-mode=io", "--auto-start", "--nb-cores=1"] + q, "vhost", 5))
        self.assertTrue(wait_for_socket(self.sock, vhost), "the vhost side did not create its socket")
        dev = "virtio_user0,path={},queues={},packed_vq={},in_order={},mrg_rxbuf={},queue_size={}".format(
            self.sock, queues, packed, in_order, mrg, queue_size)
        virtio = self.start(self.ours(VIRTIO_LCORES, dev, ["--forward-mode=mac", "--auto-start", "--tx-first",
                                                          "--nb-cores=1", "--txpkts=" + txpkts] + q, "virtio",
                                          WINDOW))
        vout = self.finish(virtio)
        vhost.send_signal(signal.SIGINT)  # done once the virtio side is: stop it (its 5 s is a cap)
        hout = self.finish(vhost)
        self.assertEqual(virtio.returncode, 0, vout[-3000:])
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        vs, hs = self.summary("virtio"), self.summary("vhost")
        self.check_side(vs, vout, "virtio side")
        self.check_side(hs, hout, "vhost side")
        vp, hp = vs["ports"][0], hs["ports"][0]
        self.assertGreater(vp["rx_packets"], 10000, "too little traffic\n" + vout[-2000:] + hout[-2000:])
        # What one side sent the other received, but for what was still in the rings when the
        # virtio side stopped (at most one ring per queue).
        in_flight = queue_size * queues
        self.assertLessEqual(hp["rx_packets"], vp["tx_packets"])
        self.assertLessEqual(vp["tx_packets"] - hp["rx_packets"], in_flight)
        self.assertLessEqual(vp["rx_packets"], hp["tx_packets"])
        self.assertLessEqual(hp["tx_packets"] - vp["rx_packets"], in_flight)
        self.assertEqual(vp["rx_errors"] + hp["rx_errors"] + vp["tx_errors"] + hp["tx_errors"], 0)
        size = sum(int(x) for x in txpkts.split(","))
        self.assertEqual(vp["rx_bytes"], vp["rx_packets"] * size, "every packet came back whole")
        self.assertEqual(hp["rx_bytes"], hp["rx_packets"] * size)
        return vs, hs

    def test_matrix_64B_one_queue(self):
        for packed in (0, 1):
            for in_order in (0, 1):
                for mrg in (0, 1):
                    with self.subTest(packed=packed, in_order=in_order, mrg=mrg):
                        self.pair(packed=packed, in_order=in_order, mrg=mrg)
                        self.tearDown()
                        self.setUp()

    def test_two_queue_pairs(self):
        for packed in (0, 1):
            with self.subTest(packed=packed):
                self.pair(packed=packed, queues=2)
                self.tearDown()
                self.setUp()

    def test_large_and_multi_segment_packets(self):
        for packed, mrg, txpkts in ((0, 1, "1500"), (1, 1, "1500"), (0, 0, "1500"), (0, 1, "64,1400"),
                                    (1, 0, "64,1400")):
            with self.subTest(packed=packed, mrg=mrg, txpkts=txpkts):
                self.pair(packed=packed, mrg=mrg, txpkts=txpkts)
                self.tearDown()
                self.setUp()

    def test_client_mode_backend_and_server_mode_frontend(self):
        """virtio_user server=1 listens; net_vhost client=1 connects (and would reconnect)."""
        self.client_and_server("net_vhost0,iface={sock},client=1",
                               "virtio_user0,path={sock},queues=1,packed_vq=1,server=1")

    def test_dpdk_device_strings(self):
        """DPDK's own device strings (names, keys, values as DTS and DPDK's perf reports write
        them) on both of our sides."""
        vout, _, hs = self.client_and_server(
            "eth_vhost0,iface={sock},queues=1,client=1,iommu-support=0,postcopy-support=0,linear-buffer=1,"
            "ext-buffer=0,legacy-ol-flags=1",
            "net_virtio_user1,mac=00:01:02:03:04:05,path={sock},queues=1,packed_vq=1,mrg_rxbuf=1,in_order=1,"
            "server=1,cq=1,speed=25000,vectorized=1")
        self.assertIn("Port 0: 00:01:02:03:04:05", vout, "mac= is the port's address")
        self.assertEqual(hs["ports"][0]["rx_errors"], 0, "64 B packets fit one mbuf: nothing dropped as non-linear")

    def client_and_server(self, vhost_dev, virtio_dev):
        """Our virtio_user (its device string has server=1) first, then our net_vhost client=1."""
        virtio = self.start(self.ours(VIRTIO_LCORES, virtio_dev.format(sock=self.sock),
                                      ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1"],
                                      "virtio", WINDOW))
        self.assertTrue(wait_for_socket(self.sock, virtio), "virtio_user server=1 did not listen")
        vhost = self.start(self.ours(VHOST_LCORES, vhost_dev.format(sock=self.sock),
                                     ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "vhost", 5))
        vout = self.finish(virtio)
        vhost.send_signal(signal.SIGINT)  # done once the virtio side is: stop it (its 5 s is a cap)
        hout = self.finish(vhost)
        self.assertEqual(virtio.returncode, 0, vout[-3000:])
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        vs, hs = self.summary("virtio"), self.summary("vhost")
        self.check_side(vs, vout, "virtio side")
        self.check_side(hs, hout, "vhost side")
        self.assertGreater(vs["ports"][0]["rx_packets"], 10000, vout[-2000:] + hout[-2000:])
        return vout, vs, hs

    def test_packed_ring_of_odd_size(self):
        self.pair(packed=1, in_order=1, queue_size=100)


class OursWithDpdk(PairBase):
    """Debian's dpdk-testpmd on the other side, both directions."""

    def dpdk(self, lcores, vdev, app, prefix, huge):
        # --in-memory: no hugepage files or runtime directory are left behind.
        mem = ["-m", "512", "--in-memory"] if huge else ["--no-huge", "-m", "512"]
        return LINE_BUFFERED + [DPDK] + mem + lcores + ["--file-prefix=" + prefix, "--no-pci",
                                                        "--single-file-segments", "--vdev", vdev, "--"] + app + POOL

    def our_virtio_user_with_dpdk_vhost(self, vhost_dev, virtio_dev):
        """DPDK's vhost side io, ours mac --tx-first; counts agree but for one ring in flight.
        Returns our virtio side's output."""
        prefix = "wsvh{}".format(os.getpid())
        vhost = self.start(self.dpdk(VHOST_LCORES, vhost_dev.format(sock=self.sock),
                                     ["--forward-mode=io", "--auto-start", "--nb-cores=1"], prefix, False),
                           stdin=subprocess.PIPE)
        self.assertTrue(wait_for_socket(self.sock, vhost), "dpdk-testpmd did not create its socket")
        virtio = self.start(self.ours(VIRTIO_LCORES, virtio_dev.format(sock=self.sock),
                                      ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1"],
                                      "virtio", WINDOW))
        vout = self.finish(virtio)
        vhost.stdin.write("\n")
        vhost.stdin.flush()
        hout = self.finish(vhost)
        self.assertEqual(virtio.returncode, 0, vout[-3000:])
        vs = self.summary("virtio")
        self.check_side(vs, vout, "our virtio side")
        vp = vs["ports"][0]
        drx, dtx = dpdk_totals(hout)
        self.assertIsNotNone(drx, hout[-3000:])
        self.assertGreater(vp["rx_packets"], 1000, vout[-2000:] + hout[-2000:])
        self.assertLessEqual(vp["tx_packets"] - drx, 256)
        self.assertGreaterEqual(vp["tx_packets"], drx)
        self.assertLessEqual(dtx - vp["rx_packets"], 256)
        self.assertGreaterEqual(dtx, vp["rx_packets"])
        return vout

    def dpdk_virtio_user_with_our_vhost(self, vhost_dev, virtio_dev, queue_size):
        """Ours vhost side io, DPDK's virtio_user mac --tx-first (run under Hugepages())."""
        vhost = self.start(self.ours(VHOST_LCORES, vhost_dev.format(sock=self.sock),
                                     ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "vhost", 6))
        self.assertTrue(wait_for_socket(self.sock, vhost))
        prefix = "wsvu{}".format(os.getpid())
        virtio = self.start(self.dpdk(VIRTIO_LCORES, virtio_dev.format(sock=self.sock),
                                      ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1"],
                                      prefix, True),
                            stdin=subprocess.PIPE)
        self.dpdk_forwards(virtio, WINDOW)
        virtio.stdin.write("\n")
        virtio.stdin.flush()
        vout = self.finish(virtio)
        vhost.send_signal(signal.SIGINT)  # done once the virtio side is (its 6 s is a cap)
        hout = self.finish(vhost)
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        hs = self.summary("vhost")
        self.check_side(hs, hout, "our vhost side")
        hp = hs["ports"][0]
        drx, dtx = dpdk_totals(vout)
        self.assertIsNotNone(drx, vout[-3000:])
        self.assertGreater(hp["rx_packets"], 1000, vout[-2000:] + hout[-2000:])
        self.assertGreaterEqual(dtx, hp["rx_packets"])
        self.assertLessEqual(dtx - hp["rx_packets"], queue_size)
        self.assertGreaterEqual(hp["tx_packets"], drx)
        self.assertLessEqual(hp["tx_packets"] - drx, queue_size)
        return hs

    def test_our_virtio_user_with_dpdk_vhost(self):
        testpmd_harness.require(self, DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        for packed in (0, 1):
            with self.subTest(packed=packed):
                self.our_virtio_user_with_dpdk_vhost("net_vhost0,iface={sock},queues=1",
                                                     "virtio_user0,path={sock},queues=1,packed_vq=" + str(packed))
                self.tearDown()
                self.setUp()

    def test_dpdk_virtio_user_with_our_vhost(self):
        testpmd_harness.require(self, DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        with Hugepages():
            # queue_size=1024: dpdk-testpmd keeps at most 512 TX descriptors outstanding there (its
            # default --txd), so an in-order backend that held used descriptors back until the
            # ring filled would stop the traffic after 512 packets.
            for packed, queue_size in ((0, 256), (1, 256), (1, 1024)):
                with self.subTest(packed=packed, queue_size=queue_size):
                    dev = "virtio_user0,path={{sock}},queues=1,packed_vq={},in_order=1,queue_size={}".format(
                        packed, queue_size)
                    self.dpdk_virtio_user_with_our_vhost("net_vhost0,iface={sock},queues=1", dev, queue_size)
                    self.tearDown()
                    self.setUp()

    # DPDK's device strings as its users' scripts and test plans (DTS vhost/virtio PVP, DPDK perf
    # reports) write them, given unchanged to both programs: the net_virtio_user and eth_vhost
    # names, mac=, cq=, speed=, vectorized=, and net_vhost's DPDK-only keys.
    DPDK_VIRTIO_USER = ("net_virtio_user1,mac=00:01:02:03:04:05,path={sock},queues=1,packed_vq=1,mrg_rxbuf=1,"
                        "in_order=1")

    def test_dpdk_device_strings_with_dpdk_vhost(self):
        testpmd_harness.require(self, DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        vout = self.our_virtio_user_with_dpdk_vhost("eth_vhost0,iface={sock},queues=1",
                                                    self.DPDK_VIRTIO_USER + ",cq=1,speed=25000,vectorized=1")
        self.assertIn("Port 0: 00:01:02:03:04:05", vout, "mac= is the port's address")

    def test_dpdk_device_strings_with_dpdk_virtio_user(self):
        testpmd_harness.require(self, DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        vhost = ("eth_vhost0,iface={sock},queues=1,client=0,iommu-support=0,postcopy-support=0,tso=0,"
                 "linear-buffer=1,ext-buffer=0,legacy-ol-flags=1")
        with Hugepages():
            hs = self.dpdk_virtio_user_with_our_vhost(vhost, self.DPDK_VIRTIO_USER, 256)
        self.assertEqual(hs["ports"][0]["rx_errors"], 0, "64 B packets fit one mbuf: nothing dropped as non-linear")


# ---- a hostile vhost-user frontend ----

GUEST = 0x10000000  # guest and user address of our one region
REGION = 1 << 20
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4
V1, INDIRECT, EVENT_IDX = 1 << 32, 1 << 28, 1 << 29


def store16(mem, offset, value):
    """One 16-bit store, for what the device polls. struct.pack_into writes byte by byte: an index
    going from 0x01ff to 0x0200 is 0x0100 for a moment, and the device rightly calls that a jump
    (a C++ stress of SplitDevice against byte-wise stores hit it within a second)."""
    with memoryview(mem) as m, m.cast("H") as h:
        h[offset // 2] = value


class Frontend:
    """Speaks vhost-user from Python: one memfd region, split rings of 256 at fixed offsets."""

    N = 256
    BASE = 0  # SET_VRING_BASE

    def __init__(self, path, rings=4, features=V1 | INDIRECT):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)  # a backend that stops answering fails the test instead of hanging it
        self.s.connect(path)
        self.fd = os.memfd_create("hostile")
        os.ftruncate(self.fd, REGION)
        self.mem = mmap.mmap(self.fd, REGION)
        self.rings = rings
        self.avail_idx = [0] * rings
        self.fds = []
        self.send(3)  # SET_OWNER
        self.send(1)  # GET_FEATURES
        offered = struct.unpack("<Q", self.reply(1, 8))[0]
        assert offered & V1, hex(offered)
        self.send(2, struct.pack("<Q", features & offered))
        self.send(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", GUEST, REGION, GUEST, 0), [self.fd])
        for r in range(rings):
            self.send(8, struct.pack("<II", r, self.N))
            self.send(10, struct.pack("<II", r, self.ring_base(r)))
            d, a, u = self.ring(r)
            self.send(9, struct.pack("<IIQQQQ", r, 0, GUEST + d, GUEST + u, GUEST + a, 0))
            for req in (13, 12):  # CALL, then KICK (starts the ring)
                efd = os.eventfd(0)
                self.fds.append(efd)
                self.send(req, struct.pack("<Q", r), [efd])
        for r in range(rings):
            self.send(18, struct.pack("<II", r, 1))

    def ring_base(self, r):
        """The base SET_VRING_BASE sends for ring r, just before the ring is set up (a subclass may
        lay the ring's indices out here, as a frontend whose rings ran on would have them)."""
        return self.BASE

    def sync(self):
        """Returns once the backend has handled every message sent before: it answers one
        connection's messages in order, so a GET_FEATURES reply means the rest are done."""
        self.send(1)
        self.reply(1, 8)

    def close(self):
        self.s.close()
        self.mem.close()
        for fd in self.fds + [self.fd]:
            os.close(fd)

    def send(self, request, payload=b"", fds=()):
        msg = struct.pack("<III", request, 1, len(payload)) + payload
        if fds:
            socket.send_fds(self.s, [msg], list(fds))
        else:
            self.s.sendall(msg)

    def reply(self, request, size):
        data = b""
        while len(data) < 12 + size:
            chunk = self.s.recv(12 + size - len(data))
            if not chunk:
                raise ConnectionError("backend closed the connection")
            data += chunk
        req, flags, n = struct.unpack("<III", data[:12])
        assert req == request and n == size, (req, flags, n)
        return data[12:]

    @staticmethod
    def ring(r):
        base = 0x4000 * r
        return base, base + 0x1000, base + 0x2000  # desc, avail, used

    def buf(self, i):
        return 0x40000 + 0x800 * i  # offset of buffer i (2 KiB each)

    def desc(self, r, i, addr, length, flags, nxt):
        struct.pack_into("<QIHH", self.mem, self.ring(r)[0] + 16 * i, addr, length, flags, nxt)

    def offer(self, r, head):
        _, a, _ = self.ring(r)
        store16(self.mem, a + 4 + 2 * (self.avail_idx[r] % self.N), head)
        self.avail_idx[r] += 1
        store16(self.mem, a + 2, self.avail_idx[r] & 0xffff)

    def set_avail_idx(self, r, idx):
        store16(self.mem, self.ring(r)[1] + 2, idx)

    def used_idx(self, r):
        return struct.unpack_from("<H", self.mem, self.ring(r)[2] + 2)[0]

    def good_traffic(self, rx_ring, tx_ring, count):
        """count RX buffers on rx_ring, count 64-byte packets on tx_ring; wait for them to come back."""
        for i in range(count):
            d = 100 + i
            self.desc(rx_ring, d, GUEST + self.buf(i), 2048, F_WRITE, 0)
            self.offer(rx_ring, d)
        for i in range(count):
            d = 100 + i
            off = self.buf(count + i)
            self.mem[off:off + 12] = bytes(12)
            self.mem[off + 12:off + 76] = bytes([0x02] * 6 + [0x04] * 6) + bytes(52)
            self.desc(tx_ring, d, GUEST + off, 76, 0, 0)
            self.offer(tx_ring, d)
        end = time.time() + 5
        while time.time() < end:
            if self.used_idx(rx_ring) >= count:
                return True
            time.sleep(0.01)
        return False


def hostile_cases(fe):
    """(name, xstat, action) for each bad descriptor on ring 1 (the frontend's TX ring of pair 0)."""
    T = 1
    table = 0x80000  # an indirect table in the region

    def head_out_of_range():
        fe.offer(T, 256)

    def next_out_of_range():
        fe.desc(T, 0, GUEST + fe.buf(0), 64, F_NEXT, 999)
        fe.offer(T, 0)

    def loop():
        fe.desc(T, 0, GUEST + fe.buf(0), 8, F_NEXT, 1)
        fe.desc(T, 1, GUEST + fe.buf(0), 8, F_NEXT, 0)
        fe.offer(T, 0)

    def outside():
        fe.desc(T, 0, 0x1000, 64, 0, 0)
        fe.offer(T, 0)

    def crossing_end():
        fe.desc(T, 0, GUEST + REGION - 16, 64, 0, 0)
        fe.offer(T, 0)

    def overflow():
        fe.desc(T, 0, (1 << 64) - 8, 64, 0, 0)
        fe.offer(T, 0)

    def zero_len_bogus():
        fe.desc(T, 0, 0xdead0000, 0, 0, 0)
        fe.offer(T, 0)

    def indirect_len():
        fe.desc(T, 0, GUEST + table, 20, F_INDIRECT, 0)
        fe.offer(T, 0)

    def indirect_nested():
        struct.pack_into("<QIHH", fe.mem, table, GUEST + table, 16, F_INDIRECT, 0)
        fe.desc(T, 0, GUEST + table, 16, F_INDIRECT, 0)
        fe.offer(T, 0)

    def indirect_next():
        struct.pack_into("<QIHH", fe.mem, table, GUEST + fe.buf(0), 64, 0, 0)
        fe.desc(T, 0, GUEST + table, 16, F_INDIRECT | F_NEXT, 1)
        fe.desc(T, 1, GUEST + fe.buf(0), 64, 0, 0)
        fe.offer(T, 0)

    def indirect_too_big():
        fe.desc(T, 0, GUEST + table, 16 * 300, F_INDIRECT, 0)
        fe.offer(T, 0)

    def avail_jump():
        fe.set_avail_idx(T, 1000)

    def read_after_write():
        fe.desc(T, 0, GUEST + fe.buf(0), 64, F_WRITE | F_NEXT, 1)
        fe.desc(T, 1, GUEST + fe.buf(1), 64, 0, 0)
        fe.offer(T, 0)

    return [("head_out_of_range", "rx_q0_head_out_of_range", head_out_of_range),
            ("next_out_of_range", "rx_q0_next_out_of_range", next_out_of_range),
            ("loop", "rx_q0_too_many_segments", loop),
            ("outside", "rx_q0_bad_address", outside),
            ("crossing_end", "rx_q0_bad_address", crossing_end),
            ("overflow", "rx_q0_bad_address", overflow),
            ("zero_len_bogus", "rx_q0_bad_address", zero_len_bogus),
            ("indirect_len", "rx_q0_indirect_bad_length", indirect_len),
            ("indirect_too_big", "rx_q0_indirect_bad_length", indirect_too_big),
            ("indirect_nested", "rx_q0_indirect_nested", indirect_nested),
            ("indirect_next", "rx_q0_indirect_with_next", indirect_next),
            ("avail_jump", "rx_q0_avail_index_jump", avail_jump),
            ("read_after_write", "rx_q0_read_after_write", read_after_write)]


PACKED = 1 << 34
P_AVAIL, P_USED = 1 << 7, 1 << 15  # packed descriptor flags (virtio 1.2 §2.8.1)


class PackedFrontend(Frontend):
    """The same frontend with packed rings (§2.8): descriptor ring, driver event area, device event
    area in the desc/avail/used slots; wrap counters start at 1, only the first lap is used."""

    BASE = 0x8000  # avail index 0, wrap counter 1

    def __init__(self, path, rings=4, features=V1 | INDIRECT | PACKED):
        self.pos = [0] * rings  # next descriptor the driver makes available, per ring
        super().__init__(path, rings, features)

    def pdesc(self, r, i, addr, length, ident, flags):
        """Writes descriptor i; `flags` already carries AVAIL/USED as the test wants them."""
        struct.pack_into("<QIH", self.mem, self.ring(r)[0] + 16 * i, addr, length, ident)
        store16(self.mem, self.ring(r)[0] + 16 * i + 14, flags)

    def chain(self, r, descs):
        """Makes (addr, len, id, flags) descriptors available at the ring's position, the first
        one last (§2.8.6); AVAIL is added to every flags value unless it has P_USED."""
        at = self.pos[r]
        for k in reversed(range(len(descs))):
            addr, length, ident, flags = descs[k]
            self.pdesc(r, (at + k) % self.N, addr, length, ident, flags if flags & P_USED else flags | P_AVAIL)
        self.pos[r] += len(descs)

    def used_count(self, r, upto):
        """How many of the first `upto` descriptor slots the device has marked used (wrap 1)."""
        base = self.ring(r)[0]
        return sum(1 for i in range(upto)
                   if struct.unpack_from("<H", self.mem, base + 16 * i + 14)[0] & (P_AVAIL | P_USED) ==
                   P_AVAIL | P_USED)

    def good_traffic(self, rx_ring, tx_ring, count):
        for i in range(count):
            self.chain(rx_ring, [(GUEST + self.buf(i), 2048, i, F_WRITE)])
        for i in range(count):
            off = self.buf(count + i)
            self.mem[off:off + 12] = bytes(12)
            self.mem[off + 12:off + 76] = bytes([0x02] * 6 + [0x04] * 6) + bytes(52)
            self.chain(tx_ring, [(GUEST + off, 76, i, 0)])
        end = time.time() + 5
        while time.time() < end:
            if self.used_count(rx_ring, count) == count:
                return True
            time.sleep(0.01)
        return False


def packed_hostile_cases(fe):
    """(name, xstat, action) for each bad packed chain on ring 1 (the frontend's TX ring of pair 0)."""
    T = 1
    table = 0x80000
    ok = 0 if fe is None else GUEST + fe.buf(0)

    def put_table(*entries):
        for k, (addr, length, flags) in enumerate(entries):
            struct.pack_into("<QIHH", fe.mem, table + 16 * k, addr, length, 0, flags)

    cases = [
        ("bad_id", "rx_q0_packed_bad_id", lambda: fe.chain(T, [(ok, 64, 300, 0)])),
        ("bad_wrap", "rx_q0_packed_bad_wrap",  # second descriptor still marked for the last lap
         lambda: fe.chain(T, [(ok, 32, 0, F_NEXT), (ok, 32, 0, P_USED | P_AVAIL)])),
        ("outside", "rx_q0_bad_address", lambda: fe.chain(T, [(0x1000, 64, 0, 0)])),
        ("crossing_end", "rx_q0_bad_address", lambda: fe.chain(T, [(GUEST + REGION - 16, 64, 0, 0)])),
        ("overflow", "rx_q0_bad_address", lambda: fe.chain(T, [((1 << 64) - 8, 64, 0, 0)])),
        ("longer_than_ring", "rx_q0_too_many_segments", lambda: fe.chain(T, [(ok, 8, 0, F_NEXT)] * fe.N)),
        ("indirect_len", "rx_q0_indirect_bad_length", lambda: fe.chain(T, [(GUEST + table, 20, 0, F_INDIRECT)])),
        ("indirect_too_big", "rx_q0_indirect_bad_length",
         lambda: fe.chain(T, [(GUEST + table, 16 * 300, 0, F_INDIRECT)])),
        ("indirect_nested", "rx_q0_indirect_nested",
         lambda: (put_table((GUEST + table, 16, F_INDIRECT)), fe.chain(T, [(GUEST + table, 16, 0, F_INDIRECT)]))),
        ("indirect_next_inside", "rx_q0_indirect_with_next",
         lambda: (put_table((ok, 32, F_NEXT), (ok, 32, 0)), fe.chain(T, [(GUEST + table, 32, 0, F_INDIRECT)]))),
        ("indirect_with_next", "rx_q0_indirect_with_next",
         lambda: fe.chain(T, [(GUEST + table, 16, 0, F_INDIRECT | F_NEXT), (ok, 64, 0, 0)])),
        ("read_after_write", "rx_q0_read_after_write",
         lambda: fe.chain(T, [(ok, 64, 0, F_WRITE | F_NEXT), (ok, 64, 0, 0)])),
    ]
    return cases


class HostileFrontend(PairBase):
    def run_cases(self, frontend, cases, bad_message):
        """One connection per bad chain from cases(fe) on ring 1; pair 1 must keep forwarding, the
        process must survive, and each refusal must show in the port's xstats at the end."""
        vhost = self.start([BINARY, "--no-huge"] + VHOST_LCORES +
                           ["--vdev", "net_vhost0,iface={},queues=2".format(self.sock), "--",
                            "--summary-json", os.path.join(self.tmp.name, "vhost.json"), "-i",
                            "--forward-mode=io", "--auto-start", "--nb-cores=1", "--rxq=2", "--txq=2"] + POOL +
                           self.NO_FLUSH,
                           stdin=subprocess.PIPE)
        self.assertTrue(wait_for_socket(self.sock, vhost))
        expected = {}
        names = []
        for name, xstat, _ in cases(None):
            names.append(name)
            expected[xstat] = expected.get(xstat, 0) + 1
        for k, name in enumerate(names):
            # One connection per case: the ring stays broken (sticky) until the frontend goes.
            fe = frontend(self.sock)
            # Traffic once the backend says the device is up (its link event: up at each
            # connection, down at each close), as a guest sends once the device is live.
            self.assertTrue(self.read_until(vhost, "link state change event", count=2 * k + 1),
                            "{}: the backend never reported the device up".format(name))
            dict((n, a) for n, _, a in cases(fe))[name]()
            # Pair 1 (rings 2 and 3) must keep forwarding while ring 1 is broken.
            self.assertTrue(fe.good_traffic(2, 3, 32), "{}: the good queue pair stopped forwarding".format(name))
            self.assertIsNone(vhost.poll(), "{}: the backend died".format(name))
            fe.close()
            time.sleep(0.3)  # the backend notices the disconnect
        if bad_message:
            # A bad message (ring index beyond the rings) closes the connection, not the process.
            fe = frontend(self.sock)
            fe.send(8, struct.pack("<II", 9, 256))
            time.sleep(0.2)
            fe.close()
        vhost.stdin.write("show port xstats 0\nquit\n")
        vhost.stdin.flush()
        out = self.finish(vhost)
        self.assertEqual(vhost.returncode, 0, out[-3000:])
        xstats = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\w+): (\d+)$", out, re.M))
        for xstat, count in expected.items():
            self.assertEqual(xstats.get(xstat), count, "{}\n{}".format(xstat, out[-3000:]))
        self.assertEqual(xstats.get("tx_q1_broken"), 0)
        self.assertEqual(xstats.get("rx_q1_broken"), 0)
        self.assertIn("ring 1 was broken by the frontend", out)
        if bad_message:
            self.assertIn("expected a ring below 4", out)
        s = self.summary("vhost")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertGreaterEqual(s["ports"][0]["rx_packets"], 32 * len(names))

    def test_each_bad_descriptor_breaks_only_its_ring(self):
        self.run_cases(Frontend, hostile_cases, True)

    def test_each_bad_packed_chain_breaks_only_its_ring(self):
        self.run_cases(PackedFrontend, packed_hostile_cases, False)


def read_eventfd(fd, wait_s=2.0):
    """The count an eventfd (non-blocking) holds, waiting up to wait_s for a signal (the backend's
    notifier thread writes it shortly after the used index moves); 0 when none came."""
    select.select([fd], [], [], wait_s)
    try:
        return struct.unpack("<Q", os.read(fd, 8))[0]
    except BlockingIOError:
        return 0


class EventIdx(PairBase):
    # Asked of the backend's prompt when a round fails: where the missing packets went.
    DIAGNOSTICS = "show fwd stats all\nshow port stats all\nshow port xstats all\n"

    def test_interrupts_follow_used_event(self):
        """With EVENT_IDX the backend interrupts when the used index passes the driver's used_event
        and not otherwise (virtio 1.2 §2.7.10); without it, whenever interrupts are not suppressed.
        On a failure, the frontend's ring indices and the backend's forward stats, port stats and
        xstats (asked at its prompt at that moment) are printed."""
        # Interactive (-i --auto-start) so the prompt can be asked; ended by `quit` once both
        # frontends are done: a slow machine must not see the backend leave in the middle.
        vhost = self.start([BINARY, "--no-huge"] + VHOST_LCORES +
                           ["--vdev", "net_vhost0,iface={},queues=1".format(self.sock), "--", "-i",
                            "--summary-json", os.path.join(self.tmp.name, "vhost.json")] + POOL +
                           ["--forward-mode=io", "--auto-start", "--nb-cores=1"] + self.NO_FLUSH, stdin=subprocess.PIPE)
        self.assertTrue(wait_for_socket(self.sock, vhost))
        failures = []
        for features, later in ((V1 | EVENT_IDX, 0), (V1, 1)):
            with self.subTest(event_idx=bool(features & EVENT_IDX)):
                fe = Frontend(self.sock, rings=2, features=features)
                try:
                    self.two_rounds(fe, features, later)
                except AssertionError:
                    failures.append("event_idx={}: frontend RX ring 0 avail {} used {}, TX ring 1 avail {} used {}"
                                    .format(bool(features & EVENT_IDX), fe.avail_idx[0], fe.used_idx(0),
                                            fe.avail_idx[1], fe.used_idx(1)))
                    vhost.stdin.write(self.DIAGNOSTICS)
                    vhost.stdin.flush()
                    raise
                finally:
                    fe.close()
                time.sleep(0.3)  # the backend notices the disconnect before the next frontend
        vhost.stdin.write("quit\n")
        vhost.stdin.flush()
        out = self.finish(vhost)
        if failures:  # the subtests failed already; this tells where the packets went
            print("\n".join(["EventIdx diagnostics:"] + failures + ["backend output (prompt answers at the failure):",
                                                                     out[-12000:]]), file=sys.stderr)
        self.assertEqual(vhost.returncode, 0, out[-3000:])
        s = self.summary("vhost")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)

    def two_rounds(self, fe, features, later):
        call = fe.fds[0]  # ring 0 (the frontend's RX ring): its call eventfd
        os.set_blocking(call, False)
        used_event = fe.ring(0)[1] + 4 + 2 * fe.N
        struct.pack_into("<H", fe.mem, used_event, 9)  # interrupt once used idx passes 9
        self.assertTrue(fe.good_traffic(0, 1, 16), hex(features))
        self.assertGreaterEqual(read_eventfd(call), 1, "used idx 0 -> 16 passed used_event 9")
        struct.pack_into("<H", fe.mem, used_event, 100)
        fe.good_traffic(0, 1, 16)
        end = time.time() + 5
        while fe.used_idx(0) < 32 and time.time() < end:
            time.sleep(0.01)
        self.assertEqual(fe.used_idx(0), 32)
        # Expecting none: a short wait, long enough for a notifier that wrongly signals.
        self.assertEqual(min(read_eventfd(call, 2.0 if later else 0.3), 1), later, "used idx 16 -> 32, used_event 100")


class Lifecycle(PairBase):
    def test_frontend_killed_and_restarted(self):
        """The virtio side is killed mid-traffic, comes back and forwards again; no mbuf is lost."""
        vhost = self.start(self.ours(VHOST_LCORES, "net_vhost0,iface={},queues=1".format(self.sock),
                                     ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "vhost", 9))
        self.assertTrue(wait_for_socket(self.sock, vhost))
        dev = "virtio_user0,path={},queues=1,packed_vq=1".format(self.sock)
        first = self.start(self.ours(VIRTIO_LCORES, dev, ["--forward-mode=mac", "--auto-start", "--tx-first",
                                                         "--nb-cores=1"], "first", 30))
        time.sleep(WINDOW)
        first.send_signal(signal.SIGKILL)
        first.wait()
        time.sleep(0.5)
        second = self.start(self.ours(VIRTIO_LCORES, dev, ["--forward-mode=mac", "--auto-start", "--tx-first",
                                                          "--nb-cores=1"], "second", WINDOW))
        sout = self.finish(second)
        vhost.send_signal(signal.SIGINT)  # done once the second frontend is (its 9 s is a cap)
        hout = self.finish(vhost)
        self.assertEqual(second.returncode, 0, sout[-3000:])
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        ss, hs = self.summary("second"), self.summary("vhost")
        self.check_side(ss, sout, "restarted virtio side")
        self.assertTrue(hs["pool_audit_ok"], hout[-2000:])
        self.assertEqual(hs["mbufs_in_use_at_exit"], 0)
        self.assertGreater(ss["ports"][0]["rx_packets"], 10000, sout[-2000:] + hout[-2000:])

    def test_client_backend_reconnects(self):
        """net_vhost client=1 serves one virtio_user server=1 after another: the first exits, the
        second is killed mid-traffic, the third forwards; no mbuf is lost on either side."""
        vhost = None
        for k, fate in enumerate(("exits", "killed", "verified")):
            dev = "virtio_user0,path={},queues=1,packed_vq={},server=1".format(self.sock, k % 2)
            tag = "front{}".format(k)
            front = self.start(self.ours(VIRTIO_LCORES, dev, ["--forward-mode=mac", "--auto-start", "--tx-first",
                                                             "--nb-cores=1"], tag, 30 if fate == "killed" else WINDOW))
            self.assertTrue(wait_for_socket(self.sock, front), "{}: virtio_user server=1 did not listen".format(tag))
            if vhost is None:
                vhost = self.start(self.ours(VHOST_LCORES, "net_vhost0,iface={},client=1".format(self.sock),
                                             ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "vhost", 10))
            if fate == "killed":
                time.sleep(WINDOW)
                front.send_signal(signal.SIGKILL)
                front.wait()
                continue
            out = self.finish(front)
            self.assertEqual(front.returncode, 0, out[-3000:])
            s = self.summary(tag)
            self.check_side(s, out, tag)
            self.assertGreater(s["ports"][0]["rx_packets"], 10000, "{}: the backend did not come (back)\n{}".format(
                tag, out[-2000:]))
        vhost.send_signal(signal.SIGINT)  # done once the last frontend is (its 10 s is a cap)
        hout = self.finish(vhost)
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        hs = self.summary("vhost")
        self.assertTrue(hs["pool_audit_ok"], hout[-2000:])
        self.assertEqual(hs["mbufs_in_use_at_exit"], 0)

    # Ring layouts the server-mode frontend runs with while its backends come and go: split rings
    # resume at their used index; packed rings are reset for each new backend.
    RING_VARIANTS = (("split", 0, 1), ("packed in order", 1, 1), ("packed", 1, 0))
    QUEUE_SIZE = 256

    def check_reset_drops(self, front, fout, packed, resets, what):
        """Split rings lose nothing to a backend restart; a packed ring reset frees the TX packets
        the old backend never completed and counts them (TX errors, and the number in the reset's
        log line), at most a ring's worth each. The frontend's stop, with no backend left to send
        them, drops and counts what its TX ring still held: the rest of the TX errors, at most a
        ring's worth."""
        p = front["ports"][0]
        reset_lines = re.findall(r"packed rings reset for the new backend; (\d+) TX packets", fout)
        reset_dropped = sum(int(n) for n in reset_lines)
        if not packed:
            self.assertEqual(reset_dropped, 0, what)
        else:
            self.assertGreater(reset_dropped, 0, "{}: a reset with a full TX ring dropped nothing".format(what))
            self.assertLessEqual(reset_dropped, resets * self.QUEUE_SIZE, what)
        stop_dropped = p["tx_errors"] - reset_dropped
        self.assertGreaterEqual(stop_dropped, 0, what)
        self.assertLessEqual(stop_dropped, self.QUEUE_SIZE, what)
        self.assertEqual(p["rx_errors"], 0, what)

    def for_each_ring_variant(self, check, prefix=""):
        """Runs check(name, packed, in_order) once for each of RING_VARIANTS, each as a subtest."""
        for variant, packed, in_order in self.RING_VARIANTS:
            with self.subTest(variant):
                check(prefix + variant.replace(" ", "_"), packed, in_order)

    def start_server_frontend(self, name, packed, in_order, duration):
        """Starts our virtio_user server=1 generating (flowgen) as name_front; returns it once it listens."""
        dev = "virtio_user0,path={},queues=1,server=1,packed_vq={},in_order={},queue_size={}".format(
            self.sock, packed, in_order, self.QUEUE_SIZE)
        front = self.start(self.ours(VIRTIO_LCORES + ["--log-level", "info"], dev,
                                     ["--forward-mode=flowgen", "--auto-start", "--nb-cores=1"],
                                     name + "_front", duration))
        self.assertTrue(wait_for_socket(self.sock, front), "virtio_user server=1 did not listen")
        return front

    def test_server_frontend_serves_a_backend_that_comes_back(self):
        """virtio_user server=1 keeps its rings while net_vhost client=1 backends come and go: the
        first exits, the second is killed mid-traffic, the third forwards both ways. Split rings
        resume, packed rings (in order or not) are reset with what the old backend held freed and
        counted. The virtio side generates (flowgen), so traffic does not depend on packets that
        were inside a backend when it went away."""
        self.for_each_ring_variant(self.serve_backends_that_come_back)

    def serve_backends_that_come_back(self, name, packed, in_order):
        front = self.start_server_frontend(name, packed, in_order, 30)
        for k, fate in enumerate(("exits", "killed", "verified")):
            tag = "{}_back{}".format(name, k)
            back = self.start(self.ours(VHOST_LCORES, "net_vhost0,iface={},client=1".format(self.sock),
                                        ["--forward-mode=io", "--auto-start", "--nb-cores=1"], tag,
                                        30 if fate == "killed" else WINDOW))
            if fate == "killed":
                # Killed once it serves the frontend's rings (a slow machine may start it late).
                self.assertTrue(self.read_until(front, "the vhost backend is back"), "{}: did not connect".format(tag))
                time.sleep(WINDOW)
                back.send_signal(signal.SIGKILL)
                back.wait()
                continue
            out = self.finish(back)
            self.assertEqual(back.returncode, 0, out[-3000:])
            s = self.summary(tag)
            self.assertTrue(s["pool_audit_ok"], out[-2000:])
            self.assertEqual(s["mbufs_in_use_at_exit"], 0, tag)
            p = s["ports"][0]
            self.assertGreater(p["rx_packets"], 10000, "{}: the frontend's TX ring did not resume".format(tag))
            self.assertGreater(p["tx_packets"], 10000, "{}: the frontend's RX ring did not resume".format(tag))
        front.send_signal(signal.SIGINT)  # done once the last backend is (its 30 s is a cap)
        fout = self.finish(front)
        self.assertEqual(front.returncode, 0, fout[-3000:])
        fs = self.summary(name + "_front")
        self.check_side(fs, fout, "virtio_user server=1 " + name)
        self.assertEqual(fout.count("the vhost backend is back"), 2, fout[-3000:])
        self.assertEqual(fout.count("packed rings reset for the new backend"), 2 if packed else 0, fout[-3000:])
        self.check_reset_drops(fs, fout, packed, 2, name)

    def test_server_frontend_accounts_exactly_across_backend_restarts(self):
        """Two net_vhost client=1 backends that each exit cleanly, one after the other: every packet
        the frontend received, a backend sent; every packet the frontend's TX ring took, a backend
        received, or the ring reset dropped and counted it (packed), or the frontend's stop did
        (what the ring still held, with no backend left to send it)."""
        self.for_each_ring_variant(self.account_exactly_across_backend_restarts, prefix="exact_")

    def account_exactly_across_backend_restarts(self, name, packed, in_order):
        front = self.start_server_frontend(name, packed, in_order, 30)
        backs = []
        for k in range(2):
            tag = "{}_back{}".format(name, k)
            back = self.start(self.ours(VHOST_LCORES, "net_vhost0,iface={},client=1".format(self.sock),
                                        ["--forward-mode=io", "--auto-start", "--nb-cores=1"], tag, WINDOW))
            out = self.finish(back)
            self.assertEqual(back.returncode, 0, out[-3000:])
            backs.append(self.summary(tag))
            self.check_side(backs[-1], out, tag)
        front.send_signal(signal.SIGINT)  # done once the last backend is (its 30 s is a cap)
        fout = self.finish(front)
        self.assertEqual(front.returncode, 0, fout[-3000:])
        fs = self.summary(name + "_front")
        self.check_side(fs, fout, name)
        self.assertEqual(fout.count("the vhost backend is back"), 1, fout[-3000:])
        self.check_reset_drops(fs, fout, packed, 1, name)
        f = fs["ports"][0]
        received = sum(b["ports"][0]["rx_packets"] for b in backs)
        sent = sum(b["ports"][0]["tx_packets"] for b in backs)
        self.assertGreater(min(b["ports"][0]["rx_packets"] for b in backs), 10000, name)
        self.assertEqual(f["rx_packets"], sent, name)
        self.assertEqual(f["tx_packets"], received + f["tx_errors"], name)

    def test_server_frontend_with_dpdk_backends_that_come_back(self):
        """The same with DPDK's net_vhost client=1 as the backend: one stops, the next forwards;
        split rings resume, packed rings are reset."""
        testpmd_harness.require(self, DPDK, "dpdk-testpmd is not installed (scripts/install-deps)")
        self.for_each_ring_variant(self.serve_dpdk_backends_that_come_back)

    def serve_dpdk_backends_that_come_back(self, name, packed, in_order):
        front = self.start_server_frontend(name, packed, in_order, 30)
        for k in range(2):
            back = self.start(LINE_BUFFERED + [DPDK, "--no-huge", "-m", "512"] + VHOST_LCORES +
                              ["--file-prefix=wsvh{}".format(os.getpid()), "--no-pci", "--single-file-segments",
                               "--vdev", "net_vhost0,iface={},client=1".format(self.sock), "--",
                               "--forward-mode=io", "--auto-start", "--nb-cores=1"] + POOL, stdin=subprocess.PIPE)
            self.dpdk_forwards(back, WINDOW)
            back.stdin.write("\n")
            back.stdin.flush()
            out = self.finish(back)
            drx, dtx = dpdk_totals(out)
            self.assertIsNotNone(drx, out[-3000:])
            self.assertGreater(drx, 100, "DPDK backend {}: the frontend's TX ring did not (re)start".format(k))
            self.assertGreater(dtx, 100, "DPDK backend {}: the frontend's RX ring did not (re)start".format(k))
            shutil.rmtree(os.path.join("/var/run/dpdk", "wsvh{}".format(os.getpid())), ignore_errors=True)
        front.send_signal(signal.SIGINT)  # done once the last backend is (its 30 s is a cap)
        fout = self.finish(front)
        self.assertEqual(front.returncode, 0, fout[-3000:])
        fs = self.summary(name + "_front")
        self.check_side(fs, fout, "virtio_user server=1 " + name)
        self.assertEqual(fout.count("the vhost backend is back"), 1, fout[-3000:])
        self.assertEqual(fout.count("packed rings reset for the new backend"), 1 if packed else 0, fout[-3000:])
        self.check_reset_drops(fs, fout, packed, 1, name)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
