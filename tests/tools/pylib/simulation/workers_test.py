"""tools/pylib/simulation/workers.py: hetero batching's sizes and compute-time draws."""

import random
import unittest

from pylib.simulation.scenario import Scenario
from pylib.simulation.workers import Worker, hetero_batches
import junit_main


class HeteroBatchesTest(unittest.TestCase):
    def test_proportional_to_speed_when_communication_is_equal(self):
        # v = 2:2:2:1, B = 256: 256 * v / 7 = 73.1, 73.1, 73.1, 36.6 -> largest remainders.
        self.assertEqual(hetero_batches([2, 2, 2, 1], [0.1] * 4, 256), [73, 73, 73, 37])

    def test_slower_communication_gets_a_smaller_batch(self):
        # K = (100 + 100 * 0 + 100 * 0.5) / 200 = 0.75: b = 100 * 0.75, 100 * 0.25.
        self.assertEqual(hetero_batches([100, 100], [0.0, 0.5], 100), [75, 25])


class WorkerTest(unittest.TestCase):
    def test_compute_per_sample_and_slowdown(self):
        sc = Scenario(workers=2, ms_per_sample=2.0, slowdown=[1.0, 3.0])
        self.assertAlmostEqual(Worker(1, sc, 50, random.Random(1)).mean_compute_s, 0.3)

    def test_spread_is_seeded_and_bounded(self):
        sc = Scenario(workers=1, compute_s=1.0, compute_cv=0.5)
        a = [Worker(0, sc, 64, random.Random(7)).sample_compute() for _ in range(3)]
        b = [Worker(0, sc, 64, random.Random(7)).sample_compute() for _ in range(3)]
        self.assertEqual(a, b)
        w = Worker(0, sc, 64, random.Random(3))
        self.assertGreaterEqual(min(w.sample_compute() for _ in range(500)), 0.1)


if __name__ == "__main__":
    junit_main.main()
