#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""examples/l2fwd and examples/l3fwd end to end on virtual ports: forwarding and counts on
net_null and net_ring, MAC rewrite, TTL and checksum checked frame by frame through net_pcap,
and every refused command line (exit code 2, a message naming the value).
Usage: examples_test.py --l2fwd PATH --l3fwd PATH [unittest args]."""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netpkt  # noqa: E402

L2FWD = L3FWD = None
EAL = ["-l", "0", "--no-huge"]  # one lcore: any machine, and the runs stay deterministic
CRASH = ["Sanitizer", "runtime error:", "Segmentation fault", "terminate called", "Aborted"]


class Run:
    """A running example: its output collected line by line, stopped with SIGINT."""

    def __init__(self, command, tmp):
        self.command = command
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=tmp)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.replace("\033[2J", "").replace("\033[1;1H", ""))

    def wait_for(self, predicate, timeout=20.0):
        """Waits until predicate(output so far) holds or the process ends; returns whether it held."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate("".join(self.lines)):
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        return predicate("".join(self.lines))

    def stop(self):
        """SIGINT, then the exit code and whole output."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=5)
        self.proc.stdout.close()
        return self.proc.returncode, "".join(self.lines)


def last_stats(output):
    """{port: {"sent": n, "received": n, "dropped": n, ...}} from the last statistics block."""
    block = output[output.rfind("Port statistics"):]
    stats = {}
    for port, body in re.findall(r"Statistics for port (\d+) -+\n((?:[A-Za-z ]+: +\d+\n?)+)", block):
        stats[int(port)] = {k.replace("Packets ", "").strip(): int(v)
                            for k, v in re.findall(r"([A-Za-z ]+): +(\d+)", body)}
    return stats


def received_at_least(port, n):
    return lambda out: "Port statistics" in out and last_stats(out).get(port, {}).get("received", 0) >= n


class ExampleCase(unittest.TestCase):
    def setUp(self):
        if 0 not in os.sched_getaffinity(0):
            self.skipTest("needs CPU 0 (the runs use -l 0)")
        self.tmp = tempfile.TemporaryDirectory(prefix="ws_examples_")
        self.addCleanup(self.tmp.cleanup)
        self.prefix = f"wsex{os.getpid()}"

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def run_until(self, binary, eal, app, predicate, settle=0.0):
        run = Run([binary] + EAL + ["--file-prefix", self.prefix] + eal + ["--"] + app, self.tmp.name)
        held = run.wait_for(predicate)
        time.sleep(settle)
        rc, out = run.stop()
        for marker in CRASH:
            self.assertNotIn(marker, out)
        self.assertTrue(held, f"condition not reached; output:\n{out[-3000:]}")
        self.assertEqual(rc, 0, out[-3000:])
        return out

    def refused(self, binary, eal, app, *needles):
        run = subprocess.run([binary] + EAL + ["--file-prefix", self.prefix] + eal + ["--"] + app,
                             capture_output=True, text=True, timeout=30, cwd=self.tmp.name)
        self.assertEqual(run.returncode, 2, f"{app}: {run.stdout}{run.stderr}")
        for needle in needles:
            self.assertIn(needle, run.stderr)


class L2fwd(ExampleCase):
    def test_null_pair_forwards_both_ways_and_counts_balance(self):
        out = self.run_until(L2FWD, ["--vdev", "net_null0", "--vdev", "net_null1"], ["-p", "0x3", "-q", "2", "-T", "1"],
                             received_at_least(1, 100000))
        s = last_stats(out)
        self.assertIn("Lcore 0: RX port 0 TX port 1", out)
        self.assertIn("Lcore 0: RX port 1 TX port 0", out)
        for rx, tx in ((0, 1), (1, 0)):  # what one port received, its pair sent or dropped
            self.assertGreater(s[rx]["received"], 0)
            self.assertEqual(s[rx]["received"], s[tx]["sent"] + s[tx]["dropped"])

    def test_through_a_ring_port(self):
        # null RX -> ring TX -> ring RX (loopback) -> null TX: only the ring may hold packets.
        out = self.run_until(L2FWD, ["--vdev", "net_null0", "--vdev", "net_ring0"], ["-p", "0x3", "-q", "2", "-T", "1"],
                             received_at_least(1, 100000))
        s = last_stats(out)
        self.assertEqual(s[0]["received"], s[1]["sent"] + s[1]["dropped"])
        self.assertEqual(s[1]["received"], s[0]["sent"] + s[0]["dropped"])
        self.assertLessEqual(s[1]["sent"] - s[1]["received"], 1024)  # at most the ring's size in flight
        self.assertGreater(s[1]["received"], 0)

    def test_mac_rewrite_frame_by_frame(self):
        frames = [netpkt.ipv4_udp_frame(f"10.0.0.{i}", ident=i) for i in range(100)]
        netpkt.write_pcap(self.path("in.pcap"), frames)
        for updating in (True, False):
            out_pcap = self.path(f"out{updating}.pcap")
            app = ["-p", "0x3", "-T", "1", "-q", "2"] + ([] if updating else ["--no-mac-updating"])
            out = self.run_until(L2FWD, ["--vdev", "net_pcap0,rx_pcap=in.pcap", "--vdev", f"net_pcap1,tx_pcap={out_pcap}"],
                                 app, received_at_least(0, 100))
            s = last_stats(out)
            self.assertEqual((s[0]["received"], s[1]["sent"], s[1]["dropped"]), (100, 100, 0))
            sent = netpkt.read_pcap(out_pcap)
            self.assertEqual(len(sent), 100)
            mac1 = re.search(r"Port 1, MAC address: (\S+)", out).group(1).upper()
            for before, after in zip(frames, sent):
                if updating:
                    self.assertEqual(netpkt.mac_text(after[0:6]), "02:00:00:00:00:01")
                    self.assertEqual(netpkt.mac_text(after[6:12]), mac1)
                    self.assertEqual(after[12:], before[12:])
                else:
                    self.assertEqual(after, before)

    def test_odd_port_count_sends_to_itself(self):
        out = self.run_until(L2FWD, ["--vdev", "net_null0"], ["-p", "0x1", "-T", "1"], received_at_least(0, 10000))
        self.assertIn("Notice: odd number of ports in portmask.", out)
        s = last_stats(out)
        self.assertEqual(s[0]["received"], s[0]["sent"] + s[0]["dropped"])

    def test_refused_command_lines(self):
        two = ["--vdev", "net_null0", "--vdev", "net_null1"]
        self.refused(L2FWD, two, ["-p", "0x0"], "port mask '0x0' names no port")
        self.refused(L2FWD, two, ["-p", "0x4"], "port mask '0x4' names port 2, which does not exist")
        self.refused(L2FWD, two, ["-p", "zz"], "port mask 'zz': expected a hexadecimal mask")
        self.refused(L2FWD, two, [], "-p PORTMASK is required")
        self.refused(L2FWD, two, ["-p", "0x3", "-q", "0"], "-q '0': expected a number 1-16")
        self.refused(L2FWD, two, ["-p", "0x3", "-T", "x"], "-T 'x': expected a number 0-86400")
        self.refused(L2FWD, two, ["-p", "0x3", "--bogus"], "unknown option '--bogus'")
        self.refused(L2FWD, two, ["-p", "0x3", "-q", "1"], "not enough lcores for -q 1 and -p 0x3")
        self.refused(L2FWD, [], ["-p", "0x1"], "no ports: give them with --vdev")
        self.refused(L2FWD, ["--vdev", "net_nosuch0"], ["-p", "0x1"], "net_nosuch0")


class L3fwd(ExampleCase):
    def l3fwd_pcap(self, frames, routes_text, app_extra=(), expect_rx=None):
        netpkt.write_pcap(self.path("in.pcap"), frames)
        with open(self.path("routes.cfg"), "w") as f:
            f.write(routes_text)
        eal = ["--vdev", "net_pcap0,rx_pcap=in.pcap,tx_pcap=out0.pcap", "--vdev", "net_pcap1,tx_pcap=out1.pcap"]
        app = ["-p", "0x3", "-T", "1", "--config", "(0,0,0)", "--rule_ipv4=routes.cfg"] + list(app_extra)
        out = self.run_until(L3FWD, eal, app, received_at_least(0, expect_rx or len(frames)))
        return out, last_stats(out), netpkt.read_pcap(self.path("out0.pcap")), netpkt.read_pcap(self.path("out1.pcap"))

    def test_routes_ttl_checksum_and_drops(self):
        routes = "# l3fwd test routes\nR10.0.0.0/8 1\nR10.1.0.0/16 0\nR192.168.1.0/24 1\nR192.168.1.128/25 0\n"
        frames = [netpkt.ipv4_udp_frame("10.2.3.4", ttl=64, ident=1),        # /8 -> port 1
                  netpkt.ipv4_udp_frame("10.1.2.3", ttl=2, ident=2),         # /16 -> port 0, TTL 2 -> 1
                  netpkt.ipv4_udp_frame("192.168.1.9", ttl=255, ident=3),    # /24 -> port 1
                  netpkt.ipv4_udp_frame("192.168.1.200", ttl=7, ident=4),    # /25 -> port 0
                  netpkt.ipv4_udp_frame("8.8.8.8", ident=5),                 # no route: dropped, counted
                  netpkt.ipv4_udp_frame("10.2.3.4", ttl=1, ident=6),         # TTL 1: not forwardable
                  netpkt.arp_frame()]                                        # not IPv4
        # Checksums of every shape: RFC 1624's update must equal a recomputation.
        frames += [netpkt.ipv4_udp_frame(f"10.9.{i}.{i}", ttl=2 + i, ident=i * 2654435761 % 65536, tos=i)
                   for i in range(200)]
        out, s, out0, out1 = self.l3fwd_pcap(frames, routes, ["--eth-dest=1,02:AA:BB:CC:DD:EE"])
        self.assertEqual(s[0]["received"], len(frames))
        self.assertEqual(s[0]["with no route"], 1)
        self.assertEqual(s[0]["not forwardable"], 2)
        self.assertEqual((s[0]["sent"], s[1]["sent"]), (2, len(frames) - 5))
        self.assertEqual(len(out0) + len(out1), len(frames) - 3)
        macs = {p: re.search(rf"Port {p}, MAC address: ([0-9A-Fa-f:]+)", out).group(1).upper() for p in (0, 1)}
        sent_in = {netpkt.ipv4_fields(f)[5][4:6]: f for f in frames[:4] + frames[7:]}  # by IP identification
        for port, sent in ((0, out0), (1, out1)):
            for frame in sent:
                dst_mac, src_mac, ttl, cksum, dst_ip, hdr = netpkt.ipv4_fields(frame)
                original = sent_in[hdr[4:6]]
                self.assertEqual(dst_mac, "02:00:00:00:00:00" if port == 0 else "02:AA:BB:CC:DD:EE")
                self.assertEqual(src_mac, macs[port])
                self.assertEqual(ttl, netpkt.ipv4_fields(original)[2] - 1)
                self.assertEqual(cksum, netpkt.ip_checksum(hdr[:10] + b"\0\0" + hdr[12:]), dst_ip)
                self.assertEqual(frame[34:], original[34:])
        self.assertEqual(sorted(netpkt.ipv4_fields(f)[4] for f in out0), ["10.1.2.3", "192.168.1.200"])

    def test_ttl_runs_out_on_a_ring_loop(self):
        # Port 1 is a loopback ring and routes to itself: each pass decrements the TTL once, until
        # a packet arrives with TTL 1 and is dropped: 63 receptions per packet sent with TTL 64.
        netpkt.write_pcap(self.path("in.pcap"), [netpkt.ipv4_udp_frame("10.0.0.1", ttl=64)] * 10)
        out = self.run_until(L3FWD, ["--vdev", "net_pcap0,rx_pcap=in.pcap", "--vdev", "net_ring0"],
                             ["-p", "0x3", "-T", "1", "--config", "(0,0,0),(1,0,0)", "--route", "10.0.0.0/8,1"],
                             lambda o: "Port statistics" in o and last_stats(o).get(1, {}).get("not forwardable") == 10)
        s = last_stats(out)
        self.assertEqual((s[1]["received"], s[1]["sent"], s[1]["not forwardable"]), (630, 630, 10))

    def test_null_ports_carry_no_ipv4(self):
        out = self.run_until(L3FWD, ["--vdev", "net_null0", "--vdev", "net_null1"], ["-p", "0x3", "-T", "1"],
                             received_at_least(0, 10000))
        s = last_stats(out)
        for p in (0, 1):  # zero-filled frames: not IPv4, each one counted
            self.assertEqual(s[p]["received"], s[p]["not forwardable"])
            self.assertEqual(s[p]["sent"], 0)

    def test_refused_command_lines(self):
        two = ["--vdev", "net_null0", "--vdev", "net_null1"]

        def with_routes(text, *needles):
            with open(self.path("r.cfg"), "w") as f:
                f.write(text)
            self.refused(L3FWD, two, ["-p", "0x3", "--rule_ipv4", "r.cfg"], *needles)

        with_routes("R10.0.0.0/8 1\nR10.0.0/8 1\n", "r.cfg:2: route 'R10.0.0/8 1'", "'10.0.0' is not an IPv4 address")
        with_routes("R10.0.0.0/8 1\nR10.0.0.0/8 0\n", "r.cfg:2: route 10.0.0.0/8 duplicates the prefix of line 1")
        with_routes("R10.1.0.0/8 1\n", "host bits set past /8 (the network is 10.0.0.0/8)")
        with_routes("R10.0.0.0/40 1\n", "length '40' is not 0-32")
        with_routes("R10.0.0.0/8 64\n", "next hop '64' is not a number 0-63")
        with_routes("".join(f"R10.{i // 256}.{i % 256}.1/32 1\n" for i in range(257)),
                    "route 10.1.0.1/32: no free tbl8 group (256 in use")
        with_routes("".join(f"R10.{i // 256}.{i % 256}.0/24 1\n" for i in range(1025)),
                    "route 10.4.0.0/24: the table is full (1024 routes, max_routes 1024)")
        self.refused(L3FWD, two, ["-p", "0x3", "--rule_ipv4", "missing.cfg"], "route file 'missing.cfg': cannot open")
        self.refused(L3FWD, two, ["-p", "0x3", "--route", "10.0.0.0/8"], "route '10.0.0.0/8': expected PREFIX NEXT_HOP")
        self.refused(L3FWD, two, ["-p", "0x0"], "port mask '0x0' names no port")
        self.refused(L3FWD, two, ["-p", "0x8"], "port mask '0x8' names port 3, which does not exist")
        self.refused(L3FWD, two, ["-p", "0x1", "--config", "(1,0,0)"], "--config (1,0,0): port 1 is not in -p 0x1")
        self.refused(L3FWD, two, ["-p", "0x3", "--config", "(0,0,5)"], "lcore 5 is not one of the EAL lcores")
        self.refused(L3FWD, two, ["-p", "0x3", "--config", "(0,0)"], "--config '(0,0)': expected (port,queue,lcore)")
        self.refused(L3FWD, two, ["-p", "0x3", "--lookup=em"], "--lookup=em: only lpm is available")
        self.refused(L3FWD, two, ["-p", "0x3", "--eth-dest=1,zz"], "--eth-dest '1,zz'")


def main():
    global L2FWD, L3FWD
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--l2fwd", required=True)
    parser.add_argument("--l3fwd", required=True)
    args, rest = parser.parse_known_args()
    L2FWD, L3FWD = os.path.abspath(args.l2fwd), os.path.abspath(args.l3fwd)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
