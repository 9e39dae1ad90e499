#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Live capture at the prompt (capture start <port> <file> [filter] / capture stop): pcapng
files checked by tshark (count, content, interface name and description, nanosecond
timestamps), a capture started and stopped while forwarding runs, and bad filters and paths.

With --built-in 0 (a build configured with -DWS_CAPTURE=OFF) only the refusals are checked:
the commands and --capture must say that capture is not built in.

usage: testpmd_capture_test.py --binary PATH [--built-in 1|0] [unittest options]
"""
import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import unittest

import testpmd_harness

BINARY = None
BUILT_IN = True
NOT_BUILT = "live capture is not built in (this wirespeed-testpmd was configured with -DWS_CAPTURE=OFF)"
EAL = ["-l", "0-1", "--no-huge", "--no-telemetry"]
POOL = ["--total-num-mbufs=8192"]
RING2 = ["--vdev", "net_ring0", "--vdev", "net_ring1"]
PROMPT = "testpmd> "


class CaptureCase(unittest.TestCase):
    needs_capture = True

    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        testpmd_harness.require_program(self, "tshark", "tshark")
        self.tmp = tempfile.TemporaryDirectory(prefix="ws-capture-")
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def session(self, lines, app=()):
        """Runs (line, seconds to wait after it) at the prompt; returns each line's output."""
        summary = self.path("summary.json")
        p = subprocess.Popen([BINARY] + EAL + RING2 + ["--", "-i", "--summary-json", summary] + POOL + list(app),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = b""

        def read_prompts(count):
            nonlocal out
            end = time.time() + 20
            while out.count(PROMPT.encode()) < count:
                self.assertLess(time.time(), end, out[-2000:])
                if select.select([p.stdout], [], [], 0.1)[0]:
                    data = os.read(p.stdout.fileno(), 65536)
                    if not data:
                        return
                    out += data

        try:
            read_prompts(1)
            for i, (line, wait_s) in enumerate(lines):
                p.stdin.write((line + "\n").encode())
                p.stdin.flush()
                time.sleep(wait_s)
                read_prompts(i + 2)
            rest, err = p.communicate(b"quit\n", timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        text, err = (out + rest).decode(errors="replace"), err.decode(errors="replace")
        for marker in ("Sanitizer", "runtime error:", "terminate called"):
            self.assertNotIn(marker, text + err)
        self.assertEqual(p.returncode, 0, text[-2000:] + err[-2000:])
        with open(summary) as f:
            s = json.load(f)
        self.assertTrue(s["pool_audit_ok"] and s["accounting_exact"], s)
        return text.split(PROMPT)[1:], s

    def tshark(self, path, *fields):
        args = ["tshark", "-r", path, "-T", "fields"]
        for f in fields:
            args += ["-e", f]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [l.split("\t") for l in r.stdout.splitlines()]


class Capture(CaptureCase):
    def test_filtered_captures_checked_by_tshark(self):
        udp, tcp, everything = self.path("udp9.pcapng"), self.path("tcp.pcapng"), self.path("all.pcapng")
        t0 = time.time()
        out, _ = self.session([
            ("set fwd rxonly", 0),
            ("capture start 0 {} udp port 9 and src host 198.18.0.1".format(udp), 0),
            ("capture start 1 {} tcp".format(tcp), 0),
            ("start tx_first", 0.5),
            ("capture stop", 0),
            ("stop", 0),
            ("capture start 1 {}".format(everything), 0),
            ("start tx_first 2", 0.5),
            ("stop", 0),
        ])
        t1 = time.time()
        self.assertIn("Capturing port 0 to " + udp + " with filter: udp port 9 and src host 198.18.0.1", out[1])
        self.assertIn("Capture of port 0 stopped: 32 packets written", out[4])
        self.assertIn("Capture of port 1 stopped: 0 packets written to {} (32 received)".format(tcp), out[4])
        rows = self.tshark(udp, "frame.time_epoch", "frame.interface_name", "frame.interface_description",
                           "ip.src", "ip.dst", "udp.srcport", "udp.dstport", "frame.len")
        self.assertEqual(len(rows), 32)
        for ts, name, descr, src, dst, sport, dport, length in rows:
            self.assertTrue(t0 <= float(ts) <= t1, (t0, ts, t1))
            self.assertEqual((name, descr), ("net_ring0", "wirespeed port 0 (net_ring)"))
            self.assertEqual((src, dst, sport, dport, length), ("198.18.0.1", "198.18.0.2", "9", "9", "64"))
        self.assertEqual(self.tshark(tcp, "frame.number"), [])
        # A capture left running is closed at exit: 64 packets from two bursts of tx_first.
        self.assertEqual(len(self.tshark(everything, "frame.number")), 64)
        info = subprocess.run(["capinfos", "-t", "-E", "-i", everything], capture_output=True, text=True)
        if info.returncode == 0:
            self.assertIn("pcapng", info.stdout)
            self.assertIn("Ethernet", info.stdout)

    def test_capture_while_forwarding(self):
        path = self.path("flow5.pcapng")
        out, summary = self.session([
            ("set fwd flowgen", 0),
            ("start", 0.3),
            ("capture start 0 {} dst host 10.253.0.5".format(path), 0.5),
            ("show port stats 0", 0),
            ("capture stop 0", 0),
            ("stop", 0),
        ])
        written = int(re.search(r"Capture of port 0 stopped: (\d+) packets written", out[4]).group(1))
        self.assertGreater(written, 0, out[4])
        rows = self.tshark(path, "ip.dst", "udp.dstport")
        self.assertEqual(len(rows), written)
        self.assertEqual({tuple(r) for r in rows}, {("10.253.0.5", "1001")})
        # Forwarding went on through the capture: one run, its counters never reset.
        self.assertEqual(out[5].count("Telling cores to stop"), 1)
        self.assertNotIn("packet forwarding - ports", "".join(out[2:5]))
        self.assertGreater(summary["ports"][0]["rx_packets"], written * 1024 // 2)

    def test_bad_filters_paths_and_arguments(self):
        missing_dir = self.path("no/such/dir/x.pcapng")
        out, _ = self.session([
            ("capture start 0 {} not a filter((".format(self.path("bad.pcapng")), 0),
            ("capture start 0 {} port 99999".format(self.path("bad2.pcapng")), 0),
            ("capture start 0 " + missing_dir, 0),
            ("capture start 5 " + self.path("x.pcapng"), 0),
            ("capture start 0", 0),
            ("capture stop", 0),
            ("capture bogus", 0),
        ])
        self.assertIn("capture filter 'not a filter((':", out[0])
        self.assertIn("tcpdump syntax", out[0])
        self.assertIn("capture filter 'port 99999':", out[1])
        self.assertIn("capture file '{}'".format(missing_dir), out[2])
        self.assertIn("No such file or directory", out[2])
        self.assertIn("port '5' does not exist", out[3])
        self.assertIn("usage: capture start <port> <file> [<filter>...]", out[4])
        self.assertIn("No capture running", out[5])
        self.assertIn("capture start <port> <file>", out[6])
        self.assertFalse(os.path.exists(self.path("bad.pcapng")))


class CaptureOption(CaptureCase):
    def test_capture_from_the_command_line(self):
        path = self.path("opt.pcapng")
        r = subprocess.run([BINARY] + EAL + RING2 + ["--", "--forward-mode=rxonly", "--tx-first", "--duration", "0.5",
                            "--capture", "1," + path + ",udp dst port 9"] + POOL,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout[-2000:] + r.stderr)
        self.assertIn("Capturing port 1 to " + path + " with filter: udp dst port 9", r.stdout)
        rows = self.tshark(path, "frame.interface_name", "ip.dst")
        self.assertEqual(rows, [["net_ring1", "198.18.0.2"]] * 32)

    def test_bad_capture_option(self):
        for spec, needle in (("0", "PORT,FILE[,FILTER]"), ("0,{},udp port x".format(self.path("b.pcapng")),
                                                          "capture filter 'udp port x'")):
            with self.subTest(spec=spec):
                r = subprocess.run([BINARY] + EAL + RING2 + ["--", "--duration", "0.5", "--capture", spec] + POOL,
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertNotIn("packet forwarding - ports", r.stdout)


class CaptureNotBuiltIn(CaptureCase):
    needs_capture = False

    def test_commands_and_option_refuse(self):
        out, _ = self.session([
            ("capture start 0 " + self.path("x.pcapng") + " udp", 0),
            ("capture stop", 0),
            ("capture start 0", 0),
            ("help capture", 0),
        ])
        self.assertIn("error: " + NOT_BUILT, out[0])
        self.assertIn("error: " + NOT_BUILT, out[1])
        self.assertIn("usage: capture start <port> <file> [<filter>...]", out[2])
        self.assertIn("not built in (-DWS_CAPTURE=OFF)", out[3])
        self.assertFalse(os.path.exists(self.path("x.pcapng")))
        r = subprocess.run([BINARY] + EAL + RING2 + ["--", "--duration", "0.5", "--capture", "0,/dev/null"] + POOL,
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--capture=0,/dev/null: " + NOT_BUILT, r.stderr)
        self.assertNotIn("packet forwarding - ports", r.stdout)


def load_tests(loader, tests, pattern):
    """Only the cases of the build under test: capture built in (Capture, CaptureOption), or
    configured with -DWS_CAPTURE=OFF (CaptureNotBuiltIn, the refusals)."""
    suite = unittest.TestSuite()
    for case in (Capture, CaptureOption, CaptureNotBuiltIn):
        if case.needs_capture == BUILT_IN:
            suite.addTests(loader.loadTestsFromTestCase(case))
    return suite


def main():
    global BINARY, BUILT_IN
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--built-in", type=int, choices=(0, 1), default=1)
    args, rest = parser.parse_known_args()
    BINARY = os.path.abspath(args.binary)
    BUILT_IN = bool(args.built_in)
    if not os.access(BINARY, os.X_OK):
        sys.exit("not an executable: " + BINARY)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
