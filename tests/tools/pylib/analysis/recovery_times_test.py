"""analysis/recovery_times.py: iterations' spans from metrics files, and per death the seconds
until every worker still training (a replacement included) finished an iteration begun after
it; and summary.json's recovery.after_deaths from a supervisor's Outcome."""

import json
import os
import shutil
import tempfile
import types
import unittest

from pylib.analysis import recovery_times
from pylib.analysis import summary as job_summary
from pylib.analysis.summary import Event
import junit_main

START = 1000.0


def line(t, compute=1.0, push=0.25, pull=0.25, wait=0.0, gap=0.0, **extra):
    return json.dumps(dict(worker=0, t=t, compute_s=compute, push_s=push, pull_s=pull,
                           wait_s=wait, gap_s=gap, **extra))


class RecoveryTimesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="recovery_times_test.")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, process, lines):
        with open(os.path.join(self.dir, f"metrics_{process}.jsonl"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def test_spans_count_the_slot_wait_only_in_r2sp_and_skip_evaluations_and_torn_lines(self):
        self.write("worker0", [line(1010.0), line(1012.0, wait=0.5, gap=0.1),
                               json.dumps({"event": "eval", "t": 1013.0}), '{"t": 10'])
        self.write("worker1.r1", [line(1020.0, wait=0.5)])
        with open(os.path.join(self.dir, "metrics_other.jsonl"), "w") as f:
            f.write(line(1.0) + "\n")
        self.assertEqual(recovery_times.metrics_by_process(self.dir),
                         {"worker0": [(1008.5, 1010.0), (1010.0, 1012.0)],
                          "worker1.r1": [(1018.5, 1020.0)]})
        self.assertEqual(recovery_times.metrics_by_process(os.path.join(self.dir, "none")), {})

    def test_a_worker_death_lasts_until_the_survivors_and_the_replacement_train(self):
        spans = {"worker0": [(1008.0, 1010.0), (1010.0, 1014.0), (1014.0, 1016.0)],  # stalled
                 "worker1": [(1008.0, 1010.0)],  # died at 1011
                 "worker1.r1": [(1013.5, 1015.0)],
                 "worker2": [(1009.0, 1011.5), (1011.5, 1013.0)]}
        events = [Event(11.0, "worker1", "died", -9), Event(11.2, "worker1.r1", "restarted", -9)]
        self.assertEqual(recovery_times.recoveries(events, START, spans),
                         [{"process": "worker1", "died_s": 11.0, "recovered_s": 5.0,
                           "replacement": "worker1.r1"}])

    def test_without_a_replacement_the_survivors_decide(self):
        spans = {"worker0": [(1008.0, 1010.0), (1010.0, 1014.0), (1014.0, 1016.0)],
                 "worker1": [(1008.0, 1010.0)],
                 "worker2": [(1009.0, 1011.5), (1011.5, 1013.0)]}
        events = [Event(11.0, "worker1", "died", -9)]
        self.assertEqual(recovery_times.recoveries(events, START, spans)[0]["recovered_s"], 5.0)

    def test_a_survivor_that_had_finished_does_not_count(self):
        spans = {"worker0": [(1009.0, 1012.0)],  # its last iteration: began before the death
                 "worker2": [(1011.5, 1013.0)]}
        events = [Event(11.0, "worker1", "died", -9)]
        self.assertEqual(recovery_times.recoveries(events, START, spans)[0]["recovered_s"], 2.0)

    def test_a_replacement_that_never_trained_means_no_recovery(self):
        spans = {"worker0": [(1012.0, 1013.0)]}
        events = [Event(11.0, "worker1", "died", -9), Event(11.2, "worker1.r1", "restarted", -9),
                  Event(30.0, "server0", "stopped", -15)]
        self.assertEqual(recovery_times.recoveries(events, START, spans),
                         [{"process": "worker1", "died_s": 11.0, "recovered_s": None,
                           "replacement": "worker1.r1"}])

    def test_a_server_death_lasts_until_every_worker_trains_again(self):
        # The replacement server has no metrics; the workers' first iterations after the death
        # wait for it.
        spans = {"worker0": [(1011.5, 1019.0)], "worker1": [(1012.0, 1017.0)]}
        events = [Event(11.0, "server1", "died", -9), Event(11.1, "server1.r1", "restarted", -9),
                  Event(12.0, "worker1", "died", 1)]
        got = recovery_times.recoveries(events, START, spans)
        self.assertEqual(got[0], {"process": "server1", "died_s": 11.0, "recovered_s": 8.0,
                                  "replacement": "server1.r1"})
        # A second death: worker1's own iterations do not count for it.
        self.assertEqual(got[1], {"process": "worker1", "died_s": 12.0, "recovered_s": None,
                                  "replacement": None})

    def test_write_summary_adds_after_deaths_for_a_supervised_job_only(self):
        self.write("worker0", [line(1013.0)])
        args = types.SimpleNamespace(run_dir=self.dir, workers=2, servers=1, sync="asp")
        stats = os.path.join(self.dir, "stats.json")
        events = [Event(11.0, "worker1", "died", -9)]
        supervised = job_summary.write_summary(
            args, 20.0, {}, stats, job_summary.Outcome(events=events, started_at=START))
        self.assertEqual(supervised["recovery"]["after_deaths"],
                         [{"process": "worker1", "died_s": 11.0, "recovered_s": 2.0,
                           "replacement": None}])
        unsupervised = job_summary.write_summary(args, 20.0, {}, stats,
                                                 job_summary.Outcome(events=events))
        self.assertNotIn("after_deaths", unsupervised["recovery"])


if __name__ == "__main__":
    junit_main.main()
