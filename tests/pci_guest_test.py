#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Our PCI poll-mode drivers on QEMU's emulated NICs, inside a Linux guest (TCG), each scenario
run twice in the same guest: with our wirespeed-testpmd and with Debian's dpdk-testpmd (22.11,
its e1000 PMD loaded with -d) on the same devices, bound to uio_pci_generic. The host side checks
what came out: frames sent in and out of the guest as UDP datagrams (QEMU's dgram netdev) are
compared byte for byte and counted exactly, what the guest transmits is also captured by QEMU's
filter-dump, and a kernel in a network namespace pings through a tap NIC. Rates inside the
guest are reported side by side (pci_guest_results.json in the work directory); TCG rates are no
hardware rates, and nothing is gated on them.

The guest binary is the `portable` preset's wirespeed-testpmd (no -march=native: TCG emulates up
to AVX2); main() builds it (a no-op when up to date).

QEMU, the guest kernel (scripts/fetch-guest-kernel), busybox-static and dpdk-testpmd are needed,
and root for the tap NIC: without them the tests skip, except under CI where they fail.

usage: pci_guest_test.py --binary PORTABLE_TESTPMD --source REPO [--work DIR] [unittest options]
"""
import argparse
import glob
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import netns
import testpmd_harness
from guest import image, qemu

BINARY = None  # the guest build of wirespeed-testpmd, set from --binary
WORK = None    # guest images and results (--work; the build tree)
DPDK = shutil.which("dpdk-testpmd")
PMD_DIR = (sorted(glob.glob("/usr/lib/x86_64-linux-gnu/dpdk/pmds-*")) or [None])[-1]
DPDK_PLUGINS = ["librte_net_e1000.so", "librte_mempool_ring.so"]
KERNEL = image.find_kernel()
KINDS = ("ours", "dpdk")
HUGEPAGES = 96            # 2 MiB pages reserved in the guest: one testpmd at a time
POOL = ["--total-num-mbufs=8192"]

# The guest's NICs: PCI slot -> (model, role). Addresses are 0000:00:SLOT.0 in the guest.
E1000_A, E1000_B, E1000_HUB_A, E1000_HUB_B, E1000_TAP = 4, 5, 6, 7, 8
RESULTS = {}  # scenario -> kind -> rate (Mpps inside the guest)


def bdf(slot):
    return "0000:00:{:02x}.0".format(slot)


def mac(slot):
    return "52:54:00:12:00:{:02x}".format(slot)


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_pcap(path):
    """The frames of a classic pcap file (what QEMU's filter-dump writes)."""
    frames = []
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return frames
    if len(data) < 24:
        return frames
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    off = 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        off += 16
        if off + caplen > len(data):
            break  # a record still being written
        frames.append(data[off:off + caplen])
        off += caplen
    return frames


def udp_frame(dst_mac, seq, length, tag):
    """An Ethernet/IPv4/UDP frame of `length` bytes whose payload carries `tag` and `seq`, so
    every frame is distinct and can be found again byte for byte."""
    eth = bytes.fromhex(dst_mac.replace(":", "")) + bytes.fromhex("02aabbccdd{:02x}".format(tag)) + b"\x08\x00"
    payload_len = length - 14 - 20 - 8
    payload = struct.pack("!BI", tag, seq) + bytes((seq + i) & 0xff for i in range(payload_len - 5))
    udp = struct.pack("!HHHH", 1000 + tag, 2000, 8 + payload_len, 0) + payload
    ip = bytearray(struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), seq & 0xffff, 0, 64, 17, 0,
                               bytes([10, 99, 71, tag]), bytes([10, 99, 72, 1])))
    s = sum(struct.unpack("!10H", bytes(ip)))
    s = (s & 0xffff) + (s >> 16)
    s = (s & 0xffff) + (s >> 16)
    ip[10:12] = struct.pack("!H", ~s & 0xffff)
    return eth + bytes(ip) + udp


class Host:
    """The test's end of one dgram NIC: a UDP socket; frames sent to QEMU's port enter the guest,
    frames the guest sends arrive here."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.guest_port = free_udp_port()

    def send(self, frames, per_ms=2):
        """Sends paced (per_ms frames a millisecond) so the guest's RX ring keeps up under TCG."""
        for i, f in enumerate(frames):
            self.sock.sendto(f, ("127.0.0.1", self.guest_port))
            if i % per_ms == per_ms - 1:
                time.sleep(0.001)

    def drain(self, timeout=0.5):
        """Every frame received until nothing came for `timeout` seconds."""
        out = []
        self.sock.settimeout(timeout)
        try:
            while True:
                out.append(self.sock.recv(65536))
        except socket.timeout:
            pass
        return out

    def close(self):
        self.sock.close()


class Run:
    """One testpmd run in the guest (ours or DPDK's): its console output, its final counters
    and the rates it printed each second."""

    def __init__(self, kind, output):
        self.kind = kind
        self.output = output
        self.summary = None
        m = re.search(r"@@json (\{.*\})", output)
        if m:
            self.summary = json.loads(m.group(1))

    def periods(self, key):
        """Per stats block, the sum over ports of the `key` ("Tx-pps" or "Rx-pps") lines."""
        blocks = self.output.split("Port statistics ====")[1:]
        return [sum(int(v) for v in re.findall(key + r":\s+(\d+)", b)) for b in blocks]

    def rate_mpps(self, key="Tx-pps"):
        """The median per-second rate, first and last (partial) periods left out."""
        p = self.periods(key)
        p = p[1:-1] if len(p) > 3 else p
        return statistics.median(p) / 1e6 if p else 0.0

    def port_totals(self):
        """{port: (rx, tx)} of forwarded packets: ours from its summary, DPDK's from its forward
        statistics."""
        if self.kind == "ours":
            return {p["id"]: (p["rx_packets"], p["tx_packets"]) for p in self.summary["ports"]}
        out = {}
        for port, body in re.findall(r"Forward statistics for port (\d+)\s+-+\n(.*?)-{20,}", self.output, re.S):
            rx = int(re.search(r"RX-packets:\s+(\d+)", body).group(1))
            tx = int(re.search(r"TX-packets:\s+(\d+)", body).group(1))
            out[int(port)] = (rx, tx)
        return out


class PciGuest(unittest.TestCase):
    """One guest for the whole class; each scenario_* runs as test_<scenario>_<kind>."""

    guest = None
    hosts = None
    ns = None
    tmp = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ws-pci-")

    @classmethod
    def tearDownClass(cls):
        cls._stop_guest()
        if os.environ.get("WS_VM_KEEP"):
            sys.stderr.write("\nconsole and captures kept in {}\n".format(cls.tmp))
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _stop_guest(cls):
        if cls.guest is not None:
            cls.guest.poweroff(10)
            cls.guest = None
        for h in (cls.hosts or {}).values():
            h.close()
        cls.hosts = None
        if cls.ns is not None:
            cls.ns.delete()
            cls.ns = None

    def setUp(self):
        testpmd_harness.require_program(self, "qemu-system-x86_64", "qemu-system-x86")
        testpmd_harness.require(self, KERNEL, "no guest kernel in {} (scripts/fetch-guest-kernel)".format(image.CACHE))
        testpmd_harness.require(self, os.path.exists(image.BUSYBOX),
                                "{} is not there (Debian package busybox-static)".format(image.BUSYBOX))
        testpmd_harness.require(self, DPDK and PMD_DIR, "dpdk-testpmd and its PMDs (Debian package dpdk)")
        self.t0 = time.monotonic()
        if PciGuest.guest is None or not PciGuest.guest.alive():
            self._boot()

    def tearDown(self):
        sys.stderr.write("[{}] {:.1f} s\n".format(self.id().split(".")[-1], time.monotonic() - self.t0))

    # ---- the guest ----
    @classmethod
    def _image(cls):
        plugins = [os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS]
        return image.Image(KERNEL, modules=image.UIO_MODULES, binaries=[BINARY, DPDK] + plugins).build(WORK, "pci")

    def _boot(self):
        cls = PciGuest
        cls._stop_guest()
        cls.hosts = {E1000_A: Host(), E1000_B: Host()}
        nics = []
        for slot, host in cls.hosts.items():
            nics.append(qemu.pci_nic_args("e1000e", qemu.dgram_netdev("n{}".format(slot), host.guest_port, host.port),
                                          slot, mac(slot), dump=os.path.join(cls.tmp, "tx{}.pcap".format(slot))))
        for slot in (E1000_HUB_A, E1000_HUB_B):
            nics.append(qemu.pci_nic_args("e1000e", "hubport,id=n{},hubid=1".format(slot), slot, mac(slot)))
        tap = None
        if os.geteuid() == 0 and shutil.which("ip"):
            tap = "wspci{}".format(os.getpid() % 100000)
            nics.append(qemu.pci_nic_args("e1000e", "tap,id=n{},ifname={},script=no,downscript=no".format(
                E1000_TAP, tap), E1000_TAP, mac(E1000_TAP)))
        cls.guest = qemu.Guest(KERNEL, self._image(), nics=nics, smp=2, mem_mb=768, shared_memory=False,
                               append="ws.hugepages={}".format(HUGEPAGES), log=os.path.join(cls.tmp, "console.log"),
                               name="pci guest").start()
        cls.guest.wait_ready(180)
        if tap:  # the tap QEMU made goes into a namespace of the test's, with the host's address
            cls.ns = netns.Netns("pci")
            ns = cls.ns.ns("h")
            netns.sh("ip", "link", "set", tap, "netns", ns)
            netns.sh("ip", "addr", "add", "10.99.73.1/24", "dev", tap, ns=ns)
            netns.sh("ip", "link", "set", tap, "up", ns=ns)
            cls.tap_ns = ns
        slots = [E1000_A, E1000_B, E1000_HUB_A, E1000_HUB_B] + ([E1000_TAP] if tap else [])
        bind = "; ".join("echo uio_pci_generic > /sys/bus/pci/devices/{d}/driver_override && "
                         "echo {d} > /sys/bus/pci/drivers_probe && test -e /sys/bus/pci/devices/{d}/driver".format(
                             d=bdf(s)) for s in slots)
        cls.guest.run(bind, timeout=60)

    # ---- testpmd in the guest ----
    def _command(self, kind, slots, app, seconds):
        allow = " ".join("-a " + bdf(s) for s in slots)
        app = " ".join(POOL + app + ["--stats-period=1"])
        if kind == "ours":
            return ("wirespeed-testpmd -l 0-1 -n 4 --file-prefix=ws {} -- {} --duration={} --summary-json=/tmp/s.json; "
                    "rc=$?; echo \"@@json $(tr -d '\\n' < /tmp/s.json)\"; rm -f /tmp/s.json; exit $rc").format(
                        allow, app, seconds)
        plugins = " ".join("-d " + os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS)
        # DPDK's testpmd runs until SIGINT; its start-up (about 2 s here) is inside the timeout.
        return "timeout -s INT {} dpdk-testpmd -l 0-1 -n 4 --file-prefix=dp {} {} -- {}".format(
            seconds + 4, plugins, allow, app)

    def run_testpmd(self, kind, slots, app, seconds=5, during=None):
        """Runs testpmd on the NICs in `slots` for `seconds` of forwarding; `during` (a function)
        runs on the host once forwarding has run for three seconds. Returns a Run."""
        g = PciGuest.guest
        started = g.start_command(self._command(kind, slots, app, seconds))
        if during is not None:
            # DPDK's em port drops what arrives in its first two seconds or so of forwarding
            # (frames sent after its first statistics were lost, after its third never): both
            # get their traffic after the third statistics block.
            at = started[1]
            for _ in range(3):
                at = g.wait_for(r"Port statistics =", 60, at).end()
            during()
        rc, out = g.wait_command(started, timeout=seconds + 90)
        testpmd_harness.assert_no_crash(self, out, kind)
        self.assertNotIn("Illegal instruction", out)
        run = Run(kind, out)
        if kind == "ours":
            self.assertEqual(rc, 0, out[-3000:])
            self.assertIsNotNone(run.summary, out[-3000:])
            self.assertTrue(run.summary["pool_audit_ok"], out[-2000:])
            self.assertTrue(run.summary["accounting_exact"], json.dumps(run.summary["totals"]))
        else:
            self.assertIn("Forward statistics for port", out, out[-3000:])
        return run

    def record(self, scenario, kind, mpps):
        RESULTS.setdefault(scenario, {})[kind] = round(mpps, 4)

    # ---- scenarios ----
    def scenario_e1000e_io(self, kind):
        """io forwarding between two 82574L: 600 distinct frames of 60 to 1514 bytes go in each
        NIC; every one comes out of the other, byte for byte, in order."""
        a, b = PciGuest.hosts[E1000_A], PciGuest.hosts[E1000_B]
        a.drain(0.05)
        b.drain(0.05)
        lengths = [60, 64, 128, 591, 1024, 1514]
        into_a = [udp_frame(mac(E1000_A), i, lengths[i % len(lengths)], 1) for i in range(600)]
        into_b = [udp_frame(mac(E1000_B), i, lengths[(i + 3) % len(lengths)], 2) for i in range(600)]
        got = {}

        def traffic():
            a.send(into_a)
            b.send(into_b)
            got["b"] = b.drain(1.5)
            got["a"] = a.drain(0.2)

        run = self.run_testpmd(kind, [E1000_A, E1000_B], ["--forward-mode=io", "--auto-start"], seconds=8, during=traffic)
        self.assertEqual(len(got["b"]), len(into_a), "frames out of B")
        self.assertEqual(len(got["a"]), len(into_b), "frames out of A")
        self.assertEqual(got["b"], into_a, "what entered A leaves B unchanged, in order")
        self.assertEqual(got["a"], into_b)
        totals = run.port_totals()
        self.assertEqual(totals[0], (600, 600), run.output[-2000:])
        self.assertEqual(totals[1], (600, 600))

    def scenario_e1000e_txonly(self, kind):
        """txonly on one 82574L: every frame testpmd counts as sent is in QEMU's capture, 64
        bytes each; the rate is recorded."""
        dump = os.path.join(PciGuest.tmp, "tx{}.pcap".format(E1000_A))
        before = len(read_pcap(dump))
        run = self.run_testpmd(kind, [E1000_A], ["--forward-mode=txonly", "--auto-start"], seconds=5)
        PciGuest.hosts[E1000_A].drain(0.3)
        time.sleep(0.5)  # filter-dump writes as QEMU sends
        frames = read_pcap(dump)[before:]
        sent = run.port_totals()[0][1]
        self.assertGreater(sent, 1000, run.output[-2000:])
        self.assertEqual(len(frames), sent, "every frame counted as sent left the NIC")
        self.assertEqual({len(f) for f in frames}, {64})
        self.record("e1000e txonly 64 B", kind, run.rate_mpps("Tx-pps"))

    def scenario_e1000e_rxonly(self, kind):
        """rxonly on one 82574L: exactly the 2000 frames the host sent are received."""
        host = PciGuest.hosts[E1000_A]
        frames = [udp_frame(mac(E1000_A), i, 60 + i % 200, 3) for i in range(2000)]
        run = self.run_testpmd(kind, [E1000_A], ["--forward-mode=rxonly", "--auto-start"], seconds=7,
                           during=lambda: host.send(frames))
        self.assertEqual(run.port_totals()[0][0], len(frames), run.output[-2000:])

    def scenario_e1000e_hub_io(self, kind):
        """io forwarding between two 82574L joined by a QEMU hub, started with a burst on each
        (--tx-first): the guest's forwarding rate, nothing lost in the loop."""
        run = self.run_testpmd(kind, [E1000_HUB_A, E1000_HUB_B], ["--forward-mode=io", "--auto-start", "--tx-first"],
                           seconds=6)
        totals = run.port_totals()
        self.assertGreater(totals[0][0], 1000, run.output[-2000:])
        self.assertGreater(totals[1][0], 1000)
        self.record("e1000e io, 2 NICs on a hub", kind, run.rate_mpps("Tx-pps"))

    def scenario_e1000e_icmpecho(self, kind):
        """icmpecho on an 82574L: the host kernel, in a namespace behind a tap, pings the guest's
        testpmd (ARP first) and gets every answer."""
        testpmd_harness.require(self, PciGuest.ns is not None, "needs root and iproute2 for the tap NIC's namespace")
        result = {}

        def ping():
            result["p"] = netns.sh("ping", "-c", "5", "-i", "0.2", "-W", "3", "10.99.73.2", ns=PciGuest.tap_ns,
                                   check=False, timeout=30)

        run = self.run_testpmd(kind, [E1000_TAP], ["--forward-mode=icmpecho", "--auto-start"], seconds=7, during=ping)
        self.assertIn(" 0% packet loss", result["p"].stdout, result["p"].stdout + run.output[-2000:])


def _add_scenarios():
    for name in [n for n in dir(PciGuest) if n.startswith("scenario_")]:
        for kind in KINDS:
            def test(self, _name=name, _kind=kind):
                getattr(self, _name)(_kind)
            test.__doc__ = getattr(PciGuest, name).__doc__
            setattr(PciGuest, "test_{}_{}".format(name[len("scenario_"):], kind), test)


_add_scenarios()


def tearDownModule():
    if not RESULTS:
        return
    lines = ["", "guest-side rates (Mpps, QEMU TCG, 2 vCPUs; not hardware rates):",
             "{:36} {:>10} {:>10} {:>7}".format("scenario", "DPDK", "ours", "ratio")]
    for scenario, r in sorted(RESULTS.items()):
        d, o = r.get("dpdk"), r.get("ours")
        ratio = "{:.2f}".format(o / d) if d and o else "-"
        lines.append("{:36} {:>10} {:>10} {:>7}".format(scenario, d if d is not None else "-",
                                                        o if o is not None else "-", ratio))
    sys.stderr.write("\n".join(lines) + "\n")
    with open(os.path.join(WORK, "pci_guest_results.json"), "w") as f:
        json.dump(RESULTS, f, indent=1)


def main():
    global WORK
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--work", default=None)
    parser.add_argument("--source", default=None, help="the repository: the guest binary is built there first")
    args, rest = parser.parse_known_args()
    WORK = os.path.abspath(args.work) if args.work else os.path.join(tempfile.gettempdir(), "wirespeed-guest")
    os.makedirs(WORK, exist_ok=True)
    if args.source:
        build = subprocess.run([os.path.join(args.source, "scripts", "build"), "portable", "wirespeed-testpmd"],
                               capture_output=True, text=True)
        if build.returncode != 0:
            sys.exit("building the guest testpmd (scripts/build portable wirespeed-testpmd) failed:\n" +
                     build.stdout[-3000:] + build.stderr[-3000:])
    sys.argv = [sys.argv[0]] + rest
    testpmd_harness.main(sys.modules[__name__])


if __name__ == "__main__":
    main()
