#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Our net_memif server against a hostile memif client written here: it speaks the protocol
(SOCK_SEQPACKET, 128-byte messages, a memfd region and eventfds passed along), then sends what a
broken or malicious peer would: half-sent and out-of-order messages, regions larger than their
file or of the wrong kind of fd, rings outside their region, descriptors outside the regions,
heads that jump, memory truncated under the server, and a peer that never finishes. Each must be
refused with a DISCONNECT naming the reason (or break only its ring: logged once, link down,
connection closed), while the process and its other port (a net_null port forwarding into it)
keep running; a well-behaved client then connects and its packets go through; the pool audit at
exit is exact.

usage: memif_hostile_test.py --binary PATH [unittest options]
"""
import json
import mmap
import os
import signal
import socket
import struct
import subprocess
import time
import unittest

import testpmd_harness

BINARY = None  # set from --binary by testpmd_harness.main

ACK, HELLO, INIT, ADD_REGION, ADD_RING, CONNECT, CONNECTED, DISCONNECT = 1, 2, 3, 4, 5, 6, 7, 8
LOG2 = 4
SLOTS = 1 << LOG2
RING_BYTES = 128 + 16 * SLOTS
BUF = 2048
REGION = 2 * RING_BYTES + 2 * SLOTS * BUF
COOKIE = 0x3E31F20


def message(kind, body=b""):
    data = struct.pack("<H", kind) + body
    return data + bytes(128 - len(data))


class Peer:
    """A memif client: one connection, one region (a C2S ring, an S2C ring, their buffers)."""

    def __init__(self, path, size=REGION):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(5)
        self.sock.connect(path)
        self.fd = os.memfd_create("hostile-memif")
        os.ftruncate(self.fd, size)
        self.mem = mmap.mmap(self.fd, size)
        self.events = [os.eventfd(0) for _ in range(2)]

    def close(self):
        self.sock.close()
        for fd in self.events + [self.fd]:
            os.close(fd)

    def send(self, kind, body=b"", fds=()):
        socket.send_fds(self.sock, [message(kind, body)], list(fds))

    def recv(self):
        """(type, body) of the next message; (None, b"") when the server closed."""
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 128, 4)
        except (ConnectionResetError, socket.timeout):
            return None, b""
        for fd in fds:
            os.close(fd)
        if not data:
            return None, b""
        return struct.unpack_from("<H", data)[0], data[2:]

    def expect(self, kind):
        got, body = self.recv()
        if got != kind:
            raise AssertionError("expected message {}, got {} {!r}".format(kind, got, body[:100]))
        return body

    def disconnect_reason(self):
        """The reason of the DISCONNECT the server sends before it closes (skipping ACKs)."""
        while True:
            got, body = self.recv()
            if got == DISCONNECT:
                return body[4:100].split(b"\0")[0].decode()
            if got is None:
                return None

    def init(self, secret=b""):
        self.expect(HELLO)
        self.send(INIT, struct.pack("<HIB24s32s", 0x200, 0, 0, secret, b"hostile"))
        self.expect(ACK)

    def region(self, size=REGION, fd=None):
        self.send(ADD_REGION, struct.pack("<HQ", 0, size), [self.fd if fd is None else fd])

    def ring(self, c2s, offset, log2=LOG2, region=0):
        self.send(ADD_RING, struct.pack("<HHHIBH", 1 if c2s else 0, 0, region, offset, log2, 0),
                  [self.events[0 if c2s else 1]])

    def connect_fully(self):
        """The whole handshake, rings laid out as DPDK's client lays them out."""
        for k in range(2):
            at = k * RING_BYTES
            struct.pack_into("<IHH", self.mem, at, COOKIE, 0, 0)
            for s in range(SLOTS):
                struct.pack_into("<HHIII", self.mem, at + 128 + 16 * s, 0, 0, BUF,
                                 2 * RING_BYTES + (k * SLOTS + s) * BUF, 0)
        self.init()
        self.region()
        self.expect(ACK)
        self.ring(True, 0)
        self.expect(ACK)
        self.ring(False, RING_BYTES)
        self.expect(ACK)
        self.send(CONNECT, b"hostile".ljust(32, b"\0"))
        self.expect(CONNECTED)

    # The rings: C2S at 0, S2C at RING_BYTES.
    def desc(self, ring, slot, flags=0, region=0, length=64, offset=None):
        if offset is None:
            offset = 2 * RING_BYTES + (ring * SLOTS + slot % SLOTS) * BUF
        struct.pack_into("<HHIII", self.mem, ring * RING_BYTES + 128 + 16 * (slot % SLOTS), flags, region, length,
                         offset, 0)

    def head(self, ring, value):
        struct.pack_into("<H", self.mem, ring * RING_BYTES + 6, value & 0xffff)

    def tail(self, ring):
        return struct.unpack_from("<H", self.mem, ring * RING_BYTES + 64)[0]


class Hostile(unittest.TestCase):
    def setUp(self):
        self.tmp = testpmd_harness.temp_dir(self, "ws-memif-hostile-")
        self.path = os.path.join(self.tmp.name, "memif.sock")
        self.summary = os.path.join(self.tmp.name, "s.json")
        # Port 0 is ours to attack; port 1 (net_null) forwards into it the whole time.
        self.proc = subprocess.Popen(
            [BINARY, "--no-huge", "-l", "0-1", "--vdev",
             "net_memif0,role=server,socket={},socket-abstract=no,rsize={}".format(self.path, LOG2),
             "--vdev", "net_null0", "--", "--forward-mode=io", "--auto-start", "--no-flush-rx",
             "--summary-json", self.summary, "--duration", "60"] + testpmd_harness.SMALL_POOL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(self.kill)
        end = time.time() + 10
        while not os.path.exists(self.path) and time.time() < end and self.proc.poll() is None:
            time.sleep(0.05)
        self.assertTrue(os.path.exists(self.path), "the server did not listen")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()

    def peer(self, **kw):
        p = Peer(self.path, **kw)
        self.addCleanup(p.close)
        return p

    def refused(self, p, reason):
        got = p.disconnect_reason()
        self.assertIsNotNone(got, "the server closed without a DISCONNECT")
        reasons = reason if isinstance(reason, tuple) else (reason,)
        self.assertTrue(any(r in got for r in reasons), f"{got!r} gives none of {reasons}")
        self.assertIsNone(self.proc.poll(), "the server died")

    def test_every_bad_peer_is_refused_and_a_good_one_then_forwards(self):
        broken = 0
        cases = [
            ("half-sent message", self.half_sent, "bytes, expected 128"),
            ("out of order", self.out_of_order, "out of order"),
            ("region larger than its file", self.region_too_large, "fewer than"),
            ("region fd is a pipe", self.region_pipe, "expected a regular file"),
            ("ring outside its region", self.ring_outside, "past region 0"),
            ("ring in a region never added", self.ring_bad_region, "expected one of the 1 added"),
            ("two fds in one message", self.two_fds, "more than one fd"),
            ("INIT for another id", self.wrong_id, "expected id 0"),
            ("descriptor in region 9", lambda p: self.bad_ring(p, lambda: p.desc(0, 0, region=9)), "a ring was broken"),
            ("descriptor past the region", lambda p: self.bad_ring(p, lambda: p.desc(0, 0, offset=REGION - 10)),
             "a ring was broken"),
            ("head that jumps", lambda p: self.bad_ring(p, lambda: None, head=SLOTS + 5), "a ring was broken"),
            # Caught when the lcore next reads the ring, or, when the truncation comes first, by the
            # server's check of the ring at CONNECT: the fault there leaves MappingGuard's zero
            # pages in place of the region, so the cookie reads 0.
            ("memory truncated", self.truncated, ("shared memory shrank", "has cookie 0x0")),
            ("silent after HELLO", self.silent, "not finished in time"),
        ]
        for name, act, reason in cases:
            with self.subTest(name):
                p = self.peer()
                act(p)
                self.refused(p, reason)
                broken += reason == "a ring was broken"
        self.good_peer()
        self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=30)
        testpmd_harness.assert_no_crash(self, out)
        self.assertEqual(self.proc.returncode, 0, out[-3000:])
        self.assertEqual(out.count("broken by the peer"), broken, "each broken ring is logged once\n" + out[-4000:])
        with open(self.summary) as f:
            s = json.load(f)
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertTrue(s["accounting_exact"], out[-2000:])
        null = s["ports"][1]
        self.assertGreater(null["rx_packets"], 100000, "the other port forwarded throughout")

    # ---- the cases ----
    def half_sent(self, p):
        p.expect(HELLO)
        p.sock.send(message(INIT)[:60])

    def out_of_order(self, p):
        p.expect(HELLO)
        p.ring(True, 0)

    def region_too_large(self, p):
        p.init()
        p.region(size=REGION * 4)

    def region_pipe(self, p):
        p.init()
        r, w = os.pipe()
        p.region(fd=r)
        os.close(r)
        os.close(w)

    def ring_outside(self, p):
        p.init()
        p.region()
        p.expect(ACK)
        p.ring(True, REGION - 64)

    def ring_bad_region(self, p):
        p.init()
        p.region()
        p.expect(ACK)
        p.ring(True, 0, region=1)

    def two_fds(self, p):
        p.init()
        p.send(ADD_REGION, struct.pack("<HQ", 0, REGION), [p.fd, p.events[0]])

    def wrong_id(self, p):
        p.expect(HELLO)
        p.send(INIT, struct.pack("<HIB24s32s", 0x200, 5, 0, b"", b"hostile"))

    def bad_ring(self, p, scribble, head=1):
        p.connect_fully()
        scribble()
        p.head(0, head)

    def truncated(self, p):
        p.connect_fully()
        os.ftruncate(p.fd, 0)  # the server's next read of the C2S ring faults

    def silent(self, p):
        p.expect(HELLO)

    def good_peer(self):
        p = self.peer()
        p.connect_fully()
        for s in range(8):
            p.desc(0, s, length=60)
        p.head(0, 8)  # eight packets to the server, which forwards them to net_null
        p.head(1, SLOTS)  # every S2C buffer to the server, which fills them from net_null
        end = time.time() + 5
        while (p.tail(0) != 8 or p.tail(1) == 0) and time.time() < end:
            time.sleep(0.01)
        self.assertEqual(p.tail(0), 8, "the server took our packets")
        self.assertGreater(p.tail(1), 0, "the server sent us packets")


if __name__ == "__main__":
    testpmd_harness.main(__import__(__name__))
