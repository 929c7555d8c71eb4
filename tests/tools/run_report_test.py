"""tools/run_report on metrics files written here: the per-worker means and medians of each
phase, exactly, and the error for a directory without metrics."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import junit_main

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                      "run_report")


def write_metrics(run_dir, worker, pushes_ms):
    """One iteration row per push time: compute 10 ms, wait 1 ms, pull 2 ms, batch 8, one
    iteration a second; and an evaluation record, which the report leaves out."""
    with open(os.path.join(run_dir, f"metrics_worker{worker}.jsonl"), "w") as f:
        for i, push in enumerate(pushes_ms):
            f.write(json.dumps({"worker": worker, "clock": i + 1, "batch": 8, "compute_s": 0.010,
                                "wait_s": 0.001, "push_s": push / 1e3, "pull_s": 0.002,
                                "t": 1000.0 + i}) + "\n")
        f.write(json.dumps({"worker": worker, "event": "eval", "test_accuracy": 0.5,
                            "t": 2000.0}) + "\n")


def report(run_dir, *args):
    p = subprocess.run([sys.executable, SCRIPT, run_dir, *args], capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout.splitlines(), p.stderr


class RunReportTest(unittest.TestCase):
    def test_means_and_medians_per_worker(self):
        with tempfile.TemporaryDirectory() as run_dir:
            # Worker 0: one slow push among five, so its mean push is far above its median.
            write_metrics(run_dir, 0, [1, 1, 1, 2, 45])
            write_metrics(run_dir, 1, [3, 3, 3, 3, 3])
            status, lines, err = report(run_dir, "--skip=0")
        self.assertEqual(status, 0, err)
        self.assertEqual(lines, [
            "per iteration (ms):           compute    wait    push    pull   batch  samples/s"
            "  finished (s)",
            "worker  0,      5 iterations:    10.0     1.0    10.0     2.0     8.0          8"
            "           4.0",
            "worker  1,      5 iterations:    10.0     1.0     3.0     2.0     8.0          8"
            "           4.0",
            "median per iteration (ms):    compute    wait    push    pull",
            "worker  0:                       10.0     1.0     1.0     2.0",
            "worker  1:                       10.0     1.0     3.0     2.0",
        ])

    def test_skip_leaves_out_the_first_iterations(self):
        with tempfile.TemporaryDirectory() as run_dir:
            write_metrics(run_dir, 0, [50, 50, 4, 4, 6])
            status, lines, err = report(run_dir, "--skip=2")
        self.assertEqual(status, 0, err)
        self.assertEqual(lines[1], "worker  0,      5 iterations:    10.0     1.0     4.7     2.0"
                                   "     8.0          8           4.0")
        self.assertEqual(lines[3], "worker  0:                       10.0     1.0     4.0     2.0")

    def test_no_metrics_is_an_error(self):
        with tempfile.TemporaryDirectory() as run_dir:
            status, lines, err = report(run_dir)
        self.assertEqual((status, lines), (1, []))
        self.assertEqual(err.strip(), f"run_report: error: no metrics_workerN.jsonl in {run_dir}")


if __name__ == "__main__":
    junit_main.main()
