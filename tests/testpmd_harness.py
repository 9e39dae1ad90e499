# SPDX-License-Identifier: BSD-3-Clause
"""What the tests that run wirespeed-testpmd share: the command line they are started with
(--binary PATH, the rest for unittest), the per-test preamble (CPUs 0 and 1, a temp dir) and the
markers of a crash that no run's output may contain."""
import argparse
import os
import shutil
import struct
import sys
import tempfile
import time
import unittest

# A pool for runs that are not about its size. The default one (dpdk-testpmd's 155456 mbufs, about
# 340 MB) costs half a second to create, a second under the sanitizers, most of it the first write
# to each 4 KiB page (on these VMs): a suite that starts hundreds of processes spent minutes there.
SMALL_POOL = ["--total-num-mbufs=8192"]

CRASH_MARKERS = ["Sanitizer", "runtime error:", "Traceback", "Segmentation fault", "core dumped",
                 "terminate called", "Aborted"]


def parse_args():
    """(the --binary PATH made absolute, the rest of the command line for unittest.main); exits
    with a message when PATH is not an executable."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--binary", required=True)
    args, rest = parser.parse_known_args()
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        sys.exit("not an executable: " + binary)
    return binary, [sys.argv[0]] + rest


class TimedResult(unittest.TextTestResult):
    """Prints each test's wall time after its verdict, so that a slow suite shows where it goes."""

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.stream.writeln("  ({:.1f} s)".format(time.monotonic() - self._started))


def main(test_module):
    """Runs the tests of `test_module` (a test script run as __main__) with its BINARY set from
    --binary."""
    test_module.BINARY, argv = parse_args()
    runner = unittest.TextTestRunner(resultclass=TimedResult, verbosity=2)
    unittest.main(module=test_module, argv=argv, testRunner=runner)


def require(test, ok, why):
    """Stops `test` when `ok` is false, saying what is missing (`why` names the package or the
    capability). Outside CI it skips; under CI (env CI set) it fails: CI installs every package
    (scripts/install-deps) and runs as root, so a missing requirement there is a defect."""
    if ok:
        return
    if os.environ.get("CI"):
        test.fail("CI requires: " + why)
    test.skipTest(why)


def require_program(test, name, package):
    """require() that `name` is on PATH; `package` is the Debian package that ships it."""
    require(test, shutil.which(name) is not None,
            "{} is not installed (Debian package {}; scripts/install-deps installs it)".format(name, package))


def need_cpus_0_1(test):
    """require() that this process may run on CPUs 0 and 1 (the runs use -l 0-1)."""
    require(test, {0, 1} <= os.sched_getaffinity(0), "needs CPUs 0 and 1 (the runs use -l 0-1)")


def temp_dir(test, prefix):
    """A temporary directory removed when `test` ends; returns its TemporaryDirectory."""
    tmp = tempfile.TemporaryDirectory(prefix=prefix)
    test.addCleanup(tmp.cleanup)
    return tmp


def assert_no_crash(test, output, where=None):
    """Fail `test` when a run's output shows a sanitizer report, a Python traceback or a crash."""
    for marker in CRASH_MARKERS:
        test.assertNotIn(marker, output, where)


def write_pcap(path, frames):
    """A classic pcap file (microseconds, Ethernet) holding `frames` (bytes each)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for k, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1, k, len(fr), len(fr)) + fr)


def read_pcap(path):
    """The frames of a classic pcap file, as bytes."""
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 24
    while at + 16 <= len(data):
        caplen = struct.unpack("<I", data[at + 8:at + 12])[0]
        out.append(data[at + 16:at + 16 + caplen])
        at += 16 + caplen
    return out
