"""job/recovery_runs.py: finding a run's process in /proc by its binary and an argument naming
the run (a fake /proc), counting iteration lines across metrics files, and a run's figures."""

import json
import os
import shutil
import tempfile
import unittest

from pylib.job import recovery_runs
from pylib.job.errors import JobError
import junit_main


class RecoveryRunsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="recovery_runs_test.")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def process(self, pid, *argv):
        os.makedirs(os.path.join(self.dir, "proc", str(pid)))
        with open(os.path.join(self.dir, "proc", str(pid), "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in argv) + b"\0")

    def test_find_wants_the_binary_and_the_runs_path_newest_first(self):
        self.process(10, "/b/worker", "--metrics=/r/run1/metrics_worker1.jsonl")
        self.process(12, "/b/worker", "--metrics=/r/run1/metrics_worker1.jsonl")
        self.process(11, "/b/worker", "--metrics=/r/run2/metrics_worker1.jsonl")
        self.process(13, "/b/server", "--checkpoint_dir=/r/run1/checkpoints")
        self.process(14, "python3", "/b/worker", "/r/run1/metrics_worker1.jsonl")
        os.makedirs(os.path.join(self.dir, "proc", "self"))
        proc = os.path.join(self.dir, "proc")
        self.assertEqual(recovery_runs.find("worker", "run1/metrics_worker1.jsonl", proc), [12, 10])
        self.assertEqual(recovery_runs.find("server", "run1/checkpoints", proc), [13])
        self.assertEqual(recovery_runs.find("server", "run2/checkpoints", proc), [])

    def test_iterations_add_up_every_matching_file_without_evaluations(self):
        for host, lines in (("a", ['{"t": 1}', '{"t": 2}', '{"event": "eval"}']), ("b", ['{"t": 1}'])):
            os.makedirs(os.path.join(self.dir, host))
            with open(os.path.join(self.dir, host, "metrics_worker0.jsonl"), "w") as f:
                f.write("\n".join(lines) + "\n")
        self.assertEqual(recovery_runs.iterations(os.path.join(self.dir, "*", "metrics_worker0.jsonl")), 3)
        self.assertEqual(recovery_runs.iterations(os.path.join(self.dir, "none", "*.jsonl")), 0)

    def test_figures_of_the_first_death_and_a_job_that_failed(self):
        path = os.path.join(self.dir, "summary.json")
        summary = {"completed": True, "recovery": {
            "updates_lost_steps": 20.0, "after_deaths": [
                {"process": "server0", "died_s": 5.0, "recovered_s": 3.25, "replacement": "server0.r1"},
                {"process": "worker1", "died_s": 9.0, "recovered_s": 1.0, "replacement": None}]}}
        with open(path, "w") as f:
            json.dump(summary, f)
        self.assertEqual(recovery_runs.figures(path), (3.25, 20.0))
        summary["completed"] = False
        with open(path, "w") as f:
            json.dump(summary, f)
        with self.assertRaisesRegex(JobError, "the job did not complete"):
            recovery_runs.figures(path)


if __name__ == "__main__":
    junit_main.main()
