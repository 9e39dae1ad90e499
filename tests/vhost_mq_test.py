#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The vhost/virtio-user pair as users run it with several queues: the vhost side with 4
forwarding cores and 4 queue pairs, started at its prompt before any frontend connects; the
frontend (ours, and DPDK's virtio_user) with 4 queue pairs on one core, `start tx_first` at its
prompt; mac forwarding on both sides; all five lcores of each side on one CPU, so they take
turns. Split and packed rings. Traffic must keep flowing to the end (no stall on any queue) and
the counts of the two sides must agree but for what was in the rings at the stop.

usage: vhost_mq_test.py --binary PATH [unittest options]"""
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
QUEUES = 4
RING = 256
SECONDS = 6
APP = ["--forward-mode=mac", "-i", "--rxq={}".format(QUEUES), "--txq={}".format(QUEUES), "--total-num-mbufs=32768"]


def port_rx(text):
    """Every RX-packets figure of `show port stats 0` answers, in order."""
    return [int(x) for x in re.findall(r"RX-packets:\s+(\d+)\s+RX-missed", text)]


class SeedShape(vp.PairBase):
    def run_pair(self, frontend, packed):
        vhost = self.start([BINARY, "--no-huge", "--lcores", "(0-4)@0", "--vdev",
                            "net_vhost0,iface={},queues={}".format(self.sock, QUEUES), "--"] + APP +
                           ["--nb-cores", "4", "--summary-json", os.path.join(self.tmp.name, "vhost.json")],
                           stdin=subprocess.PIPE)
        vhost.stdin.write("start\n")  # before the frontend exists: its rings come up later
        vhost.stdin.flush()
        self.assertTrue(vp.wait_for_socket(self.sock, vhost))
        dev = "virtio_user0,path={},queues={},queue_size={},in_order=1,packed_vq={}".format(
            self.sock, QUEUES, RING, int(packed))
        if frontend == "ours":
            cmd = [BINARY, "--no-huge", "--lcores", "(0-4)@1", "--vdev", dev, "--"] + APP + \
                  ["--nb-cores", "1", "--summary-json", os.path.join(self.tmp.name, "virtio.json")]
        else:
            cmd = [vp.DPDK, "-m", "512", "--in-memory", "--lcores", "(0-4)@1", "--file-prefix=wsvu{}".format(os.getpid()),
                   "--no-pci", "--single-file-segments", "--vdev", dev, "--"] + APP + ["--nb-cores", "1"]
        virtio = self.start(cmd, stdin=subprocess.PIPE)
        self.assertTrue(self.read_until(virtio, "testpmd>", timeout=30), "the frontend did not come up")
        virtio.stdin.write("start tx_first\n")
        virtio.stdin.flush()
        # One sample a second, each asked once the last was answered: the prompt shares its CPU
        # with four busy lcores, and requests queued behind each other would be answered together.
        samples = []
        for k in range(SECONDS):
            time.sleep(1)
            vhost.stdin.write("show port stats 0\n")
            vhost.stdin.flush()
            self.assertTrue(self.read_until(vhost, "RX-missed", count=k + 1, timeout=30), "no answer at the prompt")
            samples.append(port_rx(self.early[vhost.pid])[-1])
        virtio.stdin.write("stop\nquit\n")  # the frontend stops first: the backend drains nothing more
        virtio.stdin.flush()
        vout = self.finish(virtio, timeout=60)
        vhost.stdin.write("show port stats 0\nshow port xstats 0\nstop\nquit\n")
        vhost.stdin.flush()
        hout = self.finish(vhost, timeout=60)
        self.assertEqual(vhost.returncode, 0, hout[-3000:])
        self.assertEqual(virtio.returncode, 0, vout[-3000:])
        # No stall: packets still arrived in the last two samples' interval (at least 2 s).
        self.assertGreater(samples[-1], samples[-3], "traffic stopped: vhost RX at each sample {}\n{}".format(
            samples, hout[-3000:]))
        for q in range(QUEUES):
            self.assertRegex(hout, r"rx_q{}_packets: [1-9]".format(q), "queue {} never received".format(q))
        self.assertNotRegex(hout, r"_broken: 1", hout[-3000:])
        hs = self.summary("vhost")
        self.assertTrue(hs["pool_audit_ok"], hout[-2000:])
        self.assertTrue(hs["accounting_exact"], hout[-2000:])
        vrx, vtx = vp.dpdk_totals(vout)
        hrx, htx = hs["ports"][0]["rx_packets"], hs["ports"][0]["tx_packets"]
        in_flight = QUEUES * RING
        self.assertTrue(0 <= vtx - hrx <= in_flight, (vtx, hrx))
        self.assertTrue(0 <= htx - vrx <= in_flight, (htx, vrx))
        if frontend == "ours":
            vs = self.summary("virtio")
            self.assertTrue(vs["pool_audit_ok"], vout[-2000:])
            self.assertTrue(vs["accounting_exact"], vout[-2000:])

    def test_our_frontend(self):
        for packed in (False, True):
            with self.subTest(packed=packed):
                self.run_pair("ours", packed)
            self.tearDown()
            self.setUp()

    def test_dpdk_frontend(self):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (Debian package dpdk-dev)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        with vp.Hugepages():
            for packed in (False, True):
                with self.subTest(packed=packed):
                    self.run_pair("dpdk", packed)
                self.tearDown()
                self.setUp()


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
