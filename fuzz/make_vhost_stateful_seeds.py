#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes the seed inputs of vhost_stateful_fuzz (ws/drivers/vhost/vhost_stateful_fuzz.cpp) into
fuzz/corpus/vhost_stateful: a frontend setting up split and packed rings (in order, mergeable,
indirect) and moving packets both ways, then the attacks the hostile-frontend tests make (a slot
offered again while held, an avail index jump, a chain that loops, a kick before the rings are
set up, a memory table replaced while rings run). Each op is a tag byte and its arguments, as
step() reads them. Run it after changing the input format."""
import os
import struct

GUEST = 0x100000
V1, MRG, INDIRECT, EVENT_IDX, PACKED, IN_ORDER, CSUM = 1 << 32, 1 << 15, 1 << 28, 1 << 29, 1 << 34, 1 << 35, 1
NEXT, WRITE, IND, AVAIL, USED = 1, 2, 4, 1 << 7, 1 << 15
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "vhost_stateful")


def u8(v): return struct.pack("<B", v & 0xff)
def u16(v): return struct.pack("<H", v & 0xffff)
def u64(v): return struct.pack("<Q", v)


def write(at, data):  # op 1, in pieces of at most 255 bytes
    out = b""
    for k in range(0, len(data), 255):
        piece = data[k:k + 255]
        out += u8(1) + u16(at + k) + u8(len(piece)) + piece
    return out


def ring_area(r):  # desc, avail (driver event), used (device event) offsets of ring r
    base = 0x1000 * r
    return base, base + 0x400, base + 0x800


def setup(features, size_log2=5, base=0):
    ops = u8(4) + u64(features) + u8(5)
    for r in range(4):
        d, a, u = ring_area(r)
        ops += u8(6) + u8(r) + u8(size_log2)
        ops += u8(7) + u8(r) + u16(d // 64) + u16(u // 64) + u16(a // 64)
        ops += u8(8) + u8(r) + u16(base) + u8(9) + u8(r) + u8(10) + u8(r) + u8(1)
    return ops


def buf(i): return 0x8000 + 0x800 * i


def split_offer(r, slot, head, idx):
    d, a, u = ring_area(r)
    return write(a + 4 + 2 * slot, u16(head)) + write(a + 2, u16(idx))


def split_desc(r, i, addr, length, flags, nxt):
    return write(ring_area(r)[0] + 16 * i, struct.pack("<QIHH", GUEST + addr, length, flags, nxt))


def packed_desc(r, i, addr, length, ident, flags):
    return write(ring_area(r)[0] + 16 * i, struct.pack("<QIHH", GUEST + addr, length, ident, flags))


def dequeue(r=0, n=32): return u8(2) + u8(r) + u8(n)  # r: which of the TX rings (0 -> ring 1)
def enqueue(r=0, n=2, length=60): return u8(3) + u8(r) + u8(n) + (u8(0) + u16(length)) * n


def frame(i):
    return write(buf(i), bytes(12) + bytes([2] * 6 + [4] * 6) + bytes(52))


def split_traffic(features):
    ops = setup(features)
    for i in range(4):  # TX ring 1: four packets; RX ring 0: four buffers
        ops += frame(i) + split_desc(1, i, buf(i), 76, 0, 0) + split_offer(1, i, i, i + 1)
        ops += split_desc(0, i, buf(8 + i), 2048, WRITE, 0) + split_offer(0, i, i, i + 1)
    return ops + dequeue() + enqueue(0, 4) + dequeue()


def packed_traffic(features):
    ops = setup(features, base=0x8000)
    for i in range(8):
        ops += frame(i) + packed_desc(1, i, buf(i), 76, i, AVAIL)
        ops += packed_desc(0, i, buf(8 + i), 2048, i, AVAIL | WRITE)
    return ops + dequeue() + enqueue(0, 8, 1500) + dequeue()


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "split": split_traffic(V1),
        "split_mergeable_indirect_csum": split_traffic(V1 | MRG | INDIRECT | CSUM | EVENT_IDX),
        "packed": packed_traffic(V1 | PACKED),
        "packed_in_order_mergeable": packed_traffic(V1 | PACKED | IN_ORDER | MRG),
        # A slot we hold made available again for the next lap, between two bursts.
        "packed_slot_offered_twice": packed_traffic(V1 | PACKED | IN_ORDER) +
        u8(11) + u16((ring_area(1)[0] + 14) // 2) + u16(USED) + dequeue(),
        "split_avail_jump": split_traffic(V1) + split_offer(1, 5, 0, 1000) + dequeue(),
        "split_loop": setup(V1) + split_desc(1, 0, buf(0), 8, NEXT, 1) + split_desc(1, 1, buf(0), 8, NEXT, 0) +
        split_offer(1, 0, 0, 1) + dequeue(),
        "indirect_nested": setup(V1 | INDIRECT) + write(0x7000, struct.pack("<QIHH", GUEST + 0x7000, 16, IND, 0)) +
        split_desc(1, 0, 0x7000, 16, IND, 0) + split_offer(1, 0, 0, 1) + dequeue(),
        "kick_before_setup": u8(9) + u8(1) + u8(4) + u64(V1) + u8(5) + split_traffic(V1)[1 + 8 + 1:],
        "memory_table_replaced_while_running": split_traffic(V1) + u8(5) + dequeue() + enqueue(0, 2),
        "features_changed_while_running": packed_traffic(V1 | PACKED) + u8(4) + u64(V1 | PACKED | MRG) + enqueue(0, 3, 3000),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("wrote {} seeds to {}".format(len(seeds), OUT))


if __name__ == "__main__":
    main()
