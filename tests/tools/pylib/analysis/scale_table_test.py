"""tools/pylib/analysis/scale_table.py: one job's measurements from the scheduler's stats JSON,
the medians and spread over repeats, and the table."""

import unittest

import junit_main
from pylib.analysis import scale_table


def stats(grants=2, bound=1, dead=True):
    """A stats JSON as the scheduler writes it (only what scale_table reads)."""
    return {"scale": {
        "all_registered_unix_us": 1_000_002_500_000, "heartbeats_per_s": 64.5,
        "barrier_release_ms": {"count": 3, "p50_ms": 0.2, "p99_ms": 0.9},
        "dead_workers": [{"rank": 3, "removed_unix_us": 1_000_010_000_000}] if dead else [],
        "slots": {"grant_latency_ms": {"count": grants, "p50_ms": 0.1, "p99_ms": 0.8},
                  "gap_planned_mean_ms": 2.0, "gap_achieved_mean_ms": 2.5,
                  "gap_bound_ratio": {"count": bound, "p50": 1.01, "p99": 1.2},
                  "max_holders": 1}}}


class MeasurementsTest(unittest.TestCase):
    def test_an_r2sp_job_with_a_kill(self):
        m = scale_table.measurements(stats(), launched=1_000_000.0, killed=1_000_007.0, cpu_s=3.0,
                                     rss_mb=40.0, wall_s=12.0, workers=100, iterations=30)
        self.assertEqual(m["registered_s"], 2.5)
        self.assertEqual(m["scheduler_cpu_ms_per_worker_iter"], 1.0)
        self.assertEqual(m["scheduler_cpu_ms_per_worker_s"], 2.5)  # 3 s / 100 workers / 12 s
        self.assertEqual((m["grant_p50_ms"], m["grant_p99_ms"]), (0.1, 0.8))
        self.assertEqual((m["gap_planned_ms"], m["gap_achieved_ms"]), (2.0, 2.5))
        self.assertEqual((m["gap_bound_ratio_p50"], m["gap_bound_ratio_p99"]), (1.01, 1.2))
        self.assertEqual(m["dead_removed_s"], 3.0)
        self.assertEqual(m["max_holders"], 1)

    def test_without_slots_or_a_kill_those_figures_are_none(self):
        m = scale_table.measurements(stats(grants=0, bound=0, dead=False), 1_000_000.0, None,
                                     1.0, 10.0, 5.0, 4, 10)
        for key in ("grant_p50_ms", "gap_planned_ms", "gap_bound_ratio_p99", "max_holders",
                    "dead_removed_s"):
            self.assertIsNone(m[key], key)

    def test_a_scheduler_without_instrumentation_is_an_error_saying_so(self):
        with self.assertRaisesRegex(ValueError, "no \"scale\" object: rebuild the scheduler"):
            scale_table.measurements({"workers": []}, 0, None, 0, 0, 0, 1, 1)


class SummaryTest(unittest.TestCase):
    def test_medians_spread_and_the_table(self):
        runs = [{"registered_s": v, "wall_s": 10.0, "grant_p50_ms": None}
                for v in (1.0, 3.0, 2.0)]
        s = scale_table.summarize(runs)
        self.assertEqual(s["registered_s"], {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3})
        self.assertIsNone(s["grant_p50_ms"])
        full = {key: None for key, _, _ in scale_table.COLUMNS}
        full.update(s)
        lines = scale_table.table([("r2sp_64", full)]).splitlines()
        self.assertTrue(lines[0].startswith("job      reg s"), lines[0])
        self.assertTrue(lines[1].startswith("r2sp_64  2.00 (1.00-3.00)  -"), lines[1])
        self.assertTrue(lines[1].endswith("10.0"), lines[1])


if __name__ == "__main__":
    junit_main.main()
