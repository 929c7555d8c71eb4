"""tools/pylib/job_summary.py: the iteration summary, summary.json's contents from the
scheduler's stats and the job's Outcome, and the merged timeline."""

import json
import os
import tempfile
import types
import unittest

from pylib.analysis import summary as job_summary
import junit_main


def row(compute, wait, push, pull, gap):
    return {"compute_s": compute, "wait_s": wait, "push_s": push, "pull_s": pull, "gap_s": gap}


class IterationSummaryTest(unittest.TestCase):
    def test_no_iterations(self):
        self.assertEqual(job_summary.iteration_summary({}), {})
        self.assertEqual(job_summary.iteration_summary({0: []}), {})

    def test_wait_adds_to_the_iteration_only_as_an_r2sp_slot_wait(self):
        by_worker = {0: [row(0.010, 0.004, 0.002, 0.002, 0.0)],   # 14 ms: parked in the pull
                     1: [row(0.010, 0.004, 0.002, 0.002, 0.001)]}  # 18 ms: waited for a slot
        got = job_summary.iteration_summary(by_worker)
        self.assertEqual(got["mean_iteration_seconds"], 0.016)
        self.assertEqual(got["wait_fraction"], round(0.008 / 0.032, 4))

    def test_zero_time(self):
        got = job_summary.iteration_summary({0: [row(0, 0, 0, 0, 0)]})
        self.assertEqual(got, {"mean_iteration_seconds": 0.0, "wait_fraction": 0.0})


STATS = {
    "workers": [
        # A dead worker's counters are the scheduler's zeros: its 0 accuracy is no result.
        {"model": "cnn", "epochs": 2, "test_accuracy": 0, "samples": 600, "iterations": 10,
         "bytes_pushed": 100, "bytes_pulled": 200, "state": "dead", "push_codec": "fp16",
         "pull_codec": "fp32"},
        {"model": "cnn", "epochs": 2, "test_accuracy": 0.875, "samples": 400, "iterations": 12,
         "bytes_pushed": 50, "bytes_pulled": 70, "state": "finished", "push_codec": "fp32",
         "pull_codec": "fp32"},
    ],
    "servers": [{}],
}


class SummariseTest(unittest.TestCase):
    def summarise(self, stats, **more):
        return job_summary.summarise(stats, mode="bsp", workers=2, servers=1, run_dir="/r",
                                     wall=4.0, **more)

    def test_from_the_schedulers_stats(self):
        s = self.summarise(STATS)
        self.assertEqual(list(s)[:15], ["model", "epochs", "final_test_accuracy",
                                        "samples_per_second", "mode", "workers", "servers",
                                        "iterations", "wall_seconds", "bytes_pushed",
                                        "bytes_pulled", "dead_workers", "push_codecs",
                                        "pull_codecs", "run_dir"])
        self.assertEqual(s["push_codecs"], ["fp16", "fp32"])  # workers may differ
        self.assertEqual(s["pull_codecs"], ["fp32"])
        self.assertEqual(s["model"], "cnn")
        self.assertEqual(s["epochs"], 2)
        self.assertEqual(s["final_test_accuracy"], 0.875)  # not the dead worker's 0
        self.assertEqual(s["samples_per_second"], 250.0)
        self.assertEqual(s["iterations"], 12)
        self.assertEqual((s["bytes_pushed"], s["bytes_pulled"]), (150, 270))
        self.assertEqual(s["dead_workers"], 1)
        self.assertEqual((s["mode"], s["workers"], s["servers"], s["run_dir"]), ("bsp", 2, 1, "/r"))

    def test_recovery_adds_the_retries_and_takes_the_largest_rollback(self):
        stats = {"workers": [{"retried_requests": 3, "rolled_back_steps": 41.5},
                             {"retried_requests": 2, "rolled_back_steps": 57.25}, {}],
                 "servers": [{"repeated_pushes": 1}, {"repeated_pushes": 2}]}
        self.assertEqual(self.summarise(stats)["recovery"],
                         {"retried_requests": 5, "repeated_pushes": 3, "updates_lost_steps": 57.25})
        self.assertEqual(self.summarise(STATS)["recovery"],
                         {"retried_requests": 0, "repeated_pushes": 0, "updates_lost_steps": 0})

    def test_without_stats(self):
        s = self.summarise({"workers": [], "servers": []})
        self.assertEqual(s["model"], "")
        self.assertIsNone(s["final_test_accuracy"])
        self.assertIsNone(s["samples_per_second"])
        self.assertEqual((s["epochs"], s["iterations"], s["dead_workers"]), (0, 0, 0))
        self.assertEqual((s["push_codecs"], s["pull_codecs"]), ([], []))

    def test_iterations_cpu_and_batching_follow(self):
        stats = dict(STATS, batching={"workers": [
            {"batch": 48, "ideal": 47.6, "throughput": 1234.56},
            {"batch": 16, "ideal": 16.4, "throughput": 400.04}]})
        s = self.summarise(stats, iterations={"mean_iteration_seconds": 0.1},
                           cpu_use={"cpu_cores": {"worker0": 1.0}, "machine_cores": 2})
        self.assertEqual(list(s)[16:], ["mean_iteration_seconds", "cpu_cores", "machine_cores",
                                        "batch_sizes", "ideal_batch_sizes", "throughputs"])
        self.assertEqual(s["batch_sizes"], [48, 16])
        self.assertEqual(s["ideal_batch_sizes"], [47.6, 16.4])
        self.assertEqual(s["throughputs"], [1234.6, 400.0])


class RunDirectoryTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def read_json(self, name):
        with open(os.path.join(self.dir, name)) as f:
            return json.load(f)

    def test_merge_timelines_takes_replacements_in_order(self):
        for name, tid in (("timeline_worker1.r1.json", "1.r1"), ("timeline_worker0.json", "0"),
                          ("timeline_worker1.json", "1"), ("timeline_worker1.r10.json", "1.r10"),
                          ("timeline_worker1.r2.json", "1.r2"), ("timeline_worker2.r1.json", "2"),
                          ("timeline_worker1.rx.json", "?")):
            self.write(name, json.dumps([{"name": "push", "tid": tid}]))
        job_summary.merge_timelines(self.dir, 2)  # worker2 belongs to another run
        self.assertEqual([e["tid"] for e in self.read_json("timeline.json")["traceEvents"]],
                         ["0", "1", "1.r1", "1.r2", "1.r10"])

    def test_merge_timelines_skips_unfinished_files(self):
        self.write("timeline_worker0.json", json.dumps([{"name": "push", "tid": 0}]))
        self.write("timeline_worker1.json", '[{"name": "push", "tid": 1},')  # died mid-run
        self.write("timeline_worker2.json", json.dumps([{"name": "pull", "tid": 2}]))
        job_summary.merge_timelines(self.dir, 4)
        merged = self.read_json("timeline.json")
        self.assertEqual([e["tid"] for e in merged["traceEvents"]], [0, 2])
        self.assertEqual(merged["displayTimeUnit"], "ms")

    def test_no_timelines_no_file(self):
        job_summary.merge_timelines(self.dir, 2)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "timeline.json")))

    def test_read_stats(self):
        self.assertEqual(job_summary.read_stats(os.path.join(self.dir, "stats.json")),
                         {"workers": [], "servers": []})
        self.write("stats.json", json.dumps(STATS))
        self.assertEqual(job_summary.read_stats(os.path.join(self.dir, "stats.json")), STATS)

    def test_write_summary(self):
        self.write("stats.json", json.dumps(STATS))
        self.write("metrics_worker0.jsonl", json.dumps(dict(row(0.01, 0, 0, 0, 0), worker=0, t=1.0))
                   + "\n" + json.dumps({"worker": 0, "event": "eval", "t": 2.0}) + "\n")
        self.write("timeline_worker0.json", "[]")
        args = types.SimpleNamespace(run_dir=self.dir, workers=2, servers=1, sync="r2sp")
        summary = job_summary.write_summary(args, 2.0, {"machine_cores": 2},
                                            os.path.join(self.dir, "stats.json"))
        self.assertEqual(self.read_json("summary.json"), summary)
        self.assertEqual(summary["mode"], "r2sp")
        self.assertEqual(summary["samples_per_second"], 500.0)
        self.assertEqual(summary["mean_iteration_seconds"], 0.01)  # the eval record is no iteration
        self.assertEqual(summary["machine_cores"], 2)
        # A completed job with nothing lost (the remote backends'), not resumed, no auth.
        self.assertEqual({k: summary[k] for k in list(summary)[-8:]},
                         {"completed": True, "scheduler_status": None, "events": [],
                          "restarts": {"worker": 0, "server": 0},
                          "deaths": {"worker": 0, "server": 0}, "resumed": False, "attempt": 1,
                          "auth": "none"})

    def test_write_summary_names_the_auth_mode_only(self):
        args = types.SimpleNamespace(run_dir=self.dir, workers=2, servers=1, sync="bsp",
                                     auth="curve", keys_dir="/secret/place")
        summary = job_summary.write_summary(args, 2.0, {}, os.path.join(self.dir, "stats.json"))
        self.assertEqual(summary["auth"], "curve")
        self.assertNotIn("/secret/place", json.dumps(summary))

    def test_write_summary_with_the_outcome(self):
        args = types.SimpleNamespace(run_dir=self.dir, workers=2, servers=1, sync="bsp",
                                     resume=self.dir, attempt=3)
        outcome = job_summary.Outcome(
            completed=False, scheduler_status=-9,
            events=[job_summary.Event(1.25, "worker1", "died", 1),
                    job_summary.Event(1.3, "worker1.r1", "restarted", 1),
                    job_summary.Event(2.0, "server0", "stopped", -15)],
            restarts={"worker": 1, "server": 0}, deaths={"worker": 1, "server": 0})
        summary = job_summary.write_summary(args, 2.0, {}, os.path.join(self.dir, "stats.json"),
                                            outcome)
        self.assertEqual(self.read_json("summary.json"), summary)
        self.assertEqual((summary["completed"], summary["scheduler_status"]), (False, -9))
        self.assertEqual(summary["events"][1],
                         {"t": 1.3, "process": "worker1.r1", "event": "restarted", "status": 1})
        self.assertEqual((summary["restarts"]["worker"], summary["deaths"]["worker"]), (1, 1))
        self.assertEqual((summary["resumed"], summary["attempt"]), (True, 3))
        self.assertEqual(summary["mode"], "bsp")  # the job's keys stay


if __name__ == "__main__":
    junit_main.main()
