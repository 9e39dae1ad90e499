# SPDX-License-Identifier: BSD-3-Clause
"""A Linux guest in QEMU (TCG) on a vhost-user NIC, driven through its serial console: boot,
wait for /init's ready line, run commands and read their output and exit code, power off. QEMU
runs in its own session and is killed (never left behind) when the guest fails or the test ends."""
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from . import image

QEMU = shutil.which("qemu-system-x86_64")


class GuestError(Exception):
    """The guest did not do what was asked in time; the message ends with its console's tail."""


def netdev_args(sock, index=0, server=False, queues=1, packed=False, mq=False, mac=None, reconnect=1):
    """QEMU options for one virtio-net PCI NIC on the vhost-user socket `sock`. vectors=0 (no
    MSI-X, INTx only) is required: QEMU 7.2 under TCG segfaults in msix_set_vector_notifiers,
    from vhost_net_start, as soon as the guest starts a vhost-user device with MSI-X (whatever
    the backend). QEMU as client reconnects every `reconnect` seconds after the backend left;
    as server it waits for the backend to connect."""
    chardev = "socket,id=c{i},path={p}".format(i=index, p=sock)
    chardev += ",server=on,wait=off" if server else ",reconnect={}".format(reconnect)
    netdev = "vhost-user,id=n{i},chardev=c{i}".format(i=index)
    if queues > 1:
        netdev += ",queues={}".format(queues)
    device = "virtio-net-pci,netdev=n{i},disable-legacy=on,vectors=0,romfile=".format(i=index)
    if packed:
        device += ",packed=on"
    if mq or queues > 1:
        device += ",mq=on"
    if mac:
        device += ",mac=" + mac
    return ["-chardev", chardev, "-netdev", netdev, "-device", device]


def pci_nic_args(model, netdev, addr, mac=None, dump=None, dump_queue="rx", function=0, multifunction=False,
                 iommu=False):
    """QEMU options for one emulated PCI NIC in slot `addr` (0000:00:ADDR.0 in the guest) on the
    netdev options `netdev` (whose id= names it): `model` e1000e (an 82574L, 8086:10d3) or
    virtio-net-pci (modern only: 1af4:1041). No option ROM. `dump` names a pcap file that gets
    what the guest sends through this NIC (QEMU's filter-dump on the backend's receive queue).
    iommu: the guest has an IOMMU (Guest(iommu=True)), and virtio-net-pci is put behind it
    (iommu_platform=on: it offers VIRTIO_F_ACCESS_PLATFORM and its DMA is translated; the e1000e's
    always is).
    `function` and `multifunction` put several NICs in one slot, which share an IOMMU group."""
    nid = re.search(r"(?:^|,)id=([^,]+)", netdev).group(1)
    device = "{},netdev={},addr={:#x}.{},romfile=".format(model, nid, addr, function)
    if multifunction:
        device += ",multifunction=on"
    if model == "virtio-net-pci":
        device += ",disable-legacy=on"
        if iommu:
            device += ",iommu_platform=on"
    if mac:
        device += ",mac=" + mac
    args = ["-netdev", netdev, "-device", device]
    if dump:
        args += ["-object", "filter-dump,id=dump{},netdev={},queue={},file={}".format(nid, nid, dump_queue, dump)]
    return args


def dgram_netdev(nid, fd):
    """A netdev that carries each frame as one UDP datagram on the connected UDP socket `fd`
    (QEMU's end, made by the test and passed to the Guest in pass_fds)."""
    return "dgram,id={},local.type=fd,local.str={}".format(nid, fd)


class Guest:
    """One QEMU process. nics: lists of options from netdev_args(); ip: eth0's address/prefix;
    append: more kernel parameters (ws.run=NAME runs a baked-in script); log: a file that gets
    the console as it is read; iommu: a q35 machine with QEMU's Intel IOMMU, which the kernel turns
    on (intel_iommu=on) with its own devices passed through (iommu=pt: kernel drivers and
    uio_pci_generic keep physical addresses; vfio-pci gets a translated domain)."""

    def __init__(self, kernel, initrd, nics=(), ip=None, smp=1, mem_mb=512, append="", log=None, name="guest",
                 cpu="max", shared_memory=True, pass_fds=(), iommu=False):
        self.name = name
        self.pass_fds = tuple(pass_fds)
        self.log = log
        cmdline = "console=ttyS0 panic=-1 quiet"
        if ip:
            cmdline += " ws.ip=" + ip
        if iommu:
            cmdline += " intel_iommu=on iommu=pt"
        if append:
            cmdline += " " + append
        # cpu "max": every instruction TCG emulates (QEMU 7.2: up to AVX2), for binaries built
        # for the host; the default qemu64 lacks SSE4.2, which Debian's DPDK needs.
        self.args = [QEMU, "-accel", "tcg", "-cpu", cpu, "-m", str(mem_mb), "-smp", str(smp), "-nodefaults",
                     "-no-user-config",
                     "-display", "none", "-chardev", "stdio,id=con,signal=off", "-serial", "chardev:con",
                     "-no-reboot", "-kernel", kernel.vmlinuz, "-initrd", initrd, "-append", cmdline]
        if iommu:  # the IOMMU comes before the devices it translates for
            self.args += ["-machine", "q35", "-device", "intel-iommu,intremap=on"]
        if shared_memory:  # vhost-user needs the guest's memory in a file the backend can map
            self.args += ["-object", "memory-backend-memfd,id=mem,size={}M,share=on".format(mem_mb),
                          "-numa", "node,memdev=mem"]
        for nic in nics:
            self.args += nic
        self.proc = None
        self.text = ""  # the console so far, without carriage returns
        self._cond = threading.Condition()
        self._reader = None
        self._next_id = 1

    # ---- lifecycle ----
    def start(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=self.pass_fds,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self):
        logf = open(self.log, "a") if self.log else None
        try:
            while True:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                text = chunk.decode("utf-8", "replace").replace("\r", "")
                if logf:
                    logf.write(text)
                    logf.flush()
                with self._cond:
                    self.text += text
                    self._cond.notify_all()
        finally:
            if logf:
                logf.close()
            with self._cond:
                self._cond.notify_all()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL now (a guest killed mid-transfer, or cleanup); waits for the process."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        if self._reader:
            self._reader.join(5)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def poweroff(self, timeout=20):
        """Asks /init to power off; kills QEMU if it has not exited within `timeout`."""
        if self.alive():
            try:
                self._send("0 poweroff -f")
                self.proc.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()

    # ---- console ----
    def tail(self, chars=3000):
        return "{} console (last {} chars):\n{}".format(self.name, chars, self.text[-chars:])

    def wait_for(self, pattern, timeout, start=0):
        """The first match of regex `pattern` in the console after offset `start`; GuestError on
        timeout or when QEMU exits first."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                m = rx.search(self.text, start)
                if m:
                    return m
                left = end - time.monotonic()
                if left <= 0:
                    raise GuestError("{}: no /{}/ within {} s\n{}".format(self.name, pattern, timeout, self.tail()))
                if self.proc.poll() is not None and (self._reader is None or not self._reader.is_alive()):
                    raise GuestError("{}: QEMU exited ({}) before /{}/\n{}".format(
                        self.name, self.proc.returncode, pattern, self.tail()))
                self._cond.wait(min(left, 0.2))

    def wait_ready(self, timeout=90):
        """Waits for /init's ready line (kernel booted, modules loaded, eth0 up)."""
        self.wait_for(re.escape(image.READY) + r"[^\n]*\n", timeout)
        with self._cond:
            head = self.text
        if image.ERROR in head:
            raise GuestError("{}: /init reported an error\n{}".format(self.name, self.tail()))
        return self

    def _send(self, line):
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def run(self, command, timeout=60, check=True):
        """Runs one shell command line in the guest; returns (exit code, output). check: a
        non-zero exit code raises GuestError."""
        if "\n" in command:
            raise ValueError("one line only: " + command)
        cid = self._next_id
        self._next_id += 1
        with self._cond:
            start = len(self.text)
        self._send("{} {}".format(cid, command))
        m = self.wait_for(r"{} {} (\d+)\n".format(re.escape(image.DONE), cid), timeout, start)
        with self._cond:
            out = self.text[start:m.start()]
        rc = int(m.group(1))
        if check and rc != 0:
            raise GuestError("{}: `{}` exited {}:\n{}".format(self.name, command, rc, out[-3000:]))
        return rc, out

    def start_command(self, command):
        """Sends a command without waiting; finish it with wait_command(id)."""
        cid = self._next_id
        self._next_id += 1
        with self._cond:
            start = len(self.text)
        self._send("{} {}".format(cid, command))
        return cid, start

    def wait_command(self, started, timeout=60):
        cid, start = started
        m = self.wait_for(r"{} {} (\d+)\n".format(re.escape(image.DONE), cid), timeout, start)
        with self._cond:
            return int(m.group(1)), self.text[start:m.start()]
