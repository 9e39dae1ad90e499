#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""`show port xstats` against Debian's dpdk-testpmd 22.11: for net_null (two queue pairs),
net_ring, net_pcap and a vhost-user pair (net_vhost with net_virtio_user, each side of ours
against the same side of DPDK's), the names DPDK prints must be the first names ours prints, in
DPDK's order. Ours may add names after them (counters DPDK has no name for); DPDK's net_vhost
iotlb_* and inflight_* counters are the only ones we leave out (no IOTLB or inflight tracking).
Needs dpdk-testpmd (package dpdk) and root for it (skipped without, failed under CI).

usage: xstats_names_test.py --binary PATH [unittest options]
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
DPDK = "dpdk-testpmd"
NOT_HERE = re.compile(r"_q\d+_(iotlb_hits|iotlb_misses|inflight_submitted|inflight_completed)$")


def names(output):
    """The xstat names of the first `show port xstats` in `output`, in order."""
    at = output.find("NIC extended statistics for port")
    if at < 0:
        return []
    out = []
    for line in output[at:].splitlines()[1:]:
        m = re.match(r"^([a-z0-9_]+): \d+$", line.strip())
        if m:
            out.append(m.group(1))
        elif out:
            break
    return out


def write_pcap(path):
    """Four Ethernet frames: unicast, broadcast, multicast, and a short one."""
    frames = [bytes.fromhex(dst) + bytes.fromhex("020000000001") + b"\x08\x00" + bytes(n - 14)
              for dst, n in (("020000000002", 64), ("ffffffffffff", 100), ("01005e000001", 70),
                             ("020000000002", 60))]
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for p in frames:
            f.write(struct.pack("<IIII", 0, 0, len(p), len(p)) + p)


class XstatNames(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        testpmd_harness.require_program(self, DPDK, "dpdk")
        testpmd_harness.require(self, os.geteuid() == 0, "dpdk-testpmd needs root")
        self.tmp = testpmd_harness.temp_dir(self, "ws-xstats-")
        self.procs = []
        self.addCleanup(self.kill_all)

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.communicate()

    def start(self, binary, prefix, vdevs, app=()):
        args = [binary, "--no-huge", "-m", "512", "--no-pci", "-l", "0-1", "--file-prefix=" + prefix]
        for v in vdevs:
            args += ["--vdev", v]
        args += ["--"] + testpmd_harness.SMALL_POOL + list(app) + ["-i"]
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        self.procs.append(p)
        return p

    def finish(self, procs, wait=1.0):
        """Forwards for `wait` seconds, asks each process for its xstats, then quits them all in
        order; returns their outputs."""
        for p in procs:
            p.stdin.write("start\n")
            p.stdin.flush()
        time.sleep(wait)
        for p in procs:
            p.stdin.write("stop\nshow port xstats all\n")
            p.stdin.flush()
        time.sleep(1.0)  # both answered before either side goes away
        outs = []
        for p in procs:
            p.stdin.write("quit\n")
            p.stdin.flush()
            out, _ = p.communicate(timeout=30)
            testpmd_harness.assert_no_crash(self, out, out[-3000:])
            outs.append(out)
        return outs

    def compare(self, dpdk_out, ours_out, what):
        dpdk = [n for n in names(dpdk_out) if not NOT_HERE.search(n)]
        ours = names(ours_out)
        self.assertGreater(len(dpdk), 0, "{}: DPDK printed no xstats\n{}".format(what, dpdk_out[-3000:]))
        self.assertEqual(ours[:len(dpdk)], dpdk, "{}: ours\n{}".format(what, "\n".join(ours)))
        self.assertEqual(len(set(ours)), len(ours), "{}: a name twice".format(what))

    def single(self, vdevs, app=()):
        """One process of each on `vdevs`, compared."""
        d = self.finish([self.start(DPDK, "xd", vdevs, app)])[0]
        o = self.finish([self.start(BINARY, "xo", vdevs, app)])[0]
        self.compare(d, o, " ".join(vdevs))

    def test_null_two_queue_pairs(self):
        self.single(["net_null0"], ["--rxq=2", "--txq=2"])

    def test_ring(self):
        self.single(["net_ring0"])

    def test_pcap(self):
        src = os.path.join(self.tmp.name, "in.pcap")
        write_pcap(src)
        self.single(["net_pcap0,rx_pcap={},tx_pcap={}".format(src, os.path.join(self.tmp.name, "out.pcap"))])

    def pair(self, vhost_binary, virtio_binary, tag):
        sock = os.path.join(self.tmp.name, tag + ".sock")
        app = ["--rxq=2", "--txq=2"]
        vhost = self.start(vhost_binary, tag + "h", ["net_vhost0,iface={},queues=2".format(sock)], app)
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        virtio = self.start(virtio_binary, tag + "u", ["net_virtio_user0,path={},queues=2".format(sock)], app)
        time.sleep(1.5)  # negotiated
        return self.finish([vhost, virtio])

    def test_vhost_and_virtio_user(self):
        dh, du = self.pair(DPDK, DPDK, "d")
        oh, ou = self.pair(BINARY, BINARY, "o")
        self.compare(dh, oh, "net_vhost")
        self.compare(du, ou, "net_virtio_user")


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
