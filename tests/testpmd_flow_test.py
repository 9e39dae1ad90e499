#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""testpmd's flow commands against wirespeed-testpmd with net_ring ports, two RX queues each:
dpdk-testpmd 22.11's output lines (created, destroyed, validated, list columns, query count,
isolate, port_flow_complain errors with DPDK's type numbers), and what the software classifier
does to traffic (txonly's UDP 198.18.0.1 -> 198.18.0.2 port 9, sent by start tx_first and
received by rxonly with verbose 1): queue and rss move packets to an RX queue, drop frees them
and counts them in RX-errors, mark shows as "FDIR matched ID", count counts, jump and passthru
lead to later rules.

usage: testpmd_flow_test.py --binary PATH [unittest options]
"""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import testpmd_harness  # noqa: E402
import testpmd_prompt_test  # noqa: E402

BINARY = None  # set from --binary by testpmd_harness.main
RING2 = testpmd_prompt_test.RING2
QUEUES = ["--rxq=2", "--txq=2"]
UDP = "eth / ipv4 src is 198.18.0.1 dst is 198.18.0.2 / udp src is 9 dst is 9 / end"


def received(out, port, queue):
    """Packets verbose printed as received on port/queue."""
    return sum(int(n) for n in re.findall(r"port {}/queue {}: received (\d+) packets".format(port, queue), out))


class Flow(testpmd_prompt_test.PromptCase):
    check = testpmd_prompt_test.Commands.check  # the prompt tests' runner, not their tests

    def setUp(self):
        testpmd_prompt_test.BINARY = BINARY
        super().setUp()

    def test_commands_print_dpdk_lines(self):
        self.check([
            ("flow validate 0 ingress pattern " + UDP + " actions queue index 1 / end", ["Flow rule validated"]),
            ("flow create 0 ingress pattern " + UDP + " actions queue index 1 / end", ["Flow rule #0 created"]),
            ("flow create 0 ingress group 1 priority 3 pattern eth / vlan vid is 5 / ipv6 / tcp / end "
             "actions count / rss queues 0 1 end types ipv6-tcp end / end", ["Flow rule #1 created"]),
            ("flow create 0 ingress pattern eth / ipv4 / icmp type is 8 / end actions mark id 3 / passthru / end",
             ["Flow rule #2 created"]),
            ("flow list 0", ["ID\tGroup\tPrio\tAttr\tRule\n", "0\t0\t0\ti--\tETH IPV4 UDP => QUEUE\n",
                             "1\t1\t3\ti--\tETH VLAN IPV6 TCP => COUNT RSS\n",
                             "2\t0\t0\ti--\tETH IPV4 ICMP => MARK PASSTHRU\n"]),
            ("flow query 0 1 count", ["COUNT:\n hits_set: 1\n bytes_set: 1\n hits: 0\n bytes: 0\n"]),
            ("flow destroy 0 rule 1", ["Flow rule #1 destroyed"]),
            ("flow destroy 0 rule 7", ["!destroyed"]),
            ("flow create 0 ingress pattern end actions jump group 4 / end", ["Flow rule #3 created"]),
            ("flow list 1", ["!ID"]),
            ("flow flush 0", []),
            ("flow list 0", ["!ID"]),
            ("flow isolate 0 1", ["Ingress traffic on port 0 is now restricted to the defined flow rules"]),
            ("flow isolate 0 0", ["Ingress traffic on port 0 is not restricted anymore to the defined flow rules"]),
            ("flow create 0 ingress pattern eth / ipv4 dst is 10.0.0.300 / end actions drop / end",
             ["Bad arguments: flow rule: dst '10.0.0.300': not an IPv4 address"]),
            ("flow create 0 ingress pattern eth / end actions queue idx 1 / end", ["Bad arguments: flow rule: index"]),
            ("help flow", ["flow create <port> <rule>..."]),
            ("quit", []),
        ], vdevs=RING2, app=QUEUES)

    def run_errors(self, lines):
        """Runs `lines`; returns stderr (where port_flow_complain writes, as in dpdk-testpmd)."""
        args = [BINARY] + testpmd_prompt_test.EAL + RING2 + ["--", "-i"] + testpmd_prompt_test.POOL + QUEUES
        p = subprocess.run(args, input="\n".join(lines + ["quit"]) + "\n", capture_output=True, text=True, timeout=60)
        testpmd_harness.assert_no_crash(self, p.stdout + p.stderr, p.stdout[-2000:] + p.stderr[-2000:])
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        return p.stderr

    def test_errors_carry_dpdk_types_and_causes(self):
        err = self.run_errors([
            "flow create 0 egress pattern eth / end actions drop / end",
            "flow create 0 transfer pattern eth / end actions drop / end",
            "flow create 0 pattern eth / end actions drop / end",
            "flow validate 0 ingress pattern eth / end actions queue index 2 / end",
            "flow create 0 ingress pattern eth / end actions rss queues 0 9 end / end",
            "flow create 0 ingress pattern eth / end actions drop / queue index 0 / end",
            "flow create 0 ingress group 3 pattern eth / end actions jump group 2 / end",
            "flow create 0 ingress pattern eth / udp / ipv4 / end actions drop / end",
            "flow create 0 ingress pattern eth / ipv4 / udp dst spec 90 dst last 80 / end actions drop / end",
            "flow create 0 ingress pattern eth / end actions end",
            "flow create 0 ingress pattern eth / end actions drop / end",
            "flow query 0 0 count",
            "flow query 0 5 count",
        ])
        pre = "port_flow_complain(): Caught PMD error type "
        for needle in [pre + "6 (egress field): egress is not supported: Operation not supported",
                       pre + "7 (transfer field): transfer is not supported: Operation not supported",
                       pre + "5 (ingress field): ingress is required: Invalid argument",
                       pre + "14 (number of actions): no action: Invalid argument",
                       pre + "16 (specific action): the rule has no COUNT action: Operation not supported",
                       "Flow rule #5 not found"]:
            self.assertIn(needle, err)
        for pattern in [r"16 \(specific action\): cause: 0x[0-9a-f]+, queue index out of range: Numerical result",
                        r"15 \(action configuration\): cause: 0x[0-9a-f]+, RSS queue index out of range",
                        r"16 \(specific action\): cause: 0x[0-9a-f]+, a rule has at most one fate action",
                        r"15 \(action configuration\): cause: 0x[0-9a-f]+, jump must lead to a higher group",
                        r"13 \(specific pattern item\): cause: 0x[0-9a-f]+, IPV4 cannot follow the item before it",
                        r"11 \(item specification range\): cause: 0x[0-9a-f]+, dst: last is lower than spec"]:
            self.assertRegex(err, pattern)

    def traffic(self, rules, extra=()):
        """rxonly with verbose 1 after `rules`: start tx_first, stop; returns every output."""
        lines = [("set fwd rxonly", [])] + [(r, ["created"]) for r in rules] + [
            ("set verbose 1", []), ("start tx_first", []), ("stop", ["Accumulated forward statistics"]),
            ("set verbose 0", [])] + list(extra) + [("quit", [])]
        return self.check(lines, vdevs=RING2, app=QUEUES)

    def test_queue_mark_count_and_drop_act_on_traffic(self):
        out = self.traffic([
            "flow create 0 ingress pattern " + UDP + " actions count / mark id 42 / queue index 1 / end",
            "flow create 1 ingress pattern eth / ipv4 / udp / end actions count / drop / end",
        ], [("flow query 0 0 count", []), ("flow query 1 0 count", []), ("show port stats 1", [])])
        text = "".join(out)
        n = received(text, 0, 1)
        self.assertGreater(n, 0, text)
        self.assertEqual(received(text, 0, 0), 0, text)
        self.assertEqual(received(text, 1, 0) + received(text, 1, 1), 0, text)
        self.assertEqual(text.count("FDIR matched ID=0x2a"), n)
        self.assertIn(" hits: {}\n".format(n), out[-4])
        dropped = int(re.search(r" hits: (\d+)", out[-3]).group(1))
        self.assertGreater(dropped, 0)
        self.assertRegex(out[-2], r"RX-errors: {}\b".format(dropped))

    def test_jump_passthru_and_rss(self):
        out = self.traffic([
            "flow create 0 ingress pattern eth / end actions jump group 2 / end",
            "flow create 0 ingress group 2 pattern eth / ipv4 / udp / end actions mark id 7 / passthru / end",
            "flow create 0 ingress group 2 priority 1 pattern " + UDP + " actions queue index 1 / end",
            "flow create 1 ingress pattern " + UDP + " actions rss queues 1 end types ipv4-udp end / end",
        ])
        text = "".join(out)
        self.assertGreater(received(text, 0, 1), 0, text)
        self.assertEqual(received(text, 0, 0), 0, text)
        self.assertEqual(text.count("FDIR matched ID=0x7"), received(text, 0, 1))
        self.assertGreater(received(text, 1, 1), 0, text)
        self.assertEqual(received(text, 1, 0), 0, text)

    def test_isolate_drops_what_no_rule_matches(self):
        out = self.traffic(["flow create 1 ingress pattern eth / ipv4 / tcp / end actions queue index 1 / end"],
                           [("flow isolate 1 1", ["now restricted"]), ("start tx_first", []), ("stop", []),
                            ("show port stats 1", [])])
        text = "".join(out[:-4])
        self.assertGreater(received(text, 1, 0) + received(text, 1, 1), 0, text)  # not isolated yet
        self.assertRegex(out[-2], r"RX-errors: [1-9]")


if __name__ == "__main__":
    testpmd_harness.main(sys.modules[__name__])
