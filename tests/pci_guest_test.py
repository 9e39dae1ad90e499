#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Our PCI poll-mode drivers on QEMU's emulated NICs, inside a Linux guest (TCG, q35 with QEMU's
Intel IOMMU), bound to uio_pci_generic (physical addresses, the IOMMU passing them through) and
to vfio-pci (behind the IOMMU). Each scenario runs over uio_pci_generic as test_<scenario>_<kind>;
those of VFIO_SCENARIOS (all of them with --all-vfio) also over vfio-pci, as
test_<scenario>_<kind>_vfio, in the same guest: the test rebinds the NICs a run needs before it
starts. With --with-dpdk each scenario runs twice in the same guest: with our
wirespeed-testpmd and with Debian's dpdk-testpmd (22.11, its e1000 and virtio PMDs loaded with
-d) on the same devices, with the same assertions. That reference run proves a scenario's
expectations when the scenario changes, and tests nothing of ours: the suite leaves it out
(it would add about 60% to this test's time), bench/pci_guest asks for it. The host side checks
what came out: frames sent in and out of the guest as UDP datagrams (QEMU's dgram netdev) are
compared byte for byte and counted exactly, what the guest transmits is also captured by QEMU's
filter-dump, and a kernel in a network namespace pings through a tap NIC. In the guest, its
kernel's vhost-net serves virtio_user ports, and takes net_tap's flow rules as flower filters
(which the host's kernel may lack). Rates inside the guest are reported (side by side with
--with-dpdk; pci_guest_results.json in the work directory); TCG rates are no hardware rates, and
nothing is gated on them.

The guest binary must not use what TCG does not emulate (it emulates up to AVX2): the host
tests' own wirespeed-testpmd (built for x86-64-v2; it picks its AVX2 code at run time in the
guest), or the `portable` preset's, which main() builds first when given --source (a no-op when
up to date).

QEMU, the guest kernel (scripts/fetch-guest-kernel), busybox-static, dpdk-testpmd with
--with-dpdk, and root for the tap NIC are needed: without them the tests skip, except under CI
where they fail.

usage: pci_guest_test.py --binary GUEST_TESTPMD [--source REPO] [--work DIR] [--with-dpdk]
                         [--all-vfio] [--rates] [unittest options]
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
PROBE = None   # tests/pci_guest_probe.cpp's binary (--probe), same build
L3FWD_POWER = None  # examples/l3fwd-power (--l3fwd-power), same build
WORK = None    # guest images and results (--work; the build tree)
DPDK = shutil.which("dpdk-testpmd")
TC = shutil.which("tc")  # iproute2's, for the tap flow test's filter statistics (busybox's reads no flower)
PMD_DIR = (sorted(glob.glob("/usr/lib/x86_64-linux-gnu/dpdk/pmds-*")) or [None])[-1]
DPDK_PLUGINS = ["librte_net_e1000.so", "librte_net_virtio.so", "librte_mempool_ring.so"]
VHOST_NET_DPDK_PLUGINS = ["librte_net_tap.so"]  # the vhost-net rates (virtio_user is in librte_net_virtio)
KERNEL = image.find_kernel()
WITH_DPDK = "--with-dpdk" in sys.argv  # read here: the tests are made at import (_add_scenarios)
KINDS = ("ours", "dpdk") if WITH_DPDK else ("ours",)
UIO, VFIO = "uio_pci_generic", "vfio-pci"
# The scenarios that also run over vfio-pci in the suite: byte-exact io through each NIC kind
# (82574L, split and packed virtio rings) and the multi-queue virtio NIC; --all-vfio runs every
# scenario over both (each run costs 6-10 s of guest time; the suite keeps under 20 minutes).
ALL_VFIO = "--all-vfio" in sys.argv
VFIO_SCENARIOS = ("e1000e_io", "e1000e_virtio_io", "virtio_split_packed_io", "virtio_two_queues")
# The scenarios that measure a rate and test nothing the others do not (io_exact forwards through
# the same NICs byte for byte): bench/pci_guest runs them, with --rates; the suite does not.
WITH_RATES = "--rates" in sys.argv
RATE_SCENARIOS = ("e1000e_hub_io", "virtio_hub_io")
HUGEPAGES = 96            # 2 MiB pages reserved in the guest: one testpmd at a time
POOL = ["--total-num-mbufs=8192"]
# Statistics blocks (seconds of forwarding) to wait before a run's traffic starts. DPDK's em port
# drops what arrives in its first two seconds or so of forwarding (frames sent after its first
# statistics were lost, after its third never); our ports take what arrives once they print.
SETTLE_BLOCKS = {"ours": 1, "dpdk": 3}

# The guest's NICs, by PCI slot (0000:00:SLOT.0 in the guest): 82574L (e1000e) and virtio-net
# (modern) on UDP sockets of the test (dgram), in pairs on QEMU hubs, on taps in a namespace.
E1000_A, E1000_B, E1000_HUB_A, E1000_HUB_B, E1000_TAP = 4, 5, 6, 7, 8
VIRTIO_C, VIRTIO_PACKED_D, VIRTIO_HUB_A, VIRTIO_HUB_B, VIRTIO_MQ_TAP, VIRTIO_KERNEL = 9, 10, 11, 12, 13, 14
# One slot, two functions, one IOMMU group (conventional PCI functions, no ACS between them): a
# virtio-net NIC for vfio-pci, and one that stays with the kernel's virtio-pci, so the group is
# not viable. (An 82574L there gets a group of its own: the kernel treats it as isolated.)
SHARED_GROUP = 15
DGRAM = {E1000_A: "e1000e", E1000_B: "e1000e", VIRTIO_C: "virtio-net-pci", VIRTIO_PACKED_D: "virtio-net-pci"}
RESULTS = {}  # scenario -> kind -> rate (Mpps inside the guest)


def bdf(slot, function=0):
    return "0000:00:{:02x}.{}".format(slot, function)


def mac(slot):
    return "52:54:00:12:00:{:02x}".format(slot)


SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


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
        # QEMU's end, made here so that its receive buffer can be large: QEMU stops reading it
        # while the guest's RX ring is full, and the default buffer (~200 small frames) overflows
        # when the guest's vCPU is descheduled on a loaded host. SO_RCVBUFFORCE needs root, as
        # the test does; without it the buffer is capped by net.core.rmem_max.
        self.qemu_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.qemu_sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 8 << 20)
        except PermissionError:
            self.qemu_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.qemu_sock.bind(("127.0.0.1", 0))
        self.qemu_sock.connect(("127.0.0.1", self.port))
        self.guest_port = self.qemu_sock.getsockname()[1]

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
        self.qemu_sock.close()


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


def need_guest(test):
    """The requirements of every test here, then the one guest (booted by the first test)."""
    testpmd_harness.require_program(test, "qemu-system-x86_64", "qemu-system-x86")
    testpmd_harness.require(test, KERNEL, "no guest kernel in {} (scripts/fetch-guest-kernel)".format(image.CACHE))
    testpmd_harness.require(test, os.path.exists(image.BUSYBOX),
                            "{} is not there (Debian package busybox-static)".format(image.BUSYBOX))
    if WITH_DPDK:
        testpmd_harness.require(test, DPDK and PMD_DIR, "dpdk-testpmd and its PMDs (Debian package dpdk)")
    if PciGuest.guest is None or not PciGuest.guest.alive():
        PciGuest._boot()


class PciGuest(unittest.TestCase):
    """Each scenario_* runs as test_<scenario>_<kind>, all in one guest (the module's)."""

    guest = None
    hosts = None
    ns = None
    tmp = None

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
        need_guest(self)
        self.driver = UIO  # test_*_vfio set VFIO

    # ---- the guest ----
    @classmethod
    def _image(cls):
        dpdk = ([DPDK] + [os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS + VHOST_NET_DPDK_PLUGINS]
                if WITH_DPDK else [])
        return image.Image(KERNEL, modules=image.NET_MODULES + image.UIO_MODULES + image.VFIO_MODULES +
                           image.VHOST_NET_MODULES + image.TC_FLOWER_MODULES,
                           binaries=[BINARY] + [b for b in (PROBE, L3FWD_POWER, TC) if b] + dpdk,
                           scripts={"vhost_net_path": VHOST_NET_SCRIPT, "vhost_net_txonly": VHOST_NET_TXONLY,
                                    "tap_flower": TAP_FLOWER_SCRIPT}).build(
                               WORK, "pci-dpdk" if WITH_DPDK else "pci")

    @classmethod
    def _boot(cls):
        cls._stop_guest()
        cls.hosts = {slot: Host() for slot in DGRAM}
        nics = []
        for slot, model in DGRAM.items():
            nic = qemu.pci_nic_args(model, qemu.dgram_netdev("n{}".format(slot), cls.hosts[slot].qemu_sock.fileno()),
                                    slot, mac(slot), dump=os.path.join(cls.tmp, "tx{}.pcap".format(slot)), iommu=True)
            if slot == VIRTIO_PACKED_D:
                nic[3] += ",packed=on"
            nics.append(nic)
        for slot, model, hub in ((E1000_HUB_A, "e1000e", 1), (E1000_HUB_B, "e1000e", 1),
                                 (VIRTIO_HUB_A, "virtio-net-pci", 2), (VIRTIO_HUB_B, "virtio-net-pci", 2),
                                 (VIRTIO_KERNEL, "virtio-net-pci", 3)):
            nics.append(qemu.pci_nic_args(model, "hubport,id=n{},hubid={}".format(slot, hub), slot, mac(slot),
                                          iommu=True))
        for function in (0, 1):
            nics.append(qemu.pci_nic_args("virtio-net-pci", "hubport,id=n{}f{},hubid=4".format(SHARED_GROUP, function),
                                          SHARED_GROUP, "52:54:00:12:0{}:{:02x}".format(function, SHARED_GROUP),
                                          function=function, multifunction=True, iommu=True))
        taps = {}
        if os.geteuid() == 0 and shutil.which("ip"):
            taps = {E1000_TAP: "wspe{}".format(os.getpid() % 100000), VIRTIO_MQ_TAP: "wspv{}".format(os.getpid() % 100000)}
            nics.append(qemu.pci_nic_args("e1000e", "tap,id=n{},ifname={},script=no,downscript=no".format(
                E1000_TAP, taps[E1000_TAP]), E1000_TAP, mac(E1000_TAP), iommu=True))
            nic = qemu.pci_nic_args("virtio-net-pci", "tap,id=n{},ifname={},script=no,downscript=no,queues=2".format(
                VIRTIO_MQ_TAP, taps[VIRTIO_MQ_TAP]), VIRTIO_MQ_TAP, mac(VIRTIO_MQ_TAP), iommu=True)
            nic[3] += ",mq=on,vectors=6"
            nics.append(nic)
        nics.append(["-monitor", "unix:{},server=on,wait=off".format(os.path.join(cls.tmp, "monitor.sock"))])
        cls.guest = qemu.Guest(KERNEL, cls._image(), nics=nics, smp=2, mem_mb=768, shared_memory=False,
                               append="ws.hugepages={}".format(HUGEPAGES), log=os.path.join(cls.tmp, "console.log"),
                               name="pci guest", pass_fds=[h.qemu_sock.fileno() for h in cls.hosts.values()],
                               iommu=True).start()
        cls.guest.wait_ready(180)
        if taps:  # the taps QEMU made go into a namespace of the test's, with the host's addresses
            cls.ns = netns.Netns("pci")
            ns = cls.ns.ns("h")
            for i, (slot, tap) in enumerate(sorted(taps.items())):
                netns.sh("ip", "link", "set", tap, "netns", ns)
                netns.sh("ip", "addr", "add", "10.99.{}.1/24".format(73 + i), "dev", tap, ns=ns)
                netns.sh("ip", "link", "set", tap, "up", ns=ns)
            cls.tap_ns = ns
            cls.taps = taps
        # As an administrator would: each NIC we drive leaves the kernel's driver for
        # uio_pci_generic (bind() moves them to vfio-pci and back); VIRTIO_KERNEL and the second
        # function of SHARED_GROUP stay with virtio-pci.
        cls.bound = {}
        cls.bind(sorted(set(DGRAM) | {E1000_HUB_A, E1000_HUB_B, VIRTIO_HUB_A, VIRTIO_HUB_B} | set(taps)), UIO)
        for d in (bdf(VIRTIO_KERNEL), bdf(SHARED_GROUP, 1)):
            cls.guest.run("[ $(basename $(readlink /sys/bus/pci/devices/{}/driver)) = virtio-pci ]".format(d),
                          timeout=20)

    @classmethod
    def bind(cls, slots, driver):
        """Binds the NICs in `slots` (function 0) to `driver` (UIO or VFIO), those not bound to it
        already, as dpdk-devbind does: unbind, driver_override, drivers_probe."""
        todo = [s for s in slots if cls.bound.get(s) != driver]
        if not todo:
            return
        cls.guest.run("; ".join(
            "d={d}; p=/sys/bus/pci/devices/$d; {{ [ ! -e $p/driver ] || echo $d > $p/driver/unbind; }} && "
            "echo {drv} > $p/driver_override && echo $d > /sys/bus/pci/drivers_probe && "
            "[ $(basename $(readlink $p/driver)) = {drv} ]".format(d=bdf(s), drv=driver) for s in todo), timeout=60)
        cls.bound.update({s: driver for s in todo})

    @classmethod
    def monitor(cls, command):
        """One command on QEMU's human monitor (e.g. set_link n5 off); returns its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as m:
            m.settimeout(10)
            m.connect(os.path.join(cls.tmp, "monitor.sock"))
            out = b""
            while b"(qemu)" not in out:
                out += m.recv(4096)
            m.sendall(command.encode() + b"\n")
            out = b""
            while out.count(b"(qemu)") < 1:
                out += m.recv(4096)
            return out.decode(errors="replace")

    # ---- testpmd in the guest ----
    def _command(self, kind, slots, app, seconds):
        allow = " ".join("-a " + bdf(s) for s in slots)
        app = " ".join(POOL + app + ["--stats-period=1"])
        if kind == "ours":
            return ("wirespeed-testpmd -l 0-1 -n 4 --file-prefix=ws --log-level=info {} -- {} --duration={} "
                    "--summary-json=/tmp/s.json; "
                    "rc=$?; echo \"@@json $(tr -d '\\n' < /tmp/s.json)\"; rm -f /tmp/s.json; exit $rc").format(
                        allow, app, seconds)
        plugins = " ".join("-d " + os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS)
        # DPDK's testpmd runs until SIGINT; its start-up (about 2 s here) is inside the timeout.
        return "timeout -s INT {} dpdk-testpmd -l 0-1 -n 4 --file-prefix=dp {} {} -- {}".format(
            seconds + 4, plugins, allow, app)

    def run_testpmd(self, kind, slots, app, seconds=5, during=None):
        """Runs testpmd on the NICs in `slots` for `seconds` of forwarding; with `during` (a
        function), which runs on the host once forwarding has settled (SETTLE_BLOCKS), for
        `seconds` after that. Returns a Run."""
        g = PciGuest.guest
        PciGuest.bind(slots, self.driver)
        if during is not None:
            seconds += SETTLE_BLOCKS[kind]
        started = g.start_command(self._command(kind, slots, app, seconds))
        if during is not None:
            at = started[1]
            for _ in range(SETTLE_BLOCKS[kind]):
                at = g.wait_for(r"Port statistics =", 60, at).end()
            during()
        rc, out = g.wait_command(started, timeout=seconds + 90)
        testpmd_harness.assert_no_crash(self, out, kind)
        self.assertNotIn("Illegal instruction", out)
        run = Run(kind, out)
        if kind == "ours":
            self.assertEqual(rc, 0, out[-3000:])
            # The host tests' binary (x86-64-v2) picks its AVX2 code under TCG, which emulates up
            # to AVX2 (QEMU 7.2's -cpu max), and never AVX-512.
            level = re.search(r"EAL: SIMD level (\S+) ", out)
            self.assertIsNotNone(level, out[-3000:])
            self.assertEqual(level.group(1), "avx2", out[-3000:])
            self.assertIsNotNone(run.summary, out[-3000:])
            self.assertTrue(run.summary["pool_audit_ok"], out[-2000:])
            self.assertTrue(run.summary["accounting_exact"], json.dumps(run.summary["totals"]))
            # Behind the IOMMU: the arena, and nothing else, mapped at an IOVA inside the
            # vIOMMU's 39-bit aperture, below our virtual addresses.
            iova = re.findall(r"VFIO: (.*) \(\d+ bytes\) mapped for DMA at IOVA (0x[0-9a-f]+)", out)
            if self.driver == VFIO:
                self.assertEqual([what for what, _ in iova], ["arena 'ws'"], out[-3000:])
                self.assertLess(int(iova[0][1], 16), 1 << 39)
            else:
                self.assertEqual(iova, [], out[-3000:])
        else:
            self.assertIn("Forward statistics for port", out, out[-3000:])
        return run

    def record(self, scenario, kind, mpps):
        RESULTS.setdefault(scenario, {})[kind] = round(mpps, 4)

    # ---- what the scenarios share ----
    def io_exact(self, kind, x, y, app=()):
        """io forwarding between NICs x and y (dgram): 600 distinct frames of 60 to 1514 bytes go
        in each; every one comes out of the other, byte for byte, in order."""
        hx, hy = PciGuest.hosts[x], PciGuest.hosts[y]
        hx.drain(0.05)
        hy.drain(0.05)
        lengths = [60, 64, 128, 591, 1024, 1514]
        into_x = [udp_frame(mac(x), i, lengths[i % len(lengths)], 1) for i in range(600)]
        into_y = [udp_frame(mac(y), i, lengths[(i + 3) % len(lengths)], 2) for i in range(600)]
        got = {}

        # One frame a millisecond into each: what comes in leaves through the other NIC, whose TX
        # ring must absorb a stall of QEMU's main loop (which runs the virtio TX queue) on a
        # loaded host. Behind the IOMMU every descriptor and buffer access is translated, and at
        # two frames a millisecond a 256-descriptor ring once overflowed (32 frames dropped).
        def traffic():
            hx.send(into_x, per_ms=1)
            hy.send(into_y, per_ms=1)
            got["y"] = hy.drain(1.5)
            got["x"] = hx.drain(0.2)

        run = self.run_testpmd(kind, [x, y], ["--forward-mode=io", "--auto-start"] + list(app), seconds=5,
                               during=traffic)
        self.assertEqual(len(got["y"]), len(into_x), "frames out of {}".format(bdf(y)))
        self.assertEqual(len(got["x"]), len(into_y), "frames out of {}".format(bdf(x)))
        self.assertEqual(got["y"], into_x, "what entered one NIC leaves the other unchanged, in order")
        self.assertEqual(got["x"], into_y)
        totals = run.port_totals()
        self.assertEqual(totals[0], (600, 600), run.output[-2000:])
        self.assertEqual(totals[1], (600, 600))
        return run

    def txonly_counted(self, kind, slot, scenario):
        """txonly on one NIC: every frame testpmd counts as sent is in QEMU's capture, 64 bytes
        each; the rate is recorded. Returns the number sent."""
        dump = os.path.join(PciGuest.tmp, "tx{}.pcap".format(slot))
        before = len(read_pcap(dump))
        run = self.run_testpmd(kind, [slot], ["--forward-mode=txonly", "--auto-start"], seconds=3)
        PciGuest.hosts[slot].drain(0.3)
        time.sleep(0.5)  # filter-dump writes as QEMU sends
        frames = read_pcap(dump)[before:]
        sent = run.port_totals()[0][1]
        self.assertEqual(len(frames), sent, "every frame counted as sent left the NIC")
        self.assertEqual({len(f) for f in frames} - {64}, set())
        self.record(scenario, kind, run.rate_mpps("Tx-pps"))
        return sent, run

    def rxonly_exact(self, kind, slot):
        """rxonly on one NIC: exactly the 2000 frames the host sent are received."""
        host = PciGuest.hosts[slot]
        frames = [udp_frame(mac(slot), i, 60 + i % 200, 3) for i in range(2000)]
        # One frame a millisecond: QEMU stops reading its socket while the guest's ring is full,
        # and the host kernel's socket buffer (about 200 such frames) must cover a guest vCPU
        # descheduled on a loaded host. 8 s, not the 2 s the sending takes: on a loaded host the
        # emulated guest once still took 430 frames a second at the end of a 4-s run, and its
        # last frame arrived after the stop (1999 of 2000).
        run = self.run_testpmd(kind, [slot], ["--forward-mode=rxonly", "--auto-start"], seconds=8,
                               during=lambda: host.send(frames, per_ms=1))
        self.assertEqual(run.port_totals()[0][0], len(frames), run.output[-2000:])

    def hub_io(self, kind, x, y, scenario):
        """io between two NICs joined by a QEMU hub, started with a burst on each (--tx-first):
        the guest's forwarding rate; the loop keeps going both ways."""
        run = self.run_testpmd(kind, [x, y], ["--forward-mode=io", "--auto-start", "--tx-first"], seconds=6)
        totals = run.port_totals()
        self.assertGreater(totals[0][0], 1000, run.output[-2000:])
        self.assertGreater(totals[1][0], 1000)
        self.record(scenario, kind, run.rate_mpps("Tx-pps"))

    # ---- scenarios: 82574L ----
    def scenario_e1000e_io(self, kind):
        """io between two 82574L, byte-exact against the host's frames."""
        self.io_exact(kind, E1000_A, E1000_B)

    def scenario_e1000e_txonly(self, kind):
        """txonly on an 82574L, counted frame by frame against QEMU's capture."""
        sent, run = self.txonly_counted(kind, E1000_A, "e1000e txonly 64 B")
        self.assertGreater(sent, 1000, run.output[-2000:])

    def scenario_e1000e_rxonly(self, kind):
        """rxonly on an 82574L: exact count."""
        self.rxonly_exact(kind, E1000_A)

    def scenario_e1000e_hub_io(self, kind):
        """io between two 82574L on a hub: rates."""
        self.hub_io(kind, E1000_HUB_A, E1000_HUB_B, "e1000e io, 2 NICs on a hub")

    def icmpecho(self, kind, slot, address):
        """icmpecho on the tap NIC `slot`: the host kernel, in a namespace behind the tap, pings
        `address` (ARP first) and gets every answer."""
        testpmd_harness.require(self, PciGuest.ns is not None, "needs root and iproute2 for the tap NIC's namespace")
        result = {}

        def ping():
            result["p"] = netns.sh("ping", "-c", "5", "-i", "0.2", "-W", "3", address, ns=PciGuest.tap_ns,
                                   check=False, timeout=30)

        run = self.run_testpmd(kind, [slot], ["--forward-mode=icmpecho", "--auto-start"], seconds=4, during=ping)
        self.assertIn(" 0% packet loss", result["p"].stdout, result["p"].stdout + run.output[-2000:])

    def scenario_e1000e_icmpecho(self, kind):
        """icmpecho on an 82574L answers the host kernel's ping through a tap."""
        self.icmpecho(kind, E1000_TAP, "10.99.73.2")

    # ---- scenarios: virtio-net ----
    def scenario_e1000e_virtio_io(self, kind):
        """io between an 82574L and a virtio-net NIC (split ring, mergeable buffers), byte-exact."""
        self.io_exact(kind, E1000_A, VIRTIO_C)

    def scenario_virtio_split_packed_io(self, kind):
        """io between a split-ring and a packed-ring virtio-net NIC, byte-exact."""
        self.io_exact(kind, VIRTIO_C, VIRTIO_PACKED_D)

    def scenario_virtio_txonly(self, kind):
        """txonly on a virtio-net NIC, counted frame by frame against QEMU's capture."""
        sent, run = self.txonly_counted(kind, VIRTIO_C, "virtio-net txonly 64 B")
        self.assertGreater(sent, 1000, run.output[-2000:])

    def scenario_virtio_rxonly(self, kind):
        """rxonly on a virtio-net NIC: exact count."""
        self.rxonly_exact(kind, VIRTIO_C)

    def scenario_virtio_packed_rxonly(self, kind):
        """rxonly on a packed-ring virtio-net NIC: exact count."""
        self.rxonly_exact(kind, VIRTIO_PACKED_D)

    def scenario_virtio_hub_io(self, kind):
        """io between two virtio-net NICs on a hub: rates."""
        self.hub_io(kind, VIRTIO_HUB_A, VIRTIO_HUB_B, "virtio-net io, 2 NICs on a hub")

    def scenario_virtio_icmpecho(self, kind):
        """icmpecho on a virtio-net NIC (one queue pair of the multi-queue tap) answers the host
        kernel's ping."""
        self.icmpecho(kind, VIRTIO_MQ_TAP, "10.99.74.2")

    def scenario_virtio_two_queues(self, kind):
        """Two queue pairs on a virtio-net NIC (multi-queue tap, VIRTIO_NET_CTRL_MQ through the
        control queue): 16 UDP flows from the host kernel are spread over both RX queues by the
        tap, and every datagram is received."""
        testpmd_harness.require(self, PciGuest.ns is not None, "needs root and iproute2 for the tap NIC's namespace")
        tap = PciGuest.taps[VIRTIO_MQ_TAP]
        netns.sh("ip", "neigh", "replace", "10.99.74.2", "lladdr", mac(VIRTIO_MQ_TAP), "dev", tap, ns=PciGuest.tap_ns)
        sender = ("import socket, time\n"
                  "for i in range(1600):\n"
                  "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                  "    s.bind(('10.99.74.1', 40000 + i % 16)); s.sendto(b'x' * 100, ('10.99.74.2', 9)); s.close()\n"
                  "    time.sleep(0.0005)\n")
        result = {}

        def traffic():
            result["s"] = netns.sh("python3", "-c", sender, ns=PciGuest.tap_ns, check=False, timeout=60)

        run = self.run_testpmd(kind, [VIRTIO_MQ_TAP], ["--forward-mode=rxonly", "--auto-start", "--rxq=2", "--txq=2",
                                                       "--nb-cores=1"], seconds=5, during=traffic)
        self.assertEqual(result["s"].returncode, 0, result["s"].stderr)
        queues = {int(q): int(n) for q, n in re.findall(
            r"Forward Stats for RX Port=\s*0/Queue=\s*(\d+) .*?\n\s*RX-packets:\s+(\d+)", run.output)}
        # The host kernel may send some IPv6 or ARP traffic of its own on the tap: at least ours.
        self.assertGreaterEqual(run.port_totals()[0][0], 1600, run.output[-3000:])
        self.assertEqual(set(queues), {0, 1}, "both queues received: {}".format(queues))

class PciGuestBadInput(unittest.TestCase):
    """What our testpmd refuses in the guest, each with exit code 2, the device untouched and
    nothing started (ours only: these are our error messages)."""

    def setUp(self):
        need_guest(self)

    def refused(self, eal, needles, bind=None):
        """`bind`: {driver: slots} bound first."""
        for driver, slots in (bind or {}).items():
            PciGuest.bind(slots, driver)
        rc, out = PciGuest.guest.run(
            "wirespeed-testpmd -l 0-1 --file-prefix=ws {} -- {} --duration=1 --forward-mode=io".format(
                eal, " ".join(POOL)), timeout=90, check=False)
        self.assertEqual(rc, 2, out)
        for needle in needles:
            self.assertIn(needle, out)
        self.assertNotIn("packet forwarding", out)
        testpmd_harness.assert_no_crash(self, out)
        return out

    def test_device_bound_to_a_kernel_driver(self):
        self.refused("-a " + bdf(VIRTIO_KERNEL), [bdf(VIRTIO_KERNEL) + " (1af4:1041) is bound to the kernel driver "
                                                  "virtio-pci", "driver_override", "drivers_probe",
                                                  "echo vfio-pci > /sys/bus/pci/devices/" + bdf(VIRTIO_KERNEL),
                                                  "echo uio_pci_generic > /sys/bus/pci/devices/" + bdf(VIRTIO_KERNEL)])
        PciGuest.guest.run("[ $(basename $(readlink /sys/bus/pci/devices/{}/driver)) = virtio-pci ]".format(
            bdf(VIRTIO_KERNEL)), timeout=20)

    def test_device_that_does_not_exist(self):
        self.refused("-a 0000:00:1e.0", ["0000:00:1e.0 does not exist", bdf(E1000_A) + " (8086:10d3)"])

    def test_virtual_addresses_without_an_iommu(self):
        self.refused("-a {} --iova-mode=va".format(bdf(E1000_A)),
                     ["--iova-mode=va", bdf(E1000_A), "uio_pci_generic", "--iova-mode=pa",
                      "echo vfio-pci > /sys/bus/pci/devices/{}/driver_override".format(bdf(E1000_A))],
                     bind={UIO: [E1000_A]})

    def test_no_huge_pages(self):
        PciGuest.guest.run("echo 0 > /proc/sys/vm/nr_hugepages", timeout=20)
        try:
            self.refused("-a " + bdf(E1000_A), ["huge pages", "nr_hugepages"], bind={UIO: [E1000_A]})
        finally:
            PciGuest.guest.run("echo {} > /proc/sys/vm/nr_hugepages".format(HUGEPAGES), timeout=20)

    def test_device_that_never_shows_link(self):
        PciGuest.monitor("set_link n{} off".format(E1000_B))
        try:
            self.refused("-a {},link_wait_ms=1500".format(bdf(E1000_B)), [bdf(E1000_B), "no link after 1500 ms",
                                                                          "link_wait_ms=0"], bind={UIO: [E1000_B]})
        finally:
            PciGuest.monitor("set_link n{} on".format(E1000_B))

    # ---- vfio-pci ----
    def test_vfio_group_that_is_not_viable(self):
        self.refused("-a " + bdf(SHARED_GROUP), [bdf(SHARED_GROUP) + " (1af4:1041)", "IOMMU group", "not viable",
                                                 bdf(SHARED_GROUP, 1) + " (bound to virtio-pci)", "vfio-pci"],
                     bind={VFIO: [SHARED_GROUP]})

    def test_vfio_iommu_module_not_loaded(self):
        PciGuest.bind([E1000_A], VFIO)
        PciGuest.guest.run("rmmod vfio_iommu_type1", timeout=20)
        try:
            self.refused("-a " + bdf(E1000_A), [bdf(E1000_A), "vfio_iommu_type1", "modprobe vfio_iommu_type1"])
        finally:
            PciGuest.guest.run("insmod /lib/modules/$(grep vfio_iommu_type1 /etc/ws-modules)", timeout=20)

    def test_vfio_with_physical_addresses(self):
        self.refused("-a {} --iova-mode=pa".format(bdf(E1000_A)),
                     ["--iova-mode=pa", bdf(E1000_A) + " (8086:10d3) is on vfio-pci", "drop --iova-mode"],
                     bind={VFIO: [E1000_A]})

    def test_vfio_and_uio_in_one_run(self):
        self.refused("-a {} -a {}".format(bdf(E1000_A), bdf(E1000_B)),
                     [bdf(E1000_A) + " (8086:10d3) is on vfio-pci", bdf(E1000_B) + " (8086:10d3) on uio_pci_generic",
                      "echo vfio-pci > /sys/bus/pci/devices/{}/driver_override".format(bdf(E1000_B))],
                     bind={VFIO: [E1000_A], UIO: [E1000_B]})

    # ---- bad inputs added with the isolation proof ----
    def test_vfio_pci_module_not_loaded(self):
        """A device whose driver_override names vfio-pci but which is bound to no driver (the
        module was never loaded, here unloaded): refused rather than driven through sysfs without
        the IOMMU the user chose."""
        PciGuest.bind([E1000_A], VFIO)
        PciGuest.guest.run("rmmod vfio_pci", timeout=20)
        try:
            self.refused("-a " + bdf(E1000_A), [bdf(E1000_A) + " (8086:10d3) is bound to no driver",
                                                "driver_override names vfio-pci", "modprobe vfio-pci",
                                                "echo {} > /sys/bus/pci/drivers_probe".format(bdf(E1000_A))])
        finally:  # loading it again gives vfio-pci back every device whose driver_override names it
            PciGuest.guest.run("insmod /lib/modules/$(grep /vfio-pci.ko /etc/ws-modules)", timeout=20)
            PciGuest.guest.run("[ $(basename $(readlink /sys/bus/pci/devices/{}/driver)) = vfio-pci ]".format(
                bdf(E1000_A)), timeout=20)

    def test_vfio_dma_mapping_limit_reached(self):
        """vfio_iommu_type1's dma_entry_limit (read when a container opens) set to 0: the arena's
        VFIO_IOMMU_MAP_DMA fails with ENOSPC, and the error says which limit to raise."""
        PciGuest.bind([E1000_A], VFIO)
        param = "/sys/module/vfio_iommu_type1/parameters/dma_entry_limit"
        _, old = PciGuest.guest.run("cat " + param, timeout=20)
        old = old.strip().splitlines()[-1]
        PciGuest.guest.run("echo 0 > " + param, timeout=20)
        try:
            self.refused("-a " + bdf(E1000_A), [bdf(E1000_A) + " (8086:10d3) (vfio-pci)", "VFIO_IOMMU_MAP_DMA",
                                                "dma_entry_limit", "echo 65535 > " + param])
        finally:
            PciGuest.guest.run("echo {} > {}".format(old, param), timeout=20)


class PciGuestIsolation(unittest.TestCase):
    """The IOMMU's isolation, shown with ws-pci-guest-probe's `stray` mode: the next RX
    descriptor of an 82574L is given the physical address of a guard page the probe owns (filled
    with 0xa5), then the host sends a frame. Over vfio-pci that address is no IOVA we mapped: the
    vIOMMU blocks the write and the guest kernel logs the DMAR fault, the guard page keeps every
    byte, and the queue counts an error and receives the next frame as usual. Over
    uio_pci_generic (iommu=pt: the device's addresses are physical ones) the same write lands on
    the guard page: why vfio-pci is the default."""

    def setUp(self):
        need_guest(self)
        testpmd_harness.require(self, PROBE, "ws-pci-guest-probe (--probe) was not given")

    def stray_write(self, driver):
        """Runs the probe on E1000_A bound to `driver`; returns (its output, the guard page's
        physical address, the frame sent into the stray descriptor, the kernel's log)."""
        slot, g, host = E1000_A, PciGuest.guest, PciGuest.hosts[E1000_A]
        PciGuest.bind([slot], driver)
        g.run("dmesg -c > /dev/null", timeout=20)
        host.drain(0.05)
        began = time.monotonic()
        started = g.start_command("ws-pci-guest-probe stray -l 0 --file-prefix=probe -a " + bdf(slot))
        armed = g.wait_for(r"probe: armed: next RX descriptor -> (0x[0-9a-f]+)", 60, started[1])
        stray, after = udp_frame(mac(slot), 1, 200, 6), udp_frame(mac(slot), 2, 120, 6)
        host.send([stray])
        g.wait_for(r"probe: stray descriptor done", 30, armed.end())
        host.send([after])
        rc, out = g.wait_command(started, timeout=60)
        _, dmesg = g.run("dmesg", timeout=20)
        sys.stderr.write("\n  stray write over {}: {:.1f} s\n".format(driver, time.monotonic() - began))
        self.assertEqual(rc, 0, out[-3000:])
        testpmd_harness.assert_no_crash(self, out)
        self.assertIn("probe: queue errors 1", out)
        self.assertIn("probe: received {} bytes, head {}".format(len(after), after[:64].hex()), out,
                      "the queue runs on after the stray descriptor")
        guard = re.search(r"stray descriptor done: (\d+) bytes; guard page: (\d+) bytes changed, head ([0-9a-f]+)", out)
        self.assertIsNotNone(guard, out[-3000:])
        self.assertEqual(int(guard.group(1)), len(stray), out[-3000:])
        return out, int(armed.group(1), 16), stray, guard, dmesg

    def test_stray_rx_write_blocked_vfio(self):
        out, pa, _, guard, dmesg = self.stray_write(VFIO)
        self.assertEqual((guard.group(2), guard.group(3)), ("0", "a5" * 64), "no byte of the guard page changed")
        fault = re.search(r"DMAR: \[DMA Write[^\]]*\] Request device \[00:{:02x}\.0\] fault addr "
                          r"(0x[0-9a-f]+)".format(E1000_A), dmesg)
        self.assertIsNotNone(fault, dmesg[-3000:])
        self.assertEqual(int(fault.group(1), 16) & ~0xfff, pa & ~0xfff, dmesg[-3000:])

    def test_stray_rx_write_lands_uio(self):
        out, _, stray, guard, dmesg = self.stray_write(UIO)
        self.assertEqual(guard.group(3), stray[:64].hex(), "the frame landed on the guard page")
        self.assertGreater(int(guard.group(2)), 100)
        self.assertNotIn("DMAR: [DMA Write", dmesg)


class PciGuestInterrupts(unittest.TestCase):
    """Interrupts through the Port API (ws-pci-guest-probe's `intr` mode) on an 82574L and on
    virtio-net NICs: RX queue 0's fd, armed, fires when the host sends a frame, twice (virtio: and
    a frame sent while it is disabled does not wake it); the link event fd fires when QEMU's
    monitor takes the link down (set_link off) and again up. Over vfio-pci with MSI-X (the
    default: RX and link on vectors of their own; e1000e's IVAR, virtio's queue_msix_vector), and
    over uio_pci_generic with INTx (/dev/uioN, unmasked after each). --vfio-intr=msi (e1000e) and
    legacy run with --all-vfio."""

    def setUp(self):
        need_guest(self)
        testpmd_harness.require(self, PROBE, "ws-pci-guest-probe (--probe) was not given")

    def interrupts(self, driver, mode, vectors, eal="", slot=E1000_A, rx=True, quiet=False):
        """quiet: after the two wake-ups, a frame sent while the interrupt is disabled must not
        wake the queue's fd (the probe's intr-quiet mode)."""
        g, host = PciGuest.guest, PciGuest.hosts[slot]
        PciGuest.bind([slot], driver)
        host.drain(0.05)
        began = time.monotonic()
        started = g.start_command("ws-pci-guest-probe {} -l 0 --file-prefix=probe --log-level=info {} -a {}".format(
            ("intr-quiet" if quiet else "intr") if rx else "link", eal, bdf(slot)))
        try:
            at = started[1]
            for r in range(2 if rx else 0):
                armed = g.wait_for(r"probe: rx armed {}\n".format(r), 60, at)
                host.send([udp_frame(mac(slot), r, 100, 7)])
                at = g.wait_for(r"probe: (rx interrupt {}: \d+ frames|no rx interrupt)".format(r), 40, armed.end()).end()
            if quiet:
                disabled = g.wait_for(r"probe: (rx disabled\n|no )", 40, at)
                host.send([udp_frame(mac(slot), 2, 100, 7)])
                at = g.wait_for(r"probe: (rx quiet: .*\n|no )", 40, disabled.end()).end()
            for r, state in ((0, "off"), (1, "on")):
                armed = g.wait_for(r"probe: (link armed {} |no )".format(r), 40, at)
                PciGuest.monitor("set_link n{} {}".format(slot, state))
                at = g.wait_for(r"probe: (link event {}: link \w+|no link event)".format(r), 40, armed.end()).end()
            rc, out = g.wait_command(started, timeout=60)
        finally:
            PciGuest.monitor("set_link n{} on".format(slot))
        sys.stderr.write("\n  {} interrupts over {} ({}): {:.1f} s\n".format(
            DGRAM[slot], driver, mode, time.monotonic() - began))
        self.assertEqual(rc, 0, out[-3000:])
        testpmd_harness.assert_no_crash(self, out)
        self.assertIn("interrupts over {}, {}".format(mode, vectors), out)
        for r in range(2 if rx else 0):
            frames = re.search(r"probe: rx interrupt {}: (\d+) frames".format(r), out)
            self.assertIsNotNone(frames, out[-3000:])
            self.assertEqual(int(frames.group(1)), 1, "the frame that woke the queue is there")
        if quiet:
            self.assertIn("probe: rx quiet: 1 frames, woken no", out)
        self.assertIn("probe: link event 0: link down", out)
        self.assertIn("probe: link event 1: link up", out)

    def test_testpmd_link_state_change_event_vfio(self):
        """wirespeed-testpmd at its prompt (commands through a fifo) prints DPDK's "Port 0: link
        state change event" when the 82574L's link interrupt fires, down then up, and `show port
        info` tells each state."""
        slot, g = E1000_A, PciGuest.guest
        PciGuest.bind([slot], VFIO)
        began = time.monotonic()
        wait = ('w() {{ n=0; until [ "$(grep -c "$1" /tmp/tp.out)" -ge $2 ] || [ $n -ge 400 ]; do sleep 0.1; '
                'n=$((n+1)); done; }}; ')
        script = (wait + "rm -f /tmp/tp /tmp/tp.out; mkfifo /tmp/tp; "
                  "(wirespeed-testpmd -l 0-1 --file-prefix=ws --log-level=info -a {} -- -i {} < /tmp/tp "
                  "> /tmp/tp.out 2>&1; echo \"@@tp exit $?\" >> /tmp/tp.out) & exec 3>/tmp/tp; "
                  "w 'started, link' 1; sleep 1; echo @@lsc ready; "
                  "w 'link state change event' 1; echo 'show port info 0' >&3; w 'Link status' 1; echo @@lsc down; "
                  "w 'link state change event' 2; echo 'show port info 0' >&3; w 'Link status' 2; "
                  "echo quit >&3; w '@@tp exit' 1; cat /tmp/tp.out").format(bdf(slot), " ".join(POOL))
        started = g.start_command(script)
        try:
            at = g.wait_for(r"@@lsc ready", 90, started[1]).end()
            PciGuest.monitor("set_link n{} off".format(slot))
            g.wait_for(r"@@lsc down", 60, at)
            PciGuest.monitor("set_link n{} on".format(slot))
            rc, out = g.wait_command(started, timeout=90)
        finally:
            PciGuest.monitor("set_link n{} on".format(slot))
        sys.stderr.write("\n  testpmd link events over vfio-pci: {:.1f} s\n".format(time.monotonic() - began))
        self.assertIn("@@tp exit 0", out, out[-3000:])
        testpmd_harness.assert_no_crash(self, out)
        self.assertEqual(out.count("\nPort 0: link state change event\n"), 2, out[-3000:])
        self.assertEqual(re.findall(r"Link status: (\w+)", out), ["down", "up"], out[-3000:])
        self.assertIn("interrupts over msix, 2 vectors", out)

    def test_virtio_interrupts_vfio_msix(self):
        """virtio-net (split ring, EVENT_IDX): RX queue 0 on MSI-X vector 1 (queue_msix_vector),
        armed by used_event, quiet while disabled; link changes are configuration changes
        (VIRTIO_NET_F_STATUS) on vector 0 (msix_config)."""
        self.interrupts(VFIO, "msix", "2 vectors", slot=VIRTIO_C, quiet=True)

    def test_virtio_packed_interrupts_uio_intx(self):
        """virtio-net (packed ring: the driver event suppression) over INTx: one interrupt for
        every cause, told apart by ISR (bit 0 a queue, bit 1 the configuration), which the queue's
        enable and link() read, lowering INTx."""
        self.interrupts(UIO, "legacy", "1 vector", slot=VIRTIO_PACKED_D, quiet=True)

    def test_e1000e_interrupts_vfio_msix(self):
        self.interrupts(VFIO, "msix", "2 vectors")

    def test_e1000e_interrupts_uio_intx(self):
        self.interrupts(UIO, "legacy", "1 vector")

    # Registered with --all-vfio only (below the class): the suite leaves them out for time, and a
    # test skipped in CI fails the run.
    def _e1000e_interrupts_vfio_msi(self):
        self.interrupts(VFIO, "msi", "1 vector", "--vfio-intr=msi")

    # Registered with --all-vfio only (below the class): in two fresh-clone runs of the suite on a
    # loaded host, l3fwd-power exited at its start here, before sleeping, for a reason those runs
    # did not print (the test now does); it passes alone, in this class and in the whole file.
    def _virtio_l3fwd_power_vfio(self):
        """examples/l3fwd-power on a virtio-net NIC over vfio-pci (MSI-X): idle, its lcore sleeps
        (with a 1 s timeout, so that every wake-up before it is the queue's interrupt); a frame
        the host sends wakes it and is routed back out of the NIC; the lcore sleeps again ("sleeps
        until interrupt triggers"), and the next frame, the first after that sleep, wakes it and is
        forwarded too."""
        testpmd_harness.require(self, L3FWD_POWER, "l3fwd-power (--l3fwd-power) was not given")
        slot, g, host = VIRTIO_C, PciGuest.guest, PciGuest.hosts[VIRTIO_C]
        PciGuest.bind([slot], VFIO)
        host.drain(0.05)
        began = time.monotonic()
        # The first frame must find the lcore asleep (a frame polled before that wakes nothing),
        # and l3fwd-power logs no sleep before its first wake-up: its thread in epoll_wait
        # (/proc/PID/wchan) says so; on a loaded host the polls before that take a while.
        wait = ('w() {{ n=0; until [ "$(grep -c "$1" /tmp/l3p.out)" -ge $2 ] || ! kill -0 $p 2>/dev/null || '
                '[ $n -ge 600 ]; do sleep 0.05; n=$((n+1)); done; }}; '
                's() {{ n=0; until grep -qs epoll /proc/$p/wchan || ! kill -0 $p 2>/dev/null || [ $n -ge 600 ]; do '
                'sleep 0.05; n=$((n+1)); done; }}; ')
        script = (wait + "rm -f /tmp/l3p.out; l3fwd-power -l 0 --file-prefix=l3p -a {} -- -p 0x1 "
                  "--route=10.99.72.0/24,0 --sleep-timeout 1000 > /tmp/l3p.out 2>&1 & p=$!; "
                  "w 'entering main interrupt loop' 1; s; if kill -0 $p 2>/dev/null; then echo @@l3p ready; "
                  "w 'is waked up from rx interrupt' 1; w 'sleeps until interrupt triggers' 1; echo @@l3p asleep; "
                  "w 'is waked up from rx interrupt' 2; sleep 0.1; kill -INT $p; else echo @@l3p gone; fi; wait $p; "
                  "echo \"@@l3p exit $?\"; cat /tmp/l3p.out").format(bdf(slot))
        frames = [udp_frame(mac(slot), r, 100, 9) for r in range(2)]
        started = g.start_command(script)
        m = g.wait_for(r"@@l3p (ready|gone)", 60, started[1])
        if m.group(1) == "gone":  # it exited before sleeping: its output says why
            rc, out = g.wait_command(started, timeout=60)
            self.fail("l3fwd-power exited at start\n" + out[-3000:])
        at = m.end()
        host.send(frames[:1])
        g.wait_for(r"@@l3p asleep", 60, at)
        host.send(frames[1:])
        rc, out = g.wait_command(started, timeout=60)
        got = host.drain(0.3)
        sys.stderr.write("\n  l3fwd-power on virtio-net over vfio-pci: {:.1f} s\n".format(time.monotonic() - began))
        self.assertEqual(rc, 0, out[-3000:])
        testpmd_harness.assert_no_crash(self, out)
        self.assertIn("@@l3p exit 0", out, out[-3000:])
        self.assertIn("Bye...", out)
        self.assertEqual(out.count("is waked up from rx interrupt on port 0 queue 0"), 2, out[-3000:])
        self.assertIn("lcore 0 sleeps until interrupt triggers", out)
        # Routed: the same frames with TTL 63 (and the IP checksum redone), in order.
        self.assertEqual(len(got), 2, out[-3000:])
        for sent, back in zip(frames, got):
            self.assertEqual(back[22], 63)
            self.assertEqual(back[34:], sent[34:])

    def _e1000e_interrupts_vfio_legacy(self):
        self.interrupts(VFIO, "legacy", "1 vector", "--vfio-intr=legacy")

    def _virtio_interrupts_vfio_legacy(self):
        self.interrupts(VFIO, "legacy", "1 vector", "--vfio-intr=legacy", slot=VIRTIO_C, quiet=True)


if ALL_VFIO:
    PciGuestInterrupts.test_e1000e_interrupts_vfio_msi = PciGuestInterrupts._e1000e_interrupts_vfio_msi
    PciGuestInterrupts.test_e1000e_interrupts_vfio_legacy = PciGuestInterrupts._e1000e_interrupts_vfio_legacy
    PciGuestInterrupts.test_virtio_interrupts_vfio_legacy = PciGuestInterrupts._virtio_interrupts_vfio_legacy
    PciGuestInterrupts.test_virtio_l3fwd_power_vfio = PciGuestInterrupts._virtio_l3fwd_power_vfio


# ---- virtio_user over the kernel's vhost-net (DPDK's exception path) ----
# In the same guest: our testpmd forwards (io) between two net_virtio_user ports on
# /dev/vhost-net, each with a tap of the guest kernel's; one tap stays in the guest's namespace,
# the other goes into a namespace of its own, so the kernel's ping and TCP (busybox nc) between
# the two cross our forwarding. With csum=1,tso=1 the taps get TUN_F_CSUM|TSO4|TSO6: TCP
# segments of up to 64 KiB leave the sending tap as one GSO packet (GUEST_TSO4), are forwarded
# whole, and the receiving kernel takes them (it checks the checksum our RX completed).
VHOST_NET_SCRIPT = r"""# usage: vhost_net_path QUEUES [ours|dpdk] [vhost-net|tap] [BYTES]
# Prints @@vn lines (tap flags, ping, each TCP transfer and its time), @@json and testpmd's log.
q=$1; kind=${2:-ours}; backend=${3:-vhost-net}; bytes=${4:-1000000}
rm -f /tmp/vn.log /tmp/vn.json /tmp/vn.a /tmp/vn.b /tmp/vn.c
if [ "$backend" = tap ]; then
  d0="net_tap0,iface=wsva"; d1="net_tap1,iface=wsvb"
else
  dev="net_virtio_user%d,path=/dev/vhost-net,queues=$q"
  [ "$kind" = ours ] && [ "${OFFLOADS:-1}" = 1 ] && dev="$dev,csum=1,tso=1"
  d0="$(printf "$dev" 0),iface=wsva"; d1="$(printf "$dev" 1),iface=wsvb"
fi
app="--forward-mode=io --auto-start --rxq=$q --txq=$q --total-num-mbufs=8192 --stats-period=1"
if [ "$kind" = ours ]; then
  xs=rx_q0_size_1519_max_packets
  [ "$q" -gt 1 ] && xs=$xs,rx_q1_size_1519_max_packets
  wirespeed-testpmd -l 0-1 -n 4 --file-prefix=vn --no-pci --log-level=info --vdev "$d0" --vdev "$d1" -- \
    $app --display-xstats=$xs --duration=120 --summary-json=/tmp/vn.json >/tmp/vn.log 2>&1 &
else
  dpdk-testpmd -l 0-1 -n 4 --file-prefix=dp $DPDK_PLUGINS --no-pci --vdev "$d0" --vdev "$d1" -- \
    $app $DPDK_APP >/tmp/vn.log 2>&1 &
fi
tp=$!
n=0
while ! grep -q "Port statistics =" /tmp/vn.log && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
echo "@@vn tun_flags $(cat /sys/class/net/wsva/tun_flags) $(cat /sys/class/net/wsvb/tun_flags)"
unshare -n sleep 300 &
ns=$!
sleep 0.2
ip link set wsvb netns $ns
ip addr add 10.77.0.1/24 dev wsva && ip link set wsva up
nsenter -t $ns -n sh -c 'ip link set lo up && ip addr add 10.77.0.2/24 dev wsvb && ip link set wsvb up'
ping -c 2 -i 0.3 -W 5 10.77.0.2 >/dev/null && echo "@@vn ping ok"
head -c $bytes /dev/urandom > /tmp/vn.a
(sleep 60 | nsenter -t $ns -n nc -l -p 5001 > /tmp/vn.b) &
sleep 0.3
t0=$(cut -d' ' -f1 /proc/uptime)
nc 10.77.0.2 5001 < /tmp/vn.a
n=0
while ! cmp -s /tmp/vn.a /tmp/vn.b && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
echo "@@vn tcp out seconds $t0 $(cut -d' ' -f1 /proc/uptime)"
(sleep 60 | nc -l -p 5002 > /tmp/vn.c) &
sleep 0.3
t0=$(cut -d' ' -f1 /proc/uptime)
nsenter -t $ns -n nc 10.77.0.1 5002 < /tmp/vn.a
n=0
while ! cmp -s /tmp/vn.a /tmp/vn.c && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
echo "@@vn tcp in seconds $t0 $(cut -d' ' -f1 /proc/uptime)"
cmp -s /tmp/vn.a /tmp/vn.b && echo "@@vn tcp out ok"
cmp -s /tmp/vn.a /tmp/vn.c && echo "@@vn tcp in ok"
# One more statistics period (1 s) before the end: its xstats (cumulative) count every frame of
# both transfers, which the test reads for the frames beyond 1518 bytes.
sleep 1.3
kill -INT $tp
wait $tp
rc=$?
kill $ns 2>/dev/null
[ "$kind" = ours ] && echo "@@json $(tr -d '\n' < /tmp/vn.json)"
cat /tmp/vn.log
exit $rc
"""
VHOST_NET_TXONLY = r"""# usage: vhost_net_txonly ours|dpdk vhost-net|tap SECONDS: txonly 64 B into one tap (up)
kind=$1; backend=$2; secs=$3
if [ "$backend" = tap ]; then d0="net_tap0,iface=wsva"; else d0="net_virtio_user0,path=/dev/vhost-net,iface=wsva"; fi
app="--forward-mode=txonly --auto-start --total-num-mbufs=8192 --stats-period=1"
if [ "$kind" = ours ]; then
  wirespeed-testpmd -l 0-1 -n 4 --file-prefix=vn --no-pci --vdev "$d0" -- $app --duration=$secs >/tmp/vt.log 2>&1 &
else
  timeout -s INT $((secs + 3)) dpdk-testpmd -l 0-1 -n 4 --file-prefix=dp $DPDK_PLUGINS --no-pci --vdev "$d0" -- \
    $app >/tmp/vt.log 2>&1 &
fi
tp=$!
n=0
while [ ! -e /sys/class/net/wsva ] && [ $n -lt 300 ]; do sleep 0.05; n=$((n + 1)); done
ip link set wsva up
wait $tp
rc=$?
cat /tmp/vt.log
exit $rc
"""
VHOST_NET_RATES = {}  # "tcp_<backend>" / "txonly_<backend>" -> kind -> [per round]


class PciGuestVhostNet(unittest.TestCase):
    """virtio_user over the guest kernel's vhost-net (see VHOST_NET_SCRIPT), in the one guest."""

    def setUp(self):
        need_guest(self)

    def exception_path(self, queues):
        rc, out = PciGuest.guest.run("sh /ws/vhost_net_path {}".format(queues), timeout=150, check=False)
        testpmd_harness.assert_no_crash(self, out, "vhost-net")
        self.assertEqual(rc, 0, out[-4000:])
        # IFF_TAP|IFF_NO_PI|IFF_VNET_HDR, and IFF_MULTI_QUEUE with two queue pairs.
        flags = 0x5002 | (0x100 if queues > 1 else 0)
        self.assertIn("@@vn tun_flags {0:#06x} {0:#06x}".format(flags), out, out[-4000:])
        for line in ("@@vn ping ok", "@@vn tcp out ok", "@@vn tcp in ok"):
            self.assertIn(line, out, out[-4000:])
        self.assertIn("vhost-net on tap wsva", out)
        run = Run("ours", out)
        self.assertIsNotNone(run.summary, out[-3000:])
        self.assertTrue(run.summary["pool_audit_ok"], out[-2000:])
        self.assertTrue(run.summary["accounting_exact"], json.dumps(run.summary["totals"]))
        ports = run.summary["ports"]
        self.assertEqual([p["driver"] for p in ports], ["net_virtio_user"] * 2)
        for p in ports:
            self.assertEqual(p["rx_errors"] + p["tx_errors"], 0, json.dumps(ports))
        # GSO crossed: each port received frames beyond 1518 bytes (--display-xstats, cumulative).
        big = [0, 0]
        for port, block in re.findall(r"NIC statistics for port (\d+) *#+\n(.*?)#####", out, re.S):
            total = sum(int(v) for v in re.findall(r"rx_q\d_size_1519_max_packets\s+(\d+)", block))
            big[int(port)] = max(big[int(port)], total)
        self.assertTrue(all(b > 0 for b in big), big)

    def test_vhost_net_exception_path(self):
        """Ping and TCP both ways between two guest taps through our io forwarding, one pair."""
        self.exception_path(1)

    def test_vhost_net_exception_path_two_queues(self):
        """The same with two queue pairs: one vhost-net fd per pair, a multi-queue tap."""
        self.exception_path(2)

    def tcp_rates(self, kind, backend, offloads, megabytes=4):
        """One run of VHOST_NET_SCRIPT with `megabytes` each way: the Mbit/s of each transfer.
        DPDK's runs without the tap's offloads: with its RX checksum and LRO offloads asked for
        (--rx-offloads=0x1c), ping passed but no TCP connection opened through its io
        forwarding. Ours runs without them (as DPDK's) and with csum=1,tso=1."""
        plugins = " ".join("-d " + os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS + VHOST_NET_DPDK_PLUGINS)
        rc, out = PciGuest.guest.run("DPDK_PLUGINS='{}' OFFLOADS={} sh /ws/vhost_net_path 1 {} {} {}".format(
            plugins, int(offloads), kind, backend, megabytes * 1000000), timeout=300, check=False)
        testpmd_harness.assert_no_crash(self, out, kind)
        self.assertIn("@@vn tcp out ok", out, out[-4000:])
        self.assertIn("@@vn tcp in ok", out, out[-4000:])
        rates = {}
        for way, t0, t1 in re.findall(r"@@vn tcp (out|in) seconds (\S+) (\S+)", out):
            rates[way] = round(megabytes * 8 / max(float(t1) - float(t0), 0.01), 1)
        return rates

    if WITH_DPDK:  # bench/vhost_net_guest: rates of ours and DPDK's, alternating in one guest
        def test_vhost_net_tcp_rates(self):
            """TCP through io forwarding between two exception ports, ours and DPDK's, vhost-net
            and net_tap, alternating; Mbit/s of each direction (TCG: ratios only)."""
            rounds = int(os.environ.get("WS_VHOST_NET_ROUNDS", "3"))
            for _ in range(rounds):
                for kind in ("dpdk", "ours"):
                    for backend in ("vhost-net", "tap"):
                        r = self.tcp_rates(kind, backend, False)
                        VHOST_NET_RATES.setdefault("tcp_" + backend, {}).setdefault(kind, []).append(r)
                r = self.tcp_rates("ours", "vhost-net", True)
                VHOST_NET_RATES.setdefault("tcp_vhost-net_offloads", {}).setdefault("ours", []).append(r)

        def test_vhost_net_txonly_rates(self):
            """txonly 64 B into a tap that is up, ours and DPDK's, vhost-net and net_tap,
            alternating; the median Tx-pps (TCG: ratios only)."""
            plugins = " ".join("-d " + os.path.join(PMD_DIR, p) for p in DPDK_PLUGINS + VHOST_NET_DPDK_PLUGINS)
            for _ in range(int(os.environ.get("WS_VHOST_NET_ROUNDS", "3"))):
                for kind in ("dpdk", "ours"):
                    for backend in ("vhost-net", "tap"):
                        rc, out = PciGuest.guest.run("DPDK_PLUGINS='{}' sh /ws/vhost_net_txonly {} {} 6".format(
                            plugins, kind, backend), timeout=120, check=False)
                        testpmd_harness.assert_no_crash(self, out, kind)
                        # Periods before the first packet are start-up (the tap coming up).
                        periods = [p for p in Run(kind, out).periods("Tx-pps") if p > 0]
                        self.assertTrue(periods, out[-3000:])
                        mpps = statistics.median(periods[1:-1] if len(periods) > 3 else periods) / 1e6
                        VHOST_NET_RATES.setdefault("txonly_" + backend, {}).setdefault(kind, []).append(mpps)


# ---- net_tap's flow rules as the guest kernel's flower filters ----
# This guest's kernel has cls_flower, act_gact and act_skbedit (the host's may not): one testpmd
# (rxonly, two queues, --disable-rss) on two net_tap ports, wsfo (flow_offload=1: the rules become
# flower filters on the tap's clsact egress hook) and wsfs (flow_offload=0: the same rules in
# software), each with UDP 7001 dropped and UDP 7002 to queue 1. The guest kernel sends 8 flows
# (source ports) of 5 datagrams to each of the two ports on each tap (ws-pci-guest-probe udp), then
# 16 flows to UDP 7003, which no rule takes: the tap spreads those over both queues, so queue 1
# holding every 7002 frame is the rule's doing.
TAP_FLOWER_SCRIPT = r"""# usage: tap_flower: prints @@tf lines (each tap's tx_packets, tc's filter statistics), then
# testpmd's log: `show fwd stats all` after the ruled flows, then its stop after the unruled ones
rm -f /tmp/tf.in /tmp/tf.log
mkfifo /tmp/tf.in
v6=$(cat /proc/sys/net/ipv6/conf/default/disable_ipv6)
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6  # no router solicitation or MLD into the taps
wirespeed-testpmd -l 0-1 -n 4 --file-prefix=tf --no-pci --log-level=info \
  --vdev net_tap0,iface=wsfo,mac=02:00:00:88:01:02 --vdev net_tap1,iface=wsfs,mac=02:00:00:88:02:02,flow_offload=0 \
  -- -i --forward-mode=rxonly --rxq=2 --txq=2 --disable-rss --total-num-mbufs=8192 </tmp/tf.in >/tmp/tf.log 2>&1 &
tp=$!
exec 3>/tmp/tf.in
# Each command read is preceded by a prompt (flushed): N+1 prompts, N commands done.
prompts() {
  n=0
  while [ "$(grep -o 'testpmd> ' /tmp/tf.log | wc -l)" -lt "$1" ] && [ $n -lt 400 ]; do sleep 0.05; n=$((n + 1)); done
}
# send PORT FLOWS: FLOWS x 5 datagrams to UDP port PORT of each tap's peer. settle "WSFO WSFS":
# waits (up to 2 s) until the taps' tx_packets (tun counts a frame when its fd reads it) are
# those, and prints them.
send() {
  for i in 1 2; do ws-pci-guest-probe udp 10.88.$i.2 $1 $2 5; done
}
read_by() { cat /sys/class/net/$1/statistics/tx_packets; }
settle() {
  n=0
  while [ "$(read_by wsfo) $(read_by wsfs)" != "$1" ] && [ $n -lt 40 ]; do sleep 0.05; n=$((n + 1)); done
  for t in wsfo wsfs; do echo "@@tf $t tx_packets $(read_by $t)"; done
}
prompts 1
i=1
for t in wsfo wsfs; do
  ip addr add 10.88.$i.1/24 dev $t && arp -i $t -s 10.88.$i.2 02:00:00:88:0$i:02  # busybox's ip has no neigh add
  i=$((i + 1))
done
for p in 0 1; do
  echo "flow create $p ingress pattern eth / ipv4 / udp dst is 7001 / end actions drop / end" >&3
  echo "flow create $p ingress pattern eth / ipv4 / udp dst is 7002 / end actions queue index 1 / end" >&3
done
echo "flow list 0" >&3
echo "flow list 1" >&3
echo start >&3
prompts 8
send 7001 8
send 7002 8
settle "40 80"
echo "show fwd stats all" >&3
for t in wsfo wsfs; do
  echo "@@tf $t filters"
  /usr/local/bin/tc -s filter show dev $t egress  # iproute2's (busybox's sh prefers its own applets)
  echo "@@tf $t end"
done
send 7003 16
settle "120 160"
echo stop >&3
echo quit >&3
exec 3>&-
wait $tp
rc=$?
echo "$v6" > /proc/sys/net/ipv6/conf/default/disable_ipv6
cat /tmp/tf.log
exit $rc
"""


class PciGuestTapFlower(unittest.TestCase):
    """net_tap's flow rules as flower filters in a kernel that takes them (see TAP_FLOWER_SCRIPT),
    in the one guest."""

    def setUp(self):
        testpmd_harness.require(self, PROBE, "ws-pci-guest-probe (--probe) was not given")
        testpmd_harness.require_program(self, "tc", "iproute2")
        need_guest(self)

    @staticmethod
    def streams(text):
        """(port, queue) -> RX-packets of each stream that moved anything."""
        return {(int(p), int(q)): int(n) for p, q, n in
                re.findall(r"RX Port=\s*(\d+)/Queue=\s*(\d+) -> .*\n\s*RX-packets: (\d+)", text)}

    def test_tap_flower_offload(self):
        """A drop and a queue rule as flower filters (flow_offload=1) and in software
        (flow_offload=0), in one testpmd on two taps: the kernel drops the dropped flow before the
        tap (its filter counts every frame, the tap's fd reads none of them), and the queue rule's
        flows all reach queue 1 in both, while flows without a rule reach both queues."""
        rc, out = PciGuest.guest.run("sh /ws/tap_flower", timeout=90, check=False)
        testpmd_harness.assert_no_crash(self, out, "tap flower")
        self.assertEqual(rc, 0, out[-4000:])
        self.assertNotIn("stays in software", out, out[-4000:])
        # Port 0's two rules are filters; port 1 (flow_offload=0) prints no placement at all.
        self.assertEqual(re.findall(r"Placement:.*", out), ["Placement: #0 kernel TC, #1 kernel TC"], out[-4000:])
        filters = re.search(r"@@tf wsfo filters\n(.*?)@@tf wsfo end", out, re.S).group(1)
        blocks = {int(m.group(1)): m.group(2) for m in re.finditer(
            r"filter protocol ip pref (\d+) flower chain 0 handle 0x1 *\n(.*?)(?=\nfilter |\Z)", filters, re.S)}
        self.assertEqual(sorted(blocks), [0x2000, 0x2001], filters)
        for block, port, action in ((blocks[0x2000], 7001, "gact action drop"),
                                    (blocks[0x2001], 7002, "skbedit queue_mapping 1 pipe")):
            self.assertIn("dst_port {}".format(port), block, filters)
            self.assertIn(action, block, filters)
            self.assertRegex(block, r"Sent \d+ bytes 40 pkt", filters)
        self.assertIn("@@tf wsfs filters\n@@tf wsfs end", out)
        # What each tap's fds read: wsfo never the 40 dropped frames; wsfs all 80 (software drops).
        self.assertEqual(re.findall(r"@@tf (\w+) tx_packets (\d+)", out),
                         [("wsfo", "40"), ("wsfs", "80"), ("wsfo", "120"), ("wsfs", "160")], out[-4000:])
        snapshot, final = out.split("Telling cores to stop", 1)
        # After the ruled flows: every 7002 frame on queue 1, nothing on queue 0, in both.
        self.assertEqual(self.streams(snapshot), {(0, 1): 40, (1, 1): 40}, snapshot[-3000:])
        self.assertIn("RX-packets: 80             RX-dropped: 0             RX-total: 80\n  RX-error: 40",
                      snapshot, snapshot[-3000:])  # port 1's software drops
        self.assertRegex(snapshot, r"statistics for port 0 +-+\n  RX-packets: 40 .*\n  TX-packets", snapshot[-3000:])
        # After the 16 unruled flows: 80 more on each port, both queues of each port used.
        got = self.streams(final)
        for port in (0, 1):
            self.assertEqual(got.get((port, 0), 0) + got.get((port, 1), 0), 120, final[-3000:])
            self.assertGreater(got.get((port, 0), 0), 0, final[-3000:])


def _add_scenarios():
    for name in [n for n in dir(PciGuest) if n.startswith("scenario_")]:
        scenario = name[len("scenario_"):]
        if scenario in RATE_SCENARIOS and not WITH_RATES:
            continue
        drivers = (UIO, VFIO) if ALL_VFIO or scenario in VFIO_SCENARIOS else (UIO,)
        for kind in KINDS:
            for driver in drivers:
                def test(self, _name=name, _kind=kind, _driver=driver):
                    self.driver = _driver
                    getattr(self, _name)(_kind)
                test.__doc__ = getattr(PciGuest, name).__doc__ + (" Over vfio-pci." if driver == VFIO else "")
                setattr(PciGuest, "test_{}_{}{}".format(scenario, kind, "_vfio" if driver == VFIO else ""), test)


_add_scenarios()


def setUpModule():
    PciGuest.tmp = tempfile.mkdtemp(prefix="ws-pci-")


def tearDownModule():
    """One guest served every test: it goes now, then the rates of both are printed."""
    PciGuest._stop_guest()
    if VHOST_NET_RATES:  # bench/vhost_net_guest reads them
        sys.stderr.write("\nvhost-net rates: " + json.dumps(VHOST_NET_RATES) + "\n")
        with open(os.path.join(WORK, "vhost_net_rates.json"), "w") as f:
            json.dump(VHOST_NET_RATES, f, indent=1)
    if os.environ.get("WS_VM_KEEP"):
        sys.stderr.write("\nconsole and captures kept in {}\n".format(PciGuest.tmp))
    else:
        shutil.rmtree(PciGuest.tmp, ignore_errors=True)
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
    global WORK, PROBE, L3FWD_POWER
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--work", default=None)
    parser.add_argument("--source", default=None, help="the repository: the guest binary is built there first")
    parser.add_argument("--with-dpdk", action="store_true", help="each scenario with DPDK's PMDs too (see above)")
    parser.add_argument("--probe", default=None, help="ws-pci-guest-probe (tests/pci_guest_probe.cpp), of the same "
                        "build as --binary")
    parser.add_argument("--l3fwd-power", default=None, help="examples/l3fwd-power, of the same build as --binary")
    parser.add_argument("--all-vfio", action="store_true", help="every scenario over vfio-pci too, not only "
                        "VFIO_SCENARIOS")
    parser.add_argument("--rates", action="store_true", help="RATE_SCENARIOS too")
    args, rest = parser.parse_known_args()
    PROBE = os.path.abspath(args.probe) if args.probe else None
    L3FWD_POWER = os.path.abspath(args.l3fwd_power) if args.l3fwd_power else None
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
