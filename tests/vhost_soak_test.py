#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Soak: peers that come and go many times must not make the side that stays grow or stop.
- One net_vhost backend, frontends (ours, then DPDK's virtio_user) started, forwarding and
  killed (SIGKILL) again and again: after each, traffic flowed; the backend's open fds and RSS
  stay flat; at the end its pool audit is clean.
- One virtio_user server=1 frontend generating, net_vhost client=1 backends killed and started
  again and again: traffic resumes each time; the frontend's fds and RSS stay flat.
CI runs a few cycles of each; `scripts/soak` runs 100 (WS_SOAK_CYCLES).

usage: vhost_soak_test.py --binary PATH [unittest options]"""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
CYCLES = int(os.environ.get("WS_SOAK_CYCLES", "5"))
WARMUP = 2  # cycles before the baseline: first connections allocate what later ones reuse
RSS_SLACK_KIB = 8 * 1024


def open_fds(pid):
    return len(os.listdir("/proc/{}/fd".format(pid)))


def rss_kib(pid):
    with open("/proc/{}/status".format(pid)) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


class Soak(vp.PairBase):
    # Killed processes leave their telemetry sockets in their runtime directories: ours and
    # dpdk-testpmd's get prefixes of this test's own, removed at the end.
    OURS_PREFIX = "wssoakw{}".format(os.getpid())
    DPDK_PREFIX = "wssoak{}".format(os.getpid())

    def tearDown(self):
        super().tearDown()
        for prefix in (self.OURS_PREFIX, self.DPDK_PREFIX):
            shutil.rmtree(os.path.join("/var/run/dpdk", prefix), ignore_errors=True)

    def ours(self):
        """Our wirespeed-testpmd's EAL part: no hugepages, this test's runtime directory."""
        return [BINARY, "--no-huge", "--file-prefix=" + self.OURS_PREFIX]

    def rx_now(self, proc):
        """RX-packets of port 0 now, asked at proc's prompt."""
        seen = self.early.get(proc.pid, "").count("RX-missed")
        proc.stdin.write("show port stats 0\n")
        proc.stdin.flush()
        self.assertTrue(self.read_until(proc, "RX-missed", count=seen + 1, timeout=20),
                        "no answer at the prompt:\n" + self.early.get(proc.pid, "")[-3000:])
        return int(re.findall(r"RX-packets:\s+(\d+)\s+RX-missed", self.early[proc.pid])[-1])

    def kill(self, proc):
        """SIGKILL, as a crash would; its pipes closed."""
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.procs.remove(proc)
        for f in (proc.stdin, proc.stdout):
            if f is not None:
                f.close()

    def wait_for_rx(self, proc, above, what, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            rx = self.rx_now(proc)
            if rx > above:
                return rx
            time.sleep(0.1)
        self.fail("{}: traffic did not resume (RX stayed at {})".format(what, above))

    def check_flat(self, pid, samples, what):
        """samples: (fds, rss KiB) after each cycle; flat after the warm-up cycles."""
        base_fds, base_rss = samples[WARMUP - 1] if len(samples) >= WARMUP else samples[0]
        last_fds, last_rss = samples[-1]
        self.assertLessEqual(last_fds, base_fds, "{}: fds grew {} -> {} over {} cycles".format(
            what, base_fds, last_fds, len(samples)))
        self.assertLessEqual(last_rss - base_rss, RSS_SLACK_KIB, "{}: RSS grew {} -> {} KiB".format(
            what, base_rss, last_rss))

    def frontends_come_and_go(self, frontend_cmd, what, settle):
        vhost = self.start(self.ours() + vp.VHOST_LCORES +
                           ["--vdev", "net_vhost0,iface={}".format(self.sock), "--", "-i", "--forward-mode=io",
                            "--auto-start", "--nb-cores=1", "--summary-json",
                            os.path.join(self.tmp.name, "vhost.json")] + vp.POOL, stdin=subprocess.PIPE)
        self.assertTrue(vp.wait_for_socket(self.sock, vhost))
        samples = []
        rx = 0
        for k in range(CYCLES):
            front = self.start(frontend_cmd(k), stdin=subprocess.PIPE)
            rx = self.wait_for_rx(vhost, rx, "{} cycle {}".format(what, k), timeout=settle)
            self.kill(front)
            time.sleep(0.3)  # the backend sees the connection close and resets the device
            samples.append((open_fds(vhost.pid), rss_kib(vhost.pid)))
        self.check_flat(vhost.pid, samples, what + ": backend")
        vhost.stdin.write("quit\n")
        vhost.stdin.flush()
        out = self.finish(vhost)
        self.assertEqual(vhost.returncode, 0, out[-3000:])
        s = self.summary("vhost")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)
        print("{}: {} cycles, backend fds {} -> {}, RSS {} -> {} KiB".format(
            what, CYCLES, samples[0][0], samples[-1][0], samples[0][1], samples[-1][1]), file=sys.stderr)

    def test_our_frontends_killed_and_restarted(self):
        def frontend(k):
            dev = "virtio_user0,path={},packed_vq={}".format(self.sock, k % 2)
            return self.ours() + vp.VIRTIO_LCORES + ["--vdev", dev, "--", "--forward-mode=mac", "--auto-start",
                                                     "--tx-first", "--nb-cores=1"] + vp.POOL
        self.frontends_come_and_go(frontend, "our virtio_user", 20)

    def test_dpdk_frontends_killed_and_restarted(self):
        testpmd_harness.require(self, vp.DPDK, "dpdk-testpmd is not installed (Debian package dpdk-dev)")
        testpmd_harness.require(self, os.geteuid() == 0, "DPDK's virtio_user needs hugepages: run as root")

        def dpdk(k):
            dev = "virtio_user0,path={},packed_vq={}".format(self.sock, k % 2)
            return [vp.DPDK, "-m", "512", "--in-memory"] + vp.VIRTIO_LCORES + [
                "--file-prefix=" + self.DPDK_PREFIX, "--no-pci", "--single-file-segments", "--vdev", dev,
                "--", "--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1"] + vp.POOL
        with vp.Hugepages():
            self.frontends_come_and_go(dpdk, "DPDK's virtio_user", 30)

    def test_backends_killed_and_restarted_under_a_server_frontend(self):
        dev = "virtio_user0,path={},server=1,packed_vq=1,in_order=1".format(self.sock)
        front = self.start(self.ours() + vp.VIRTIO_LCORES +
                           ["--vdev", dev, "--", "-i", "--forward-mode=flowgen", "--auto-start", "--nb-cores=1",
                            "--summary-json", os.path.join(self.tmp.name, "front.json")] + vp.POOL,
                           stdin=subprocess.PIPE)
        self.assertTrue(vp.wait_for_socket(self.sock, front), "virtio_user server=1 did not listen")
        samples = []
        back = None
        for k in range(CYCLES):
            back = self.start(self.ours() + vp.VHOST_LCORES +
                              ["--vdev", "net_vhost0,iface={},client=1".format(self.sock), "--",
                               "--forward-mode=io", "--auto-start", "--nb-cores=1", "--duration=120"] + vp.POOL)
            rx = self.rx_now(front)  # (the first answer comes once the frontend has its first backend)
            self.wait_for_rx(front, rx, "backend {}".format(k))
            self.kill(back)
            time.sleep(0.3)
            samples.append((open_fds(front.pid), rss_kib(front.pid)))
        self.check_flat(front.pid, samples, "virtio_user server=1 frontend")
        front.stdin.write("quit\n")
        front.stdin.flush()
        out = self.finish(front)
        self.assertEqual(front.returncode, 0, out[-3000:])
        s = self.summary("front")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)
        print("server frontend: {} backends, fds {} -> {}, RSS {} -> {} KiB".format(
            CYCLES, samples[0][0], samples[-1][0], samples[0][1], samples[-1][1]), file=sys.stderr)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
