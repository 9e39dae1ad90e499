#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The installed package, as a user outside this tree gets it: `cmake --install` into a
temporary prefix must hold exactly the public headers (each compiling on its own with
`pkg-config --cflags wirespeed`), the shared library with its SONAME and the static one,
wirespeed-testpmd, the docs, wirespeed.pc and the CMake package, and nothing that points back
into the build tree. Then examples/l2fwd and examples/l3fwd are built out of tree against that
prefix, with CMake (find_package) and with pkg-config (shared, and --static for l2fwd), and each
build runs on virtual ports (examples_test.py checks forwarding and counts)."""
import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = None
# The examples are built unoptimized: what is tested is how they find, compile against and link
# the package; the optimizer would triple the test's compile time and change none of that.
NO_OPT = "-O0"
# The examples_test.py cases the CMake builds run: forwarding and counts on null, ring and pcap
# ports. The pkg-config builds (same sources, other link lines) run the first of each.
RUN_CASES = {"l2fwd": ["L2fwd.test_null_pair_forwards_both_ways_and_counts_balance", "L2fwd.test_through_a_ring_port",
                       "L2fwd.test_mac_rewrite_frame_by_frame"],
             "l3fwd": ["L3fwd.test_routes_ttl_checksum_and_drops", "L3fwd.test_ttl_runs_out_on_a_ring_loop"]}


def run(cmd, env=None, cwd=None, timeout=300):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} failed ({r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}")
    return r.stdout


def dynamic_section(path):
    return run(["readelf", "-d", path])


class InstalledPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ws_install_")
        cls.prefix = os.path.join(cls.tmp.name, "prefix")
        run(["cmake", "--install", ARGS.build_dir, "--prefix", cls.prefix])
        libdirs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu") if os.path.exists(
            os.path.join(cls.prefix, d, "pkgconfig", "wirespeed.pc"))]
        if not libdirs:
            raise AssertionError("no wirespeed.pc installed under " + cls.prefix)
        cls.libdir = os.path.join(cls.prefix, libdirs[0])
        cls.env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(cls.libdir, "pkgconfig"))
        cls.flags = shlex.split(ARGS.cxx_flags)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def pkg_config(self, *args):
        return shlex.split(run(["pkg-config", *args, "wirespeed"], env=self.env))

    def test_only_public_headers(self):
        root = os.path.join(self.prefix, "include", "wirespeed")
        installed = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
        expected = sorted(ARGS.public_headers.split(";") + ["ws/version.hpp"])
        self.assertEqual(installed, expected)
        for private in ("ws/virtio/ring/packed.hpp", "ws/drivers/null/null_port.hpp", "ws/core/burst_gate.hpp",
                        "ws/port/software_tx.hpp", "ws/port/software_rss.hpp", "ws/lpm/lpm_bulk.hpp", "ws/testing/shell.hpp"):
            self.assertNotIn(private, installed)

    def test_each_header_compiles_alone_with_the_pc_cflags(self):
        cflags = self.pkg_config("--cflags")
        self.assertIn("-I" + os.path.join(self.prefix, "include", "wirespeed"), [os.path.normpath(f) if f.startswith("-I")
                                                                                 else f for f in cflags])
        headers = ARGS.public_headers.split(";") + ["ws/version.hpp"]

        def compile_one(header):
            cmd = [ARGS.cxx, *cflags, *self.flags, "-fsyntax-only", "-Wall", "-Wextra", "-x", "c++", "-"]
            r = subprocess.run(cmd, input=f"#include <{header}>\n", capture_output=True, text=True, timeout=300)
            return header, r.returncode, r.stderr

        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for header, rc, err in pool.map(compile_one, headers):
                self.assertEqual(rc, 0, f"{header} does not compile alone:\n{err[-3000:]}")

    def test_libraries_soname_and_static(self):
        real = f"libwirespeed.so.{ARGS.version}"
        major = ARGS.version.split(".")[0]
        self.assertEqual(os.readlink(os.path.join(self.libdir, "libwirespeed.so")), f"libwirespeed.so.{major}")
        self.assertEqual(os.readlink(os.path.join(self.libdir, f"libwirespeed.so.{major}")), real)
        self.assertIn(f"Library soname: [libwirespeed.so.{major}]", dynamic_section(os.path.join(self.libdir, real)))
        self.assertTrue(os.path.exists(os.path.join(self.libdir, "libwirespeed.a")))
        static = self.pkg_config("--libs", "--static")
        self.assertLess(static.index("-l:libwirespeed.a"), static.index("-lwirespeed"), static)
        self.assertIn("-lpcap", static)

    def test_testpmd_docs_and_nothing_points_into_the_build(self):
        testpmd = os.path.join(self.prefix, "bin", "wirespeed-testpmd")
        out = run([testpmd, "--lcores", "0@0,1@0", "--no-huge", "--no-telemetry", "--file-prefix", f"wsinst{os.getpid()}",
                   "--vdev", "net_null0", "--vdev", "net_null1", "--", "--forward-mode=io", "--duration=0.5"], timeout=60)
        self.assertIn("Port 0:", out)
        docs = os.path.join(self.prefix, "share", "doc", "wirespeed")
        drivers = sorted(d for d in os.listdir(os.path.join(ARGS.source_dir, "ws", "drivers"))
                         if os.path.exists(os.path.join(ARGS.source_dir, "ws", "drivers", d, "README.md")))
        for d in drivers:
            self.assertTrue(os.path.exists(os.path.join(docs, "drivers", d, "README.md")), d)
        for f in ("README.md", "api.md", "library.md", "examples/l2fwd/main.cpp", "examples/l3fwd/CMakeLists.txt"):
            self.assertTrue(os.path.exists(os.path.join(docs, f)), f)
        build = os.path.realpath(ARGS.build_dir)
        for d, _, files in os.walk(self.prefix):
            for f in files:
                path = os.path.join(d, f)
                if os.path.islink(path):
                    continue
                if f.endswith((".pc", ".cmake", ".hpp", ".md", ".txt", ".cpp")):
                    with open(path, errors="replace") as fh:
                        self.assertNotIn(build, fh.read(), path)
                elif f.startswith("libwirespeed.so") or f == "wirespeed-testpmd":
                    self.assertNotRegex(dynamic_section(path), r"R(UN)?PATH", path)

    def check_runs(self, example, binary, env=None, cases=None):
        cmd = [sys.executable, os.path.join(HERE, "examples_test.py"), f"--{example}", binary,
               "--l2fwd" if example == "l3fwd" else "--l3fwd", binary, *(cases or RUN_CASES[example])]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(r.returncode, 0, f"{binary}:\n{r.stdout[-3000:]}{r.stderr[-5000:]}")

    # Each build below is one compiler run: they run side by side, one per CPU.
    @staticmethod
    def side_by_side(fn, items):
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            return list(pool.map(fn, items))

    def test_examples_with_cmake(self):
        config = (ARGS.build_type or "Release").upper()

        def build(example):
            build = os.path.join(self.tmp.name, f"cmake-{example}")
            run(["cmake", "-S", os.path.join(HERE, example), "-B", build, "-G", "Ninja",
                 f"-DCMAKE_PREFIX_PATH={self.prefix}", "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
                 f"-DCMAKE_CXX_COMPILER={ARGS.cxx}", f"-DCMAKE_CXX_FLAGS={ARGS.cxx_flags}",
                 f"-DCMAKE_BUILD_TYPE={ARGS.build_type or 'Release'}", f"-DCMAKE_CXX_FLAGS_{config}={NO_OPT}"])
            run(["cmake", "--build", build])
            return build

        examples = ("l2fwd", "l3fwd")
        for example, build in zip(examples, self.side_by_side(build, examples)):
            with open(os.path.join(build, "CMakeCache.txt")) as f:
                found = re.search(r"^wirespeed_DIR:PATH=(.*)$", f.read(), re.M).group(1)
            self.assertEqual(os.path.realpath(found), os.path.realpath(os.path.join(self.libdir, "cmake", "wirespeed")))
            binary = os.path.join(build, example)
            self.assertIn(f"[{self.libdir}]", dynamic_section(binary))  # runs with the prefix's library
            self.check_runs(example, binary)

    def test_examples_with_pkg_config(self):
        shared = self.pkg_config("--cflags", "--libs")
        static = self.pkg_config("--cflags", "--libs", "--static")
        # (binary, example, is_static): both examples against the shared library, and l2fwd
        # --static: the archive is linked, the shared library not needed.
        builds = [(os.path.join(self.tmp.name, f"pc-{e}"), e, False) for e in ("l2fwd", "l3fwd")]
        builds.append((os.path.join(self.tmp.name, "pc-static-l2fwd"), "l2fwd", True))
        self.side_by_side(lambda b: run([ARGS.cxx, NO_OPT, *self.flags, os.path.join(HERE, b[1], "main.cpp"),
                                         "-o", b[0], *(static if b[2] else shared)]), builds)
        shared_env = dict(os.environ, LD_LIBRARY_PATH=self.libdir)
        for binary, example, is_static in builds:
            linked = dynamic_section(binary)
            if is_static:
                self.assertNotIn("libwirespeed", linked)
            else:
                self.assertIn("libwirespeed.so.", linked)
            self.check_runs(example, binary, None if is_static else shared_env, RUN_CASES[example][:1])

def main():
    global ARGS
    p = argparse.ArgumentParser(add_help=False)
    for a in ("--build-dir", "--source-dir", "--cxx", "--public-headers", "--version"):
        p.add_argument(a, required=True)
    p.add_argument("--cxx-flags", default="")
    p.add_argument("--build-type", default="")
    ARGS, rest = p.parse_known_args()
    for tool in ("cmake", "pkg-config", "readelf", "ninja"):
        if shutil.which(tool) is None:
            message = f"{tool} is not installed (scripts/install-deps installs it)"
            if os.environ.get("CI"):
                sys.exit("FAIL: " + message)
            print("SKIP: " + message)
            sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
