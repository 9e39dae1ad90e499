#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""net_memif with real peers: wirespeed-testpmd against itself (both roles, 64 B and 1500 B, two
queues) and against Debian's dpdk-testpmd in both directions, and peers restarted while traffic
runs: the link goes down and comes back, traffic resumes, and the pool audit at exit is exact.

Each run's own accounting must be exact (received + generated = sent + dropped + consumed), and
between the two sides what one sent the other received, but for what was still in the rings when
the sender stopped (one ring per queue at most).

usage: memif_pair_test.py --binary PATH [unittest options]
"""
import json
import os
import re
import select
import shutil
import signal
import subprocess
import time
import unittest

import testpmd_harness

BINARY = None  # set from --binary by testpmd_harness.main
DPDK = shutil.which("dpdk-testpmd")
POOL = ["--total-num-mbufs=16384"]
SERVER_LCORES = ["--lcores", "0@0,1@0"]
CLIENT_LCORES = ["--lcores", "0@1,1@1"]
RING = 1024  # rsize=10, DPDK's default
WINDOW = 1


def dpdk_adds_up(text):
    """dpdk-testpmd's accumulated line: RX-packets = TX-packets + TX-dropped (io forwarding)."""
    block = text.split("Accumulated forward statistics for all ports")[-1]
    rx = int(re.search(r"RX-packets:\s+(\d+)", block).group(1))
    tx = int(re.search(r"TX-packets:\s+(\d+)", block).group(1))
    dropped = int(re.search(r"TX-dropped:\s+(\d+)", block).group(1))
    return rx, tx, dropped


class MemifBase(unittest.TestCase):
    def setUp(self):
        self.tmp = testpmd_harness.temp_dir(self, "ws-memif-")
        self.sock = os.path.join(self.tmp.name, "memif.sock")
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
        shutil.rmtree("/var/run/dpdk/wsmif{}".format(os.getpid()), ignore_errors=True)

    def vdev(self, role, extra=""):
        return "net_memif0,role={},socket={},socket-abstract=no{}".format(role, self.sock, extra)

    def ours(self, lcores, vdev, app, summary, duration):
        return [BINARY, "--no-huge"] + lcores + ["--vdev", vdev, "--", "--summary-json",
                                                  os.path.join(self.tmp.name, summary + ".json"),
                                                  "--duration", str(duration), "--no-flush-rx"] + POOL + app

    def dpdk(self, lcores, vdev, app):
        # memif's regions are memfds of its own: DPDK needs no hugepages for them.
        return ["stdbuf", "-oL", DPDK, "--no-huge", "-m", "256", "--file-prefix=wsmif{}".format(os.getpid()),
                "--no-pci"] + lcores + ["--vdev", vdev, "--"] + app + POOL

    def start(self, args, stdin=None):
        p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def read_until(self, p, text, count=1, timeout=20.0):
        """Reads p's output while it runs until `text` appeared `count` times (a failure when it
        does not); finish() returns what was read here too."""
        buf = self.early.get(p.pid, "")
        end = time.time() + timeout
        while buf.count(text) < count and time.time() < end and p.poll() is None:
            if select.select([p.stdout], [], [], 0.1)[0]:
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk.decode(errors="replace")
        self.early[p.pid] = buf
        self.assertGreaterEqual(buf.count(text), count, "'{}' did not come\n{}".format(text, buf[-3000:]))
        return ""

    def finish(self, p, timeout=30):
        out, _ = p.communicate(timeout=timeout)
        out = self.early.pop(p.pid, "") + out
        testpmd_harness.assert_no_crash(self, out, " ".join(p.args) + "\n" + out[-3000:])
        return out

    def summary(self, name):
        with open(os.path.join(self.tmp.name, name + ".json")) as f:
            return json.load(f)

    def check_side(self, s, out, what):
        self.assertTrue(s["pool_audit_ok"], "{}: pool audit failed\n{}".format(what, out[-2000:]))
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, what)
        self.assertTrue(s["accounting_exact"], "{}: accounting\n{}".format(what, out[-2000:]))

    def wait_socket(self, proc, timeout=10.0):
        end = time.time() + timeout
        while time.time() < end and not os.path.exists(self.sock):
            self.assertIsNone(proc.poll(), "the server exited before listening")
            time.sleep(0.05)
        self.assertTrue(os.path.exists(self.sock), "the server did not listen")

    def stop_ours(self, p):
        p.send_signal(signal.SIGINT)
        out = self.finish(p)
        self.assertEqual(p.returncode, 0, out[-3000:])
        return out


class OursWithOurs(MemifBase):
    """Our server io-forwards what our client (mac --tx-first) sends, and back."""

    def pair(self, txpkts="64", queues=1):
        q = ["--rxq={}".format(queues), "--txq={}".format(queues)]
        server = self.start(self.ours(SERVER_LCORES, self.vdev("server"),
                                      ["--forward-mode=io", "--auto-start", "--nb-cores=1"] + q, "server", 6))
        self.wait_socket(server)
        client = self.start(self.ours(CLIENT_LCORES, self.vdev("client"),
                                      ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1",
                                       "--txpkts=" + txpkts] + q, "client", WINDOW))
        cout = self.finish(client)
        self.assertEqual(client.returncode, 0, cout[-3000:])
        sout = self.stop_ours(server)
        cs, ss = self.summary("client"), self.summary("server")
        self.check_side(cs, cout, "client")
        self.check_side(ss, sout, "server")
        cp, sp = cs["ports"][0], ss["ports"][0]
        self.assertGreater(cp["rx_packets"], 10000, "too little traffic\n" + cout[-2000:] + sout[-2000:])
        in_flight = RING * queues
        self.assertLessEqual(sp["rx_packets"], cp["tx_packets"])
        self.assertLessEqual(cp["tx_packets"] - sp["rx_packets"], in_flight)
        self.assertLessEqual(cp["rx_packets"], sp["tx_packets"])
        self.assertLessEqual(sp["tx_packets"] - cp["rx_packets"], in_flight)
        size = int(txpkts)
        self.assertEqual(cp["rx_bytes"], cp["rx_packets"] * size, "every packet came back whole")
        self.assertEqual(sp["rx_bytes"], sp["rx_packets"] * size)
        self.assertIn("connected to", sout)
        return cs, ss

    def test_64B_and_1500B(self):
        for txpkts in ("64", "1500"):
            with self.subTest(txpkts=txpkts):
                self.pair(txpkts)
                self.doCleanups()
                self.setUp()

    def test_two_queues(self):
        self.pair(queues=2)

    def test_abstract_socket_and_secret(self):
        """DPDK's defaults: the socket in the abstract namespace; a secret both sides know."""
        name = "wsmemif{}".format(os.getpid())
        dev = "net_memif0,role={},socket=" + name + ",id=3,secret=sesame"
        server = self.start(self.ours(SERVER_LCORES, dev.format("server"), ["--forward-mode=io", "--auto-start"],
                                      "server", 6))
        time.sleep(0.5)
        client = self.start(self.ours(CLIENT_LCORES, dev.format("client"),
                                      ["--forward-mode=mac", "--auto-start", "--tx-first"], "client", WINDOW))
        cout = self.finish(client)
        sout = self.stop_ours(server)
        self.assertGreater(self.summary("client")["ports"][0]["rx_packets"], 1000, cout[-2000:] + sout[-2000:])


class Restarts(MemifBase):
    """A peer killed while traffic runs, and started again."""

    def test_client_killed_and_restarted(self):
        server = self.start(self.ours(SERVER_LCORES, self.vdev("server"),
                                      ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "server", 10))
        self.wait_socket(server)
        client_app = ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1"]
        first = self.start(self.ours(CLIENT_LCORES, self.vdev("client"), client_app, "first", 30))
        self.read_until(server, "connected to")
        time.sleep(0.5)
        first.kill()  # mid-traffic, no DISCONNECT: the socket just closes
        first.wait()
        second = self.start(self.ours(CLIENT_LCORES, self.vdev("client"), client_app, "second", WINDOW))
        cout = self.finish(second)
        self.assertEqual(second.returncode, 0, cout[-3000:])
        sout = self.stop_ours(server)
        self.check_side(self.summary("second"), cout, "second client")
        self.check_side(self.summary("server"), sout, "server")
        self.assertGreater(self.summary("second")["ports"][0]["rx_packets"], 10000, cout[-2000:] + sout[-2000:])
        self.assertEqual(sout.count("connected to"), 2, sout[-3000:])
        self.assertGreaterEqual(sout.count("disconnected; link down"), 2, sout[-3000:])

    def test_server_killed_and_restarted(self):
        server_app = ["--forward-mode=io", "--auto-start", "--nb-cores=1"]
        first = self.start(self.ours(SERVER_LCORES, self.vdev("server"), server_app, "first", 30))
        self.wait_socket(first)
        # txonly: the packets the killed server held are gone; new ones flow to its successor.
        client = self.start(self.ours(CLIENT_LCORES, self.vdev("client"),
                                      ["--forward-mode=txonly", "--auto-start", "--nb-cores=1"], "client", 4))
        self.read_until(first, "connected to")
        time.sleep(0.5)
        first.kill()
        first.wait()
        second = self.start(self.ours(SERVER_LCORES, self.vdev("server"), server_app, "second", 30))
        cout = self.finish(client)
        sout = self.stop_ours(second)
        self.assertEqual(client.returncode, 0, cout[-3000:])
        cs = self.summary("client")
        self.check_side(cs, cout, "client")
        self.assertEqual(cout.count("connected to"), 2, cout[-3000:])
        # Traffic resumed with the second server: it received thousands of packets.
        self.assertGreater(self.summary("second")["ports"][0]["rx_packets"], 1000, sout[-2000:] + cout[-2000:])


class OursWithDpdk(MemifBase):
    """dpdk-testpmd's net_memif on the other side, in either role. The client side sends first
    (a DPDK client waits for its link at start, as ours does when its server listens)."""

    def setUp(self):
        super().setUp()
        testpmd_harness.require_program(self, "dpdk-testpmd", "dpdk")

    def check_pair(self, ours, out, dout, burst):
        """`burst`: what dpdk-testpmd sent first (--tx-first), beyond what it received."""
        drx, dtx, ddrop = dpdk_adds_up(dout)
        self.assertEqual(drx + burst, dtx + ddrop, "dpdk-testpmd's accumulated line adds up\n" + dout[-2000:])
        p = ours["ports"][0]
        self.assertGreater(p["rx_packets"], 1000, out[-2000:] + dout[-2000:])
        self.assertGreaterEqual(p["tx_packets"], drx)
        self.assertLessEqual(p["tx_packets"] - drx, RING)
        self.assertGreaterEqual(dtx, p["rx_packets"])
        self.assertLessEqual(dtx - p["rx_packets"], RING)

    def dpdk_quit(self, p):
        p.stdin.write("\n")
        p.stdin.flush()
        return self.finish(p)

    def our_client(self, txpkts):
        # dpdk-testpmd stops first: DPDK 22.11's net_memif counts only the rings of the connection
        # that is up, so its statistics are gone once its client has left.
        dpdk = self.start(self.dpdk(SERVER_LCORES, self.vdev("server"), ["--forward-mode=io", "--auto-start"]),
                          stdin=subprocess.PIPE)
        # A DPDK server refuses clients ("ID not found") until its port has started.
        early = self.read_until(dpdk, "Press enter to exit")
        ours = self.start(self.ours(CLIENT_LCORES, self.vdev("client"),
                                    ["--forward-mode=mac", "--auto-start", "--tx-first", "--nb-cores=1",
                                     "--txpkts=" + txpkts], "ours", 10))
        time.sleep(WINDOW + 0.5)
        dout = early + self.dpdk_quit(dpdk)
        out = self.stop_ours(ours)
        s = self.summary("ours")
        self.check_side(s, out, "ours")
        self.check_pair(s, out, dout, 0)
        size = int(txpkts)
        self.assertEqual(s["ports"][0]["rx_bytes"], s["ports"][0]["rx_packets"] * size)

    def test_our_client_with_dpdk_server(self):
        for txpkts in ("64", "1500"):
            with self.subTest(txpkts=txpkts):
                self.our_client(txpkts)
                self.doCleanups()
                self.setUp()

    def test_our_server_with_dpdk_client(self):
        ours = self.start(self.ours(SERVER_LCORES, self.vdev("server"),
                                    ["--forward-mode=io", "--auto-start", "--nb-cores=1"], "ours", 10))
        self.wait_socket(ours)
        dpdk = self.start(self.dpdk(CLIENT_LCORES, self.vdev("client"),
                                    ["--forward-mode=mac", "--auto-start", "--tx-first"]), stdin=subprocess.PIPE)
        buf = self.read_until(dpdk, "Press enter to exit")
        time.sleep(WINDOW)
        dout = buf + self.dpdk_quit(dpdk)
        out = self.stop_ours(ours)
        s = self.summary("ours")
        self.check_side(s, out, "ours")
        self.check_pair(s, out, dout, 32)


if __name__ == "__main__":
    testpmd_harness.main(__import__(__name__))
