"""tools/pylib/soak.py: finding a job's processes and their RSS in a fake /proc, the RSS growth
after warm-up, the kill plan and victims, recovery from the metrics files, and the verdict."""

import os
import random
import tempfile
import unittest

import junit_main
from pylib.emulation import soak


class SoakTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def fake_proc(self, pid, argv, rss_kib=None, environ=None):
        d = os.path.join(self.dir, "proc", str(pid))
        os.makedirs(d)
        if environ is not None:
            with open(os.path.join(d, "environ"), "wb") as f:
                f.write(b"\0".join(f"{k}={v}".encode() for k, v in environ.items()) + b"\0")
        with open(os.path.join(d, "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in argv) + b"\0")
        if rss_kib is not None:
            with open(os.path.join(d, "status"), "w") as f:
                f.write(f"Name:\tx\nVmPeak:\t99 kB\nVmRSS:\t{rss_kib} kB\nThreads:\t4\n")

    def test_processes_of_the_run_and_their_rss(self):
        run = "/runs/soak_a"
        self.fake_proc(10, ["/bin/scheduler/scheduler", f"--stats_json={run}/stats.json"], 900)
        self.fake_proc(11, ["/bin/server/server", f"--checkpoint_dir={run}/checkpoints"], 1200)
        self.fake_proc(12, ["/bin/worker/worker", f"--metrics={run}/metrics_worker0.jsonl"])
        self.fake_proc(13, ["/bin/worker/worker", "--metrics=/runs/soak_b/metrics_worker0.jsonl"])
        self.fake_proc(14, ["/usr/bin/python3", "tools/launch", f"--run_dir={run}"])
        self.fake_proc(15, [f"{run}/worker"])  # the run's path as the program only
        # Python workers: their flags are in their environment, not on their command line.
        self.fake_proc(16, ["/usr/bin/python3", "train.py"], environ={
            "PATH": "/bin", "R2SP_WORKER_FLAGS": f"--scheduler=tcp://h:1 '--metrics={run}/m 1'"})
        self.fake_proc(17, ["/usr/bin/python3", "train.py"], environ={
            "R2SP_WORKER_FLAGS": "--metrics=/runs/soak_b/metrics_worker0.jsonl"})
        os.makedirs(os.path.join(self.dir, "proc", "self"))
        proc = os.path.join(self.dir, "proc")
        self.assertEqual(soak.job_processes(run, proc),
                         {10: "scheduler", 11: "server", 12: "worker", 16: "worker"})
        self.assertEqual(soak.rss_kib(11, proc), 1200)
        self.assertIsNone(soak.rss_kib(12, proc))  # no status file
        self.assertIsNone(soak.rss_kib(99, proc))  # gone

    def test_growth_counts_only_after_warm_up(self):
        self.assertAlmostEqual(soak.rss_growth([10, 50, 100, 100, 104, 102], warmup=3), 0.04)
        self.assertAlmostEqual(soak.rss_growth([100, 100, 100, 100], warmup=1), 0.0)
        self.assertIsNone(soak.rss_growth([100, 110, 120], warmup=1))  # too short a life
        self.assertIsNone(soak.rss_growth([0, 0, 0, 0, 0], warmup=1))

    def test_kill_plan_and_victims(self):
        rng = random.Random(4)
        times = soak.kill_times(600, 20, 60, rng)
        self.assertTrue(times)
        self.assertTrue(all(20 <= t < 580 for t in times), times)
        gaps = [b - a for a, b in zip(times, times[1:])]
        self.assertTrue(all(20 <= g <= 60 for g in gaps), gaps)
        self.assertEqual(soak.kill_times(30, 20, 60, rng), [])
        processes = {1: "scheduler", 2: "server", 3: "worker", 4: "worker"}
        for _ in range(20):
            self.assertIn(soak.pick_victim(processes, {"worker"}, rng), [(3, "worker"),
                                                                         (4, "worker")])
        both = {soak.pick_victim(processes, {"worker", "server"}, rng) for _ in range(50)}
        self.assertEqual(both, {(2, "server"), (3, "worker"), (4, "worker")})
        self.assertIsNone(soak.pick_victim({1: "scheduler"}, {"worker", "server"}, rng))

    def test_recovery_is_a_new_process_that_finished_an_iteration(self):
        def write(name, rows):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("".join('{"clock": %d}\n' % i for i in range(rows)))
                f.write('{"event": "eval", "test_accuracy": 0.5}\n')
        write("metrics_worker0.jsonl", 5)
        write("metrics_worker1.jsonl", 3)
        before = soak.metrics_files(self.dir)
        self.assertEqual(sorted(before.values()), [3, 5])  # evaluation records left out
        write("metrics_worker1.jsonl", 4)  # rewritten in place: the same file grows
        self.assertFalse(soak.recovered(before, soak.metrics_files(self.dir)))
        write("metrics_worker1.r1.jsonl", 0)
        self.assertFalse(soak.recovered(before, soak.metrics_files(self.dir)))
        write("metrics_worker1.r1.jsonl", 1)
        self.assertTrue(soak.recovered(before, soak.metrics_files(self.dir)))
        # A resumed attempt's file under an old name is a new inode.
        os.remove(os.path.join(self.dir, "metrics_worker0.jsonl"))
        write("metrics_worker0.jsonl", 2)
        self.assertTrue(soak.recovered({k: v for k, v in before.items()},
                                       soak.metrics_files(self.dir)))

    def test_a_server_kill_recovers_once_the_workers_go_on_past_their_inflight_iterations(self):
        def write(name, rows):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("".join('{"clock": %d}\n' % i for i in range(rows)))
        for w in range(3):
            write(f"metrics_worker{w}.jsonl", 10)
        before = soak.metrics_files(self.dir)
        for w in range(3):  # each finished the iteration it had in flight at the kill
            write(f"metrics_worker{w}.jsonl", 11)
        self.assertFalse(soak.recovered(before, soak.metrics_files(self.dir), "server", 3))
        write("metrics_worker0.jsonl", 12)  # one more: the replacement serves
        self.assertTrue(soak.recovered(before, soak.metrics_files(self.dir), "server", 3))

    def test_verdict_names_each_failed_check(self):
        good = {"accuracy": [0.8, 0.85], "kills": [{"role": "worker", "pid": 3, "at_s": 20,
                                                    "recovery_s": 4.0}],
                "longest_stall_s": 5, "rss": [{"role": "server", "pid": 2, "growth": 0.05},
                                              {"role": "worker", "pid": 3, "growth": 0.5}]}
        self.assertEqual(soak.verdict(good, 0.10, 60), [])
        bad = dict(good, accuracy=[0.85, 0.84], longest_stall_s=90,
                   kills=[{"role": "server", "pid": 2, "at_s": 30, "recovery_s": None}],
                   rss=[{"role": "scheduler", "pid": 1, "growth": 0.2}])
        failures = soak.verdict(bad, 0.10, 60)
        self.assertEqual(len(failures), 4, failures)
        unjudged = dict(good, rss=[{"role": "server", "pid": 2, "growth": None},
                                   {"role": "worker", "pid": 3, "growth": 0.01}])
        self.assertEqual(soak.verdict(unjudged, 0.10, 60),
                         ["RSS growth not judged: no scheduler or server lived past warm-up"])
        for text in ("accuracy did not rise", "no recovery from the kill of server 2",
                     "no progress for 90 s", "scheduler 1 RSS grew 20.0%"):
            self.assertTrue(any(text in f for f in failures), (text, failures))


if __name__ == "__main__":
    junit_main.main()
