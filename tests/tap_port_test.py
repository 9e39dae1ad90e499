#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""net_tap with the kernel stack as the peer: in the test's own network namespace the kernel
pings the address icmpecho answers for (--icmpecho-ip) through a TAP port, with one queue and
with IFF_MULTI_QUEUE queues; an address the port does not own stays unanswered; `remote=` makes
the TAP stand in for a veth end (a ping from the veth's peer namespace is answered through it,
and the rules are gone after exit); `persist` (bare, as DPDK writes it) leaves the interface behind; bad device strings
and options are refused with a clear error. Flow rules: a drop and a queue rule on UDP ports the
kernel sends to become TC flower filters on the TAP (their counters read with `tc -s filter show`)
where the kernel has flower, gact and skbedit; a kernel without them refuses, and the rules run in
software after a log line naming the port. Either way the same packets are dropped and queued
(testpmd's per-stream counts).

usage: tap_port_test.py --binary PATH [unittest options]
"""
import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main

class TapCase(unittest.TestCase):
    """Root, /dev/net/tun, CPUs 0-1, a temp dir, namespaces and one testpmd process per test."""

    def setUp(self):
        netns.require_root(self)
        testpmd_harness.require(self, os.path.exists("/dev/net/tun"), "/dev/net/tun is missing (the tun module)")
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-tap-")
        self.net = netns.for_test(self, "tp")
        self.proc = None
        self.addCleanup(self.kill)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class TapPing(TapCase):
    def ping_icmpecho(self, queues):
        ns = self.net.ns("k")
        summary = os.path.join(self.tmp.name, "summary.json")
        args = ["ip", "netns", "exec", ns, BINARY, "-l", "0-1", "--no-huge", "--vdev",
                "net_tap0,iface=wstap0,mac=02:00:00:99:05:02", "--", "--summary-json", summary,
                "--forward-mode=icmpecho", "--icmpecho-ip=10.99.5.2", "--rxq={}".format(queues),
                "--txq={}".format(queues), "--duration", "4"] + testpmd_harness.SMALL_POOL
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 5
        while netns.sh("ip", "link", "show", "wstap0", ns=ns, check=False).returncode != 0:
            self.assertLess(time.time(), deadline, "the TAP interface did not appear")
            time.sleep(0.05)
        netns.sh("ip", "addr", "add", "10.99.5.1/24", "dev", "wstap0", ns=ns)
        netns.sh("ip", "link", "set", "wstap0", "up", ns=ns)
        time.sleep(0.3)
        sys_queues = netns.sh("ls", "/sys/class/net/wstap0/queues", ns=ns).stdout.split()
        ping = netns.sh("ping", "-c", "5", "-i", "0.2", "-W", "1", "10.99.5.2", ns=ns, check=False, timeout=20)
        other = netns.sh("ping", "-c", "1", "-W", "1", "10.99.5.3", ns=ns, check=False, timeout=20)
        arp = netns.sh("ip", "neigh", "show", "10.99.5.2", ns=ns).stdout
        out, err = self.proc.communicate(timeout=20)
        where = "ping:\n{}{}\ntestpmd exit {}\nstdout:\n{}\nstderr:\n{}".format(
            ping.stdout, ping.stderr, self.proc.returncode, out[-3000:], err[-3000:])
        testpmd_harness.assert_no_crash(self, out + err, where)
        self.assertEqual(self.proc.returncode, 0, where)
        self.assertEqual(ping.returncode, 0, where)
        self.assertIn("5 received", ping.stdout, where)
        self.assertNotEqual(other.returncode, 0, "10.99.5.3 is not the port's address\n" + other.stdout)
        self.assertIn("02:00:00:99:05:02", arp, "the kernel learned the port's MAC through ARP")
        with open(summary) as f:
            s = json.load(f)
        port = s["ports"][0]
        self.assertGreaterEqual(port["rx_packets"], 6, where)   # 5 echo requests + ARP (+ unanswered)
        self.assertGreaterEqual(port["tx_packets"], 6, where)   # 5 echo replies + ARP reply
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, where)
        return sys_queues

    def test_kernel_ping_into_icmpecho(self):
        self.ping_icmpecho(1)

    def test_multi_queue_tap(self):
        queues = self.ping_icmpecho(2)
        self.assertIn("rx-1", queues, "IFF_MULTI_QUEUE gives the interface two queues: {}".format(queues))


class TapRemoteAndPersist(TapCase):
    def run_testpmd(self, ns, vdev, seconds):
        args = ["ip", "netns", "exec", ns, BINARY, "-l", "0-1", "--no-huge", "--log-level=info", "--vdev", vdev, "--",
                "--forward-mode=icmpecho", "--icmpecho-ip=10.99.6.2", "--duration", str(seconds)]
        args += testpmd_harness.SMALL_POOL
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)

    def finish(self):
        out, err = self.proc.communicate(timeout=30)
        where = "testpmd exit {}\nstdout:\n{}\nstderr:\n{}".format(self.proc.returncode, out[-3000:], err[-3000:])
        testpmd_harness.assert_no_crash(self, out + err, where)
        self.assertEqual(self.proc.returncode, 0, where)
        return err, where

    def test_remote_answers_for_a_veth(self):
        # wirespeed-testpmd runs where the veth end wsi4r lives; the kernel of the peer namespace
        # pings 10.99.6.2 across the veth, and the answers come from icmpecho on the TAP.
        here, peer = self.net.ns("t"), self.net.ns("p")
        self.net.veth("wsi4r", here, "wsi4p", peer, addr_b="10.99.6.1/24")
        remote_mac = json.loads(netns.sh("ip", "-j", "link", "show", "wsi4r", ns=here).stdout)[0]["address"]
        self.run_testpmd(here, "net_tap0,iface=wsi4t,remote=wsi4r", 5)
        deadline = time.time() + 5
        while "wsi4t" not in netns.sh("tc", "filter", "show", "dev", "wsi4r", "ingress", ns=here, check=False).stdout:
            self.assertLess(time.time(), deadline, "no redirect rule on the remote")
            time.sleep(0.1)
        time.sleep(0.5)
        rules = netns.sh("tc", "filter", "show", "dev", "wsi4t", "ingress", ns=here).stdout
        ping = netns.sh("ping", "-c", "5", "-i", "0.2", "-W", "1", "10.99.6.2", ns=peer, check=False, timeout=20)
        arp = netns.sh("ip", "neigh", "show", "10.99.6.2", ns=peer).stdout
        err, where = self.finish()
        where = "ping:\n{}{}\nrules on the TAP:\n{}\n{}".format(ping.stdout, ping.stderr, rules, where)
        self.assertIn("wsi4r", rules, where)
        self.assertEqual(ping.returncode, 0, where)
        self.assertIn("5 received", ping.stdout, where)
        self.assertIn(remote_mac, arp, "the port answers ARP with the remote's address\n" + where)
        self.assertIn("redirected", err, where)
        left = netns.sh("tc", "filter", "show", "dev", "wsi4r", "ingress", ns=here, check=False).stdout
        self.assertNotIn("mirred", left, "the rules on the remote are removed at exit")
        self.assertNotIn("clsact", netns.sh("tc", "qdisc", "show", "dev", "wsi4r", ns=here).stdout)

    def test_persist_keeps_the_interface(self):
        ns = self.net.ns("k")
        self.run_testpmd(ns, "net_tap0,iface=wsi4keep,persist", 0.5)
        self.finish()
        self.assertEqual(netns.sh("ip", "link", "show", "wsi4keep", ns=ns, check=False).returncode, 0,
                         "persist=1: the TAP interface outlives the port")
        self.run_testpmd(ns, "net_tap0,iface=wsi4gone", 0.5)
        self.finish()
        self.assertNotEqual(netns.sh("ip", "link", "show", "wsi4gone", ns=ns, check=False).returncode, 0,
                            "without persist the TAP interface goes with the port")


class TapFlows(TapCase):
    SEND = ("import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            "for port in (7001,7002,7003):\n"
            "    for i in range(40): s.sendto(b'x'*32,('10.99.7.2',port))\n")

    def test_drop_and_queue_rules(self):
        ns = self.net.ns("f")
        args = ["ip", "netns", "exec", ns, BINARY, "-l", "0-1", "--no-huge", "--vdev",
                "net_tap0,iface=wstapf,mac=02:00:00:99:07:02", "--", "-i", "--forward-mode=rxonly", "--rxq=2",
                "--txq=2", "--disable-rss"] + testpmd_harness.SMALL_POOL
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.PIPE)
        deadline = time.time() + 5
        while netns.sh("ip", "link", "show", "wstapf", ns=ns, check=False).returncode != 0:
            self.assertLess(time.time(), deadline, "the TAP interface did not appear")
            time.sleep(0.05)
        netns.sh("sysctl", "-qw", "net.ipv6.conf.wstapf.disable_ipv6=1", ns=ns, check=False)
        netns.sh("ip", "addr", "add", "10.99.7.1/24", "dev", "wstapf", ns=ns)
        netns.sh("ip", "neigh", "add", "10.99.7.2", "lladdr", "02:00:00:99:07:02", "dev", "wstapf", ns=ns)
        self.proc.stdin.write(
            "flow create 0 ingress pattern eth / ipv4 / udp dst is 7001 / end actions drop / end\n"
            "flow create 0 ingress pattern eth / ipv4 / udp dst is 7002 / end actions queue index 1 / end\n"
            "flow list 0\nstart\n")
        self.proc.stdin.flush()
        # The port is started (link up) before the prompt reads the rules; flower filters appear
        # within a second where the kernel takes them (the log line below tells why not).
        while ",UP" not in netns.sh("ip", "link", "show", "wstapf", ns=ns).stdout:
            self.assertLess(time.time(), deadline, "the port did not start")
            time.sleep(0.05)
        ready = time.time() + 1
        while "flower" not in netns.sh("tc", "filter", "show", "dev", "wstapf", "egress", ns=ns, check=False).stdout:
            if time.time() > ready:
                break
            time.sleep(0.1)
        netns.sh("python3", "-c", self.SEND, ns=ns)
        time.sleep(0.5)
        filters = netns.sh("tc", "-s", "filter", "show", "dev", "wstapf", "egress", ns=ns, check=False).stdout
        out, err = self.proc.communicate("stop\nquit\n", timeout=30)
        where = "filters:\n{}\nstdout:\n{}\nstderr:\n{}".format(filters, out[-3000:], err[-3000:])
        testpmd_harness.assert_no_crash(self, out + err, where)
        per_queue = dict((int(q), int(n)) for q, n in re.findall(r"Queue=\s*(\d+) -> .*\n\s*RX-packets: (\d+)", out))
        # 7001 dropped; 7002 on queue 1; 7003 where the TAP put it (one flow: one queue).
        self.assertEqual(sum(per_queue.values()), 80, where)
        self.assertIn(per_queue.get(1, 0), (40, 80), where)
        if "Placement: #0 kernel TC, #1 kernel TC" in out:
            self.assertRegex(filters, r"gact action drop[\s\S]*Sent \d+ bytes 40 pkt", where)
            self.assertRegex(filters, r"queue_mapping 1[\s\S]*Sent \d+ bytes 40 pkt", where)
        else:
            probe = netns.sh("tc", "filter", "add", "dev", "wstapf", "egress", "protocol", "ip", "flower",
                             "action", "drop", ns=ns, check=False)
            self.assertNotEqual(probe.returncode, 0, "the kernel has flower, yet the rules stayed in software\n"
                                + where)
            self.assertIn("port 0 (net_tap0): flow rule #0 stays in software: device 'net_tap0': the kernel "
                          "refused the flower filter", err, where)
            # The kernel's own reason (its extended ack, e.g. "TC classifier not found"), then ours.
            self.assertRegex(err, r"refused the flower filter: [^\n]* \([^;\n]+; no cls_flower, act_gact or "
                             r"act_skbedit in this kernel\)", where)
            self.assertNotIn("Placement:", out, where)


class BadDevices(unittest.TestCase):
    def refused(self, vdev, app, *words):
        p = subprocess.run([BINARY, "-l", "0-1", "--no-huge", "--vdev", vdev, "--"] + app + ["--duration", "0.2"]
                           + testpmd_harness.SMALL_POOL,
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        for w in words:
            self.assertIn(w, p.stderr, p.stderr)
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr)

    def test_refused(self):
        self.refused("net_tap0,mac=02:00:zz:00:00:01", [], "net_tap0", "mac", "02:00:zz:00:00:01")
        self.refused("net_tap0,iface=aaaaaaaaaaaaaaaaaaaaaaa", [], "net_tap0", "iface", "longer")
        self.refused("net_tap0,remote=wsi4none", [], "net_tap0", "remote", "wsi4none", "no such interface")
        self.refused("net_tap0,persist=sometimes", [], "net_tap0", "persist", "sometimes")
        self.refused("net_tap0,flow_offload=2", [], "net_tap0", "flow_offload", "2")
        self.refused("net_null0", ["--forward-mode=icmpecho", "--icmpecho-ip=10.99.5.300"], "--icmpecho-ip")
        self.refused("net_null0", ["--forward-mode=icmpecho", "--icmpecho-ip=99,10.99.5.1"], "--icmpecho-ip")


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
