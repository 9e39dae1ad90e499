# SPDX-License-Identifier: BSD-3-Clause
"""Network namespaces and veth pairs for tests with kernel peers. Every name carries the test
process id, every address is inside 10.99.0.0/16, and everything is deleted at cleanup (even when
the test fails). Without root the tests skip; under CI (env CI set) they fail instead."""
import json
import os
import subprocess
import unittest

import testpmd_harness


def require_root(test):
    """Skip (or fail under CI) when the test cannot create namespaces."""
    testpmd_harness.require(test, os.geteuid() == 0, "needs root to create network namespaces and veth pairs")
    testpmd_harness.require_program(test, "ip", "iproute2")


def sh(*args, ns=None, check=True, timeout=30):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("{} failed ({}): {}{}".format(" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


class Netns:
    """Namespaces and veths created for one test; delete() removes them all."""

    def __init__(self, tag):
        self.prefix = "ws{}{}".format(tag, os.getpid() % 100000)
        self.namespaces = []

    def ns(self, name):
        full = "{}{}".format(self.prefix, name)
        sh("ip", "netns", "add", full)
        self.namespaces.append(full)
        sh("ip", "link", "set", "lo", "up", ns=full)
        # No IPv6 autoconfiguration or MLD: only the test's packets cross the links.
        sh("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", ns=full)
        sh("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", ns=full)
        return full

    def veth(self, name_a, ns_a, name_b, ns_b, addr_a=None, addr_b=None):
        """A veth pair with one end in each namespace, both up."""
        sh("ip", "link", "add", name_a, "netns", ns_a, "type", "veth", "peer", "name", name_b, "netns", ns_b)
        for name, ns, addr in ((name_a, ns_a, addr_a), (name_b, ns_b, addr_b)):
            sh("sysctl", "-qw", "net.ipv6.conf.{}.disable_ipv6=1".format(name), ns=ns, check=False)
            if addr:
                sh("ip", "addr", "add", addr, "dev", name, ns=ns)
            sh("ip", "link", "set", name, "up", ns=ns)

    def delete(self):
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.namespaces = []


def link_stats(ns, dev):
    """The kernel's interface counters (ip -s link) as {'rx': {...}, 'tx': {...}}."""
    p = sh("ip", "-j", "-s", "link", "show", "dev", dev, ns=ns)
    return json.loads(p.stdout)[0]["stats64"]


def leftover_namespaces(prefix):
    p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return [line.split()[0] for line in p.stdout.splitlines() if line.startswith(prefix)]


def wait_packet_sockets(ns, count, proc=None, timeout_s=15):
    """Wait until `count` packet sockets exist in `ns` (/proc/net/packet): a wirespeed-testpmd
    with net_af_packet ports has bound its sockets and is receiving. False on timeout or exit."""
    import time
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        p = sh("cat", "/proc/net/packet", ns=ns, check=False)
        if len(p.stdout.splitlines()) - 1 >= count:
            return True
        time.sleep(0.05)
    return False


def for_test(test, tag):
    """require_root(test), then a Netns("tag") that is deleted when `test` ends."""
    require_root(test)
    net = Netns(tag)
    test.addCleanup(net.delete)
    return net
