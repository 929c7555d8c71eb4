"""tools/pylib/run_files.py: reading the workers' metrics files (iteration rows, evaluation
records, torn lines, missing directories) and the median."""

import json
import os
import tempfile
import unittest

import junit_main
from pylib.analysis.run_files import device_copies, evaluations, median, worker_metrics


def iteration(worker, t, batch=64):
    return {"worker": worker, "clock": 0, "epoch": 0, "batch": batch, "compute_s": 0.01,
            "wait_s": 0.0, "push_s": 0.002, "pull_s": 0.003, "push_bytes": 100,
            "pull_bytes": 100, "loss": 1.0, "gap_s": 0.0, "t": t}


def evaluation(worker, epoch, accuracy, elapsed, t):
    return {"worker": worker, "event": "eval", "epoch": epoch, "test_accuracy": accuracy,
            "test_loss": 0.4, "train_loss": 0.5, "elapsed_s": elapsed, "t": t}


class RunDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, rows, tail=""):
        with open(os.path.join(self.dir, name), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
            f.write(tail)


class WorkerMetricsTest(RunDirTest):
    def test_rows_by_worker_in_time_order(self):
        self.write("metrics_worker0.jsonl", [iteration(0, 3.0), iteration(0, 1.0), iteration(0, 2.0)])
        self.write("metrics_worker1.jsonl", [iteration(1, 1.5)])
        got = worker_metrics(self.dir)
        self.assertEqual(sorted(got), [0, 1])
        self.assertEqual([r["t"] for r in got[0]], [1.0, 2.0, 3.0])
        self.assertEqual([r["t"] for r in got[1]], [1.5])

    def test_evaluation_records_are_left_out(self):
        self.write("metrics_worker0.jsonl",
                   [iteration(0, 1.0), evaluation(0, 1, 0.8, 30.0, 1.5), iteration(0, 2.0)])
        got = worker_metrics(self.dir)
        self.assertEqual([r["t"] for r in got[0]], [1.0, 2.0])
        self.assertTrue(all("event" not in r for r in got[0]))

    def test_torn_and_blank_lines_are_skipped(self):
        self.write("metrics_worker0.jsonl", [iteration(0, 1.0)], tail='\n{"worker": 0, "clo')
        self.assertEqual(len(worker_metrics(self.dir)[0]), 1)

    def test_non_object_lines_are_skipped(self):
        self.write("metrics_worker0.jsonl", [iteration(0, 1.0)], tail="42\n[1, 2]\n")
        self.assertEqual(len(worker_metrics(self.dir)[0]), 1)

    def test_other_files_are_ignored(self):
        self.write("metrics_worker0.jsonl", [iteration(0, 1.0)])
        self.write("link_bytes.jsonl", [{"worker": 5, "t": 1.0}])
        self.write("metrics_worker1.json", [iteration(1, 1.0)])
        self.assertEqual(list(worker_metrics(self.dir)), [0])

    def test_missing_directory_gives_nothing(self):
        self.assertEqual(worker_metrics(os.path.join(self.dir, "absent")), {})

    def test_directory_without_metrics_gives_nothing(self):
        self.assertEqual(worker_metrics(self.dir), {})


class EvaluationsTest(RunDirTest):
    def test_only_evaluation_records_in_time_order_across_workers(self):
        self.write("metrics_worker0.jsonl",
                   [iteration(0, 1.0), evaluation(0, 2, 0.85, 60.0, 20.0),
                    evaluation(0, 1, 0.80, 30.0, 10.0)])
        self.write("metrics_worker1.jsonl", [evaluation(1, 1, 0.79, 31.0, 15.0), iteration(1, 2.0)])
        got = evaluations(self.dir)
        self.assertEqual([(e["worker"], e["epoch"]) for e in got], [(0, 1), (1, 1), (0, 2)])
        self.assertEqual(got[0]["test_accuracy"], 0.80)
        self.assertEqual(got[0]["elapsed_s"], 30.0)

    def test_other_events_are_not_evaluations(self):
        self.write("metrics_worker0.jsonl", [{"worker": 0, "event": "checkpoint", "t": 1.0}])
        self.assertEqual(evaluations(self.dir), [])
        self.assertEqual(worker_metrics(self.dir), {})

    def test_torn_evaluation_record_is_skipped(self):
        self.write("metrics_worker0.jsonl", [evaluation(0, 1, 0.8, 30.0, 10.0)],
                   tail='{"worker": 0, "event": "eval", "epoch": 2, "test_acc')
        self.assertEqual([e["epoch"] for e in evaluations(self.dir)], [1])

    def test_missing_directory_gives_nothing(self):
        self.assertEqual(evaluations(os.path.join(self.dir, "absent")), [])


class MedianTest(unittest.TestCase):
    def test_odd_count(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_even_count_averages_the_middle_two(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_none_values_are_left_out(self):
        self.assertEqual(median([None, 5, None, 1]), 3)

    def test_nothing_gives_none(self):
        self.assertIsNone(median([]))
        self.assertIsNone(median([None, None]))

    def test_single_value(self):
        self.assertEqual(median([0.7]), 0.7)


class DeviceCopiesTest(unittest.TestCase):
    def test_means_per_step_for_workers_with_device_copies(self):
        events = [
            {"name": "compute", "tid": 0, "ts": 0, "dur": 5000},
            {"name": "h2d_params", "tid": 0, "ts": 0, "dur": 1000},
            {"name": "d2h_grads", "tid": 0, "ts": 3000, "dur": 2000},
            {"name": "compute", "tid": 0, "ts": 9000, "dur": 5000},
            {"name": "h2d_params", "tid": 0, "ts": 9000, "dur": 3000},
            {"name": "d2h_grads", "tid": 0, "ts": 12000, "dur": 2000},
            {"name": "compute", "tid": 1, "ts": 0, "dur": 4000},  # a CPU worker: no copies
            {"name": "push", "tid": 1, "ts": 4000, "dur": 100},
        ]
        self.assertEqual(device_copies(events),
                         {0: {"compute": 2, "h2d_params": 2.0, "d2h_grads": 2.0}})
        self.assertEqual(device_copies([]), {})


if __name__ == "__main__":
    junit_main.main()
