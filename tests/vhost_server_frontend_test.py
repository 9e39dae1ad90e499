#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A virtio_user server=1 with two queue pairs and an interactive net_vhost client=1, driven at
both prompts as users drive them: the vhost side's `stop`, `port stop 0`, `port start 0`,
`start tx_first 32` must leave both queue pairs carrying traffic; and a frontend quit and
launched again while the vhost side forwards must bring traffic back at the rate the first one
had, not a trickle. Ours as the frontend, and DPDK's as the reference for the same expectations
(root and dpdk-testpmd; skipped without, failed under CI).

usage: vhost_server_frontend_test.py --binary PATH [unittest options]"""
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
# --no-flush-rx: `start` on one side may run after the other side's `start tx_first` burst has
# arrived (on a loaded machine it does), and a flush would drop the only packets in flight.
APP = ["-i", "--rxq=2", "--txq=2", "--nb-cores=1", "--no-flush-rx"]
SECONDS = 2  # per traffic sample: thousands of packets per queue even on a loaded machine


def queue_packets(text):
    """{queue: rx_qN_good_packets} from the last `show port xstats 0` answer in `text`."""
    block = text[text.rfind("NIC extended statistics"):]
    return {int(q): int(n) for q, n in re.findall(r"rx_q(\d)_good_packets: (\d+)", block)}


class ServerFrontend(vp.PairBase):
    def setUp(self):
        super().setUp()
        self.asked = {}  # pid -> xstats requests sent

    def say(self, p, *commands):
        p.stdin.write("".join(c + "\n" for c in commands))
        p.stdin.flush()

    def vhost(self):
        vhost = self.start([BINARY, "--no-huge"] + vp.VHOST_LCORES +
                           ["--vdev", "net_vhost0,iface={},queues=2,client=1".format(self.sock), "--"] + APP + vp.POOL,
                           stdin=subprocess.PIPE)
        self.assertTrue(self.read_until(vhost, "testpmd>"), "the vhost side did not come up")
        return vhost

    def frontend(self, kind, generation):
        dev = "net_virtio_user0,path={},queues=2,server=1".format(self.sock)
        if kind == "ours":
            cmd = [BINARY, "--no-huge"] + vp.VIRTIO_LCORES + ["--vdev", dev, "--"] + APP + vp.POOL
        else:
            cmd = vp.LINE_BUFFERED + [vp.DPDK, "-m", "512", "--in-memory"] + vp.VIRTIO_LCORES + [
                "--file-prefix=wsvu{}{}".format(os.getpid(), generation), "--no-pci", "--single-file-segments",
                "--vdev", dev, "--"] + APP + vp.POOL
        front = self.start(cmd, stdin=subprocess.PIPE)
        self.assertTrue(vp.wait_for_socket(self.sock, front, timeout=30), "virtio_user server=1 did not listen")
        return front

    def counts(self, p):
        """The vhost side's packets received per queue so far."""
        self.asked[p.pid] = self.asked.get(p.pid, 0) + 1
        self.say(p, "show port xstats 0")
        self.assertTrue(self.read_until(p, "rx_q1_good_packets", count=self.asked[p.pid], timeout=30),
                        "no answer at the prompt")
        return queue_packets(self.early[p.pid])

    def traffic(self, vhost):
        """Packets per queue the vhost side received over SECONDS, once every queue receives: the
        sides may still be connecting when forwarding starts (on a loaded machine, for seconds),
        and a sample taken then would measure the connection, not the rings."""
        start = self.counts(vhost)
        deadline = time.monotonic() + 20
        before = start
        while time.monotonic() < deadline:
            time.sleep(0.2)
            before = self.counts(vhost)
            if before and all(before[q] > start.get(q, 0) for q in before):
                break
        time.sleep(SECONDS)
        after = self.counts(vhost)
        return {q: after[q] - before.get(q, 0) for q in after}

    def quit(self, p):
        self.say(p, "stop", "quit")
        out = self.finish(p, timeout=60)
        self.assertEqual(p.returncode, 0, out[-3000:])
        return out

    def port_restart_on_the_vhost_side(self, kind):
        front = self.frontend(kind, 0)
        vhost = self.vhost()
        self.assertTrue(self.read_until(front, "testpmd>", timeout=30), "the frontend did not come up")
        self.say(front, "start")
        self.say(vhost, "start tx_first")
        first = self.traffic(vhost)
        self.say(vhost, "stop", "port stop 0", "port start 0", "start tx_first 32")
        again = self.traffic(vhost)
        self.quit(front)
        hout = self.quit(vhost)
        for q in (0, 1):
            self.assertGreater(first.get(q, 0), 1000, "queue {} before the port restart: {}".format(q, first))
            self.assertGreater(again.get(q, 0), 1000, "queue {} after the vhost side's port stop/start: {}\n{}".format(
                q, again, hout[-2000:]))

    def frontend_relaunched(self, kind):
        front = self.frontend(kind, 0)
        vhost = self.vhost()
        self.assertTrue(self.read_until(front, "testpmd>", timeout=30), "the frontend did not come up")
        self.say(vhost, "start")
        self.say(front, "start tx_first")
        first = self.traffic(vhost)
        self.quit(front)
        second = self.frontend(kind, 1)
        self.assertTrue(self.read_until(second, "testpmd>", timeout=30), "the relaunched frontend did not come up")
        self.say(second, "start tx_first")
        again = self.traffic(vhost)
        self.quit(second)
        hout = self.quit(vhost)
        for q in (0, 1):
            self.assertGreater(first.get(q, 0), 1000, "queue {} of the first frontend: {}".format(q, first))
            self.assertGreater(again.get(q, 0), 1000, "queue {} of the relaunched frontend: {}".format(q, again))
        # A trickle (a frontend or backend waiting for notifications that do not come) would be
        # orders of magnitude below; a tenth leaves room for a machine whose load changes.
        self.assertGreater(sum(again.values()), sum(first.values()) / 10,
                           "relaunched: {} packets in {} s against {} before\n{}".format(
                               again, SECONDS, first, hout[-2000:]))

    def test_our_frontend_vhost_port_restart(self):
        self.port_restart_on_the_vhost_side("ours")

    def test_our_frontend_relaunched(self):
        self.frontend_relaunched("ours")

    def dpdk_frontend(self, check):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (Debian package dpdk-dev)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        with vp.Hugepages(1100):  # two DPDK processes of 512 MB at once when relaunched
            check("dpdk")

    def test_dpdk_frontend_vhost_port_restart(self):
        self.dpdk_frontend(self.port_restart_on_the_vhost_side)

    def test_dpdk_frontend_relaunched(self):
        self.dpdk_frontend(self.frontend_relaunched)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
