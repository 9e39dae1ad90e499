#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Scenarios for the real wirespeed-testpmd binary: every forwarding mode on net_null and net_ring
ports, checked through --summary-json (exact packet accounting, pool audit, port counters that
agree with the stream totals), the periodic and final statistics, the prompt, SIGINT, and bad
command lines that must fail cleanly (exit 2, one error line, nothing started).

usage: testpmd_scenarios_test.py --binary PATH [unittest options]
"""
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import unittest

import testpmd_harness

BINARY = None  # set from --binary by testpmd_harness.main
EAL = ["-l", "0-1", "--no-huge"]
POOL = ["--total-num-mbufs=8192"]
NULL2 = ["--vdev", "net_null0", "--vdev", "net_null1"]
MODES = ["io", "mac", "macswap", "flowgen", "txonly", "rxonly"]



class Run:
    """One finished process: exit code, output and (if written) the summary JSON."""

    def __init__(self, args, returncode, stdout, stderr, summary):
        self.args, self.returncode, self.stdout, self.stderr, self.summary = args, returncode, stdout, stderr, summary

    def describe(self):
        return "command: {}\nexit: {}\n--- stdout (tail) ---\n{}\n--- stderr ---\n{}".format(
            " ".join(self.args), self.returncode, self.stdout[-3000:], self.stderr[-3000:])


class TestpmdCase(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-testpmd-")
        self.runs = 0

    def summary_path(self):
        self.runs += 1
        return os.path.join(self.tmp.name, "summary{}.json".format(self.runs))

    def read_summary(self, path):
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    def run_testpmd(self, eal, app, stdin_text=None, timeout=30, summary=True):
        path = self.summary_path()
        # The summary option goes first so that a test can end the line with an incomplete option.
        args = [BINARY] + eal + ["--"] + (["--summary-json", path] if summary else []) + app
        p = subprocess.run(args, input=stdin_text if stdin_text is not None else "", capture_output=True, text=True,
                           timeout=timeout)
        run = Run(args, p.returncode, p.stdout, p.stderr, self.read_summary(path))
        self.assert_no_crash(run)
        return run

    def assert_no_crash(self, run):
        testpmd_harness.assert_no_crash(self, run.stderr, run.describe())
        testpmd_harness.assert_no_crash(self, run.stdout, run.describe())
        self.assertGreaterEqual(run.returncode, 0, "killed by a signal\n" + run.describe())

    def assert_clean_run(self, run):
        """Exit 0, no error printed, a summary with exact accounting and a full pool."""
        self.assertEqual(run.returncode, 0, run.describe())
        self.assertNotIn("error", run.stderr, run.describe())
        s = run.summary
        self.assertIsNotNone(s, "no summary JSON written\n" + run.describe())
        t = s["totals"]
        self.assertEqual(t["rx_packets"] + t["generated"], t["tx_packets"] + t["fwd_dropped"] + t["consumed"],
                         "accounting identity\n" + json.dumps(s, indent=1))
        self.assertTrue(s["accounting_exact"], json.dumps(s, indent=1))
        self.assertTrue(s["pool_audit_ok"], json.dumps(s, indent=1))
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, json.dumps(s, indent=1))
        return s

    def assert_ports_match_totals(self, s):
        """Port counters (this run's deltas) sum to the stream totals."""
        t = s["totals"]
        self.assertEqual(sum(p["rx_packets"] for p in s["ports"]), t["rx_packets"], json.dumps(s, indent=1))
        self.assertEqual(sum(p["tx_packets"] for p in s["ports"]), t["tx_packets"], json.dumps(s, indent=1))

    def assert_bytes_per_packet(self, s, rx_size=None, tx_size=None):
        for p in s["ports"]:
            if rx_size is not None:
                self.assertEqual(p["rx_bytes"], p["rx_packets"] * rx_size, p)
            if tx_size is not None:
                self.assertEqual(p["tx_bytes"], p["tx_packets"] * tx_size, p)

    def assert_forward_stats_printed(self, run, ports=(0, 1)):
        for port in ports:
            self.assertIn("Forward statistics for port {}".format(port), run.stdout, run.describe())
        self.assertIn("Accumulated forward statistics for all ports", run.stdout, run.describe())


class ForwardModesOnNull(TestpmdCase):
    def test_every_mode_accounts_exactly(self):
        for mode in MODES:
            with self.subTest(mode=mode):
                extra = ["--eth-peer=0,02:00:00:00:00:09"] if mode == "mac" else []
                run = self.run_testpmd(EAL + NULL2, ["--forward-mode=" + mode, "--duration", "0.5"] + extra + POOL)
                s = self.assert_clean_run(run)
                self.assert_forward_stats_printed(run)
                self.assertEqual(s["forward_mode"], mode)
                self.assertEqual(s["forwarding_cores"], 1)
                self.assertEqual(len(s["ports"]), 2)
                self.assertGreater(s["mpps"], 0, json.dumps(s, indent=1))
                self.assert_ports_match_totals(s)
                t = s["totals"]
                ports = s["ports"]
                # net_null RX makes 64-byte packets; flowgen sends 64 - 4 (FCS) as dpdk-testpmd.
                self.assert_bytes_per_packet(s, rx_size=64, tx_size=60 if mode == "flowgen" else 64)
                if mode in ("io", "mac", "macswap"):
                    self.assertGreater(t["rx_packets"], 0)
                    self.assertEqual(t["generated"] + t["consumed"] + t["fwd_dropped"], 0, t)
                    self.assertEqual(t["rx_packets"], t["tx_packets"])
                    # Paired topology: what port 1 receives leaves through port 0 and back.
                    self.assertEqual(ports[0]["tx_packets"], ports[1]["rx_packets"])
                    self.assertEqual(ports[1]["tx_packets"], ports[0]["rx_packets"])
                elif mode == "txonly":
                    self.assertEqual(t["rx_packets"], 0)
                    self.assertGreater(t["tx_packets"], 0)
                    self.assertEqual(t["generated"], t["tx_packets"] + t["fwd_dropped"])
                    for p in ports:
                        self.assertGreater(p["tx_packets"], 0, p)
                elif mode == "rxonly":
                    self.assertEqual(t["tx_packets"], 0)
                    self.assertGreater(t["rx_packets"], 0)
                    self.assertEqual(t["consumed"], t["rx_packets"])
                elif mode == "flowgen":
                    self.assertGreater(t["tx_packets"], 0)
                    self.assertEqual(t["consumed"], t["rx_packets"])
                    self.assertEqual(t["generated"], t["tx_packets"] + t["fwd_dropped"])

    def test_io_port_bytes_follow_each_ports_packet_size(self):
        run = self.run_testpmd(EAL + ["--vdev", "net_null0,size=128", "--vdev", "net_null1,size=256"],
                               ["--forward-mode=io", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        p0, p1 = s["ports"]
        self.assertGreater(p0["rx_packets"], 0)
        self.assertEqual(p0["rx_bytes"], p0["rx_packets"] * 128)
        self.assertEqual(p1["rx_bytes"], p1["rx_packets"] * 256)
        # Port 0 transmits what port 1 received, and back.
        self.assertEqual(p0["tx_bytes"], p0["tx_packets"] * 256)
        self.assertEqual(p1["tx_bytes"], p1["tx_packets"] * 128)

    def test_txonly_multi_segment(self):
        run = self.run_testpmd(EAL + NULL2, ["--forward-mode=txonly", "--txpkts=64,1400", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        self.assertGreater(s["totals"]["tx_packets"], 0)
        self.assert_bytes_per_packet(s, tx_size=64 + 1400)

    def test_no_rx_port_receives_nothing(self):
        run = self.run_testpmd(EAL + ["--vdev", "net_null0,no-rx=1", "--vdev", "net_null1"],
                               ["--forward-mode=io", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        p0, p1 = s["ports"]
        self.assertEqual(p0["rx_packets"], 0)
        self.assertEqual(p1["tx_packets"], 0)  # nothing came in on port 0 to send out of port 1
        self.assertGreater(p1["rx_packets"], 0)
        self.assertEqual(p0["tx_packets"], p1["rx_packets"])


class Flowgen(TestpmdCase):
    def test_clones_and_no_clones(self):
        results = {}
        for clones in (16, 0):
            with self.subTest(clones=clones):
                run = self.run_testpmd(EAL + NULL2, ["--forward-mode=flowgen", "--flowgen-clones={}".format(clones),
                                                     "--disable-crc-strip", "--duration", "0.5"] + POOL)
                s = self.assert_clean_run(run)
                self.assert_ports_match_totals(s)
                self.assertGreater(s["totals"]["tx_packets"], 0)
                for p in s["ports"]:
                    self.assertGreater(p["tx_packets"], 0, p)
                    self.assertEqual(p["tx_bytes"] / p["tx_packets"], 60, p)  # 64 minus the 4-byte FCS
                results[clones] = s
        self.assertEqual(set(results), {0, 16})


class RingPorts(TestpmdCase):
    def check_circulates(self, vdevs):
        run = self.run_testpmd(EAL + vdevs, ["--forward-mode=io", "--tx-first", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        t = s["totals"]
        # --tx-first: one txonly burst (32) per stream, then io keeps those packets moving.
        self.assertEqual(t["generated"], 2 * 32, t)
        self.assertEqual(t["fwd_dropped"], 0, t)
        self.assertGreater(t["tx_packets"], t["generated"], t)
        self.assertGreater(t["rx_packets"], 0, t)
        in_flight = t["tx_packets"] - t["rx_packets"]
        self.assertTrue(0 <= in_flight <= t["generated"], t)
        # Bytes are counted only with count_bytes=1 (the last device asks for it; the first not).
        self.assert_bytes_per_packet({"ports": s["ports"][1:]}, rx_size=64, tx_size=64)
        self.assertEqual(s["ports"][0]["rx_bytes"] + s["ports"][0]["tx_bytes"], 0, s["ports"][0])
        for p in s["ports"]:
            self.assertEqual(p["driver"], "net_ring")
            self.assertGreater(p["tx_packets"], 0, p)

    def test_two_loopback_ring_ports_with_tx_first(self):
        self.check_circulates(["--vdev", "net_ring0", "--vdev", "net_ring1,count_bytes=1"])

    def test_paired_ring_ports_with_tx_first(self):
        self.check_circulates(["--vdev", "net_ring0", "--vdev", "net_ring1,peer=net_ring0,count_bytes=1"])

    def test_named_tx_ring_nobody_reads_is_drained_at_exit(self):
        # txonly into a named ring with no reader: it fills, the rest is dropped, and at exit
        # the mbufs still in the ring go back to the pool (the audit passes).
        run = self.run_testpmd(EAL + ["--vdev", "net_ring0,rx_ring=a,tx_ring=b"],
                               ["--forward-mode=txonly", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        t = s["totals"]
        self.assertEqual(t["tx_packets"], 1024, t)  # the ring's size
        self.assertGreater(t["fwd_dropped"], 0, t)

    def test_ring_without_tx_first_stays_idle(self):
        run = self.run_testpmd(EAL + ["--vdev", "net_ring0", "--vdev", "net_ring1,peer=net_ring0"],
                               ["--forward-mode=io", "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assertEqual(s["totals"]["rx_packets"] + s["totals"]["tx_packets"], 0, s["totals"])


class QueuesAndCores(TestpmdCase):
    def test_two_queues_one_core(self):
        run = self.run_testpmd(EAL + NULL2, ["--forward-mode=io", "--rxq=2", "--txq=2", "--nb-cores=1",
                                             "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        self.assertEqual(s["forwarding_cores"], 1)
        self.assertIn("cores=1 - streams=4", run.stdout, run.describe())
        self.assertGreater(s["totals"]["rx_packets"], 0)
        self.assert_bytes_per_packet(s, rx_size=64, tx_size=64)

    def test_two_cores_from_an_lcore_map(self):
        eal = ["--lcores", "0@0,1@0,2@1", "--no-huge"] + NULL2
        for app in (["--nb-cores=2"], ["--rxq=2", "--txq=2", "--nb-cores=2"]):
            with self.subTest(app=app):
                run = self.run_testpmd(eal, ["--forward-mode=io", "--duration", "0.5"] + app + POOL)
                s = self.assert_clean_run(run)
                self.assert_ports_match_totals(s)
                self.assertEqual(s["forwarding_cores"], 2)
                self.assertIn("cores=2", run.stdout, run.describe())
                for p in s["ports"]:
                    self.assertGreater(p["rx_packets"], 0, p)
                    self.assertGreater(p["tx_packets"], 0, p)
                self.assert_bytes_per_packet(s, rx_size=64, tx_size=64)


    def test_uneven_queue_counts_never_share_a_tx_queue(self):
        # As dpdk-testpmd: streams cover min(rxq, txq) queues with TX queue = RX queue. Two lcores
        # sending on one TX queue would break the one-poller-per-queue contract (net_null's
        # counters lose updates, net_ring's single-producer rings corrupt).
        eal = ["--lcores", "0@0,1@0,2@1", "--no-huge"] + NULL2
        for queues in (["--rxq=2", "--txq=1"], ["--rxq=1", "--txq=2"]):
            with self.subTest(queues=queues):
                run = self.run_testpmd(eal, ["--forward-mode=txonly", "--nb-cores=2", "--duration", "0.5"] + queues +
                                       POOL)
                s = self.assert_clean_run(run)
                self.assertIn("cores=2 - streams=2", run.stdout, run.describe())
                self.assert_ports_match_totals(s)
                self.assert_bytes_per_packet(s, tx_size=64)

    def test_ring_ports_on_two_cores(self):
        eal = ["--lcores", "0@0,1@0,2@1", "--no-huge", "--vdev", "net_ring0", "--vdev", "net_ring1,peer=net_ring0"]
        run = self.run_testpmd(eal, ["--forward-mode=io", "--tx-first", "--nb-cores=2", "--rxq=2", "--txq=2",
                                     "--duration", "0.5"] + POOL)
        s = self.assert_clean_run(run)
        self.assert_ports_match_totals(s)
        t = s["totals"]
        self.assertEqual(t["generated"], 4 * 32, t)  # one burst on each of the 4 streams
        self.assertGreater(t["tx_packets"], t["generated"], t)
        self.assertTrue(0 <= t["tx_packets"] - t["rx_packets"] - t["fwd_dropped"] <= t["generated"], t)


class StatisticsOutput(TestpmdCase):
    def test_periodic_nic_statistics_then_forward_statistics(self):
        run = self.run_testpmd(EAL + NULL2, ["--stats-period=1", "--duration", "2.2"] + POOL)
        self.assert_clean_run(run)
        out = run.stdout
        self.assertGreaterEqual(out.count("NIC statistics for port 0"), 1, run.describe())
        for label in ("Rx-pps:", "Tx-pps:", "Tx-bps:"):
            self.assertIn(label, out, run.describe())
        tx_pps = [int(v) for v in re.findall(r"Tx-pps:\s+(\d+)", out)]
        self.assertTrue(any(v > 0 for v in tx_pps), tx_pps)
        self.assert_forward_stats_printed(run)
        # The periodic blocks come while forwarding, the forward statistics at the end.
        self.assertLess(out.index("NIC statistics for port 0"), out.index("Forward statistics for port 0"))


class Prompt(TestpmdCase):
    COMMANDS = "start\nshow port stats all\nstop\nquit\n"

    def check_prompt_run(self, run):
        s = self.assert_clean_run(run)
        self.assertIn("NIC statistics for port 0", run.stdout, run.describe())
        self.assert_forward_stats_printed(run)
        self.assertIn("packet forwarding - ports=2", run.stdout, run.describe())
        self.assertNotIn("Bad command", run.stdout, run.describe())
        return s

    def test_interactive_commands_on_stdin(self):
        run = self.run_testpmd(EAL + NULL2, ["-i"] + POOL, stdin_text=self.COMMANDS)
        self.check_prompt_run(run)
        self.assertIn("testpmd>", run.stdout)

    def test_cmdline_file(self):
        path = os.path.join(self.tmp.name, "cmds.txt")
        with open(path, "w") as f:
            f.write(self.COMMANDS)
        run = self.run_testpmd(EAL + NULL2, ["--cmdline-file=" + path] + POOL)
        self.check_prompt_run(run)
        self.assertIn("Read CLI commands from " + path, run.stdout)

    def test_port_restart_returns_what_the_rings_held(self):
        """A virtio_user port and its net_vhost peer in one process: `start tx_first`, `port stop
        all`, `port start all`, again. The restart zeroes the rings; the RX buffers the first
        start posted go back to the pool first (the audit at exit counts every mbuf: 256 were
        missing before)."""
        sock = os.path.join(self.tmp.name, "restart.sock")
        path = os.path.join(self.tmp.name, "restart.txt")
        with open(path, "w") as f:
            f.write("start tx_first\nstop\nport stop all\nport start all\nstart tx_first\nstop\nquit\n")
        vdevs = ["--vdev", "net_vhost0,iface=" + sock, "--vdev", "net_virtio_user0,path=" + sock]
        run = self.run_testpmd(EAL + vdevs, ["--cmdline-file=" + path] + POOL)
        self.assertEqual(run.returncode, 0, run.describe())
        s = run.summary
        self.assertIsNotNone(s, run.describe())
        # The stop takes net_vhost0 down before net_virtio_user0, whose last TX burst is then
        # never completed: dropped and counted (oerrors), which the accounting includes.
        self.assertTrue(s["accounting_exact"], json.dumps(s, indent=1))
        self.assertTrue(s["pool_audit_ok"], json.dumps(s, indent=1))
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, json.dumps(s, indent=1))

    def test_cmdline_file_then_interactive(self):
        path = os.path.join(self.tmp.name, "start.txt")
        with open(path, "w") as f:
            f.write("start\nshow port stats all\n")
        run = self.run_testpmd(EAL + NULL2, ["-i", "--cmdline-file", path] + POOL, stdin_text="stop\nquit\n")
        self.check_prompt_run(run)
        # The file's "start" ran before the prompt's "stop" (how many bursts fit between them
        # depends on scheduling, so no packet count is asserted).
        self.assertLess(run.stdout.index("packet forwarding - ports="), run.stdout.index("Telling cores to stop"))


class Signals(TestpmdCase):
    def test_sigint_ends_an_open_ended_run(self):
        run = self.interrupted_run(["--stats-period=1"], stdin=subprocess.DEVNULL, sig=signal.SIGINT)
        self.assertIn("NIC statistics for port 0", run.stdout, run.describe())

    def test_signals_end_the_interactive_prompt(self):
        # stdin stays open and silent: the signal alone must end the prompt (and forwarding).
        for sig in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=sig.name):
                self.interrupted_run(["-i", "--auto-start"], stdin=subprocess.PIPE, sig=sig)

    def interrupted_run(self, app, stdin, sig):
        path = self.summary_path()
        args = [BINARY] + EAL + NULL2 + ["--", "--summary-json", path] + app + POOL
        p = subprocess.Popen(args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = []
        started = threading.Event()

        def read_stdout():
            for line in p.stdout:
                lines.append(line)
                if "packet forwarding - ports=" in line:
                    started.set()

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        try:
            self.assertTrue(started.wait(15), "forwarding never started")
            time.sleep(1.5)
            self.assertIsNone(p.poll(), "exited before the signal")
            p.send_signal(sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.fail("still running 10 s after {}".format(sig.name))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            reader.join(5)
            for f in (p.stdin, p.stdout):
                if f:
                    f.close()
        run = Run(args, p.returncode, "".join(lines), p.stderr.read(), self.read_summary(path))
        p.stderr.close()
        self.assert_no_crash(run)
        self.assert_clean_run(run)
        self.assert_forward_stats_printed(run)
        self.assertGreater(run.summary["totals"]["rx_packets"], 0)
        return run


class BadInput(TestpmdCase):
    """Each mistake: exit 2, one error line naming it and what is accepted, nothing started."""

    def check_refused(self, eal, app, needles):
        run = self.run_testpmd(eal, ["--duration", "0.5"] + app, timeout=20)
        self.assertEqual(run.returncode, 2, run.describe())
        lines = [l for l in run.stderr.splitlines() if l.strip()]
        errors = [l for l in lines if "error" in l]
        self.assertEqual(len(errors), 1, run.describe())
        # Besides the error, at most the one-line usage reminder.
        self.assertTrue(all(l in errors or l.startswith("usage:") for l in lines), run.describe())
        for needle in needles:
            self.assertIn(needle, errors[0], run.describe())
        self.assertNotIn("Port 0:", run.stdout, "a port was started\n" + run.describe())
        self.assertNotIn("packet forwarding", run.stdout, run.describe())
        self.assertIsNone(run.summary, "a summary was written for a run that never started")

    def test_bad_devices(self):
        cases = [
            ("unknown driver", "net_bogus0", ["net_bogus0", "known drivers", "net_null", "net_ring"]),
            ("unknown key", "net_null0,sise=64", ["sise", "known keys", "size", "copy", "no-rx"]),
            ("malformed key", "net_null0,size", ["'size'", "key=value"]),
            ("bad value", "net_null0,size=abc", ["size", "abc", "unsigned integer"]),
            ("ring size", "net_ring0,size=1000", ["net_ring0", "size", "1000", "power of two"]),
        ]
        for what, dev, needles in cases:
            with self.subTest(what=what, vdev=dev):
                self.check_refused(EAL + ["--vdev", "net_null9", "--vdev", dev], POOL, needles)

    def test_bad_pci_devices(self):
        """-a/-b/--iova-mode mistakes, a PCI address with no device or no driver, a device a
        kernel driver holds: refused before anything starts, the device untouched."""
        present = sorted(os.listdir("/sys/bus/pci/devices")) if os.path.isdir("/sys/bus/pci/devices") else []
        absent = next("0000:7f:{:02x}.7".format(d) for d in range(32) if "0000:7f:{:02x}.7".format(d) not in present)
        cases = [
            ("malformed address", ["-a", "0000:00:4.0"], ["-a", "0000:00:4.0", "0000:00:04.0"]),
            ("function over 7", ["-a", "0000:00:04.9"], ["0000:00:04.9", "function"]),
            ("no such device", ["-a", absent], [absent, "does not exist", "devices present"]),
            ("allow and block", ["-a", "0000:00:04.0", "-b", "0000:00:05.0"], ["-a", "-b", "together"]),
            ("bad iova mode", ["--iova-mode=dc"], ["--iova-mode", "dc", "pa", "va"]),
            ("pa without huge pages", ["--iova-mode=pa", "--no-huge"], ["--iova-mode=pa", "huge pages", "--no-huge"]),
        ]
        supported = {("0x8086", "0x10d3"), ("0x1af4", "0x1041"), ("0x1af4", "0x1000")}  # our PCI drivers take
        for dev in present:
            path = os.path.join("/sys/bus/pci/devices", dev)
            with open(os.path.join(path, "vendor")) as v, open(os.path.join(path, "device")) as d:
                ids = (v.read().strip(), d.read().strip())
            driver = os.path.basename(os.readlink(os.path.join(path, "driver"))) if os.path.islink(
                os.path.join(path, "driver")) else ""
            if ids not in supported and not any(c[0] == "unsupported device" for c in cases):
                cases.append(("unsupported device", ["-a", dev], [dev, "no driver takes"]))
            if ids in supported and driver and driver != "uio_pci_generic" and not any(
                    c[0] == "kernel driver" for c in cases):
                cases.append(("kernel driver", ["-a", dev], [dev, "kernel driver " + driver, "driver_override",
                                                             "drivers_probe"]))
        for what, eal, needles in cases:
            with self.subTest(what=what):
                self.check_refused(["-l", "0-1"] + eal + ["--vdev", "net_null0"], POOL, needles)

    def test_missing_cpu_in_lcore_list(self):
        lcores = "0-{}".format(max(os.sched_getaffinity(0)) + 1)  # one CPU past the last we may use
        self.check_refused(["-l", lcores, "--no-huge"] + NULL2, POOL, ["-l", lcores, "not available", "--lcores"])

    def test_bad_app_options(self):
        cases = [
            ("burst too big", ["--burst=1024"], ["--burst", "1024", "512"]),
            ("unknown mode", ["--forward-mode=bogus"], ["bogus"] + MODES),
            ("more cores than lcores", ["--nb-cores=2"], ["--nb-cores=2", "lcore", "--lcores"]),
            ("unknown app option", ["--bogus-opt"], ["--bogus-opt", "unknown option", "--help"]),
            ("dpdk-testpmd option we lack", ["--hairpinq=1"], ["--hairpinq", "not available", "hairpin"]),
            ("flag with a value", ["--tx-first=3"], ["--tx-first", "takes no value"]),
            ("segment too short", ["--txpkts=20,100"], ["--txpkts", "42"]),
            ("segment beyond the mbuf", ["--txpkts=64,4000"], ["--txpkts", "4000", "2048", "--mbuf-size"]),
            ("flowgen packet beyond one mbuf", ["--forward-mode=flowgen", "--txpkts=1500,1500"],
             ["flowgen", "3000", "2048", "--mbuf-size"]),
            ("missing value", ["--burst"], ["--burst", "needs a value"]),
        ]
        for what, app, needles in cases:
            with self.subTest(what=what):
                # The bad option goes last so that "missing value" really is missing.
                self.check_refused(EAL + NULL2, POOL + app, needles)

    def test_bad_eal_options(self):
        self.check_refused(EAL + ["--bogus-eal"] + NULL2, POOL, ["--bogus-eal", "unknown EAL option", "--help"])
        self.check_refused(EAL + ["--vfio-intr=msi-x"] + NULL2, POOL, ["--vfio-intr 'msi-x'", "legacy, msi or msix"])

    def test_no_vdev(self):
        self.check_refused(EAL, POOL, ["no ports", "--vdev"])

    def test_memory_too_small_for_the_pool(self):
        self.check_refused(EAL + ["-m", "8"] + NULL2, POOL, ["-m", "8 MiB", "too small", "8192 mbufs",
                                                             "--total-num-mbufs"])


def cpu_simd_bits():
    """The widest SIMD level this CPU has, as ws/core/simd.cpp reads it from CPUID."""
    with open("/proc/cpuinfo") as f:
        flags = set(next(l for l in f if l.startswith("flags")).split(":", 1)[1].split())
    if {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"} <= flags:
        return 512
    if {"avx2", "bmi1", "bmi2", "fma", "f16c", "movbe"} <= flags:
        return 256
    return 128


class SimdLevels(TestpmdCase):
    """--force-max-simd-bitwidth (DPDK's EAL option): each width this CPU has forwards exactly and
    is reported at info level; a width above the CPU's is refused, never run as a narrower one.
    Registered in the optimized build too (testpmd_simd), where the levels' code differs most."""

    NAMES = {64: "scalar", 128: "sse4.2", 256: "avx2", 512: "avx512"}

    def test_each_width_forwards_exactly_or_is_refused(self):
        cpu = cpu_simd_bits()
        for bits in (64, 128, 256, 512):
            for mode, ports, extra in (("csum", ["--vdev", "net_ring0", "--vdev", "net_ring1"], ["--tx-first"]),
                                       ("macswap", NULL2, [])):
                with self.subTest(bits=bits, mode=mode):
                    eal = EAL + ["--log-level=info", "--force-max-simd-bitwidth={}".format(bits)] + ports
                    run = self.run_testpmd(eal, ["--forward-mode=" + mode, "--duration", "0.5"] + extra + POOL)
                    if bits > cpu:
                        self.assertEqual(run.returncode, 2, run.describe())
                        self.assertIn("--force-max-simd-bitwidth {}".format(bits), run.stderr, run.describe())
                        self.assertIn("it lacks", run.stderr, run.describe())
                        self.assertIsNone(run.summary, run.describe())
                        continue
                    s = self.assert_clean_run(run)
                    self.assertGreater(s["totals"]["tx_packets"], 0, run.describe())
                    self.assertIn("SIMD level {} ({} bits".format(self.NAMES[bits], bits), run.stderr, run.describe())

    def test_without_the_option_the_cpus_widest_is_used(self):
        run = self.run_testpmd(EAL + ["--log-level=info"] + NULL2, ["--forward-mode=io", "--duration", "0.3"] + POOL)
        self.assert_clean_run(run)
        bits = cpu_simd_bits()
        self.assertIn("SIMD level {} ({} bits; this CPU has {})".format(self.NAMES[bits], bits, self.NAMES[bits]),
                      run.stderr, run.describe())

    def test_widths_dpdk_refuses_are_refused(self):
        for value in ("100", "32", "65536", "wide"):
            with self.subTest(value=value):
                run = self.run_testpmd(EAL + ["--force-max-simd-bitwidth=" + value] + NULL2, ["--duration", "0.3"])
                self.assertEqual(run.returncode, 2, run.describe())
                self.assertIn("--force-max-simd-bitwidth", run.stderr, run.describe())


def udp_frame(k):
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + 18, k, 0, 64, 17, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    return bytes.fromhex("020000000002020000000001") + b"\x08\x00" + ip + struct.pack("!HHHH", 1000, 2000, 26, 0) + bytes(18)


class DpdkTestpmdOptions(TestpmdCase):
    """dpdk-testpmd's options taken as it takes them (docs/testpmd.md lists every one)."""

    def test_help_prints_both_parts_and_exits_zero(self):
        for eal, app in ((["--help"], []), (["-h"], []), (EAL, ["--help"])):
            with self.subTest(args=eal + app):
                p = subprocess.run([BINARY] + eal + ["--"] + app, capture_output=True, text=True, timeout=10)
                self.assertEqual(p.returncode, 0, p.stderr)
                for needle in ("EAL options:", "--lcores", "testpmd options:", "--portmask", "--enable-hw-vlan-strip",
                               "--hairpinq=N: set the number of hairpin queues per port to N. [not available:"):
                    self.assertIn(needle, p.stdout)

    def test_virtio_test_plan_line_runs(self):
        """The options virtio test plans start virtio_user with, on ports that have them."""
        run = self.run_testpmd(EAL + NULL2, ["--enable-hw-vlan-strip", "--rss-ip", "--tx-offloads=0x0", "--no-numa",
                                             "--nb-cores=1", "--duration", "0.3", "--mlockall"] + POOL)
        self.assert_clean_run(run)
        self.assertIn("NUMA support disabled", run.stdout, run.describe())

    def test_rx_offload_a_port_lacks_stops_the_start_with_dpdks_message(self):
        run = self.run_testpmd(EAL + NULL2, ["--enable-scatter", "--duration", "0.3"] + POOL)
        self.assertNotEqual(run.returncode, 0, run.describe())
        self.assertIn("Ethdev port_id=0 requested Rx offloads 0x2000 doesn't match Rx offloads capabilities 0x201 in "
                      "rte_eth_dev_configure()", run.stderr, run.describe())
        self.assertIn("Fail to configure port 0", run.stderr, run.describe())
        run = self.run_testpmd(EAL + NULL2, ["--max-pkt-len=40", "--duration", "0.3"] + POOL)
        self.assertIn("--max-pkt-len=40", run.stderr, run.describe())

    def test_portmask_portlist_and_coremask_choose_ports_and_cores(self):
        null3 = NULL2 + ["--vdev", "net_null2"]
        for opt in ("--portmask=0x5", "--portlist=0,2"):
            with self.subTest(opt=opt):
                run = self.run_testpmd(EAL + null3, [opt, "--coremask=0x2", "--duration", "0.3"] + POOL)
                self.assert_clean_run(run)
                self.assertIn("ports=2 - cores=1", run.stdout, run.describe())
                self.assertIn("Forward statistics for port 2", run.stdout, run.describe())
                self.assertNotIn("Forward statistics for port 1 ", run.stdout, run.describe())
        run = self.run_testpmd(EAL + null3, ["--coremask=0x1", "--duration", "0.3"] + POOL)
        self.assertEqual(run.returncode, 2, run.describe())
        self.assertIn("main lcore", run.stderr, run.describe())
        run = self.run_testpmd(EAL + null3, ["--portmask=0x8", "--duration", "0.3"] + POOL)
        self.assertIn("port 3 does not exist", run.stderr, run.describe())

    def test_txonly_multi_flow_tx_ip_and_tx_udp(self):
        out = os.path.join(self.tmp.name, "tx.pcap")
        run = self.run_testpmd(EAL + ["--vdev", "net_pcap0,tx_pcap=" + out],
                               ["--forward-mode=txonly", "--txonly-multi-flow", "--tx-ip=10.1.0.1,10.2.0.2",
                                "--tx-udp=1000,2000", "--duration", "0.3"] + POOL)
        self.assert_clean_run(run)
        frames = testpmd_harness.read_pcap(out)[:300]
        self.assertGreater(len(frames), 256, run.describe())
        srcs = {f[26:30] for f in frames}
        self.assertEqual(len(srcs), 256, "the third byte of the source cycles through 256 values")
        for f in frames:
            self.assertEqual(f[30:34], bytes([10, 2, 0, 2]))
            self.assertEqual(f[26:28], bytes([10, 2]), "source: the destination with the counter in its third byte")
            self.assertEqual(struct.unpack("!HH", f[34:38]), (1000, 2000))
            ihl = f[14:34]
            total = sum(struct.unpack("!10H", ihl))
            while total >> 16:
                total = (total & 0xFFFF) + (total >> 16)
            self.assertEqual(total, 0xFFFF, "the IPv4 header checksum is redone for each source")

    def test_rx_is_flushed_before_forwarding_unless_no_flush_rx(self):
        src = os.path.join(self.tmp.name, "in.pcap")
        testpmd_harness.write_pcap(src, [udp_frame(k) for k in range(50)])
        for extra, expect in (([], 0), (["--no-flush-rx"], 50)):
            with self.subTest(extra=extra):
                out = os.path.join(self.tmp.name, "out{}.pcap".format(len(extra)))
                run = self.run_testpmd(EAL + ["--vdev", "net_pcap0,rx_pcap={},tx_pcap={}".format(src, out)],
                                       ["--port-topology=loop", "--duration", "0.5"] + extra + POOL)
                self.assert_clean_run(run)
                self.assertEqual(run.summary["totals"]["rx_packets"], expect, run.describe())
                self.assertEqual(len(testpmd_harness.read_pcap(out)), expect, run.describe())

    def test_disable_device_start_waits_for_port_start(self):
        cmds = os.path.join(self.tmp.name, "cmds")
        with open(cmds, "w") as f:
            f.write("start\nport start all\nstart\nstop\n")
        run = self.run_testpmd(EAL + NULL2, ["--disable-device-start", "--cmdline-file", cmds, "--duration", "0.3"]
                               + POOL)
        self.assert_clean_run(run)
        self.assertIn("Not all ports were started", run.stdout + run.stderr, run.describe())
        self.assertIn("Port 0: ", run.stdout, run.describe())
        self.assertGreater(run.summary["totals"]["rx_packets"], 0, run.describe())

    def test_display_xstats_with_the_periodic_statistics(self):
        run = self.run_testpmd(EAL + NULL2, ["--stats-period", "1", "--duration", "1.5", "--display-xstats",
                                             "rx_good_packets,no_such_xstat"] + POOL)
        self.assert_clean_run(run)
        self.assertIn("No xstat 'no_such_xstat' on port 0 - skip it", run.stdout, run.describe())
        self.assertRegex(run.stdout, r"\n {31}Value {12}Rate \(since last show\)\n  rx_good_packets {10}[ 0-9]{12} ",
                         run.describe())

    def test_eth_peers_configfile(self):
        conf = os.path.join(self.tmp.name, "peers")
        with open(conf, "w") as f:
            f.write("02:00:00:00:00:aa\n02:00:00:00:00:bb\n")
        out = os.path.join(self.tmp.name, "mac.pcap")
        run = self.run_testpmd(EAL + ["--vdev", "net_pcap0,tx_pcap=" + out],
                               ["--forward-mode=txonly", "--eth-peers-configfile", conf, "--duration", "0.2"] + POOL)
        self.assert_clean_run(run)
        self.assertEqual(testpmd_harness.read_pcap(out)[0][:6], bytes.fromhex("0200000000aa"), run.describe())


class LinkState(TestpmdCase):
    """After the peer goes away, the link of virtio_user, and of net_vhost, is down within a
    second and testpmd prints dpdk-testpmd's event line; ours against ours, both sides real
    processes."""

    def start(self, eal, app):
        return subprocess.Popen([BINARY] + eal + ["--"] + app, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def pair_then_quit(self, tag, quitting):
        """Our net_vhost and our virtio_user connected for a second; then the `quitting` side
        ("vhost" or "virtio") quits, and the other one's output after a second is returned."""
        sock = os.path.join(self.tmp.name, tag + ".sock")
        vhost = self.start(["-l", "0-1", "--no-huge", "--file-prefix", tag + "h", "--vdev",
                            "net_vhost0,iface={},queues=1".format(sock)], ["-i"] + POOL)
        virtio = None
        try:
            for _ in range(100):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            virtio = self.start(["-l", "0-1", "--no-huge", "--file-prefix", tag + "v", "--vdev",
                                 "net_virtio_user0,path=" + sock], ["-i"] + POOL)
            time.sleep(1.5)
            leaving, staying = (vhost, virtio) if quitting == "vhost" else (virtio, vhost)
            leaving.communicate("quit\n", timeout=20)
            time.sleep(1.0)
            out, err = staying.communicate("show port info 0\nquit\n", timeout=20)
        finally:
            for p in (vhost, virtio):
                if p is not None and p.poll() is None:
                    p.kill()
        return out + err

    def test_virtio_user_link_goes_down_when_vhost_quits(self):
        out = self.pair_then_quit("ls1", "vhost")
        self.assertIn("Port 0: link state change event", out, out)
        self.assertIn("Link status: down", out, out)

    def test_vhost_link_goes_down_when_virtio_user_quits(self):
        out = self.pair_then_quit("ls2", "virtio")
        # Up when the frontend connected, down when it left: two events.
        self.assertEqual(out.count("Port 0: link state change event"), 2, out)
        self.assertIn("Link status: down", out, out)

if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
