"""tools/pylib/simulation/predictions.py and prediction_report.py: the jobs' scenarios, the
best server count, the tables."""

import unittest

from pylib.simulation import prediction_report, predictions
from pylib.simulation.predictions import Point
import junit_main


def point(mode, workers, servers, rate):
    return Point("ec2", mode, workers, servers, 25, "fp32", rate, rate * 64, 1.0, 0.5, 0.5)


class ScenarioTest(unittest.TestCase):
    def test_ec2_job(self):
        sc = predictions.scenario("r2sp", 64, 16, 25, "fp16", extra={"slot_width": None})
        self.assertEqual(sc.slot_width, 16)          # width = servers
        self.assertEqual(sc.server_link_bps, 25e9)
        self.assertEqual(sc.worker_link_bps, 25e9)
        self.assertEqual((sc.push_codec, sc.pull_codec), ("fp16", "fp16"))
        self.assertEqual((sc.iterations, sc.skip), (8, 2))
        self.assertEqual(predictions.scenario("bsp", 1024, 1, 10, "fp32").iterations, 4)


class BestTest(unittest.TestCase):
    POINTS = [point("bsp", 64, 1, 10.0), point("bsp", 64, 4, 19.5), point("bsp", 64, 16, 20.0),
              point("r2sp", 64, 1, 5.0), point("r2sp", 64, 4, 5.0)]

    def test_fewest_servers_within_five_percent(self):
        best = predictions.best_by_job(self.POINTS)
        self.assertEqual(best[("ec2", "bsp", 64, 25, "fp32")], (20.0, 4))
        self.assertEqual(best[("ec2", "r2sp", 64, 25, "fp32")], (5.0, 1))

    def test_table(self):
        lines = prediction_report.ec2_table(self.POINTS).splitlines()
        self.assertEqual(lines[2], "| 64 | 25 Gbit/s | fp32 | 20.0 (4) | 5.0 (1) | 0.25 | 0.25 |")


class SimulatedPointTest(unittest.TestCase):
    def test_ring_bound_r2sp(self):
        # 64 workers, ResNet-50 at 25 Gbit/s: each slot holds a 102 MB push (32.8 ms) plus the
        # fixed costs, and 64 of them take far longer than the 0.2 s compute.
        sc = predictions.scenario("r2sp", 64, 4, 25, "fp32")
        p = predictions.run_point("ec2", "r2sp", sc, 25, "fp32")
        self.assertLess(p.iterations_per_s, 1 / (0.0328 + sc.calibration.op_overhead_s))
        self.assertGreater(p.mean_iteration_s, 64 * 0.0328)


if __name__ == "__main__":
    junit_main.main()
