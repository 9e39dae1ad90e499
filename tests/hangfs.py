# SPDX-License-Identifier: BSD-3-Clause
"""A FUSE file system that can stop answering, spoken straight over /dev/fuse (no libfuse, no
Python package): one regular file, `file`, whose daemon answers until hang() and then holds every
request (FLUSH at close, GETATTR, STATFS, READ...) until release(), which answers them all with
an error. A peer that hands such a file's fd to a process makes fstat(),
fstatfs(), a page fault or close() of it wait for the daemon.

Needs root (mount(2)) and /dev/fuse; available() says whether both are there."""
import ctypes
import errno
import os
import struct
import threading

FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_OPEN, FUSE_READ = 1, 2, 3, 14, 15
FUSE_STATFS, FUSE_RELEASE, FUSE_FLUSH, FUSE_INIT, FUSE_INTERRUPT = 17, 18, 25, 26, 36
FUSE_DESTROY, FUSE_BATCH_FORGET = 38, 42
NO_REPLY = (FUSE_FORGET, FUSE_BATCH_FORGET, FUSE_INTERRUPT)
FILE_INO, FILE_SIZE = 2, 1 << 20
MNT_DETACH = 2


def available():
    return os.geteuid() == 0 and os.path.exists("/dev/fuse")


def attr(ino, mode, size):
    # fuse_attr: ino size blocks atime mtime ctime (u64), three nsec, mode nlink uid gid rdev
    # blksize flags (u32)
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, size // 512, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0, 4096, 0)


class HangFs:
    def __init__(self, mountpoint):
        self.mountpoint = mountpoint
        self.path = os.path.join(mountpoint, "file")
        self.hanging = threading.Event()
        self.held = []  # (opcode, unique) of the requests left unanswered
        self.lock = threading.Lock()
        self.dev = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
        libc = ctypes.CDLL(None, use_errno=True)
        opts = "fd={},rootmode=40000,user_id=0,group_id=0,allow_other".format(self.dev).encode()
        if libc.mount(b"hangfs", mountpoint.encode(), b"fuse", 0, opts) != 0:
            err = ctypes.get_errno()
            os.close(self.dev)
            raise OSError(err, "mount fuse at {}: {}".format(mountpoint, os.strerror(err)))
        self.libc = libc
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def hang(self):
        """From now on no request is answered."""
        self.hanging.set()

    def held_opcodes(self):
        with self.lock:
            return [op for op, _ in self.held]

    def release(self):
        """Answers every held request with EIO, answers the next ones again, and unmounts (lazily:
        the file system goes once its last file is closed; the daemon thread then ends)."""
        with self.lock:
            self.hanging.clear()
            held, self.held = self.held, []
        for _, unique in held:
            try:
                self.reply(unique, error=errno.EIO)
            except OSError:
                pass  # interrupted meanwhile
        self.libc.umount2(self.mountpoint.encode(), MNT_DETACH)

    def reply(self, unique, payload=b"", error=0):
        os.write(self.dev, struct.pack("<IiQ", 16 + len(payload), -error, unique) + payload)

    def serve(self):
        while True:
            try:
                req = os.read(self.dev, 1 << 16)  # more than max_write (4096) and its headers
            except OSError:
                return  # released (ENODEV) or closed
            _, opcode, unique, nodeid = struct.unpack_from("<IIQQ", req)
            body = req[40:]
            if opcode in NO_REPLY:
                continue
            if opcode == FUSE_DESTROY:
                return
            with self.lock:
                if self.hanging.is_set() and opcode != FUSE_INIT:
                    self.held.append((opcode, unique))
                    continue
            try:
                self.answer(opcode, unique, nodeid, body)
            except OSError:
                return

    def answer(self, opcode, unique, nodeid, body):
        if opcode == FUSE_INIT:
            major, minor = struct.unpack_from("<II", body)
            # fuse_init_out (64 bytes): major minor max_readahead flags max_background
            # congestion_threshold max_write time_gran max_pages map_alignment flags2 ...
            out = struct.pack("<IIIIHHIIHHII", 7, min(minor, 31), 0, 0, 16, 12, 4096, 1, 1, 0, 0, 0)
            self.reply(unique, out + bytes(64 - len(out)))
        elif opcode == FUSE_LOOKUP:
            if body.rstrip(b"\0") != b"file":
                self.reply(unique, error=errno.ENOENT)
                return
            # fuse_entry_out: nodeid generation entry_valid attr_valid (u64), two nsec (u32)
            self.reply(unique, struct.pack("<QQQQII", FILE_INO, 1, 0, 0, 0, 0) + attr(FILE_INO, 0o100600, FILE_SIZE))
        elif opcode == FUSE_GETATTR:
            ino, mode, size = (FILE_INO, 0o100600, FILE_SIZE) if nodeid == FILE_INO else (1, 0o40755, 0)
            # attr_valid 0: every fstat() comes back here
            self.reply(unique, struct.pack("<QII", 0, 0, 0) + attr(ino, mode, size))
        elif opcode == FUSE_OPEN:
            self.reply(unique, struct.pack("<QII", 1, 0, 0))
        elif opcode == FUSE_STATFS:
            self.reply(unique, struct.pack("<QQQQQIII", 1024, 0, 0, 1, 0, 4096, 255, 4096) + bytes(28))
        elif opcode == FUSE_READ:
            _, _, size = struct.unpack_from("<QQI", body)
            self.reply(unique, bytes(size))
        elif opcode in (FUSE_FLUSH, FUSE_RELEASE):
            self.reply(unique)
        else:
            self.reply(unique, error=errno.ENOSYS)
