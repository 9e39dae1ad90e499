# SPDX-License-Identifier: BSD-3-Clause
"""The test guest's kernel and initramfs: Debian's cloud kernel (unpacked by
scripts/fetch-guest-kernel, never installed on the host), and an initramfs of static busybox, the
kernel modules asked for (in the order modules.dep gives), any extra binaries with their shared
libraries, and an /init that brings eth0 up and then runs a baked-in script or serves commands
on the serial console (see qemu.Guest). Images are cached by content in the build tree."""
import hashlib
import os
import re
import stat
import subprocess

CACHE = os.environ.get("WS_GUEST_CACHE", "/var/cache/wirespeed/guest")
BUSYBOX = "/bin/busybox"  # busybox-static replaces Debian's dynamic one with a static binary

# virtio-net over PCI, in dependency order (module_order() checks it against modules.dep).
NET_MODULES = ["virtio_ring", "virtio", "virtio_pci_legacy_dev", "virtio_pci_modern_dev", "virtio_pci",
               "failover", "net_failover", "virtio_net"]
# For a userspace PCI driver inside the guest: uio_pci_generic takes a NIC from the kernel.
UIO_MODULES = ["uio", "uio_pci_generic"]
# VFIO, for a userspace driver behind the IOMMU (a guest booted with an IOMMU, qemu.Guest(iommu=True)):
# insmod knows no soft dependencies, so vfio_iommu_type1 (which vfio only soft-depends on) is named.
VFIO_MODULES = ["vfio", "vfio_iommu_type1", "vfio-pci"]
# The kernel's vhost-net and the tap it serves (vhost, vhost_iotlb, tun, tap come with it).
VHOST_NET_MODULES = ["vhost_net"]
# What net_tap's flow rules become in the kernel: flower filters on a clsact qdisc (sch_ingress
# provides both) with gact drop or skbedit queue_mapping actions (the tap's tun comes with vhost_net).
TC_FLOWER_MODULES = ["sch_ingress", "cls_flower", "act_gact", "act_skbedit"]

LINK = -1  # Image contents: a symbolic link to the path given as data

# What /init prints on the console; qemu.Guest reads these markers.
READY = "@@ws ready"
DONE = "@@ws done"    # "@@ws done ID RC" after each console command
EXIT = "@@ws exit"    # "@@ws exit RC" after a baked-in script
ERROR = "@@ws error"  # a setup step failed

INIT = r"""#!/bin/sh
# /init of the wirespeed test guest: mounts, modules, eth0, then ws.run=NAME (a script under /ws)
# or a command loop on the console: each line "ID COMMAND" runs, then "@@ws done ID RC" is printed.
export PATH=/usr/local/bin:/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
dmesg -n 1
for m in $(cat /etc/ws-modules); do
  insmod "/lib/modules/$m" || echo "@@ws error insmod $m"
done
ip=; run=; huge=
for a in $(cat /proc/cmdline); do
  case "$a" in
    ws.ip=*) ip="${a#ws.ip=}" ;;
    ws.run=*) run="${a#ws.run=}" ;;
    ws.hugepages=*) huge="${a#ws.hugepages=}" ;;
  esac
done
ip link set lo up
if [ -n "$ip" ]; then
  n=0
  while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
  { ip addr add "$ip" dev eth0 && ip link set eth0 up; } || echo "@@ws error eth0"
fi
if [ -n "$huge" ]; then
  mkdir -p /dev/hugepages
  mount -t hugetlbfs nodev /dev/hugepages
  echo "$huge" > /proc/sys/vm/nr_hugepages
fi
[ -n "$run" ] || stty -echo 2>/dev/null  # the commands sent are not echoed back
echo "@@ws ready $(uname -r) cpus=$(nproc)"
if [ -n "$run" ]; then
  sh "/ws/$run"
  echo "@@ws exit $?"
else
  while read -r id cmd; do
    sh -c "$cmd" </dev/null 2>&1
    echo "@@ws done $id $?"
  done
fi
poweroff -f
"""


class Kernel:
    """An unpacked guest kernel: vmlinuz and /lib/modules/VERSION with modules.dep."""

    def __init__(self, root):
        self.root = os.path.realpath(root)
        with open(os.path.join(self.root, "kernel-version")) as f:
            self.version = f.read().strip()
        self.vmlinuz = os.path.join(self.root, "vmlinuz")
        self.modules = os.path.join(self.root, "lib", "modules", self.version)


def find_kernel(cache=CACHE):
    """The kernel scripts/fetch-guest-kernel unpacked (its `current` link), or None."""
    root = os.path.join(cache, "current")
    if not os.path.exists(os.path.join(root, "vmlinuz")):
        return None
    return Kernel(root)


def module_order(kernel, names):
    """Paths (relative to the modules directory) of `names` and their dependencies, each after
    what it depends on, from modules.dep (which lists a module's dependencies, the last loaded
    first)."""
    deps = {}
    with open(os.path.join(kernel.modules, "modules.dep")) as f:
        for line in f:
            path, _, rest = line.partition(":")
            deps[os.path.basename(path).split(".ko")[0].replace("-", "_")] = (path, rest.split())
    order = []

    def add(path):
        if path not in order:
            order.append(path)

    for name in names:
        key = name.replace("-", "_")
        if key not in deps:
            raise ValueError("guest kernel {} has no module {}".format(kernel.version, name))
        path, needs = deps[key]
        for dep in reversed(needs):
            add(dep)
        add(path)
    return order


def shared_libraries(binary):
    """The files the dynamic loader maps for `binary` (ldd), the loader itself, and libgcc_s
    (which glibc loads on demand for unwinding and thread cancellation)."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    if "not a dynamic executable" in out or "statically linked" in out:
        return []
    libs = []
    for line in out.splitlines():
        m = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
        elif "not found" in line:
            raise ValueError("{}: {}".format(binary, line.strip()))
    for gcc in ("/lib/x86_64-linux-gnu/libgcc_s.so.1", "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1"):
        if os.path.exists(gcc):
            libs.append(gcc)
            break
    return libs


class Cpio:
    """An initramfs archive (cpio "newc", the format the kernel unpacks), written in memory so
    device nodes and root ownership need no privileges."""

    def __init__(self):
        self.parts = []
        self.ino = 1
        self.names = set()

    def _entry(self, name, mode, data=b"", rdev=(0, 0)):
        name = name.lstrip("/")
        if name in self.names:
            return
        self.names.add(name)
        encoded = name.encode() + b"\0"
        fields = [self.ino, mode, 0, 0, 2 if stat.S_ISDIR(mode) else 1, 0, len(data), 0, 0, rdev[0], rdev[1],
                  len(encoded), 0]
        self.ino += 1
        header = b"070701" + b"".join(b"%08x" % v for v in fields)
        self.parts.append(header + encoded + b"\0" * (-(len(header) + len(encoded)) % 4))
        self.parts.append(data + b"\0" * (-len(data) % 4))

    def dir(self, name):
        parent = os.path.dirname(name.rstrip("/"))
        if parent not in ("", "/"):
            self.dir(parent)
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o644):
        self.dir(os.path.dirname(name))
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self.dir(os.path.dirname(name))
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, name, major, minor):
        self.dir(os.path.dirname(name))
        self._entry(name, stat.S_IFCHR | 0o600, rdev=(major, minor))

    def bytes(self):
        self.ino = 0
        self._entry("TRAILER!!!", 0)
        return b"".join(self.parts)


# /init mounts file systems over these: a file the image puts below one would be hidden.
MOUNTED = ("/proc", "/sys", "/dev", "/tmp", "/run", "/var/run")


def guest_path(host_path):
    """Where a host binary goes in the guest: the same path (DPDK finds its plugins by theirs),
    unless /init mounts over it, as a build tree under /tmp would be: then under /opt/host."""
    if any(host_path == m or host_path.startswith(m + "/") for m in MOUNTED):
        return "/opt/host" + host_path
    return host_path


class Image:
    """One initramfs. modules: names (NET_MODULES, UIO_MODULES); binaries: host paths copied to
    the same path in the guest (guest_path()), and linked by name from /usr/local/bin, with the
    shared libraries they need; files: guest path -> host
    path or bytes; scripts: NAME -> shell text, run by ws.run=NAME."""

    def __init__(self, kernel, modules=NET_MODULES, binaries=(), files=None, scripts=None):
        self.kernel = kernel
        self.modules = module_order(kernel, modules)
        self.binaries = [os.path.abspath(b) for b in binaries]
        self.files = dict(files or {})
        self.scripts = dict(scripts or {})

    def _contents(self):
        """guest path -> (bytes, mode), the whole image but busybox's links and /dev."""
        out = {"/init": (INIT.encode(), 0o755),
               "/bin/busybox": (_read(BUSYBOX), 0o755),
               "/etc/ws-modules": ("\n".join(self.modules).encode() + b"\n", 0o644)}
        for m in self.modules:
            out["/lib/modules/" + m] = (_read(os.path.join(self.kernel.modules, m)), 0o644)
        for b in self.binaries:
            at = guest_path(b)
            out[at] = (_read(b), 0o755)
            out["/usr/local/bin/" + os.path.basename(b)] = (at.encode(), LINK)  # on PATH by name
            for lib in shared_libraries(b):
                out[lib] = (_read(lib), 0o755)
        for path, src in self.files.items():
            out[path] = (src if isinstance(src, bytes) else _read(src), 0o755)
        for name, text in self.scripts.items():
            out["/ws/" + name] = (text.encode(), 0o755)
        return out

    def build(self, out_dir, name="guest"):
        """Writes OUT_DIR/NAME-HASH.cpio unless an image of the same contents is there; returns
        its path. Older images of NAME are removed."""
        contents = self._contents()
        h = hashlib.sha256(self.kernel.version.encode())
        h.update(_read(__file__))  # the layout below and /init: a change of this builder rebuilds
        for path in sorted(contents):
            data, mode = contents[path]
            h.update(b"%s %d %d\0" % (path.encode(), mode, len(data)))
            h.update(data)
        path = os.path.join(out_dir, "{}-{}.cpio".format(name, h.hexdigest()[:16]))
        if os.path.exists(path):
            return path
        os.makedirs(out_dir, exist_ok=True)
        archive = Cpio()
        archive.dir("/dev")
        archive.chardev("/dev/console", 5, 1)  # init's stdio before devtmpfs is mounted
        archive.chardev("/dev/null", 1, 3)
        for d in ("/proc", "/sys", "/tmp", "/run", "/var/tmp", "/sbin", "/usr/bin", "/usr/sbin"):
            archive.dir(d)
        archive.symlink("/var/run", "/run")  # DPDK's runtime directory lives under /var/run
        for p in sorted(contents):
            data, mode = contents[p]
            if mode == LINK:
                archive.symlink(p, data.decode())
            else:
                archive.file(p, data, mode)
        applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
        for applet in applets:
            if applet not in ("busybox", "init", "linuxrc"):
                archive.symlink("/bin/" + applet, "busybox")
        tmp = path + ".tmp{}".format(os.getpid())
        with open(tmp, "wb") as f:
            f.write(archive.bytes())
        os.replace(tmp, path)
        for old in os.listdir(out_dir):
            if old.startswith(name + "-") and old.endswith(".cpio") and os.path.join(out_dir, old) != path:
                os.unlink(os.path.join(out_dir, old))
        return path


def _read(path):
    with open(path, "rb") as f:
        return f.read()
