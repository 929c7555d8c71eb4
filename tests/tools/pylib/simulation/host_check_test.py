"""tools/pylib/simulation/host_check.py: this host's calibration from the calibration jobs, and
the simulator against the real jobs of tools/simulate_data/host_runs.json: every entry expected
to match within 10% of its measured iterations/s (docs/RESULTS.md#many-workers-the-simulator)."""

import copy
import types
import unittest

from pylib.simulation import host_check
import junit_main

# Entries documented as not matched (docs/RESULTS.md#many-workers-the-simulator), each with its
# note: none in the data set of 2026-11-27 14:33 (ring and saturate calibration jobs at each
# worker count).
NOT_MATCHED = set()


def figures(**kw):
    base = dict(job_cores=1.2, bytes_per_s=2e8, push_s=0.001, pull_s=0.0008,
                gap_achieved_ms=1.6, iterations_per_s=100.0)
    base.update(kw)
    return types.SimpleNamespace(**base)


class CalibrateTest(unittest.TestCase):
    def test_lone_op(self):
        # 4 shares of 16 KiB at 10 ns a byte: in 4 rounds on 1 core, 2 on 2.
        self.assertAlmostEqual(host_check.lone_op_s(1, 4, 16384, 1e-8), 4 * 16384e-8)
        self.assertAlmostEqual(host_check.lone_op_s(2, 4, 16384, 1e-8), 2 * 16384e-8)
        self.assertAlmostEqual(host_check.lone_op_s(3, 4, 16384, 1e-8), 2 * 16384e-8)

    def test_calibration(self):
        cal = host_check.calibrate(figures(), figures(), servers=4, model_bytes=65536)
        self.assertEqual(cal.host_cores, 1)                   # 1.2 cores, rounded
        self.assertAlmostEqual(cal.host_cpu_s_per_byte, 1 / 2e8)
        # The ring job's mean op, 0.9 ms, less the model's 4 x 16 KiB x 5 ns = 0.32768 ms.
        self.assertAlmostEqual(cal.op_overhead_s, 0.0009 - 4 * 16384 * 5e-9)
        self.assertAlmostEqual(cal.control_s, (0.0016 - 0.001) / 2)
        self.assertEqual((cal.link_efficiency, cal.server_cpu_s_per_byte), (1.0, 0.0))
        two = host_check.calibrate(figures(job_cores=1.7), figures(), 4, 65536)
        self.assertEqual(two.host_cores, 2)
        self.assertAlmostEqual(two.host_cpu_s_per_byte, 2 / 2e8)

    def test_overheads_never_negative(self):
        cal = host_check.calibrate(figures(bytes_per_s=1e6),
                                   figures(push_s=0.0007, pull_s=0.0, gap_achieved_ms=0.5),
                                   4, 65536)
        self.assertEqual((cal.op_overhead_s, cal.control_s), (0.0, 0.0))

    def test_saturating_jobs_run_long_enough_to_be_steady(self):
        self.assertEqual([host_check.saturate_iterations(w) for w in (16, 64, 256, 1024, 4096)],
                         [240, 60, 15, 10, 10])
        self.assertEqual([host_check.ring_iterations(w) for w in (16, 64, 256, 1024)],
                         [160, 40, 10, 8])

    def test_missing_figures(self):
        with self.assertRaisesRegex(ValueError, "rerun them"):
            host_check.calibrate(figures(bytes_per_s=0), figures(), 4, 65536)


class RecordedRunsTest(unittest.TestCase):
    def test_within_ten_percent(self):
        data = host_check.load()
        self.assertGreaterEqual(len(data["entries"]), 6)
        for entry in data["entries"]:
            if not entry.get("matched", True):
                continue
            with self.subTest(entry=entry["name"]):
                c = host_check.check_entry(data, entry)
                self.assertLessEqual(abs(c.error), host_check.TOLERANCE,
                                     f"{c.name}: simulated {c.simulated}, measured {c.measured}")

    def test_only_the_documented_entries_are_exempt(self):
        data = host_check.load()
        exempt = {e["name"] for e in data["entries"] if not e.get("matched", True)}
        self.assertEqual(exempt, NOT_MATCHED)
        for e in data["entries"]:
            self.assertEqual(len(e["runs"]), 3, e["name"])     # medians of 3
            if e["name"] in exempt:
                self.assertIn("not matched", e["note"])

    def test_the_recorded_jobs_ran_with_the_papers_gap(self):
        """The data set predates --r2sp_gap_holds: its jobs simulate without the cap; a job
        that records its gap_holds simulates with it."""
        job = host_check.load()["entries"][0]["job"]
        self.assertNotIn("gap_holds", job)
        self.assertEqual(host_check.scenario(job, None, 2.0, 0.0).gap_holds, 0)
        self.assertEqual(host_check.scenario({**job, "gap_holds": 2}, None, 2.0, 0.0).gap_holds, 2)

    def test_a_wrong_measurement_fails(self):
        data = host_check.load()
        entry = copy.deepcopy(data["entries"][0])
        entry["figures"]["iterations_per_s"] *= 1.2
        self.assertGreater(abs(host_check.check_entry(data, entry).error), host_check.TOLERANCE)

    def test_a_missing_calibration_job_is_named(self):
        data = copy.deepcopy(host_check.load())
        del data["calibration_jobs"]["ring_64"]
        with self.assertRaisesRegex(ValueError, "no calibration job ring_64"):
            host_check.check_entry(data, data["entries"][0])


if __name__ == "__main__":
    junit_main.main()
