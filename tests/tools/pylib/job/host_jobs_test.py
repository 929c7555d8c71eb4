"""tools/pylib/job/host_jobs.py: a host job's command line and its figures from what it left."""

import os
import tempfile
import unittest

from pylib.job import host_jobs
import junit_main


def row(worker, t, push_bytes=100, pull_bytes=100, compute=0.5, push=0.01, pull=0.02):
    return {"worker": worker, "t": t, "batch": 32, "compute_s": compute, "push_s": push,
            "pull_s": pull, "push_bytes": push_bytes, "pull_bytes": pull_bytes}


class LaunchArgvTest(unittest.TestCase):
    def test_pinned_launch_of_threaded_workers(self):
        job = host_jobs.HostJob(workers=256, mode="r2sp", compute_ms=500, iterations=20)
        argv = host_jobs.launch_argv(job, "/bins", "/run")
        self.assertEqual(argv[:3], ["taskset", "-c", "0,1"])
        self.assertTrue(argv[3].endswith("tools/launch"))
        self.assertEqual(argv[4:], [
            "--servers=4", "--workers=256", "--workers_per_process=64", "--sync=r2sp",
            "--quiet", "--run_dir=/run", "--bin_dir=/bins",
            "--scheduler_flags=--partition_bytes=16384 --r2sp_gap_holds=2",
            "--worker_flags=--model_mb=0.0625 --layers=4 --iterations=20 --compute_ms=500 "
            "--log_every=100000"])
        self.assertEqual(job.name(), "r2sp_256")


class FiguresTest(unittest.TestCase):
    def test_steady_bytes_per_s(self):
        # Iterations ending 1 s apart; the earliest third iteration's end starts the window
        # (3.0 and 3.5: 3.0), and every iteration ending after it counts: worker 0's at 4.0,
        # worker 1's at 3.5 and 4.5 (the end).
        rows = [row(0, t) for t in (1.0, 2.0, 3.0, 4.0)] + [row(1, t) for t in (1.5, 2.5, 3.5, 4.5)]
        self.assertEqual(host_jobs.steady_bytes_per_s(rows), 3 * 200 / 1.5)
        # A worker with no iteration past its third sets no bound but its iterations in the
        # window count (3.5); none at all: 0.
        self.assertEqual(host_jobs.steady_bytes_per_s(rows[:4] + rows[4:7]), 2 * 200 / 1.0)
        self.assertEqual(host_jobs.steady_bytes_per_s(rows[:3]), 0.0)

    def test_steady_bytes_count_a_late_workers_first_iterations(self):
        # Worker 1 starts late (its iterations at 3.2, 3.4, 3.6, 3.8): the window is 3.0..4.0
        # and it moved 4 iterations' bytes in it, worker 0 one. Counting each worker's own
        # steady iterations only (0's at 4.0, 1's at 3.8) would give 2 x 200 per second.
        rows = ([row(0, t) for t in (1.0, 2.0, 3.0, 4.0)]
                + [row(1, t) for t in (3.2, 3.4, 3.6, 3.8)])
        self.assertEqual(host_jobs.steady_bytes_per_s(rows), 5 * 200 / 1.0)

    def test_figures(self):
        rows = ([row(0, float(t), compute=0.4, push=0.01) for t in range(1, 6)]
                + [row(1, float(t), compute=0.6, push=0.03) for t in range(1, 6)])
        summary = {"cpu_cores": {"scheduler": 0.1, "server0": 0.2, "worker0": 0.7},
                   "wall_seconds": 10.0, "bytes_pushed": 4e9, "bytes_pulled": 6e9,
                   "machine_busy_cores": 1.9}
        stats = {"scale": {"slots": {"gap_achieved_mean_ms": 2.5}}}
        f = host_jobs.figures(rows, summary, stats)
        self.assertEqual(f.iterations_per_s, 2.0)          # 2 steady iterations in 2 s, twice
        self.assertAlmostEqual(f.compute_s, 0.5)
        self.assertAlmostEqual(f.compute_cv, 0.2)
        self.assertAlmostEqual(f.push_s, 0.02)
        self.assertAlmostEqual(f.pull_s, 0.02)
        self.assertAlmostEqual(f.cpu_ns_per_byte, 1.0)     # 1 core x 10 s over 1e10 bytes
        self.assertEqual((f.job_cores, f.machine_busy_cores, f.gap_achieved_ms),
                         (1.0, 1.9, 2.5))
        self.assertEqual(f.bytes_per_s, 2 * 2 * 200 / 2.0)

    def test_too_few_iterations(self):
        summary = {"cpu_cores": {}, "wall_seconds": 1.0, "bytes_pushed": 1, "bytes_pulled": 1}
        with self.assertRaisesRegex(ValueError, "too few iterations"):
            host_jobs.figures([row(0, 1.0), row(0, 2.0)], summary, {})


class RunTest(unittest.TestCase):
    def test_a_failed_job_says_so_and_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            run_dir = os.path.join(d, "run")
            with self.assertRaisesRegex(RuntimeError, "asp_2: tools/launch exited"):
                host_jobs.run(host_jobs.HostJob(workers=2, mode="asp"),
                              os.path.join(d, "no_binaries"), run_dir, timeout_s=60)
            self.assertFalse(os.path.exists(run_dir))


if __name__ == "__main__":
    junit_main.main()
