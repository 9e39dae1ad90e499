#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A backend restarted under running rings resumes them; a frontend that lies about where they
are is still refused.
- DPDK's virtio_user server=1 generating (flowgen: it also receives and frees) keeps its rings
  while our net_vhost client=1 is killed (SIGKILL) and started again: split and packed rings, one
  and two queue pairs. The new backend resumes each split ring at its used index (and says so),
  every queue carries traffic both ways again, on both sides, and no ring is reported broken.
- A Python frontend starts split rings at bases and used indices of its choosing: a restart
  (base 0, used and avail indices far on) runs; a used index the avail index is more than a ring
  ahead of (whatever the base claims), or behind, breaks only that ring.
DPDK parts need root and dpdk-testpmd (skipped without, failed under CI).

usage: vhost_resync_test.py --binary PATH [unittest options]"""
import os
import re
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
SECONDS = 1  # traffic per sample: tens of thousands of packets per queue, even on a loaded machine
RESYNC = re.compile(r"ring (\d+) resumes at its used index (\d+), not at base (\d+)")


def last_block(text, title):
    """`text` from the last occurrence of `title` on: the latest answer of a prompt command."""
    return text[text.rfind(title):]


class DpdkFrontendRestartedBackend(vp.PairBase):
    """DPDK's virtio_user server=1 (flowgen) and our interactive net_vhost client=1 (io), driven at
    both prompts; DPDK's needs 128 hugepages (-m 256)."""

    def setUp(self):
        super().setUp()
        self.asked = {}  # (pid, command) -> answers waited for

    def ask(self, p, command, last_line):
        """Sends `command` at p's prompt; returns p's output once `last_line` (the answer's last
        line) came once more."""
        key = (p.pid, command)
        self.asked[key] = self.asked.get(key, 0) + 1
        p.stdin.write(command + "\n")
        p.stdin.flush()
        self.assertTrue(self.read_until(p, last_line, count=self.asked[key], timeout=30),
                        "no answer to {!r}\n{}".format(command, self.early.get(p.pid, "")[-2000:]))
        return self.early[p.pid]

    def frontend_counts(self, front):
        """(RX, TX) packets of DPDK's virtio_user port so far."""
        block = last_block(self.ask(front, "show port stats 0", "Tx-pps:"), "NIC statistics for port 0")
        return (int(re.search(r"RX-packets:\s+(\d+)", block).group(1)),
                int(re.search(r"TX-packets:\s+(\d+)", block).group(1)))

    def backend_xstats(self, back):
        block = last_block(self.ask(back, "show port xstats 0", "guest_memory_lost"), "NIC extended statistics")
        return {k: int(v) for k, v in re.findall(r"^\s*(\w+): (\d+)$", block, re.M)}

    def backend(self, queues, tag):
        q = ["--rxq={}".format(queues), "--txq={}".format(queues)]
        back = self.start([BINARY, "--no-huge"] + vp.VHOST_LCORES +
                          ["--vdev", "net_vhost0,iface={},queues={},client=1".format(self.sock, queues), "--",
                           "--summary-json", os.path.join(self.tmp.name, tag + ".json"), "-i", "--forward-mode=io",
                           "--auto-start", "--nb-cores=1"] + q + vp.POOL + self.NO_FLUSH, stdin=subprocess.PIPE)
        self.assertTrue(self.read_until(back, "testpmd>", timeout=30), "{}: no prompt".format(tag))
        return back

    def queue_traffic(self, back, queues):
        """Packets each of our queues received and sent over SECONDS, once traffic has started (a
        loaded machine may take a while to connect)."""
        end = time.time() + 10
        while time.time() < end and self.backend_xstats(back).get("tx_q0_good_packets", 0) == 0:
            time.sleep(0.1)
        before = self.backend_xstats(back)
        time.sleep(SECONDS)
        after = self.backend_xstats(back)
        return {"{}_q{}".format(d, q): after["{}_q{}_good_packets".format(d, q)] -
                before.get("{}_q{}_good_packets".format(d, q), 0) for d in ("rx", "tx") for q in range(queues)}

    def restart_under_running_rings(self, packed, queues):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (Debian package dpdk-dev)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")
        q = ["--rxq={}".format(queues), "--txq={}".format(queues)]
        dev = "net_virtio_user0,path={},queues={},server=1,packed_vq={}".format(self.sock, queues, packed)
        front = self.start(vp.LINE_BUFFERED + [vp.DPDK, "-m", "256", "--in-memory"] + vp.VIRTIO_LCORES + [
            "--file-prefix=wsvu{}".format(os.getpid()), "--no-pci", "--single-file-segments", "--vdev", dev, "--",
            "-i", "--forward-mode=flowgen", "--nb-cores=1"] + q + vp.POOL, stdin=subprocess.PIPE)
        self.assertTrue(vp.wait_for_socket(self.sock, front, timeout=30), "virtio_user server=1 did not listen")
        first = self.backend(queues, "first")
        self.assertTrue(self.read_until(front, "testpmd>", timeout=30), "DPDK's frontend did not come up")
        self.ask(front, "start", "Logical Core")
        traffic = self.queue_traffic(first, queues)
        for k, n in traffic.items():
            self.assertGreater(n, 1000, "first backend, {}: {}".format(k, traffic))
        first.send_signal(signal.SIGKILL)
        first.wait()
        self.assertNotIn("was broken by the frontend", self.finish(first))
        before = self.frontend_counts(front)
        second = self.backend(queues, "second")
        # Resumed: every queue carries traffic both ways, on our side and on DPDK's.
        traffic = self.queue_traffic(second, queues)
        after = self.frontend_counts(front)
        xstats = self.backend_xstats(second)
        self.ask(second, "quit", "Bye")
        out = self.finish(second)
        self.ask(front, "stop", "Done")
        front.stdin.write("quit\n")
        front.stdin.flush()
        self.finish(front, timeout=60)
        self.assertEqual(second.returncode, 0, out[-3000:])
        self.assertNotIn("was broken by the frontend", out, out[-3000:])
        for r in range(2 * queues):
            self.assertEqual(xstats["{}_q{}_broken".format("rx" if r % 2 else "tx", r // 2)], 0, out[-3000:])
        for k, n in traffic.items():
            self.assertGreater(n, 1000, "after the restart, {}: {}\n{}".format(k, traffic, out[-3000:]))
        self.assertGreater(after[0] - before[0], 1000, "DPDK's RX after the restart: {} -> {}".format(before, after))
        self.assertGreater(after[1] - before[1], 1000, "DPDK's TX after the restart: {} -> {}".format(before, after))
        resynced = {int(m.group(1)) for m in RESYNC.finditer(out)}
        if packed:
            # DPDK's virtio_user resets its packed rings for a new backend: they start afresh.
            self.assertEqual(resynced, set(), out[-3000:])
        else:
            self.assertEqual(resynced, set(range(2 * queues)), out[-3000:])
        s = self.summary("second")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)

    def test_split_one_queue(self):
        with vp.Hugepages(160):
            self.restart_under_running_rings(0, 1)

    def test_split_two_queues(self):
        with vp.Hugepages(160):
            self.restart_under_running_rings(0, 2)

    def test_packed_one_queue(self):
        with vp.Hugepages(160):
            self.restart_under_running_rings(1, 1)

    def test_packed_two_queues(self):
        with vp.Hugepages(160):
            self.restart_under_running_rings(1, 2)


class RunOnFrontend(vp.Frontend):
    """vp.Frontend whose split rings ran on without a backend: `starts` maps a ring to the (base
    it sends, used index, avail index) it starts with; other rings start at 0."""

    def __init__(self, path, starts):
        self.starts = starts
        super().__init__(path)

    def ring_base(self, r):
        if r not in self.starts:
            return self.BASE
        base, used, avail = self.starts[r]
        vp.store16(self.mem, self.ring(r)[2] + 2, used)
        self.avail_idx[r] = avail
        self.set_avail_idx(r, avail & 0xffff)
        return base

    def wait_used(self, r, idx):
        end = time.time() + 5
        while time.time() < end:
            if self.used_idx(r) == idx & 0xffff:
                return True
            time.sleep(0.01)
        return False


# (name, {ring: (base, used index, avail index)}) that no restart can produce: ring 1 (the
# frontend's TX ring of pair 0) must break with an avail index jump, whatever its base says.
LIES = [
    ("more outstanding than the ring", {1: (0, 1000, 1000 + vp.Frontend.N + 1)}),
    ("base next to avail, used far behind", {1: (5000, 5000 - 300, 5000)}),
    ("used ahead of avail", {1: (0, 100, 50)}),
]


class LyingFrontend(vp.PairBase):
    def test_restart_resumes_and_lies_are_refused(self):
        """A split ring pair started as a restart leaves it (used and avail indices near the 16-bit
        wrap, base 0, 8 RX buffers the old backend took and never returned): every packet the
        frontend sends comes back, the 8 buffers first. Then each lie breaks ring 1 only, while
        the other queue pair keeps forwarding."""
        back = self.start([BINARY, "--no-huge"] + vp.VHOST_LCORES +
                          ["--vdev", "net_vhost0,iface={},queues=2".format(self.sock), "--",
                           "--summary-json", os.path.join(self.tmp.name, "vhost.json"), "-i", "--forward-mode=io",
                           "--auto-start", "--nb-cores=1", "--rxq=2", "--txq=2"] + vp.POOL + self.NO_FLUSH,
                          stdin=subprocess.PIPE)
        self.assertTrue(vp.wait_for_socket(self.sock, back))
        used = 0xfff8
        fe = RunOnFrontend(self.sock, {0: (0, used, used + 8), 1: (0, used, used)})
        for k in range(8):  # the RX buffers the old backend took: descriptors 0-7, avail entries used..used+7
            fe.desc(0, k, vp.GUEST + fe.buf(300 + k), 2048, vp.F_WRITE, 0)
            struct.pack_into("<H", fe.mem, fe.ring(0)[1] + 4 + 2 * ((used + k) % fe.N), k)
        self.assertTrue(self.read_until(back, "link state change event"), "the backend never reported the device up")
        fe.good_traffic(0, 1, 32)  # 32 more RX buffers, 32 packets
        self.assertTrue(fe.wait_used(1, used + 32), "ring 1: used idx {:#x}".format(fe.used_idx(1)))
        self.assertTrue(fe.wait_used(0, used + 32), "ring 0: used idx {:#x}".format(fe.used_idx(0)))
        # The first 8 packets went to the buffers the old backend had taken (descriptors 0-7).
        used_ring = fe.ring(0)[2] + 4
        ids = [struct.unpack_from("<I", fe.mem, used_ring + 8 * ((used + k) % fe.N))[0] for k in range(32)]
        self.assertEqual(ids, list(range(8)) + [100 + k for k in range(24)])
        fe.close()
        for k, (name, starts) in enumerate(LIES):
            time.sleep(0.3)  # the backend notices the disconnect
            fe = RunOnFrontend(self.sock, starts)
            self.assertTrue(self.read_until(back, "link state change event", count=2 * k + 3),
                            "{}: the backend never reported the device up".format(name))
            self.assertTrue(fe.good_traffic(2, 3, 32), "{}: the other queue pair stopped forwarding".format(name))
            self.assertIsNone(back.poll(), "{}: the backend died".format(name))
            fe.close()
        back.stdin.write("show port xstats 0\nquit\n")
        back.stdin.flush()
        out = self.finish(back)
        self.assertEqual(back.returncode, 0, out[-3000:])
        xstats = {k: int(v) for k, v in re.findall(r"^(\w+): (\d+)$", out, re.M)}
        self.assertEqual(xstats.get("rx_q0_avail_index_jump"), len(LIES), out[-3000:])
        self.assertEqual(xstats.get("tx_q0_avail_index_jump", 0), 0, out[-3000:])
        self.assertEqual(out.count("ring 1 was broken by the frontend: avail_index_jump"), len(LIES), out[-3000:])
        self.assertNotIn("ring 0 was broken", out)
        resynced = [(int(r), int(i), int(b)) for r, i, b in RESYNC.findall(out)]
        self.assertIn((0, used, 0), resynced, out[-3000:])
        self.assertIn((1, used, 0), resynced, out[-3000:])
        s = self.summary("vhost")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)

if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
