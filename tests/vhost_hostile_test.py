#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""net_vhost against frontends that stall, flood or speak out of order, written in Python so that
each can misbehave exactly: a call fd that blocks (an eventfd at its maximum), fds of the wrong
type (a socket, a pipe, a directory, a character device as kick, call, err or region fd), an fd
whose close() blocks (a TCP socket lingering for an hour), a file on a FUSE file system that stops
answering, a message sent in part (and a frontend reconnecting meanwhile), replies never read,
a kick before the ring's addresses and memory (and the call fd after the kick, as QEMU sends
it), bad messages and kicks in a loop. Each must cost that frontend its own connection at most:
the other rings and ports keep forwarding, a new frontend is answered at once, the process exits
promptly when told to, and no mbuf is lost.

usage: vhost_hostile_test.py --binary PATH [unittest options]"""
import os
import re
import select
import socket
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hangfs  # noqa: E402  (a FUSE file system that stops answering, over /dev/fuse)
import testpmd_harness  # noqa: E402
import vhost_pair_test as vp  # noqa: E402  (the Python frontend, process helpers)

BINARY = None  # set from --binary by testpmd_harness.main

SET_VRING_CALL, SET_VRING_KICK, SET_VRING_ERR = 13, 12, 14
GET_FEATURES, SET_OWNER, SET_MEM_TABLE = 1, 3, 5
FUSE_FLUSH = 25


def vhost_args(socks, queues=1, extra_app=()):
    """wirespeed-testpmd serving one net_vhost port per socket, io forwarding, each port looped
    to itself, interactive so that the test can ask for xstats and quit."""
    args = [BINARY, "--no-huge"] + vp.VHOST_LCORES
    for k, sock in enumerate(socks):
        args += ["--vdev", "net_vhost{},iface={},queues={}".format(k, sock, queues)]
    # --no-flush-rx: a frontend may connect and send before forwarding starts (see vp.PairBase).
    return args + ["--", "-i", "--forward-mode=io", "--auto-start", "--nb-cores=1", "--port-topology=loop",
                   "--rxq={}".format(queues), "--txq={}".format(queues), "--no-flush-rx"] + vp.POOL + list(extra_app)


def eventfd_at_max():
    """A blocking eventfd holding 0xfffffffffffffffe: a write of 1 to it blocks forever."""
    fd = os.eventfd(0)
    os.write(fd, struct.pack("<Q", 0xfffffffffffffffe))
    return fd


def full_pipe():
    """A pipe nobody reads, filled, its write end blocking again: (read end, write end)."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)
    return r, w


def orphan_pipe():
    """A pipe whose read end is closed: a write raises SIGPIPE (EPIPE where it is blocked)."""
    r, w = os.pipe()
    os.close(r)
    return w


class QemuOrderFrontend(vp.Frontend):
    """The Python frontend, but in the order QEMU (and the vhost-user spec) allow: every ring is
    kicked first, its size and addresses come next, the memory table after them, SET_FEATURES
    last, and the call fd only once the ring runs. Rings start when their last piece arrives."""

    def __init__(self, path, rings=2, features=vp.V1):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(20)
        self.s.connect(path)
        self.fd = os.memfd_create("qemu-order")
        os.ftruncate(self.fd, vp.REGION)
        import mmap
        self.mem = mmap.mmap(self.fd, vp.REGION)
        self.rings = rings
        self.avail_idx = [0] * rings
        self.fds = []
        self.send(3)  # SET_OWNER
        self.send(1)  # GET_FEATURES
        offered = struct.unpack("<Q", self.reply(1, 8))[0]
        for r in range(rings):
            kick = os.eventfd(0)
            self.fds.append(kick)
            self.send(SET_VRING_KICK, struct.pack("<Q", r), [kick])
        for r in range(rings):
            self.send(8, struct.pack("<II", r, self.N))
            self.send(10, struct.pack("<II", r, self.BASE))
            d, a, u = self.ring(r)
            self.send(9, struct.pack("<IIQQQQ", r, 0, vp.GUEST + d, vp.GUEST + u, vp.GUEST + a, 0))
        self.send(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", vp.GUEST, vp.REGION, vp.GUEST, 0), [self.fd])
        self.send(2, struct.pack("<Q", features & offered))
        self.calls = []
        for r in range(rings):
            call = os.eventfd(0, os.EFD_NONBLOCK)
            self.calls.append(call)
            self.fds.append(call)
            self.send(SET_VRING_CALL, struct.pack("<Q", r), [call])
        for r in range(rings):
            self.send(18, struct.pack("<II", r, 1))


class HostileCase(vp.PairBase):
    def start_vhost(self, socks, queues=1):
        vhost = self.start(vhost_args(socks, queues, ["--summary-json", os.path.join(self.tmp.name, "vhost.json")]),
                           stdin=subprocess.PIPE)
        for sock in socks:
            self.assertTrue(vp.wait_for_socket(sock, vhost))
        return vhost

    def quit(self, vhost, commands="", within_s=10):
        """Sends `commands` then quit; the backend must be gone within `within_s` seconds with its
        pool whole and every packet accounted for. Returns its output and xstats (from `show port
        xstats all` when asked)."""
        t0 = time.time()
        vhost.stdin.write(commands + "quit\n")
        vhost.stdin.flush()
        out = self.finish(vhost, timeout=within_s + 20)
        self.assertLess(time.time() - t0, within_s, "the backend took too long to quit\n" + out[-3000:])
        self.assertEqual(vhost.returncode, 0, out[-3000:])
        s = self.summary("vhost")
        self.assertTrue(s["pool_audit_ok"], out[-2000:])
        self.assertEqual(s["mbufs_in_use_at_exit"], 0)
        # received + generated = sent + dropped + consumed, whatever broke or stalled
        self.assertTrue(s["accounting_exact"], out[-2000:])
        xstats = dict((m.group(1), int(m.group(2))) for m in re.finditer(r"^(\w+): (\d+)$", out, re.M))
        return out, xstats


class BlockingCallFds(HostileCase):
    """A frontend's call fd may block (it shares the file description and can clear O_NONBLOCK):
    an eventfd at its maximum. Our lcore never writes it, so every ring keeps forwarding while
    that frontend stays connected. (Pipes, which could block or raise SIGPIPE, are refused on
    arrival: FdTypes.)"""

    def test_call_fds_that_block_stop_nothing(self):
        vhost = self.start_vhost([self.sock], queues=2)
        keep = []
        for kind in ("eventfd_at_max",):
            with self.subTest(call_fd=kind):
                fe = vp.Frontend(self.sock)  # 2 queue pairs; interrupts wanted (avail flags 0)
                fd = eventfd_at_max()
                keep.append(fd)
                for ring in (0, 1):  # pair 0's interrupts both go to the blocking fd
                    fe.send(SET_VRING_CALL, struct.pack("<Q", ring), [fd])
                    kick = os.eventfd(0)  # a kick restarts the ring: whatever a backend copies then
                    fe.fds.append(kick)
                    fe.send(SET_VRING_KICK, struct.pack("<Q", ring), [kick])
                # The kicks restart the rings; packets the backend holds at that moment are
                # dropped (and counted), so the traffic starts only once the restarts are done.
                fe.sync()
                for round_ in range(3):
                    self.assertTrue(fe.good_traffic(0, 1, 32), "{} round {}: pair 0 stopped".format(kind, round_))
                    self.assertTrue(fe.good_traffic(2, 3, 32), "{} round {}: pair 1 stopped".format(kind, round_))
                    time.sleep(0.2)
                self.assertIsNone(vhost.poll(), "{}: the backend died".format(kind))
                fe.close()
                time.sleep(0.3)
        out, xstats = self.quit(vhost, "show port xstats all\n")
        for fd in keep:
            os.close(fd)
        self.assertGreater(xstats.get("tx_q0_notify_dropped", 0), 0, out[-3000:])
        self.assertGreaterEqual(self.summary("vhost")["ports"][0]["rx_packets"], 3 * 2 * 32)


class CallAfterKick(HostileCase):
    """QEMU's order: the call fd comes after SET_VRING_KICK (and changes on every (un)mask), and a
    ring may be kicked before its addresses, the memory table and SET_FEATURES. The interrupts
    must reach the call fd given last."""

    def test_interrupts_reach_a_call_fd_sent_after_the_kick(self):
        vhost = self.start_vhost([self.sock])
        fe = QemuOrderFrontend(self.sock)
        # Traffic once the backend reports the device up, as a guest sends once it is live.
        self.assertTrue(self.read_until(vhost, "link state change event"), "the device never came up")
        self.assertTrue(fe.good_traffic(0, 1, 16), "a ring kicked first never started")
        self.assertGreaterEqual(vp.read_eventfd(fe.calls[0]), 1, "no interrupt on the RX ring's call fd")
        # A new call fd while the ring runs (QEMU's unmask): the next interrupts go there.
        again = os.eventfd(0, os.EFD_NONBLOCK)
        fe.fds.append(again)
        fe.send(SET_VRING_CALL, struct.pack("<Q", 0), [again])
        time.sleep(0.1)
        vp.read_eventfd(fe.calls[0], 0)
        self.assertTrue(fe.good_traffic(0, 1, 16))
        self.assertGreaterEqual(vp.read_eventfd(again), 1, "the new call fd got nothing")
        self.assertEqual(vp.read_eventfd(fe.calls[0], 0.3), 0, "the old call fd still gets interrupts")
        fe.close()
        self.quit(vhost)


class StalledMessages(HostileCase):
    """A frontend that sends half a message, or never reads our replies, holds its own connection
    for one deadline at most; the other port in the process is served all along, and quitting
    does not wait for it."""

    def test_half_a_message_costs_one_deadline_and_no_other_port(self):
        sock1 = os.path.join(self.tmp.name, "vhost1.sock")
        vhost = self.start_vhost([self.sock, sock1])
        stall = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stall.connect(self.sock)
        stall.sendall(struct.pack("<III", GET_FEATURES, 1, 0)[:6])  # half a header, then nothing
        t0 = time.time()
        good = vp.Frontend(sock1, rings=2)
        self.assertTrue(good.good_traffic(0, 1, 32), "the other port stopped while one stalled")
        stall.settimeout(20)
        self.assertEqual(stall.recv(64), b"", "the stalled connection was not closed")
        waited = time.time() - t0
        self.assertGreater(waited, 2, "closed before the frontend had time to finish its message")
        stall.close()
        fe = vp.Frontend(self.sock, rings=2)  # the stalled port serves the next frontend
        self.assertTrue(fe.good_traffic(0, 1, 32))
        fe.close()
        good.close()
        # Quitting while a frontend is in the middle of a message does not wait for it.
        stall = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stall.connect(self.sock)
        stall.sendall(struct.pack("<III", 5, 1, 40) + bytes(8))  # SET_MEM_TABLE, 8 of 40 bytes
        time.sleep(0.3)
        out, _ = self.quit(vhost, within_s=4)
        stall.close()
        self.assertRegex(out, r"the peer sent 6 of 12 bytes and then nothing for \d+ ms; closing")

    def test_a_frontend_that_never_reads_replies_is_closed(self):
        vhost = self.start_vhost([self.sock])
        deaf = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        deaf.connect(self.sock)
        deaf.setblocking(False)
        ask = struct.pack("<III", GET_FEATURES, 1, 0)
        closed = False
        end = time.time() + 30
        while time.time() < end and not closed:
            try:
                deaf.send(ask)
            except BlockingIOError:
                time.sleep(0.05)  # our socket buffer is full too: wait for the backend to give up
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        self.assertTrue(closed, "the backend kept a frontend that never reads")
        deaf.close()
        fe = vp.Frontend(self.sock, rings=2)
        self.assertTrue(fe.good_traffic(0, 1, 32))
        fe.close()
        out, _ = self.quit(vhost)
        self.assertIn("does not read what we send", out)


class ShrunkMemory(HostileCase):
    """A frontend that shrinks (ftruncate) the memfd it shared after SET_MEM_TABLE: our next touch
    of its rings raises SIGBUS. It costs that frontend its connection; the process, the other
    port and the next frontend on the same port are fine, and no mbuf is lost."""

    def test_memory_shrunk_under_us_costs_only_that_connection(self):
        sock1 = os.path.join(self.tmp.name, "vhost1.sock")
        vhost = self.start_vhost([self.sock, sock1])
        good = vp.Frontend(sock1, rings=2)
        self.assertTrue(good.good_traffic(0, 1, 16))
        bad = vp.Frontend(self.sock, rings=2)
        self.assertTrue(bad.good_traffic(0, 1, 16))
        bad.mem.close()  # our own mapping first: Python would die of the SIGBUS too
        os.ftruncate(bad.fd, 0)
        bad.s.settimeout(10)
        self.assertEqual(bad.s.recv(64), b"", "the connection of the frontend that shrank its memory stayed")
        self.assertIsNone(vhost.poll(), "the backend died of the SIGBUS")
        self.assertTrue(good.good_traffic(0, 1, 16), "the other port stopped")
        bad.s.close()
        for fd in bad.fds + [bad.fd]:
            os.close(fd)
        again = vp.Frontend(self.sock, rings=2)
        self.assertTrue(again.good_traffic(0, 1, 16), "the port did not serve the next frontend")
        again.close()
        good.close()
        out, xstats = self.quit(vhost, "show port xstats 0\n")
        self.assertEqual(xstats.get("guest_memory_lost"), 1, out[-3000:])
        self.assertIn("shrank the memory it shared", out)


class Floods(HostileCase):
    """A frontend that loops on bad messages or on kicks of a broken ring is refused each time and
    counted exactly, but cannot make us log without limit; a broken ring stays broken until the
    device is reset."""

    def test_bad_messages_and_kicks_in_a_loop_log_a_bounded_number_of_lines(self):
        vhost = self.start_vhost([self.sock], queues=2)
        t0 = time.time()
        for _ in range(300):  # a bad message each time: a ring beyond the device's
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(self.sock)
            s.sendall(struct.pack("<III", 8, 1, 8) + struct.pack("<II", 9, 256))
            s.settimeout(10)
            self.assertEqual(s.recv(64), b"")  # closed
            s.close()
        fe = vp.Frontend(self.sock)
        fe.offer(1, 256)  # head out of range: ring 1 breaks
        time.sleep(0.2)
        for _ in range(300):  # kick it again and again: it stays broken, and says so once
            kick = os.eventfd(0)
            fe.send(SET_VRING_KICK, struct.pack("<Q", 1), [kick])
            os.close(kick)
        self.assertTrue(fe.good_traffic(2, 3, 32), "pair 1 stopped")
        fe.close()
        elapsed = time.time() - t0
        out, xstats = self.quit(vhost, "show port xstats all\n")
        warnings = [l for l in out.splitlines() if l.startswith("warning:")]
        # 10 lines a second at most (the budget), whatever the frontend did.
        self.assertLess(len(warnings), 10 * (elapsed + 2) + 10, "\n".join(warnings[-20:]))
        self.assertIn("more lines like the above suppressed", out)
        self.assertEqual(xstats.get("rx_q0_head_out_of_range"), 1, out[-3000:])
        self.assertEqual(xstats.get("rx_q0_broken"), 1)
        self.assertEqual(out.count("ring 1 was broken by the frontend"), 1, out[-3000:])


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def send_msg(s, request, payload=b"", fds=()):
    msg = struct.pack("<III", request, 1, len(payload)) + payload
    if fds:
        socket.send_fds(s, [msg], list(fds))
    else:
        s.sendall(msg)


def closed_within(s, seconds):
    """Whether the backend closes `s` within `seconds` (it sends nothing before)."""
    s.settimeout(seconds)
    try:
        return s.recv(64) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def one_region():
    """A SET_MEM_TABLE payload of one region (the fd goes with it)."""
    return struct.pack("<II", 1, 0) + struct.pack("<QQQQ", vp.GUEST, vp.REGION, vp.GUEST, 0)


# The messages that take an fd, and the payload each needs for ring 0 or one region.
FD_MESSAGES = (("kick", SET_VRING_KICK, struct.pack("<Q", 0), "SET_VRING_KICK ring 0", "expected an eventfd"),
               ("call", SET_VRING_CALL, struct.pack("<Q", 0), "SET_VRING_CALL ring 0", "expected an eventfd"),
               ("err", SET_VRING_ERR, struct.pack("<Q", 0), "SET_VRING_ERR ring 0", "expected an eventfd"),
               ("region", SET_MEM_TABLE, one_region(), "SET_MEM_TABLE region 0",
                "expected a regular file on tmpfs or hugetlbfs"))


class PeerFdCase(HostileCase):
    """Port 0 takes the hostile frontends; port 1 has a good one, which must keep forwarding."""

    def setUp(self):
        super().setUp()
        self.sock1 = os.path.join(self.tmp.name, "vhost1.sock")
        self.vhost = self.start_vhost([self.sock, self.sock1])
        self.good = vp.Frontend(self.sock1, rings=2)
        self.assertTrue(self.good.good_traffic(0, 1, 16))

    def assert_port_serves(self, what):
        """A new frontend on port 0 is answered within 1 s, and port 1 forwards."""
        t0 = time.time()
        s = connect(self.sock)
        send_msg(s, GET_FEATURES)
        s.settimeout(5)
        reply = b""
        while len(reply) < 20:
            chunk = s.recv(20 - len(reply))
            self.assertTrue(chunk, "{}: a new frontend's GET_FEATURES got no reply".format(what))
            reply += chunk
        self.assertLess(time.time() - t0, 1.0, "{}: a new frontend waited for its reply".format(what))
        s.close()
        self.assertTrue(self.good.good_traffic(0, 1, 16), "{}: the other port stopped forwarding".format(what))
        self.assertIsNone(self.vhost.poll(), "{}: the backend died".format(what))


class FdTypes(PeerFdCase):
    """Kick, call and err fds must be eventfds, region fds tmpfs or hugetlbfs files: a socket, a
    pipe, a directory and a character device as each are refused on arrival, naming the port, the
    message and what was expected, and the frontend's connection is closed."""

    def test_each_wrong_type_as_each_fd_is_refused(self):
        expected = []
        for kind in ("socket", "pipe", "directory", "chardev"):
            for name, request, payload, where, want in FD_MESSAGES:
                with self.subTest(fd=kind, message=name):
                    keep = []
                    if kind == "socket":
                        a, b = socket.socketpair()
                        keep += [a, b]
                        fd = a.fileno()
                    elif kind == "pipe":
                        r, fd = full_pipe()  # written to as a call fd, it would block
                        keep += [r, fd]
                    elif kind == "directory":
                        fd = os.open(self.tmp.name, os.O_RDONLY | os.O_DIRECTORY)
                        keep.append(fd)
                    else:
                        fd = os.open("/dev/null", os.O_RDWR)
                        keep.append(fd)
                    s = connect(self.sock)
                    send_msg(s, SET_OWNER)
                    send_msg(s, request, payload, [fd])
                    self.assertTrue(closed_within(s, 2), "the connection stayed")
                    s.close()
                    for k in keep:
                        k.close() if isinstance(k, socket.socket) else os.close(k)
                    self.assert_port_serves("{} as {} fd".format(kind, name))
                    expected.append("net_vhost0: {}: the fd is '".format(where))
                    time.sleep(0.12)  # within the log budget (10 lines a second): every refusal is told
        self.good.close()
        out, _ = self.quit(self.vhost)
        for kind_text in ("socket:[", "pipe:[", "'{}'".format(self.tmp.name), "'/dev/null'"):
            self.assertEqual(out.count(kind_text), 4, "each message refused {}\n{}".format(kind_text, out[-3000:]))
        for _, _, _, where, want in FD_MESSAGES:
            lines = [l for l in out.splitlines() if "net_vhost0: {}: the fd is '".format(where) in l]
            self.assertEqual(len(lines), 4, out[-3000:])
            for line in lines:
                self.assertIn(want, line)
                self.assertIn("; closing the connection", line)


class FdsThatBlock(PeerFdCase):
    """fds whose close() or fstat() waits as long as the frontend likes: none of that waiting
    may happen on the port's control thread."""

    def test_lingering_socket_with_a_message_that_takes_no_fd(self):
        # A TCP connection to a peer that never reads, our send buffer full, SO_LINGER one hour:
        # the last close() of it would wait an hour for the peer.
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        tcp = socket.socket()
        tcp.connect(listener.getsockname())
        deaf, _ = listener.accept()
        deaf.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3600))
        tcp.setblocking(False)
        try:
            while True:
                tcp.send(b"x" * 65536)
        except BlockingIOError:
            pass
        s = connect(self.sock)
        send_msg(s, GET_FEATURES, b"", [tcp.fileno()])
        tcp.close()  # the backend's copy is the last reference
        self.assertTrue(closed_within(s, 2), "GET_FEATURES with an fd was not refused")
        s.close()
        self.assert_port_serves("a lingering socket")
        # The backend reset the connection (SO_LINGER {1, 0}) instead of waiting on it.
        deaf.settimeout(5)
        with self.assertRaises(ConnectionResetError):
            while deaf.recv(65536):
                pass
        deaf.close()
        listener.close()
        self.good.close()
        out, _ = self.quit(self.vhost, within_s=5)
        self.assertIn("GET_FEATURES: 1 fds received, expected 0", out)

    def test_file_on_a_fuse_file_system_that_stops_answering(self):
        testpmd_harness.require(self, hangfs.available(), "FUSE needs root and /dev/fuse (the fuse kernel module)")
        mnt = os.path.join(self.tmp.name, "fuse")
        os.mkdir(mnt)
        fs = hangfs.HangFs(mnt)
        files = []
        try:
            files = [os.open(fs.path, os.O_RDWR) for _ in FD_MESSAGES[::3]]
            fs.hang()  # from here, fstat(), fstatfs() and close() of its files wait for nothing
            for fd, (name, request, payload, where, want) in zip(files, FD_MESSAGES[::3]):  # kick, region
                s = connect(self.sock)
                send_msg(s, SET_OWNER)
                send_msg(s, request, payload, [fd])
                self.assertTrue(closed_within(s, 2), "{}: the FUSE file was not refused at once".format(name))
                s.close()
                self.assert_port_serves("a FUSE file as {} fd".format(name))
            # The refused fds went to the reaper, whose close() waits on the daemon (FLUSH).
            end = time.time() + 5
            while FUSE_FLUSH not in fs.held_opcodes() and time.time() < end:
                time.sleep(0.05)
            self.assertIn(FUSE_FLUSH, fs.held_opcodes())
            self.assert_port_serves("a close() stuck on FUSE")
            self.good.close()
            # Quitting: the port does not wait for the stuck close beyond its deadline...
            t0 = time.time()
            self.vhost.stdin.write("quit\n")
            self.vhost.stdin.flush()
            self.assertTrue(self.read_until(self.vhost, "leaving that thread behind", timeout=10),
                            "the shutdown waited for the stuck close()")
            self.assertLess(time.time() - t0, 5)
        finally:
            # ...but the kernel lets the process end only once that close() returns.
            fs.release()
            for fd in files:
                os.close(fd)
        out = self.finish(self.vhost, timeout=10)
        self.assertEqual(self.vhost.returncode, 0, out[-3000:])
        self.assertTrue(self.summary("vhost")["pool_audit_ok"])
        for _, _, _, where, want in FD_MESSAGES[::3]:
            self.assertRegex(out, r"net_vhost0: {}: the fd is '{}', {}".format(re.escape(where), re.escape(fs.path),
                                                                               re.escape(want)))
        self.assertNotIn(FUSE_FLUSH, fs.held_opcodes())


class PartialMessages(HostileCase):
    """A frontend that sends part of a message holds nothing: a frontend that connects meanwhile
    (a restarted one) is answered at once, and the partial one's connection closed for it."""

    def test_a_new_frontend_is_answered_while_another_holds_half_a_message(self):
        sock1 = os.path.join(self.tmp.name, "vhost1.sock")
        vhost = self.start_vhost([self.sock, sock1])
        good = vp.Frontend(sock1, rings=2)
        for part in (struct.pack("<III", GET_FEATURES, 1, 0)[:6],  # half a header
                     struct.pack("<III", SET_MEM_TABLE, 1, 40) + bytes(8)):  # 8 of 40 payload bytes
            with self.subTest(sent=len(part)):
                stall = connect(self.sock)
                stall.sendall(part)
                time.sleep(0.3)  # the backend holds the part
                t0 = time.time()
                fe = vp.Frontend(self.sock, rings=2)  # waits for its GET_FEATURES reply
                self.assertLess(time.time() - t0, 1.0, "the new frontend waited for the stalled one")
                self.assertTrue(closed_within(stall, 1), "the stalled connection was kept over the new one")
                stall.close()
                self.assertTrue(fe.good_traffic(0, 1, 16))
                self.assertTrue(good.good_traffic(0, 1, 16), "the other port stopped")
                fe.close()
                time.sleep(0.2)
        good.close()
        out, _ = self.quit(vhost, within_s=5)
        self.assertIn("vhost-user message header: the peer sent 6 of 12 bytes and then nothing for", out)
        self.assertIn("vhost-user SET_MEM_TABLE: the peer sent 20 of 52 bytes and then nothing for", out)
        self.assertEqual(out.count("and a new frontend connected; closing this one for it"), 2, out[-3000:])


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
