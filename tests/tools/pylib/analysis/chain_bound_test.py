"""tools/pylib/analysis/chain_bound.py: step times worked out by hand for one and two modules
(1 ms of transfer each at 1 GB/s) under each chain, the rate a target step needs, and the
refusals."""

import unittest

import junit_main
from pylib.analysis import chain_bound
from pylib.analysis.chain_bound import Chain

MS = 1e-3
RATE = 1e9  # bytes/s: a module of 1e6 bytes takes 1 ms each way


def step_ms(sizes, forward_ms, backward_ms, chain, rate=RATE):
    return round(chain_bound.step_seconds(sizes, forward_ms * MS, backward_ms * MS, rate,
                                          chain) / MS, 9)


class OneModuleTest(unittest.TestCase):
    def test_the_forward_waits_for_push_and_pull_after_the_backward(self):
        # backward ends at 3 ms: push 3-4, pull 4-5; the next forward starts at 5.
        for chain in (Chain(), Chain(pulls="early"), Chain(link="shared"),
                      Chain(reports="end")):
            self.assertEqual(step_ms([1e6], 1, 2, chain), 5.0, chain)

    def test_the_rate_for_a_target_step(self):
        # f + b + 2 * bytes / rate = 4 ms: 2 GB/s.
        rate = chain_bound.rate_for([1e6], 1 * MS, 2 * MS, Chain(), 4 * MS)
        self.assertAlmostEqual(rate / 2e9, 1.0, delta=0.002)
        self.assertIsNone(chain_bound.rate_for([1e6], 1 * MS, 2 * MS, Chain(), 2.5 * MS))


class TwoModulesTest(unittest.TestCase):
    # Forward m0 then m1, 1 ms each; backward m1 then m0, 1 ms each.
    def test_duplex_links_pull_early_or_after_alike_here(self):
        # m1 pushed 9-10, m0 10-11; after: pulls 11-12 (m0), 12-13; early: m1 10-11, m0 11-12.
        self.assertEqual(step_ms([1e6, 1e6], 1, 1, Chain()), 6.0)
        self.assertEqual(step_ms([1e6, 1e6], 1, 1, Chain(pulls="early")), 6.0)

    def test_on_a_shared_link_an_early_pull_delays_what_the_forward_needs_first(self):
        # after: pushes 10-11 (m1) and 11-12 (m0), then the pulls in the forward's order, m0
        # first: 6 ms. early: m1's pull, asked when its push lands, goes ahead of m0's (pulls
        # 12-13 and 13-14), so m0, which the forward needs first, lands a millisecond later.
        self.assertEqual(step_ms([1e6, 1e6], 1, 1, Chain(link="shared")), 6.0)
        self.assertEqual(step_ms([1e6, 1e6], 1, 1, Chain(pulls="early", link="shared")), 7.0)

    def test_reports_at_the_backwards_end_start_every_push_late(self):
        # pushes 11-12 (m1) and 12-13 (m0), pulls 13-14 and 14-15: 7 ms.
        self.assertEqual(step_ms([1e6, 1e6], 1, 1, Chain(reports="end")), 7.0)

    def test_partitions_of_a_module_are_at_most_a_mebibyte(self):
        self.assertEqual(chain_bound.partitions([3 * 2 ** 20 + 3, 10]),
                         [(0, 786432.75)] * 4 + [(1, 10.0)])

    def test_without_bytes_the_step_is_the_compute(self):
        self.assertEqual(step_ms([0, 0], 1, 1, Chain(pulls="early", link="shared")), 4.0)


class ThreeModulesTest(unittest.TestCase):
    # Forward 1 ms a module, backward 0.5 ms; the shared link, 1 ms a transfer. From the
    # backward's start B: m2's gradient at B+0.5, m1's at B+1, m0's at B+1.5 (step() there).
    def step(self, chain):
        return step_ms([1e6] * 3, 1, 0.5, chain)

    def test_after_the_pushes_the_pulls_come_in_the_forwards_order(self):
        # pushes B+0.5-3.5; pulls m0 -4.5, m1 -5.5, m2 -6.5; forward 4.5-7.5: 7.5 ms a step.
        self.assertEqual(self.step(Chain(link="shared")), 7.5)

    def test_early_pulls_queue_m0_behind_the_others(self):
        # push m2 -1.5, m1 -2.5, m0 -3.5, pulls m2 -4.5, m1 -5.5, m0 -6.5: forward 6.5-9.5.
        self.assertEqual(self.step(Chain(pulls="early", link="shared")), 9.5)

    def test_a_gate_of_one_holds_m1_until_the_last_push_then_sends_it_in_order(self):
        # m2's pull goes at B+1.5 (none in flight), m1's waits; once m0 is pushed (B+3.5) the
        # rest go in key order: m2 -4.5, m0 -5.5, m1 -6.5; forward 5.5-8.5.
        self.assertEqual(self.step(Chain(pulls="gated", in_flight=1, link="shared")), 8.5)


class RefusalsTest(unittest.TestCase):
    def test_unknown_chains(self):
        for kwargs in ({"pulls": "late"}, {"reports": "never"}, {"link": "half"},
                       {"pulls": "gated", "in_flight": 0}):
            with self.assertRaisesRegex(ValueError, "pulls after|early|gated"):
                Chain(**kwargs)

    def test_no_modules_or_no_rate(self):
        for sizes, rate in (([], RATE), ([1e6], 0)):
            with self.assertRaisesRegex(ValueError, "needs modules, a positive rate"):
                chain_bound.step_seconds(sizes, MS, MS, rate, Chain())


if __name__ == "__main__":
    junit_main.main()
