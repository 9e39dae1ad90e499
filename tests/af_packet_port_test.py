#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""net_af_packet on veth pairs in the test's own network namespaces: txonly on one end and rxonly
on the other with every count checked against the kernel's interface counters (ip -s link), two
queue pairs fanned out by flow hash, the kernel's ping across io forwarding between two veth
pairs, and device strings that must be refused with a clear error.

usage: af_packet_port_test.py --binary PATH [unittest options]
"""
import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main

class AfPacketCase(unittest.TestCase):
    def setUp(self):
        self.net = netns.for_test(self, "ap")
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-afp-")
        self.procs = []
        self.addCleanup(self.kill_procs)
        self.count = 0

    def kill_procs(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def start(self, ns, vdevs, app):
        """wirespeed-testpmd in namespace `ns`; returns (process, summary path)."""
        self.count += 1
        summary = os.path.join(self.tmp.name, "summary{}.json".format(self.count))
        args = ["ip", "netns", "exec", ns, BINARY, "-l", "0-1", "--no-huge"]
        for v in vdevs:
            args += ["--vdev", v]
        args += ["--", "--summary-json", summary] + testpmd_harness.SMALL_POOL + app
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        p.ws_args, p.ws_summary = args, summary
        self.procs.append(p)
        return p

    def finish(self, p, timeout=30):
        out, err = p.communicate(timeout=timeout)
        where = "command: {}\nexit: {}\nstdout:\n{}\nstderr:\n{}".format(" ".join(p.ws_args), p.returncode,
                                                                          out[-3000:], err[-3000:])
        testpmd_harness.assert_no_crash(self, out + err, where)
        self.assertEqual(p.returncode, 0, where)
        with open(p.ws_summary) as f:
            return json.load(f), where

    def pair(self):
        a, b = self.net.ns("a"), self.net.ns("b")
        self.net.veth("wsva", a, "wsvb", b)
        return a, b

    def tx_to_rx(self, tx_dev, rx_dev, tx_app, rx_app, rx_sockets=2):
        a, b = self.pair()
        before_a, before_b = netns.link_stats(a, "wsva"), netns.link_stats(b, "wsvb")
        rx = self.start(b, [rx_dev], ["--forward-mode=rxonly", "--duration", "120"] + rx_app)
        # The sender starts only once the receiver's sockets are bound, and the receiver is
        # stopped (SIGINT: a clean exit with its summary) only after the sender has exited and
        # the rings had time to drain, so every packet meets a bound socket however loaded the
        # machine is.
        self.assertTrue(netns.wait_packet_sockets(b, rx_sockets, rx), "the receiver did not come up")
        time.sleep(0.3)
        tx = self.start(a, [tx_dev], ["--duration", "0.7"] + tx_app)
        tx_sum, tx_where = self.finish(tx)
        time.sleep(0.5)
        rx.send_signal(signal.SIGINT)
        rx_sum, rx_where = self.finish(rx)
        after_a, after_b = netns.link_stats(a, "wsva"), netns.link_stats(b, "wsvb")
        sent = tx_sum["ports"][0]["tx_packets"]
        got = rx_sum["ports"][0]["rx_packets"]
        missed = rx_sum["ports"][0]["rx_missed"]
        k_tx = after_a["tx"]["packets"] - before_a["tx"]["packets"]
        k_drop = after_a["tx"]["dropped"] - before_a["tx"]["dropped"]
        k_rx = after_b["rx"]["packets"] - before_b["rx"]["packets"]
        where = "sender {} / receiver {} / kernel tx {} dropped {} rx {}\n{}\n{}".format(
            sent, got, k_tx, k_drop, k_rx, tx_where, rx_where)
        self.assertGreater(sent, 1000, where)
        self.assertEqual(sent, k_tx, "the sender's count is the kernel's TX count\n" + where)
        self.assertEqual(k_tx, k_rx + k_drop, "veth: what one end sent, the other received or dropped\n" + where)
        self.assertEqual(got + missed, k_rx, "the receiver's count (+ ring drops) is the kernel's RX count\n" + where)
        self.assertGreater(got, 0, where)
        self.assertEqual(rx_sum["mbufs_in_use_at_exit"], 0, where)
        return tx_sum, rx_sum


class TxRx(AfPacketCase):
    def test_txonly_to_rxonly_counts_match_kernel(self):
        self.tx_to_rx("net_af_packet0,iface=wsva", "net_af_packet0,iface=wsvb", ["--forward-mode=txonly"], [])

    def test_two_qpairs_fanout_and_ring_geometry(self):
        # flowgen's many flows spread over both RX queues by the kernel's fanout hash.
        _, rx_sum = self.tx_to_rx("net_af_packet0,iface=wsva,qpairs=2,qdisc_bypass=1,framecnt=1024",
                                  "net_af_packet0,iface=wsvb,qpairs=2,blocksz=65536,framesz=2048,framecnt=256",
                                  ["--forward-mode=flowgen", "--txq=2", "--rxq=2"], ["--rxq=2", "--txq=2"],
                                  rx_sockets=4)


class PingAcrossIo(AfPacketCase):
    def test_ping_through_io_forwarding(self):
        h1, h2, mid = self.net.ns("h1"), self.net.ns("h2"), self.net.ns("m")
        self.net.veth("wsh1", h1, "wsm1", mid, addr_a="10.99.7.1/24")
        self.net.veth("wsh2", h2, "wsm2", mid, addr_a="10.99.7.2/24")
        before = [netns.link_stats(mid, d) for d in ("wsm1", "wsm2")]
        fwd = self.start(mid, ["net_af_packet0,iface=wsm1", "net_af_packet1,iface=wsm2"],
                         ["--forward-mode=io", "--duration", "4"])
        self.assertTrue(netns.wait_packet_sockets(mid, 4, fwd), "the forwarder did not come up")
        time.sleep(0.3)
        ping = netns.sh("ping", "-c", "4", "-i", "0.2", "-W", "1", "10.99.7.2", ns=h1, check=False, timeout=20)
        s, where = self.finish(fwd)
        after = [netns.link_stats(mid, d) for d in ("wsm1", "wsm2")]
        self.assertEqual(ping.returncode, 0, "ping across io forwarding failed:\n" + ping.stdout + ping.stderr + where)
        self.assertIn("4 received", ping.stdout)
        for i in range(2):
            k_rx = after[i]["rx"]["packets"] - before[i]["rx"]["packets"]
            k_tx = after[i]["tx"]["packets"] - before[i]["tx"]["packets"]
            port = s["ports"][i]
            self.assertEqual(port["rx_packets"], k_rx, "port {} RX vs ip -s link\n{}".format(i, where))
            self.assertEqual(port["tx_packets"], k_tx, "port {} TX vs ip -s link\n{}".format(i, where))
            self.assertGreaterEqual(port["rx_packets"], 4, where)  # the echo requests or replies (+ ARP)


class BadDevices(unittest.TestCase):
    def refused(self, dev, *words):
        p = subprocess.run([BINARY, "-l", "0-1", "--no-huge", "--vdev", dev, "--", "--duration", "0.2"]
                           + testpmd_harness.SMALL_POOL,
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        for w in ["net_af_packet0"] + list(words):
            self.assertIn(w, p.stderr, p.stderr)
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr)

    def test_refused_device_strings(self):
        self.refused("net_af_packet0", "iface", "required")
        self.refused("net_af_packet0,iface=wsnosuchif0", "iface", "wsnosuchif0", "no such interface")
        self.refused("net_af_packet0,iface=lo,blocksz=5000", "blocksz", "5000")
        self.refused("net_af_packet0,iface=lo,framesz=1000", "framesz", "1000")
        self.refused("net_af_packet0,iface=lo,framecnt=3", "framecnt", "3")
        self.refused("net_af_packet0,iface=lo,qpairs=0", "qpairs")
        self.refused("net_af_packet0,iface=lo,queues=2", "queues")


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
