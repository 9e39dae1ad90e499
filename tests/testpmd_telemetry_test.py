#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""DPDK telemetry v2 on wirespeed-testpmd: Debian's dpdk-telemetry.py, unchanged, and a plain
SOCK_SEQPACKET client query a running process; the answers are compared with the port counters
the process reports itself (summary JSON). Also: the socket path rules (file prefix,
RUNTIME_DIRECTORY, ":1" when the path is taken, stale files), --no-telemetry, bad requests.

usage: testpmd_telemetry_test.py --binary PATH [unittest options]
"""
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
TELEMETRY_PY = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"
EAL = ["-l", "0-1", "--no-huge"]
POOL = ["--total-num-mbufs=8192"]
RING2 = ["--vdev", "net_ring0", "--vdev", "net_ring1"]
NULL2 = ["--vdev", "net_null0", "--vdev", "net_null1"]


def runtime_dir(prefix, env=os.environ):
    base = env.get("RUNTIME_DIRECTORY") or ("/var/run" if os.getuid() == 0 else env.get("XDG_RUNTIME_DIR", "/tmp"))
    return os.path.join(base, "dpdk", prefix)


class Client:
    """The protocol by hand: greeting on connect, then one JSON reply per request."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(5)
        self.sock.connect(path)
        self.greeting = json.loads(self.sock.recv(1024).decode())

    def query(self, request):
        self.sock.send(request.encode())
        return json.loads(self.sock.recv(self.greeting["max_output_len"]).decode())

    def close(self):
        self.sock.close()


def greeting_pid(path):
    c = Client(path)
    c.close()
    return c.greeting["pid"]


class TelemetryCase(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-telemetry-")
        self.prefix = "wstel-{}-{}".format(os.getpid(), self.id().rsplit(".", 1)[-1][:20])
        self.addCleanup(shutil.rmtree, runtime_dir(self.prefix), True)

    def start(self, eal_extra=(), app=(), env=None, vdevs=RING2, prefix=None):
        """A running interactive testpmd; returns (process, socket path it should use)."""
        summary = os.path.join(self.tmp.name, "summary{}.json".format(time.monotonic_ns()))
        args = ([BINARY] + EAL + ["--file-prefix", prefix or self.prefix] + list(eal_extra) + vdevs +
                ["--", "-i", "--summary-json", summary] + POOL + list(app))
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
        p.summary_path = summary

        def cleanup():
            if p.poll() is None:
                p.kill()
                p.communicate()
        self.addCleanup(cleanup)
        p.banner = self.wait_for_prompt(p)
        return p

    def wait_for_prompt(self, p):
        end, seen = time.time() + 15, ""
        while "testpmd>" not in seen:
            self.assertLess(time.time(), end, "no prompt: " + seen)
            r, _, _ = select.select([p.stdout], [], [], 0.1)
            if r:
                seen += os.read(p.stdout.fileno(), 65536).decode()
        return seen

    def finish(self, p):
        out, err = p.communicate("quit\n", timeout=30)
        self.assertEqual(p.returncode, 0, out[-2000:] + err[-2000:])
        for marker in ("Sanitizer", "runtime error:", "terminate called"):
            self.assertNotIn(marker, out + err)
        with open(p.summary_path) as f:
            return json.load(f)

    def command(self, p, line, wait_s=0.0):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        time.sleep(wait_s)
        self.wait_for_prompt(p)

    def telemetry_py(self, commands, prefix=None, instance=None, env=None):
        args = [sys.executable, TELEMETRY_PY, "-f", prefix or self.prefix]
        if instance:
            args += ["-i", str(instance)]
        r = subprocess.run(args, input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=20,
                           env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        replies = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
        self.assertEqual(len(replies), len(commands), r.stdout + r.stderr)
        return replies


class DpdkTelemetryPy(TelemetryCase):
    def test_answers_match_the_port_counters(self):
        testpmd_harness.require(self, os.path.exists(TELEMETRY_PY),
                                "{} is not installed (Debian package dpdk-dev)".format(TELEMETRY_PY))
        p = self.start(app=["--forward-mode=rxonly"])
        # 32 packets per port, then nothing moves: the counters are exact.
        self.command(p, "start tx_first", wait_s=0.5)
        r = self.telemetry_py(["/", "/info", "/help,/ethdev/stats", "/eal/params", "/eal/app_params", "/ethdev/list",
                               "/ethdev/info,1", "/ethdev/stats,0", "/ethdev/stats,1", "/ethdev/xstats,0",
                               "/ethdev/link_status,0", "/ethdev/stats,7", "/no/such/command"])
        self.command(p, "stop")
        summary = self.finish(p)
        listing = r[0]["/"]
        for cmd in ("/", "/info", "/help", "/eal/params", "/ethdev/list", "/ethdev/info", "/ethdev/stats",
                    "/ethdev/xstats", "/ethdev/link_status"):
            self.assertIn(cmd, listing)
        self.assertEqual(r[1]["/info"]["pid"], p.pid)
        self.assertEqual(r[1]["/info"]["max_output_len"], 16384)
        self.assertIn("Parameters: int port_id", r[2]["/help"]["/ethdev/stats"])
        self.assertEqual(r[3]["/eal/params"][-6:], ["--file-prefix", self.prefix] + RING2)
        self.assertEqual(r[4]["/eal/app_params"][:2], ["-i", "--summary-json"])
        self.assertEqual(r[5]["/ethdev/list"], [0, 1])
        info = r[6]["/ethdev/info,1".split(",")[0]]
        self.assertEqual((info["name"], info["port_id"], info["nb_rx_queues"], info["dev_started"]),
                         ("net_ring1", 1, 1, 1))
        for port, reply in ((0, r[7]), (1, r[8])):
            stats = reply["/ethdev/stats"]
            mine = summary["ports"][port]
            self.assertEqual(stats["ipackets"], mine["rx_packets"])
            self.assertEqual(stats["opackets"], mine["tx_packets"])
            self.assertEqual(stats["ipackets"], 32)
            self.assertEqual(stats["q_ipackets"][0], 32)
            self.assertEqual(len(stats["q_ipackets"]), 16)
        xstats = r[9]["/ethdev/xstats"]
        self.assertEqual(xstats["rx_good_packets"], 32)
        self.assertEqual(xstats["tx_good_packets"], summary["ports"][0]["tx_packets"])
        self.assertEqual(r[10]["/ethdev/link_status"], {"status": "UP", "speed": 10000, "duplex": "full-duplex"})
        self.assertEqual(r[11], {"/ethdev/stats": None})
        self.assertEqual(r[12], {"/no/such/command": None})

    def test_counters_of_a_forwarding_run_only_grow(self):
        # Without the RX flush at start (net_null always has packets, which the flush would count
        # in the ports' counters before the run's own), so the run's counts bound the telemetry's.
        p = self.start(vdevs=NULL2, app=["--no-flush-rx"])
        self.command(p, "start", wait_s=0.3)
        path = os.path.join(runtime_dir(self.prefix), "dpdk_telemetry.v2")
        c = Client(path)
        first = c.query("/ethdev/stats,0")["/ethdev/stats"]
        # Until they moved (5 s at most): on a loaded machine the forwarding core may wait for a CPU.
        end = time.time() + 5
        while True:
            time.sleep(0.1)
            second = c.query("/ethdev/stats,0")["/ethdev/stats"]
            self.assertGreaterEqual(second["ipackets"], first["ipackets"])
            if second["ipackets"] > first["ipackets"] or time.time() > end:
                break
        x = c.query("/ethdev/xstats,0")["/ethdev/xstats"]
        c.close()
        self.command(p, "stop")
        summary = self.finish(p)
        self.assertGreater(first["ipackets"], 0)
        self.assertGreater(second["ipackets"], first["ipackets"])
        self.assertGreaterEqual(x["rx_good_packets"], second["ipackets"])
        self.assertGreaterEqual(summary["ports"][0]["rx_packets"], x["rx_good_packets"])
        self.assertFalse(os.path.exists(path), "socket file left behind")


class Protocol(TelemetryCase):
    def test_greeting_bad_requests_and_concurrent_clients(self):
        p = self.start()
        path = os.path.join(runtime_dir(self.prefix), "dpdk_telemetry.v2")
        a, b = Client(path), Client(path)
        self.assertEqual(set(a.greeting), {"version", "pid", "max_output_len"})
        self.assertEqual(a.greeting["pid"], p.pid)
        self.assertEqual(b.query("/ethdev/list"), {"/ethdev/list": [0, 1]})
        for bad in ("/ethdev/stats", "/ethdev/stats,", "/ethdev/stats,x", "/ethdev/stats,2", "/ethdev/info,-1",
                    "/help,/nope", "nothing"):
            with self.subTest(request=bad):
                self.assertEqual(a.query(bad), {bad.split(",")[0]: None})
        self.assertEqual(a.query("/help"), {"/help": "Returns help text for a command. Parameters: string command"})
        self.assertEqual(a.query("/ethdev/link_status,1")["/ethdev/link_status"]["status"], "UP")
        # A port stopped from the prompt reports it.
        self.command(p, "port stop 1")
        self.assertEqual(b.query("/ethdev/link_status,1"), {"/ethdev/link_status": {"status": "DOWN"}})
        self.assertEqual(b.query("/ethdev/info,1")["/ethdev/info"]["dev_started"], 0)
        a.close()
        b.close()
        self.finish(p)

    def test_second_process_takes_the_next_instance_and_stale_files_are_replaced(self):
        directory = runtime_dir(self.prefix)
        os.makedirs(directory, exist_ok=True)
        stale = os.path.join(directory, "dpdk_telemetry.v2")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.bind(stale)  # bound, never listening, closed: what a killed process leaves
        s.close()
        first = self.start()
        second = self.start()
        self.assertEqual(greeting_pid(stale), first.pid)
        self.assertEqual(greeting_pid(stale + ":1"), second.pid)
        if os.path.exists(TELEMETRY_PY):
            self.assertEqual(self.telemetry_py(["/info"], instance=1)[0]["/info"]["pid"], second.pid)
        self.finish(second)
        self.finish(first)
        self.assertEqual(os.listdir(directory), [])

    def test_runtime_directory_and_no_telemetry(self):
        env = dict(os.environ, RUNTIME_DIRECTORY=self.tmp.name)
        p = self.start(env=env)
        path = os.path.join(runtime_dir(self.prefix, env), "dpdk_telemetry.v2")
        self.assertTrue(path.startswith(self.tmp.name))
        self.assertEqual(greeting_pid(path), p.pid)
        if os.path.exists(TELEMETRY_PY):
            self.assertEqual(self.telemetry_py(["/ethdev/list"], env=env)[0], {"/ethdev/list": [0, 1]})
        self.finish(p)
        q = self.start(eal_extra=["--no-telemetry"])
        self.assertFalse(os.path.exists(os.path.join(runtime_dir(self.prefix), "dpdk_telemetry.v2")))
        self.finish(q)


class Prometheus(TelemetryCase):
    def test_metrics_page_matches_the_counters(self):
        p = self.start(eal_extra=["--no-telemetry"], app=["--forward-mode=rxonly", "--metrics-addr", "127.0.0.1:0"])
        url = re.search(r"Prometheus metrics on (http://127\.0\.0\.1:\d+/metrics)", p.banner).group(1)
        self.command(p, "start tx_first", wait_s=0.5)
        with urllib.request.urlopen(url, timeout=5) as r:
            self.assertTrue(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"))
            page = r.read().decode()
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url.replace("/metrics", "/nothing"), timeout=5)
        self.assertEqual(e.exception.code, 404)
        self.command(p, "stop")
        summary = self.finish(p)
        values = {}
        for line in page.splitlines():
            if not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = int(value)
        labels = 'port="{}",name="net_ring{}",driver="net_ring"'
        for port in (0, 1):
            self.assertEqual(values["wirespeed_port_rx_packets_total{" + labels.format(port, port) + "}"],
                             summary["ports"][port]["rx_packets"])
            self.assertEqual(values["wirespeed_port_tx_packets_total{" + labels.format(port, port) + "}"], 32)
            self.assertEqual(values["wirespeed_rx_queue_packets_total{" + labels.format(port, port) + ',queue="0"}'], 32)
        self.assertIn("# TYPE wirespeed_port_rx_packets_total counter", page)

    def test_only_loopback_is_served(self):
        r = subprocess.run([BINARY] + EAL + ["--no-telemetry"] + NULL2 + ["--", "--metrics-addr", "0.0.0.0:9100"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("loopback", r.stderr)
        self.assertNotIn("Port 0:", r.stdout)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
