"""tools/pylib/simulation/slots.py: the SlotPlanner's gap and its cap at a multiple of the hold,
ring and first-come orders, width."""

import unittest

from pylib.simulation.slots import SlotPlanner
import junit_main


class SlotPlannerTest(unittest.TestCase):
    def test_ring_waits_for_the_turn_and_the_gap(self):
        p = SlotPlanner([2, 0, 1], headroom=1.2, width=1, first_come=False)
        p.request(1, 3.6)
        self.assertIsNone(p.poll(0.0))           # worker 0's turn
        p.request(0, 3.6)
        self.assertAlmostEqual(p.gap(), 3.6 / (1.2 * 3))
        self.assertEqual(p.poll(0.0), 0)
        self.assertIsNone(p.poll(0.5))           # held
        p.release(0, 0.4)
        self.assertIsNone(p.poll(0.5))           # within the gap (1.0)
        self.assertAlmostEqual(p.next_wakeup(), 1.0)
        self.assertEqual(p.poll(1.0), 1)
        self.assertEqual(p.grants, [(0.0, 0), (1.0, 1)])

    def test_the_gap_is_at_most_a_multiple_of_the_hold(self):
        """As scheduler/slot_planner.cc: T = 3.6 s over 3 workers with h = 1.2 is a 1 s gap;
        a 0.1 s hold caps it at 0.2 s with gap_holds 2; a 5 s hold next makes the average
        0.8 * 0.1 + 0.2 * 5 = 1.08 s, and the cap (2.16 s) leaves the paper's gap."""
        p = SlotPlanner([0, 1, 2], headroom=1.2, width=1, first_come=False, gap_holds=2)
        for r in (0, 1, 2):
            p.request(r, 3.6)
        self.assertEqual(p.poll(0.0), 0)
        self.assertAlmostEqual(p.gap(), 1.0)    # no hold measured yet
        p.release(0, 0.1)
        self.assertAlmostEqual(p.gap(), 0.2)
        self.assertIsNone(p.poll(0.19))
        self.assertEqual(p.poll(0.2), 1)
        p.release(1, 5.2)                       # held 5 s: mean 0.8 * 0.1 + 0.2 * 5.0
        self.assertAlmostEqual(p.mean_hold, 1.08)
        self.assertAlmostEqual(p.gap(), 1.0)

    def test_first_come_takes_the_earliest(self):
        p = SlotPlanner([0, 1, 2], headroom=1.2, width=1, first_come=True)
        p.request(2, 1.0)
        p.request(0, 1.0)
        self.assertEqual(p.poll(0.0), 2)

    def test_width_two_holders(self):
        p = SlotPlanner([0, 1, 2], headroom=10 / 3, width=2, first_come=False)  # gap 0.1
        for r in (0, 1, 2):
            p.request(r, 1.0)
        self.assertEqual([p.poll(0.0), p.poll(0.05), p.poll(0.1), p.poll(0.3)], [0, None, 1, None])
        p.release(0, 0.3)
        self.assertEqual(p.poll(0.3), 2)

    def test_finished_workers_still_count_in_the_gap(self):
        p = SlotPlanner([0, 1], headroom=1.0, width=1, first_come=False)
        p.request(0, 2.0)
        p.remove(1, finished=True)
        self.assertEqual(p.gap(), 1.0)

    def test_smoothing(self):
        p = SlotPlanner([0, 1], headroom=1.0, width=1, first_come=True)
        p.request(0, 1.0)
        p.request(1, 2.0)
        self.assertAlmostEqual(p.mean_compute, 0.8 * 1.0 + 0.2 * 2.0)

    def test_errors(self):
        p = SlotPlanner([0], headroom=1.0, width=1, first_come=False)
        with self.assertRaisesRegex(ValueError, "does not hold"):
            p.release(0, 0.0)
        p.request(0, 1.0)
        with self.assertRaisesRegex(ValueError, "cannot ask"):
            p.request(0, 1.0)


if __name__ == "__main__":
    junit_main.main()
