#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Our virtio_user against a hostile vhost-user backend written here in Python. The backend
listens, answers the protocol until the device is up and serves it as a net device on split
and packed rings (it takes our TX packets and fills our RX buffers); then, while traffic runs, it
attacks: it truncates the memory we shared, scribbles random bytes over every shared byte,
returns used ids we never made available (beyond the ring, and one already returned), used
lengths beyond the buffer, and num_buffers of 0 and 65535 (MRG_RXBUF negotiated).

Each time the testpmd process keeps running and its other ports (a net_ring pair) keep
forwarding; a queue the backend broke is logged once, counted in xstats, and its port reports
link down ("Port 0: link state change event", `show port info`); at quit the process exits 0
with its mbuf pool whole and every packet accounted for.

usage: vhost_hostile_backend_test.py --binary PATH [unittest options]"""
import errno
import mmap
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402  (process helpers)

BINARY = None  # set from --binary by testpmd_harness.main

# vhost-user requests (the protocol's numbering) and the feature bits this backend offers.
GET_FEATURES, SET_FEATURES, SET_OWNER, RESET_OWNER, SET_MEM_TABLE = 1, 2, 3, 4, 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE, GET_VRING_BASE = 8, 9, 10, 11
SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR = 12, 13, 14
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM, SET_VRING_ENABLE = 15, 16, 17, 18
SET_STATUS, GET_STATUS = 39, 40
FLAG_VERSION, FLAG_REPLY, FLAG_NEED_REPLY = 1, 4, 8
MRG_RXBUF, PROTOCOL_FEATURES, VERSION_1, RING_PACKED = 1 << 15, 1 << 30, 1 << 32, 1 << 34
PROTOCOL_STATUS = 1 << 16
USED_F_NO_NOTIFY = 1  # split: the device asks for no kicks
EVENT_DISABLE = 1  # packed: likewise, in the device event suppression area
F_NEXT, F_WRITE, F_AVAIL, F_USED = 1, 2, 1 << 7, 1 << 15
HDR = 12  # virtio-net header with num_buffers (VERSION_1)
FRAME = bytes([0x02] * 6 + [0x04] * 6) + b"\x08\x00" + bytes(46)  # 60 bytes

# Ports: 0 our virtio_user (to the backend here), 1 net_null (feeds it and takes what it
# receives), 2 and 3 a net_ring pair looping the --tx-first burst: the ports that must not notice.
LCORES = ["--lcores", "0@0,1@0"]
BROKEN_LOG = "was broken by the device"
LINK_EVENT = "Port 0: link state change event"
ANY_QUEUE = "any"  # run_attack(breaks=): whichever queue broke


class Ring:
    """One ring as the backend sees it: offsets into the mapped region, and where it is. Split:
    indices. Packed: positions and wrap counters (§2.8.1: both start at 1)."""

    def __init__(self):
        self.num = 0
        self.base = 0
        self.addr = None  # (desc, avail, used) offsets
        self.kick = self.call = None
        self.enabled = False
        self.stopped = False
        self.last_avail = 0
        self.used_idx = 0
        self.avail_wrap = self.used_wrap = True
        self.pending = []  # packed: (offset, flags) of used descriptors written but for their flags


class Backend:
    """A vhost-user backend on a unix socket: the protocol on one thread, the device on another.
    `attack` (set by the test) changes what the device thread does next."""

    def __init__(self, path, packed=False):
        self.packed = packed
        self.lst = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lst.bind(path)
        self.lst.listen(1)
        self.conn = None
        self.mem = self.h = None  # mmap of the one region, and its 16-bit view
        self.memfd = -1
        self.region = None  # (guest address, size, user address, offset)
        self.rings = [Ring(), Ring()]
        self.features = 0
        self.fds = []
        self.lock = threading.Lock()  # rings and memory between the two threads
        self.stop = False
        self.attack = None
        self.attacked = threading.Event()  # the attack was carried out
        self.truncate_error = None  # errno of the refused ftruncate, None when it succeeded
        self.delivered = 0  # packets put into our RX ring
        self.taken = 0  # packets taken from our TX ring
        self.error = None  # an exception in a thread, for the test to report
        self.threads = [threading.Thread(target=self.guard, args=(self.serve,), daemon=True),
                        threading.Thread(target=self.guard, args=(self.device,), daemon=True)]
        for t in self.threads:
            t.start()

    def guard(self, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001  (reported by the test)
            self.error = "{}: {!r}".format(fn.__name__, e)

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(5)
        for s in (self.conn, self.lst):
            if s is not None:
                s.close()
        with self.lock:
            self.unmap()
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def unmap(self):
        if self.h is not None:
            self.h.release()
            self.h = None
        if self.mem is not None:
            self.mem.close()
            self.mem = None
        if self.memfd >= 0:
            os.close(self.memfd)
            self.memfd = -1

    # ---- protocol ----
    def recv_exact(self, n):
        data = b""
        while len(data) < n:
            chunk = self.conn.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def reply(self, request, payload):
        self.conn.sendall(struct.pack("<III", request, FLAG_VERSION | FLAG_REPLY, len(payload)) + payload)

    def serve(self):
        self.lst.settimeout(20)
        self.conn, _ = self.lst.accept()
        self.conn.settimeout(None)
        while not self.stop:
            # The fds of a message arrive with its first byte: the header's recvmsg takes them.
            head, fds, _, _ = socket.recv_fds(self.conn, 12, 8)
            if not head:
                return  # the frontend closed the connection
            if len(head) < 12:
                head += self.recv_exact(12 - len(head)) or b""
            request, flags, size = struct.unpack("<III", head)
            payload = self.recv_exact(size) if size else b""
            if payload is None:
                return
            self.handle(request, flags, payload, list(fds))

    def handle(self, request, flags, payload, fds):
        if request == GET_FEATURES:
            self.reply(request, struct.pack("<Q", VERSION_1 | MRG_RXBUF | PROTOCOL_FEATURES |
                                            (RING_PACKED if self.packed else 0)))
        elif request == SET_FEATURES:
            self.features = struct.unpack("<Q", payload)[0]
        elif request == GET_PROTOCOL_FEATURES:
            self.reply(request, struct.pack("<Q", PROTOCOL_STATUS))
        elif request == GET_QUEUE_NUM:
            self.reply(request, struct.pack("<Q", 1))
        elif request == GET_STATUS:
            self.reply(request, struct.pack("<Q", 0xf))
        elif request == SET_MEM_TABLE:
            count = struct.unpack_from("<I", payload)[0]
            assert count == 1 and len(fds) == 1, (count, fds)
            gpa, size, uaddr, offset = struct.unpack_from("<QQQQ", payload, 8)
            with self.lock:
                self.unmap()
                self.memfd = fds.pop()
                self.mem = mmap.mmap(self.memfd, size + offset)
                self.h = memoryview(self.mem).cast("H")
                self.region = (gpa, size, uaddr, offset)
        elif request == SET_VRING_NUM:
            r, num = struct.unpack("<II", payload)
            self.rings[r].num = num
        elif request == SET_VRING_BASE:
            r, base = struct.unpack("<II", payload)
            ring = self.rings[r]
            if self.packed:  # bit 15: the wrap counter
                ring.last_avail = ring.used_idx = base & 0x7fff
                ring.avail_wrap = ring.used_wrap = bool(base >> 15)
            else:
                ring.last_avail = ring.used_idx = base
        elif request == SET_VRING_ADDR:
            r, _, desc, used, avail, _ = struct.unpack("<IIQQQQ", payload)
            _, _, uaddr, offset = self.region
            self.rings[r].addr = tuple(a - uaddr + offset for a in (desc, avail, used))
        elif request in (SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR):
            r = struct.unpack("<Q", payload)[0] & 0xff
            self.fds += fds
            fds = []
            if request == SET_VRING_KICK:
                with self.lock:
                    ring = self.rings[r]
                    ring.stopped = False
                    if self.mem is not None and ring.addr is not None:
                        # We poll: ask the driver not to kick (virtio 1.2 §2.7.10, §2.8.10).
                        if self.packed:
                            self.h[(ring.addr[2] + 2) // 2] = EVENT_DISABLE
                        else:
                            self.h[ring.addr[2] // 2] = USED_F_NO_NOTIFY
        elif request == SET_VRING_ENABLE:
            r, on = struct.unpack("<II", payload)
            self.rings[r].enabled = bool(on)
        elif request == GET_VRING_BASE:
            r = struct.unpack("<II", payload)[0]
            with self.lock:
                ring = self.rings[r]
                ring.stopped = True
                base = ring.last_avail | (ring.avail_wrap << 15 if self.packed else 0)
                self.reply(request, struct.pack("<II", r, base & 0xffff))
        # SET_OWNER, RESET_OWNER, SET_PROTOCOL_FEATURES, SET_STATUS: nothing to keep.
        for fd in fds:  # fds of messages that take none
            os.close(fd)
        if flags & FLAG_NEED_REPLY and request not in (GET_FEATURES, GET_PROTOCOL_FEATURES, GET_QUEUE_NUM,
                                                       GET_STATUS, GET_VRING_BASE):
            self.reply(request, struct.pack("<Q", 0))

    # ---- device ----
    def ready(self):
        return self.mem is not None and all(r.addr and r.enabled and not r.stopped for r in self.rings)

    def device(self):
        while not self.stop:
            with self.lock:
                attack = self.attack
                moved = 0
                if attack in ("frozen", "truncated"):
                    pass  # nothing of the region may be touched any more
                elif attack == "truncate":
                    self.truncate()
                elif attack == "scribble":
                    self.scribble()
                elif self.ready():
                    moved = self.take_tx(self.rings[1]) + self.fill_rx(self.rings[0])
            if not moved:
                time.sleep(0.0005)

    def truncate(self):
        try:
            os.ftruncate(self.memfd, 0)
            self.attack = "truncated"  # a touch of the region would now be our SIGBUS
        except OSError as e:
            self.truncate_error = e.errno
            self.attack = None  # the memory stays: serve on
        self.attacked.set()

    def scribble(self, rounds=5):
        """Random bytes over every byte of the region, `rounds` times while the frontend runs."""
        size = len(self.mem)
        noise = os.urandom(size)
        for k in range(rounds):
            cut = (k * 4099) % size
            self.mem[:size - cut] = noise[cut:]
            self.mem[size - cut:] = noise[:cut]
            self.lock.release()  # let the protocol thread answer between rounds
            time.sleep(0.05)
            self.lock.acquire()
        self.attack = "frozen"
        self.attacked.set()

    def translate(self, gpa, length):
        gbase, size, _, offset = self.region
        if gpa < gbase or gpa + length > gbase + size:
            raise ValueError("buffer {:#x}+{} outside the region".format(gpa, length))
        return gpa - gbase + offset

    def pop(self, ring, budget):
        """Up to `budget` chains made available: (id, descriptors, first address, first length)."""
        if self.packed:
            return self.pop_packed(ring, budget)
        desc, avail, _ = ring.addr
        n = min((self.h[(avail + 2) // 2] - ring.last_avail) & 0xffff, budget)
        out = []
        for k in range(n):
            head = self.h[(avail + 4 + 2 * ((ring.last_avail + k) % ring.num)) // 2]
            addr, dlen, _, _ = struct.unpack_from("<QIHH", self.mem, desc + 16 * head)
            out.append((head, 1, addr, dlen))
        ring.last_avail = (ring.last_avail + n) & 0xffff
        return out

    def pop_packed(self, ring, budget):
        desc = ring.addr[0]
        out = []
        while len(out) < budget:
            flags = self.h[(desc + 16 * ring.last_avail + 14) // 2]
            # §2.8.1: available when AVAIL matches our wrap counter and USED does not.
            if bool(flags & F_AVAIL) != ring.avail_wrap or bool(flags & F_USED) == ring.avail_wrap:
                break
            first = None
            n = 0
            while True:  # the buffer id is in the chain's last descriptor
                addr, dlen, ident, flags = struct.unpack_from("<QIHH", self.mem, desc + 16 * ring.last_avail)
                first = first or (addr, dlen)
                n += 1
                ring.last_avail += 1
                if ring.last_avail == ring.num:
                    ring.last_avail = 0
                    ring.avail_wrap = not ring.avail_wrap
                if not flags & F_NEXT:
                    break
            out.append((ident, n) + first)
        return out

    def push_used(self, ring, ident, length, descs=1, write=False):
        """Returns a chain, seen by the driver at publish_used(). Packed: one used descriptor, then
        the chain's descriptors skipped (§2.8.7)."""
        if self.packed:
            at = ring.addr[0] + 16 * ring.used_idx
            struct.pack_into("<IH", self.mem, at + 8, length, ident)
            ring.pending.append((at, (F_AVAIL | F_USED if ring.used_wrap else 0) | (F_WRITE if write else 0)))
            ring.used_idx += descs
            if ring.used_idx >= ring.num:
                ring.used_idx -= ring.num
                ring.used_wrap = not ring.used_wrap
            return
        _, _, used = ring.addr
        struct.pack_into("<II", self.mem, used + 4 + 8 * (ring.used_idx % ring.num), ident, length)
        ring.used_idx = (ring.used_idx + 1) & 0xffff

    def publish_used(self, ring):
        """Makes the batch visible at once: split, the used index; packed, the first descriptor's
        flags stored last, as a device batches (the driver reads on from its used position only
        once that one is used), so that the driver takes the whole batch in one pass."""
        if not self.packed:
            self.h[(ring.addr[2] + 2) // 2] = ring.used_idx  # one 16-bit store (see vp.store16)
            return
        for at, flags in reversed(ring.pending):
            self.h[(at + 14) // 2] = flags
        ring.pending = []

    def take_tx(self, ring, budget=64):
        heads = self.pop(ring, budget)
        for ident, descs, _, _ in heads:
            if self.attack == "tx_id_beyond_ring":
                ident = ring.num + 3
                self.attack = None
                self.attacked.set()
            self.push_used(ring, ident, 0, descs)
        if heads:
            self.publish_used(ring)
            self.taken += len(heads)
        return len(heads)

    def fill_rx(self, ring, budget=32):
        heads = self.pop(ring, budget)
        for k, (ident, descs, addr, dlen) in enumerate(heads):
            attack, num_buffers, length = self.attack, 1, HDR + len(FRAME)
            if attack == "id_not_outstanding" and k == 0:
                attack = None  # the attack needs a batch of two: the second returns the first's id
            if attack == "num_buffers_0":
                num_buffers = 0
            elif attack == "num_buffers_65535":
                num_buffers = 65535
            elif attack == "length_beyond_buffer":
                length = dlen + 1
            elif attack == "id_beyond_ring":
                ident = ring.num + 7
            elif attack == "id_not_outstanding":
                ident = heads[0][0]  # returned just before: ours no more (heads[1] is never returned)
            if attack in ("num_buffers_0", "num_buffers_65535", "length_beyond_buffer", "id_beyond_ring",
                          "id_not_outstanding"):
                self.attack = None  # once; what follows is good traffic
                self.attacked.set()
            at = self.translate(addr, min(dlen, HDR + len(FRAME)))
            self.mem[at:at + HDR + len(FRAME)] = struct.pack("<BBHHHHH", 0, 0, 0, 0, 0, 0, num_buffers) + FRAME
            self.push_used(ring, ident, length, descs, write=True)
        if heads:
            self.publish_used(ring)
            self.delivered += len(heads)
        return len(heads)


def port_rx(text, port):
    """RX-packets of `port` in the last `show port stats` answer for it in `text`."""
    block = text[text.rfind("NIC statistics for port {} ".format(port)):]
    return int(re.search(r"RX-packets: (\d+)", block).group(1))


class HostileBackend(vp.PairBase):
    """Split rings."""

    PACKED = False

    def setUp(self):
        super().setUp()
        testpmd_harness.need_cpus_0_1(self)
        self.backend = Backend(self.sock, packed=self.PACKED)
        self.addCleanup(self.backend.close)
        self.commands = 0

    def start_testpmd(self):
        args = [BINARY, "--no-huge"] + LCORES + [
            "--vdev", "net_virtio_user0,path={},mrg_rxbuf=1,packed_vq={}".format(self.sock, int(self.PACKED)),
            "--vdev", "net_null0", "--vdev", "net_ring0", "--vdev", "net_ring1,peer=net_ring0", "--",
            "-i", "--forward-mode=io", "--auto-start", "--tx-first", "--nb-cores=1",
            "--summary-json", os.path.join(self.tmp.name, "virtio.json")] + testpmd_harness.SMALL_POOL + self.NO_FLUSH
        p = self.start(args, stdin=subprocess.PIPE)
        self.assertTrue(self.read_until(p, "testpmd> "), "testpmd did not come up")
        return p

    def ask(self, p, command):
        """The answer to one prompt command: what testpmd printed before its next prompt."""
        self.commands += 1
        p.stdin.write(command + "\n")
        p.stdin.flush()
        self.assertTrue(self.read_until(p, "testpmd> ", count=1 + self.commands), "no answer to " + command)
        text = self.early[p.pid]
        start = 0
        for _ in range(self.commands):
            start = text.index("testpmd> ", start) + len("testpmd> ")
        return text[start:text.index("testpmd> ", start)]

    def wait_for(self, what, check, timeout=10.0):
        end = time.time() + timeout
        while not check():
            self.assertIsNone(self.backend.error, self.backend.error)
            self.assertLess(time.time(), end, "timed out waiting for " + what)
            time.sleep(0.02)

    def others_forward(self, p):
        """The net_ring pair (ports 2 and 3) keeps receiving."""
        before = [port_rx(self.ask(p, "show port stats {}".format(q)), q) for q in (2, 3)]
        time.sleep(0.3)
        after = [port_rx(self.ask(p, "show port stats {}".format(q)), q) for q in (2, 3)]
        for q, b, a in zip((2, 3), before, after):
            self.assertGreater(a, b, "port {} stopped forwarding".format(q))

    def run_attack(self, attack, breaks=None, then=None):
        """Traffic both ways, `attack`, then: the process runs, the other ports forward. `breaks`:
        the xstat the attack must count; that queue is broken, logged once, and the link is down.
        ANY_QUEUE: whichever queue the attack broke, if any, is (garbage may also read as "nothing
        used yet"). `then(p)`: further checks while testpmd runs. Quit: exit 0, pool whole,
        accounting exact. Returns testpmd's output."""
        p = self.start_testpmd()
        b = self.backend
        self.wait_for("traffic both ways", lambda: b.delivered >= 256 and b.taken >= 256)
        self.others_forward(p)
        b.attack = attack
        self.wait_for("the attack", b.attacked.is_set)
        time.sleep(0.3)
        self.assertIsNone(p.poll(), "testpmd died after '{}'\n{}".format(attack, self.early.get(p.pid, "")[-3000:]))
        xstats = dict(re.findall(r"^\s*(\w+): (\d+)$", self.ask(p, "show port xstats 0"), re.M))
        broken = [q for q in ("rx", "tx") if xstats.get(q + "_q0_broken") == "1"]
        if breaks and breaks != ANY_QUEUE:
            self.assertGreaterEqual(int(xstats.get(breaks, 0)), 1, "{} not counted: {}".format(breaks, xstats))
            self.assertIn(breaks[:2], broken)
        if broken:
            self.assertTrue(self.read_until(p, LINK_EVENT, timeout=5), "no link state change after " + attack)
            self.assertIn("Link status: down", self.ask(p, "show port info 0"))
        elif not breaks:
            self.assertIn("Link status: up", self.ask(p, "show port info 0"))
        self.others_forward(p)
        if then is not None:
            then(p)
        self.assertIsNone(p.poll(), "testpmd died after '{}'".format(attack))
        p.stdin.write("quit\n")
        p.stdin.flush()
        out = self.finish(p, timeout=30)
        self.assertEqual(p.returncode, 0, "'{}': exit {}\n{}".format(attack, p.returncode, out[-3000:]))
        s = self.summary("virtio")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0, out[-2000:])
        self.assertTrue(s["accounting_exact"], out[-2000:])
        # Each queue found broken is logged once (a scribbled one may break after the xstats).
        for q in ("rx", "tx"):
            logged = len(re.findall(r"{} queue 0 {}".format(q.upper(), BROKEN_LOG), out))
            self.assertLessEqual(logged, 1, out[-3000:])
            if q in broken:
                self.assertEqual(logged, 1, out[-3000:])
            elif breaks != ANY_QUEUE:
                self.assertEqual(logged, 0, out[-3000:])
        self.assertIsNone(b.error, b.error)
        return out

    def test_truncated_memory(self):
        """ftruncate() to 0 of the memfd we shared: refused, since the memory is sealed against
        shrinking, and traffic goes on."""

        def traffic_goes_on(p):
            self.assertEqual(self.backend.truncate_error, errno.EPERM, "the shared memory can shrink")
            b = self.backend
            before = b.delivered, b.taken, port_rx(self.ask(p, "show port stats 0"), 0)
            time.sleep(0.3)
            after = b.delivered, b.taken, port_rx(self.ask(p, "show port stats 0"), 0)
            self.assertTrue(all(x > y for x, y in zip(after, before)), "virtio_user0 stopped: {} {}".format(
                before, after))

        self.run_attack("truncate", then=traffic_goes_on)

    def test_scribbled_memory(self):
        """Random bytes over every shared byte, five times while traffic runs: rings and packet
        data are garbage, nothing the process relies on is there."""
        self.run_attack("scribble", breaks=ANY_QUEUE)

    def test_used_id_beyond_the_ring(self):
        self.run_attack("id_beyond_ring", breaks="rx_q0_used_bad_id")

    def test_used_id_not_outstanding(self):
        """A buffer returned twice in one batch, the second time in place of another: then it is not
        ours to take."""
        self.run_attack("id_not_outstanding", breaks="rx_q0_used_bad_id")

    def test_tx_used_id_beyond_the_ring(self):
        self.run_attack("tx_id_beyond_ring", breaks="tx_q0_used_bad_id")

    def test_used_length_beyond_the_buffer(self):
        self.run_attack("length_beyond_buffer", breaks="rx_q0_used_bad_length")

    def test_num_buffers_zero(self):
        self.run_attack("num_buffers_0", breaks="rx_q0_used_bad_num_buffers")

    def test_num_buffers_65535(self):
        """More buffers than the ring holds: the packet can never be whole, and collecting it
        would take the pool's mbufs from every other port."""
        self.run_attack("num_buffers_65535", breaks="rx_q0_used_bad_num_buffers")


class PackedHostileBackend(HostileBackend):
    """The same attacks on packed rings: used descriptors whose ids, lengths and headers lie."""

    PACKED = True


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
