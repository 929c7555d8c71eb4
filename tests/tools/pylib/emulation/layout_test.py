"""tools/pylib/emulation/layout.py: the machines of dedicated, colocated and DDP jobs, their
links, CPU quotas, the watched links and the self-check's pair, and the errors for layouts that
cannot be built."""

import unittest

import junit_main
from pylib.emulation import layout


class PlanTest(unittest.TestCase):
    def test_dedicated_servers_are_the_default(self):
        plan = layout.plan(2, 2, "100mbit", "1gbit")
        self.assertEqual(plan.machines, ["scheduler", "server0", "server1", "worker0", "worker1"])
        self.assertEqual(plan.colocated, {})
        self.assertEqual(plan.rates, {"scheduler": None, "server0": "100mbit",
                                      "server1": "100mbit", "worker0": "1gbit", "worker1": "1gbit"})
        self.assertEqual(plan.rate("server1"), "100mbit")

    def test_colocated_servers_share_their_workers_machines_and_links(self):
        plan = layout.plan(2, 3, "", "419mbit", colocate=True)
        self.assertEqual(plan.machines, ["scheduler", "worker0", "worker1", "worker2"])
        self.assertEqual(plan.colocated, {"server0": "worker0", "server1": "worker1"})
        self.assertEqual((plan.machine("server1"), plan.rate("server1")), ("worker1", "419mbit"))
        self.assertEqual(plan.machine("worker2"), "worker2")

    def test_a_ddp_job_has_only_its_workers_machines(self):
        for colocate in (False, True):
            plan = layout.plan(4, 2, "100mbit", "1gbit", colocate=colocate, ddp=True)
            self.assertEqual(plan.machines, ["worker0", "worker1"])
            self.assertEqual((plan.colocated, plan.rates),
                             ({}, {"worker0": "1gbit", "worker1": "1gbit"}))

    def test_colocation_that_cannot_be_built_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"^--colocate puts server i on worker i's "
                                                r"machine: 3 servers need at least as many "
                                                r"workers \(got 2\)$"):
            layout.plan(3, 2, colocate=True)
        with self.assertRaisesRegex(ValueError, r"^--colocate: a server shares its worker's "
                                                r"link; give --worker_link only"):
            layout.plan(1, 2, "100mbit", "1gbit", colocate=True)


class QuotaTest(unittest.TestCase):
    def test_quotas_by_worker(self):
        self.assertEqual(layout.parse_quotas(["3:0.2", "0:0.4"], 4),
                         {"worker3": 0.2, "worker0": 0.4})
        self.assertEqual(layout.parse_quotas([], 4), {})

    def test_bad_quotas(self):
        cases = [("x:0.5", r"^--cpu_quota wants RANK:FRACTION, got 'x:0.5'$"),
                 ("1", r"^--cpu_quota wants RANK:FRACTION, got '1'$"),
                 ("4:0.5", r"^--cpu_quota '4:0.5': rank must be in \[0, 4\)"),
                 ("0:0.05", r"^--cpu_quota '0:0.05': rank must be in \[0, 4\) and the "
                            r"fraction in \[0.1, 64\] CPUs$")]
        for item, message in cases:
            with self.subTest(item=item), self.assertRaisesRegex(ValueError, message):
                layout.parse_quotas([item], 4)


class WatchedTest(unittest.TestCase):
    def test_watched_links(self):
        plan = layout.plan(2, 2)
        self.assertEqual(layout.watched_hosts(plan, 2), ["server0", "server1", "worker0"])
        self.assertEqual(layout.watched_hosts(layout.plan(2, 2, ddp=True), 2, ddp=True),
                         ["worker0"])

    def test_the_self_check_crosses_a_link(self):
        self.assertEqual(layout.probe_pair(layout.plan(1, 2)), ("worker0", "server0"))
        self.assertEqual(layout.probe_pair(layout.plan(1, 2, colocate=True)),
                         ("worker1", "server0"))
        self.assertEqual(layout.probe_pair(layout.plan(1, 1, colocate=True)),
                         ("scheduler", "server0"))
        self.assertEqual(layout.probe_pair(layout.plan(1, 2, ddp=True)), ("worker1", "worker0"))
        self.assertEqual(layout.probe_pair(layout.plan(1, 1, ddp=True)), (None, "worker0"))


if __name__ == "__main__":
    junit_main.main()
