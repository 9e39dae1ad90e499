#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The wirespeed-testpmd prompt, driven for real: through a pseudo-terminal (libedit line
editing, history, tab completion, a signal at the prompt) and through piped stdin and
--cmdline-file (every command's output, settings refused while forwarding runs, bad commands
and bad arguments answered with what is accepted, verbose packet dumps).

usage: testpmd_prompt_test.py --binary PATH [unittest options]
"""
import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
EAL = ["-l", "0-1", "--no-huge", "--no-telemetry"]
POOL = ["--total-num-mbufs=8192"]
NULL2 = ["--vdev", "net_null0", "--vdev", "net_null1"]
RING2 = ["--vdev", "net_ring0", "--vdev", "net_ring1"]
PROMPT = "testpmd> "


class PromptCase(unittest.TestCase):
    def setUp(self):
        testpmd_harness.need_cpus_0_1(self)
        self.tmp = testpmd_harness.temp_dir(self, "ws-prompt-")

    def assert_clean(self, rc, out, err, summary_path=None):
        testpmd_harness.assert_no_crash(self, out + err, out[-3000:] + err[-3000:])
        self.assertEqual(rc, 0, out[-3000:] + err[-3000:])
        if summary_path:
            with open(summary_path) as f:
                s = json.load(f)
            self.assertTrue(s["pool_audit_ok"], s)
            self.assertTrue(s["accounting_exact"], s)
            return s
        return None

    def run_commands(self, lines, vdevs=NULL2, app=()):
        """Runs `lines` at the prompt (piped stdin, one at a time, each after the previous one's
        prompt; forwarding gets half a second after each start); returns each command's output.
        A line may come as (line, wait): wait seconds after it, or, when wait is a string, until
        that string has been printed since the line was sent (at most 20 s: a loaded machine
        may take long to get the forwarding lcore going again)."""
        summary = os.path.join(self.tmp.name, "summary.json")
        args = [BINARY] + EAL + vdevs + ["--", "-i", "--summary-json", summary] + POOL + list(app)
        p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = b""

        def read_until(done, what):
            """Reads the output until done() holds (at most 20 s) or the process closes it."""
            nonlocal out
            end = time.time() + 20
            while not done():
                self.assertLess(time.time(), end, "waited for {}\n{}".format(what, out[-3000:]))
                r, _, _ = select.select([p.stdout], [], [], 0.1)
                if r:
                    data = os.read(p.stdout.fileno(), 65536)
                    if not data:
                        return
                    out += data

        def read_prompt():
            read_until(lambda: out.count(PROMPT.encode()) >= 1 + len(chunks), "the prompt")

        chunks = []
        try:
            read_prompt()
            for line in lines:
                if isinstance(line, tuple):
                    line, wait_s = line
                else:
                    wait_s = 0.5 if line.startswith("start") else 0
                sent_at = len(out)
                p.stdin.write((line + "\n").encode())
                p.stdin.flush()
                if isinstance(wait_s, str):
                    read_until(lambda: wait_s.encode() in out[sent_at:], repr(wait_s))
                else:
                    time.sleep(wait_s)
                chunks.append(line)
                read_prompt()
            rest, err = p.communicate(timeout=20)  # closes stdin
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        text = (out + rest).decode(errors="replace")
        self.last_summary = self.assert_clean(p.returncode, text, err.decode(errors="replace"), summary)
        outputs = text.split(PROMPT)[1:]  # outputs[i]: what command i printed
        self.assertGreaterEqual(len(outputs), len(lines), text[-3000:])
        return outputs


class Commands(PromptCase):
    def check(self, lines_and_needles, **kw):
        """(line, needles[, seconds to wait after it]): each needle is in that line's output, or
        with a leading '!' is not."""
        lines = [(e[0], e[2]) if len(e) > 2 else e[0] for e in lines_and_needles]
        chunks = self.run_commands(lines, **kw)
        for (line, needles, *_), out in zip(lines_and_needles, chunks):
            for needle in needles:
                if needle.startswith("!"):
                    self.assertNotIn(needle[1:], out, "command: {}\n{}".format(line, out))
                else:
                    self.assertIn(needle, out, "command: {}\n{}".format(line, out))
        return chunks

    def test_every_command_prints_what_it_did(self):
        chunks = self.check([
            ("help", ["start tx_first [<n>]", "show port xstats all|<port>", "clear port stats all|<port>",
                      "show config fwd|rxtx|cores", "set flowgen clones <n>", "set promisc all|<port> on|off",
                      "port config all rxq|txq|rxd|txd <n>", "set verbose <level>", "quit"]),
            ("help port", ["port stop all|<port>", "!show port"]),
            ("show port info all", ["Infos for port 0", "Infos for port 1", "Device name: net_null1",
                                    "Driver name: net_null", "Promiscuous mode: enabled", "Port state: started"]),
            ("set promisc 1 off", ["Port 1: promiscuous mode disabled", "!Port 0"]),
            ("show port info 1", ["Promiscuous mode: disabled", "!Infos for port 0"]),
            ("set promisc all on", ["Port 0: promiscuous mode enabled", "Port 1: promiscuous mode enabled"]),
            ("show port xstats 1", ["NIC extended statistics for port 1", "rx_good_packets: 0", "tx_q0_packets: 0"]),
            ("show config rxtx", ["io packet forwarding packets/burst=32", "port 1: RX queue number: 1"]),
            ("set burst 64", ["Number of packets per burst set to 64"]),
            ("set txpkts 64,64", ["Packet length set to 128 bytes in 2 segment(s)"]),
            ("set flowgen clones 2", ["flowgen clones set to 2"]),
            ("set nbcore 1", ["Number of forwarding cores set to 1"]),
            ("show config rxtx", ["packets/burst=64", "packet len=128 - nb packet segments=2"]),
            ("show config cores", ["Logical Core 1 (socket 0) forwards packets on 2 streams",
                                   "RX P=0/Q=0 (socket 0) -> TX P=1/Q=0"]),
            ("set fwd mac", ["Set mac packet forwarding mode"]),
            ("show config fwd", ["mac packet forwarding - ports=2 - cores=1 - streams=2 - burst=64"]),
            ("set fwd io", ["Set io packet forwarding mode"]),
            ("start", ["io packet forwarding - ports=2"]),
            # Settings the lcores read are refused while they run, and forwarding goes on.
            ("set burst 16", ["Please stop forwarding first"]),
            ("set nbcore 1", ["Please stop forwarding first"]),
            ("set txpkts 64", ["Please stop forwarding first"]),
            ("set flowgen clones 1", ["Please stop forwarding first"]),
            ("set fwd mac", ["stop forwarding"]),
            ("port stop all", ["Please stop forwarding first"]),
            ("port config all rxq 2", ["Please stop all ports first"]),
            ("start", ["already started"]),
            ("show port stats 1", ["NIC statistics for port 1", "!for port 0 "]),
            ("show fwd stats all", ["Forward statistics for port 0", "Accumulated forward statistics"]),
            ("stop", ["Telling cores to stop", "Accumulated forward statistics"]),
            ("stop", ["Packet forwarding not started"]),
            ("clear port stats all", ["NIC statistics for port 0 cleared", "NIC statistics for port 1 cleared"]),
            ("show port xstats 0", ["rx_good_packets: 0\n", "tx_good_packets: 0\n"]),
            ("port stop all", ["Stopping ports...", "Done"]),
            ("show port info 0", ["Port state: stopped", "Link status: down"]),
            ("port config all rxq 2", ["rxq set to 2"]),
            ("port config all txq 2", ["txq set to 2"]),
            ("port config all rxd 512", ["rxd set to 512"]),
            ("port config all txd 512", ["txd set to 512"]),
            ("start", ["pending", "port start all"]),
            ("port start all", ["Configuring Port 0", "Configuring Port 1", "Port 1: ", "Done"]),
            ("show config fwd", ["streams=4", "stream 3: RX P=1/Q=1 -> TX P=0/Q=1"]),
            ("show port info 0", ["Current number of RX queues: 2", "Current number of TX queues: 2",
                                  "Port state: started"]),
            ("show config rxtx", ["RX desc=512 - TX desc=512"]),
            ("start tx_first 2", ["io packet forwarding - ports=2 - cores=1 - streams=4"]),
            ("stop", ["Accumulated forward statistics"]),
            ("quit", []),
        ])
        # Forwarding ran through the refused commands: the first stop reports packets.
        rx = [int(l.split()[1]) for l in chunks[28].splitlines() if l.strip().startswith("RX-packets:")]
        self.assertTrue(rx and rx[-1] > 0, chunks[28])

    def test_dpdk_port_and_forwarding_configuration_commands(self):
        self.check([
            ("show port summary all", ["Number of available ports: 2",
                                       "Port MAC Address       Name         Driver         Status   Link",
                                       "net_null1    net_null       up       10 Gbps"]),
            ("show device info all", ["Infos for device net_null0", "Bus name: vdev", "\tPort id: 1 "]),
            ("set allmulti 0 off", []),
            ("show port info 0", ["Allmulticast mode: disabled", "MTU: 1500",
                                  "strip off, filter off, extend off, qinq strip off"]),
            ("set nbport 1", ["Number of forwarding ports set to 1"]),
            ("show config fwd", ["ports=1"]),
            ("set portlist 1,0", ["changed to number of configured ports 2"]),
            ("set eth-peer 0 02:00:00:00:00:aa", []),
            ("show config fwd", ["peer=02:00:00:00:00:AA"]),
            ("set link-down port 0", ["Set link down fail."]),
            ("set link-up port 0", ["Set link up fail."]),
            ("vlan set strip on 0", ["Can't config offload when Port 0 is not stopped"]),
            ("port stop 0", ["Done"]),
            ("vlan set strip on 0", ["!error"]),
            ("vlan set filter on 0", ["!error"]),
            ("rx_vlan add 100 0", ["!error"]),
            ("rx_vlan add 100 1", ["Port 1: VLAN-filtering disabled"]),
            ("port config mtu 0 9000", ["!error"]),
            ("port config mtu 0 20", ["MTU (20) < device min MTU (68)"]),
            ("port config 0 rx_offload scatter on", ["requested Rx offloads 0x2201 doesn't match Rx offloads "
                                                     "capabilities 0x201"]),
            ("port config 0 rx_offload bogus on", ["vlan_strip", "scatter"]),
            ("port config 0 tx_offload udp_cksum on", ["!error"]),
            ("mac_addr set 0 02:00:00:00:00:11", ["!error"]),
            ("mac_addr add 0 02:00:00:00:00:12", ["Operation not supported"]),
            ("port start 0", ["Port 0: 02:00:00:00:00:11"]),
            ("show port info 0", ["MTU: 9000", "strip on, filter on, extend off"]),
            ("start", ["io packet forwarding"]),
            ("stop", ["Accumulated forward statistics"]),
            ("clear port xstats all", []),
            ("show port xstats 0", ["rx_good_packets: 0\n"]),
            ("port close 1", ["Cannot close started device (port 1)"]),
            ("port stop 1", ["Done"]),
            ("port close 1", ["Closing ports...", "Port 1 is closed", "Done"]),
            ("port start 1", ["Port 1 is closed"]),
            ("port reset 1", ["Resetting ports...", "Done"]),
            ("port start 1", ["Port 1: ", "Done"]),
            ("start", ["io packet forwarding"]),
            ("stop", ["Accumulated forward statistics"]),
            ("port attach net_null7", ["Attaching a new port...", "Port 2 is attached. Now total ports is 3", "Done"]),
            ("port attach 0000:00:04.0", ["PCI devices are probed at start-up"]),
            ("start", ["Not all ports were started"]),
            ("port start 2", ["Port 2: ", "Done"]),
            ("start", ["io packet forwarding - ports=3"]),
            ("stop", ["Forward statistics for port 2"]),
            ("port detach 2", ["Port was not closed"]),
            ("port stop 2", ["Done"]),
            ("port close 2", ["Port 2 is closed"]),
            ("port detach 2", ["Removing a device...", "Device is detached", "Now total ports is 2", "Done"]),
            ("show port summary all", ["Number of available ports: 2", "!net_null7"]),
            ("show port info 2", ["port 2 is detached"]),
            ("port attach net_null8", ["Port 2 is attached. Now total ports is 3"]),
            ("show port summary all", ["net_null8"]),
            ("quit", []),
        ])

    def test_bad_commands_and_arguments_say_what_is_accepted(self):
        self.check([
            ("bogus", ["Bad command: 'bogus'", "help"]),
            ("show bogus", ["Bad command", "accepted:", "show port stats all|<port>", "show config fwd|rxtx|cores",
                            "!set burst"]),
            ("show port stats", ["missing argument", "usage: show port stats all|<port>"]),
            ("show port stats 9", ["port '9' does not exist", "all or a port id 0 to 1"]),
            ("show port xstats x", ["port 'x' does not exist"]),
            ("show config bogus", ["'bogus' is not accepted", "usage: show config fwd|rxtx|cores"]),
            ("set burst 0", ["out of range", "1 to 512"]),
            ("set burst 1024", ["out of range", "1 to 512"]),
            ("set burst abc", ["'abc' is not a number"]),
            ("set nbcore 5", ["nbcore 5", "[1, 1]"]),
            ("set txpkts 20", ["20", "42"]),
            ("set txpkts 64,x", ["set txpkts 64,x", "[1, 65535]"]),
            ("set fwd bogus", ["bogus", "io", "rxonly"]),
            ("set promisc all maybe", ["'maybe' is not accepted", "on|off"]),
            ("set verbose 9", ["out of range", "0 to 3"]),
            ("port config all rxq 0", ["out of range", "1 to 65535"]),
            ("port config all foo 2", ["'foo' is not accepted", "rxq|txq|rxd|txd"]),
            ("port start 5", ["port '5' does not exist"]),
            ("start tx_first 0", ["out of range"]),
            ("start extra", ["unexpected argument 'extra'", "usage: start"]),
            ("stop now", ["unexpected argument 'now'"]),
            ("help bogus", ["no command starts with 'bogus'", "show", "port"]),
            ("start", ["io packet forwarding"]),
            ("quit", []),
        ])

    def test_verbose_prints_received_headers_only_when_on(self):
        chunks = self.check([
            ("set fwd rxonly", []),
            ("set verbose 1", ["Change verbose level from 0 to 1"]),
            ("start tx_first", ["rxonly packet forwarding"]),
            ("stop", ["Accumulated forward statistics"]),
            ("set verbose 0", ["Change verbose level from 1 to 0"]),
            ("start tx_first", []),
            ("stop", []),
            ("quit", []),
        ], vdevs=RING2)
        verbose_out = "".join(chunks[2:4])
        self.assertEqual(verbose_out.count("  src="), 64, verbose_out)
        self.assertIn("port 0/queue 0: received", verbose_out)
        self.assertIn("port 1/queue 0: received", verbose_out)
        self.assertIn("type=0x0800 - length=64 - nb_segs=1 - IPv4 198.18.0.1 -> 198.18.0.2 proto=17 - UDP 9 -> 9",
                      verbose_out)
        quiet_out = "".join(chunks[5:7])
        self.assertNotIn("src=", quiet_out)
        self.assertEqual(self.last_summary["totals"]["consumed"], 64)

    def test_verbose_levels_as_dpdk_1_rx_2_tx_3_both(self):
        # rxonly on two rings: tx_first sends one burst of 32 per stream, rxonly receives them.
        chunks = self.check([
            ("set fwd rxonly", []),
            ("set verbose 2", ["Change verbose level from 0 to 2"]),
            ("start tx_first", ["rxonly packet forwarding"]),
            ("stop", []),
            ("set verbose 3", ["Change verbose level from 2 to 3"]),
            ("start tx_first", []),
            ("stop", []),
            ("quit", []),
        ], vdevs=RING2)
        tx_only, both = "".join(chunks[2:4]), "".join(chunks[5:7])
        self.assertIn("port 1/queue 0: sent 32 packets", tx_only)
        self.assertIn("port 0/queue 0: sent 32 packets", tx_only)
        self.assertNotIn("received", tx_only)
        self.assertEqual(tx_only.count("  src="), 64, tx_only)
        self.assertIn("type=0x0800 - length=64 - nb_segs=1 - IPv4 198.18.0.1 -> 198.18.0.2 proto=17 - UDP 9 -> 9",
                      tx_only)
        self.assertEqual(both.count("sent 32 packets"), 2, both)
        self.assertEqual(both.count(": received "), 2, both)
        self.assertEqual(both.count("  src="), 128, both)
        self.assertEqual(self.last_summary["totals"]["consumed"], 64)  # the last run's

    def test_verbose_switches_while_forwarding(self):
        # 64 packets circulate between the two rings; verbose on and off while they do.
        chunks = self.check([
            ("start tx_first", ["io packet forwarding"]),
            ("set verbose 1", ["Change verbose level from 0 to 1"], ": received 4 packets"),
            ("set verbose 2", ["Change verbose level from 1 to 2"], ": sent 4 packets"),
            ("set verbose 0", ["Change verbose level from 2 to 0"]),
            ("show fwd stats all", ["!src="]),
            ("stop", ["!src=", "Accumulated forward statistics"]),
            ("quit", []),
        ], vdevs=RING2, app=["--burst=4"])
        # Dumps printed while a level holds; lcores are joined before each change is reported.
        dumps = "".join(chunks[1:4])
        at_1, rest = dumps.split("Change verbose level from 1 to 2")
        at_2 = rest.split("Change verbose level from 2 to 0")[0]
        self.assertIn(": received 4 packets", at_1)
        self.assertIn(": sent 4 packets", at_2)
        self.assertNotIn(": received ", at_2)
        self.assertEqual(chunks[5].count("Telling cores to stop"), 1)

    def test_cmdline_file_runs_every_group(self):
        path = os.path.join(self.tmp.name, "cmds.txt")
        with open(path, "w") as f:
            f.write("# a comment\nset burst 16\nshow config rxtx\nset promisc all off\nshow port info 0\n"
                    "set bogus\nport stop all\nport config all rxq 2\nport config all txq 2\nport start all\n"
                    "start\nstop\nquit\n")
        summary = os.path.join(self.tmp.name, "s.json")
        p = subprocess.run([BINARY] + EAL + NULL2 + ["--", "--cmdline-file", path, "--summary-json", summary] + POOL,
                           capture_output=True, text=True, timeout=60)
        s = self.assert_clean(p.returncode, p.stdout, p.stderr, summary)
        for needle in ["packets/burst=16", "Promiscuous mode: disabled", "Bad command: 'set bogus'",
                       "Configuring Port 1", "io packet forwarding - ports=2 - cores=1 - streams=4"]:
            self.assertIn(needle, p.stdout)
        self.assertEqual(s["burst"], 16)


class Terminal(PromptCase):
    """libedit behind a real pseudo-terminal."""

    def spawn(self, **env_changes):
        """Starts -i on a pseudo-terminal; HOME is the test's directory (the default history
        file goes there); env_changes: variables to set (None: unset)."""
        master, slave = os.openpty()
        env = dict(os.environ, TERM="xterm", HOME=self.tmp.name)
        env.pop("WIRESPEED_TESTPMD_HISTORY", None)
        for name, value in env_changes.items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        args = [BINARY] + EAL + NULL2 + ["--", "-i"] + POOL
        p = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.wait()))
        self.addCleanup(os.close, master)
        self.master, self.proc, self.out = master, p, b""
        self.expect(PROMPT)
        return p

    def expect(self, text, timeout=10):
        """Reads until `text` appears after what earlier calls consumed."""
        end = time.time() + timeout
        data = text.encode()
        while data not in self.out:
            if time.time() > end:
                self.fail("no {!r} within {} s; got:\n{!r}".format(text, timeout, self.out[-2000:]))
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:
                    break
        got, self.out = self.out.split(data, 1)
        return got.decode(errors="replace")

    def send(self, text):
        os.write(self.master, text.encode())

    def test_completion_history_and_editing(self):
        self.spawn()
        # Tab completes command words and literal arguments.
        self.send("sho\t")
        self.expect("w ")
        self.send("po\t")
        self.expect("rt ")
        self.send("xs\t")
        self.expect("tats ")
        self.send("1\r")
        self.expect("NIC extended statistics for port 1")
        self.expect(PROMPT)
        # Two tabs list the choices.
        self.send("set \t\t")
        listing = self.expect(PROMPT)
        for word in ("burst", "fwd", "nbcore", "promisc", "txpkts", "verbose", "flowgen"):
            self.assertIn(word, listing)
        self.send("\x15")  # Ctrl-U: kill the line
        # History: the up arrow recalls the last command.
        self.send("show config fwd\r")
        self.expect("streams=2")
        self.expect(PROMPT)
        self.send("\x1b[A\r")
        self.expect("streams=2")
        self.expect(PROMPT)
        # Editing: Ctrl-A goes to the start of the line; the typo is fixed before Enter.
        self.send("elp\x01h\r")
        self.expect("port config all rxq|txq|rxd|txd <n>")
        self.expect(PROMPT)
        self.send("bogus\r")
        self.expect("Bad command: 'bogus'")
        self.send("start\r")
        self.expect("io packet forwarding - ports=2")
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)

    def test_history_is_kept_between_sessions(self):
        path = os.path.join(self.tmp.name, "sub", "hist")
        os.mkdir(os.path.dirname(path))
        self.spawn(WIRESPEED_TESTPMD_HISTORY=path)
        self.send("show config fwd\r")
        self.expect("streams=2")
        self.expect(PROMPT)
        self.send("help port\r")
        self.expect("port stop all|<port>")
        self.expect(PROMPT)
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)
        self.assertTrue(os.path.exists(path))
        # A new session recalls the last session's lines, newest first (quit, help port, show ...).
        self.spawn(WIRESPEED_TESTPMD_HISTORY=path)
        self.send("\x1b[A\x1b[A\x1b[A\r")
        self.expect("streams=2")
        self.expect(PROMPT)
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)

    def test_history_file_default_and_off(self):
        default = os.path.join(self.tmp.name, ".wirespeed-testpmd_history")
        self.spawn(WIRESPEED_TESTPMD_HISTORY="")  # set but empty: no history file
        self.send("show config fwd\r")
        self.expect("streams=2")
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)
        self.assertFalse(os.path.exists(default))
        self.spawn()  # unset: ~/.wirespeed-testpmd_history
        self.send("show config fwd\r")
        self.expect("streams=2")
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)
        self.assertTrue(os.path.exists(default))
        # An unwritable history file is reported once; the prompt goes on.
        self.spawn(WIRESPEED_TESTPMD_HISTORY=os.path.join(self.tmp.name, "no", "such", "dir", "h"))
        self.send("show config fwd\r")
        self.expect("warning: cannot write the history file")
        self.expect("streams=2")
        self.send("show config fwd\r")
        rest = self.expect("streams=2")
        self.assertNotIn("warning", rest)
        self.send("quit\r")
        self.expect("Bye...")
        self.assertEqual(self.proc.wait(10), 0)

    def test_signal_at_the_terminal_prompt_exits_cleanly(self):
        p = self.spawn()
        self.send("start\r")
        self.expect("io packet forwarding")
        self.send("show po")  # a half-typed line
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        self.expect("Accumulated forward statistics")
        self.expect("Bye...")
        self.assertEqual(p.wait(10), 0)


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
