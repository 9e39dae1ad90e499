#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""examples/l3fwd-power on every virtual port with an RX interrupt, in a network namespace the
test creates: net_vhost and net_virtio_user (two l3fwd-power processes, one on each side of a
vhost-user socket), net_memif (two, server and client), and net_af_packet with net_af_xdp on veth
pairs (one). The outer ports of each pair are net_tap interfaces the test writes frames into and
reads them from with packet sockets. Every process first goes idle: its lcore must sleep (CPU
time from /proc/<pid>/task/*/stat over one second well under a core); then a frame goes in at one
end and must come out at the other, waking each lcore on the way (DPDK's "is waked up from rx
interrupt" line), then a burst, both ways. Root is needed (skipped without, failed under CI).
Usage: l3fwd_power_test.py --l3fwd-power PATH [unittest args]."""
import argparse
import ctypes
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import netns  # noqa: E402
import netpkt  # noqa: E402
import testpmd_harness  # noqa: E402

L3FWD_POWER = None
CRASH = testpmd_harness.CRASH_MARKERS
ETH_P_ALL = 0x0003
CLONE_NEWNET = 0x40000000
IDLE_CPU_LIMIT = 0.20  # of one core: a sleeping lcore uses next to none; a polling one, all of it
CLK_TCK = os.sysconf("SC_CLK_TCK")


def in_namespace(ns, fn):
    """fn() run on a thread that entered network namespace `ns`: sockets it opens live there."""
    out = {}

    def run():
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/var/run/netns/" + ns) as f:
            if libc.setns(f.fileno(), CLONE_NEWNET) != 0:
                out["error"] = OSError(ctypes.get_errno(), "setns " + ns)
                return
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the caller
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class Proc:
    """A running l3fwd-power: its output collected line by line, stopped with SIGINT."""

    def __init__(self, ns, eal, app):
        prefix = ["ip", "netns", "exec", ns] if ns else []
        cmd = prefix + ["stdbuf", "-oL", L3FWD_POWER, "-l", "0", "--no-huge"] + eal + ["--"] + app
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def text(self):
        return "".join(self.lines)

    def wait_for(self, pattern, timeout=20, after=0):
        """Whether a line from line `after` on matches `pattern` within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(re.search(pattern, line) for line in self.lines[after:]):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return False

    def pid(self):
        """l3fwd-power's own pid (ip netns exec and stdbuf exec it in place)."""
        return self.proc.pid

    def cpu_ticks(self):
        total = 0
        for tid in os.listdir(f"/proc/{self.pid()}/task"):
            try:
                with open(f"/proc/{self.pid()}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except FileNotFoundError:
                pass
        return total

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        time.sleep(0.05)
        return self.text()


class Tap:
    """A packet socket on interface `iface` of namespace `ns`: frames sent go in, frames the
    interface receives come out."""

    def __init__(self, ns, iface):
        def open_socket():
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((iface, 0))
            s.settimeout(0.1)
            return s

        self.iface = iface
        self.sock = in_namespace(ns, open_socket)

    def send(self, frame):
        self.sock.send(frame)

    def expect(self, dst_ip, count, timeout=5.0):
        """Frames to `dst_ip` that came in within `timeout` (stops at `count`)."""
        want = bytes(int(x) for x in dst_ip.split("."))
        got = 0
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            try:
                frame, addr = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            if addr[2] != socket.PACKET_OUTGOING and len(frame) >= 34 and frame[12:14] == b"\x08\x00" and \
                    frame[30:34] == want:
                got += 1
        return got


class L3fwdPower(unittest.TestCase):
    def setUp(self):
        netns.require_root(self)
        testpmd_harness.require_program(self, "stdbuf", "coreutils")
        self.tmp = tempfile.TemporaryDirectory(prefix="ws-l3p-")
        self.addCleanup(self.tmp.cleanup)
        self.net = netns.Netns("l3p")
        self.addCleanup(self.net.delete)
        self.ns = self.net.ns("a")
        self.procs = []
        self.addCleanup(self.stop_all)

    def stop_all(self):
        for p in self.procs:  # all at once: each may sleep up to a second before it sees SIGINT
            if p.proc.poll() is None:
                p.proc.send_signal(2)
        for p in self.procs:
            p.stop()

    def start(self, *vdev_lists):
        """One l3fwd-power per list of devices, started together; each is forwarding on return."""
        procs = []
        for vdevs in vdev_lists:
            eal = [a for v in vdevs for a in ("--vdev", v)]
            # Sleeps of up to a second, not DPDK's 10 ms: a frame must be picked up by its
            # interrupt, not by the poll after a timeout, which would hide a lost wake-up.
            procs.append(Proc(self.ns, eal, ["-p", "0x3", "--interrupt-only", "--sleep-timeout", "1000"]))
        self.procs += procs
        for p in procs:
            if not p.wait_for(r"entering main interrupt loop"):
                self.fail("\n".join(q.stop() for q in self.procs))
        return procs

    def taps(self, *names):
        return [Tap(self.ns, n) for n in names]

    def check_idle(self, procs):
        """Each process sleeps: CPU over one second of idleness well under a core."""
        time.sleep(0.5)
        before = [p.cpu_ticks() for p in procs]
        t0 = time.monotonic()
        time.sleep(1.0)
        spent = time.monotonic() - t0
        for p, b in zip(procs, before):
            share = (p.cpu_ticks() - b) / CLK_TCK / spent
            self.assertLess(share, IDLE_CPU_LIMIT, f"an idle l3fwd-power used {share:.0%} of a core\n{p.text()}")

    def through(self, into, out, dst_ip, woken):
        """One frame into `into` after idleness comes out of `out` (the lcores of `woken` say
        they were woken by it), then a burst of 20."""
        time.sleep(0.3)  # every lcore back asleep after what came before (a few ms of empty polls)
        marks = [len(p.lines) for p in woken]
        into.send(netpkt.ipv4_udp_frame(dst_ip, ttl=64, size=64))
        self.assertEqual(out.expect(dst_ip, 1), 1, f"first frame to {dst_ip} lost\n" +
                         "\n".join(p.text() for p in self.procs))
        for p, m in zip(woken, marks):
            self.assertTrue(p.wait_for(r"is waked up from rx interrupt on port \d+ queue 0", 5, m), p.text())
        for i in range(20):
            into.send(netpkt.ipv4_udp_frame(dst_ip, ttl=64, size=64 + i))
        self.assertEqual(out.expect(dst_ip, 20), 20, f"burst to {dst_ip}\n" + "\n".join(p.text() for p in self.procs))

    def finish(self):
        self.stop_all()
        for p in self.procs:
            out = p.stop()
            for marker in CRASH:
                self.assertNotIn(marker, out)
            self.assertIn("Bye...", out)

    def test_vhost_memif_af_packet_af_xdp_sleep_and_wake(self):
        n = netns
        n.sh("ip", "link", "add", "wsl3pa0", "type", "veth", "peer", "name", "wsl3pa1", ns=self.ns)
        n.sh("ip", "link", "add", "wsl3px0", "type", "veth", "peer", "name", "wsl3px1", ns=self.ns)
        for dev in ("wsl3pa0", "wsl3pa1", "wsl3px0", "wsl3px1"):
            n.sh("ip", "link", "set", dev, "up", ns=self.ns)
        sock = os.path.join(self.tmp.name, "vhost.sock")
        memif = os.path.join(self.tmp.name, "memif.sock")
        # Servers first (net_vhost listens, net_memif role=server), then their clients.
        vhost, memif_server, kernel = self.start(
            ["net_tap0,iface=wsl3pt0", f"net_vhost0,iface={sock}"],
            ["net_tap1,iface=wsl3pt2", f"net_memif0,role=server,socket={memif},socket-abstract=no"],
            ["net_af_packet0,iface=wsl3pa0", "net_af_xdp0,iface=wsl3px0"])
        virtio, memif_client = self.start(
            [f"net_virtio_user0,path={sock}", "net_tap2,iface=wsl3pt1"],
            [f"net_memif1,role=client,socket={memif},socket-abstract=no", "net_tap3,iface=wsl3pt3"])
        t0, t1, t2, t3, a1, x1 = self.taps("wsl3pt0", "wsl3pt1", "wsl3pt2", "wsl3pt3", "wsl3pa1", "wsl3px1")
        self.check_idle(self.procs)
        # DPDK l3fwd-power's table: 1.1.1.0/24 to port 0, 2.1.1.0/24 to port 1.
        self.through(t0, t1, "2.1.1.7", [vhost, virtio])  # tap -> vhost TX -> virtio_user RX (call fd)
        self.through(t1, t0, "1.1.1.7", [virtio, vhost])  # tap -> virtio_user TX -> vhost RX (kick fd)
        self.through(t2, t3, "2.1.1.8", [memif_server, memif_client])  # server S2C -> client RX
        self.through(t3, t2, "1.1.1.8", [memif_client, memif_server])  # client C2S -> server RX
        self.through(a1, x1, "2.1.1.9", [kernel])  # af_packet RX -> af_xdp TX
        self.through(x1, a1, "1.1.1.9", [kernel])  # af_xdp RX -> af_packet TX
        self.finish()


class CommandLine(unittest.TestCase):
    def refused(self, *app):
        p = subprocess.run([L3FWD_POWER, "-l", "0", "--no-huge", "--vdev", "net_null0", "--", "-p", "0x1", *app],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        return p.stderr

    def test_scaling_modes_are_refused_with_the_reason(self):
        for opt in (["--legacy"], ["--pmd-mgmt", "monitor"], ["-u"]):
            self.assertIn("frequency scaling is not available here", self.refused(*opt))
        self.assertIn("--max-pkt-len 20: expected 64-9600", self.refused("--max-pkt-len", "20"))

    def test_a_port_without_interrupts_polls(self):
        p = Proc(None, ["--vdev", "net_null0"], ["-p", "0x1"])
        self.assertTrue(p.wait_for("entering main interrupt loop"))
        out = p.stop()
        self.assertIn("RX interrupt won't enable: port 0 (net_null0): RX interrupts are not supported", out)
        self.assertIn("Bye...", out)


def main():
    global L3FWD_POWER
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--l3fwd-power", required=True)
    args, rest = parser.parse_known_args()
    L3FWD_POWER = os.path.abspath(args.l3fwd_power)
    runner = unittest.TextTestRunner(resultclass=testpmd_harness.TimedResult, verbosity=2)
    unittest.main(argv=[sys.argv[0]] + rest, testRunner=runner)


if __name__ == "__main__":
    main()
