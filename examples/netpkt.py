# SPDX-License-Identifier: BSD-3-Clause
"""Frames and pcap files for the example tests and benchmarks: Ethernet/IPv4/UDP frames with
valid checksums, and classic pcap files written and read (µs or ns timestamps)."""
import ipaddress
import struct

ETH_IPV4 = 0x0800


def mac_bytes(text):
    return bytes(int(x, 16) for x in text.split(":"))


def mac_text(raw):
    return ":".join(f"{b:02X}" for b in raw)


def ip_checksum(header):
    """RFC 1071 over an IPv4 header whose checksum field is zero."""
    s = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ipv4_udp_frame(dst_ip, src_ip="192.0.2.1", ttl=64, size=64, dst_mac="02:00:00:00:00:AA",
                   src_mac="02:00:00:00:00:BB", ident=0, tos=0):
    """An Ethernet frame of `size` bytes (no FCS) carrying IPv4/UDP with a valid header checksum."""
    ip_len = size - 14
    udp = struct.pack("!HHHH", 1024, 1024, ip_len - 20, 0) + bytes(ip_len - 28)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos, ip_len, ident, 0, ttl, 17, 0,
                      ipaddress.IPv4Address(src_ip).packed, ipaddress.IPv4Address(dst_ip).packed)
    hdr = hdr[:10] + struct.pack("!H", ip_checksum(hdr)) + hdr[12:]
    return mac_bytes(dst_mac) + mac_bytes(src_mac) + struct.pack("!H", ETH_IPV4) + hdr + udp


def arp_frame(size=64):
    """A broadcast ARP request padded to `size` bytes: not IPv4, never routed."""
    arp = struct.pack("!HHBBH6s4s6s4s", 1, ETH_IPV4, 6, 4, 1, mac_bytes("02:00:00:00:00:BB"),
                      bytes([192, 0, 2, 1]), bytes(6), bytes([192, 0, 2, 2]))
    frame = bytes([0xFF] * 6) + mac_bytes("02:00:00:00:00:BB") + struct.pack("!H", 0x0806) + arp
    return frame + bytes(size - len(frame))


def write_pcap(path, frames):
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, frame in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(frame), len(frame)))
            f.write(frame)


def read_pcap(path):
    """The frames of a classic pcap file (either timestamp resolution, either byte order)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 24:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    frames, off = [], 24
    while off + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def ipv4_fields(frame):
    """(dst MAC, src MAC, TTL, header checksum, destination address, header) of an IPv4 frame."""
    hdr = frame[14:34]
    return (mac_text(frame[0:6]), mac_text(frame[6:12]), hdr[8], struct.unpack("!H", hdr[10:12])[0],
            str(ipaddress.IPv4Address(hdr[16:20])), hdr)
