"""tools/pylib/job/worker_processes.py: how a job's workers are cut into threaded worker
processes, the commands tools/launch runs for them, and every refusal with its message."""

import argparse
import unittest

import junit_main
from pylib.job import local_commands, worker_processes
from pylib.job.worker_processes import WorkerProcess


def job_args(**changes):
    """tools/launch's options as parse_args leaves them for a local job, with `changes`."""
    args = dict(servers=1, workers=10, workers_per_process=4, worker_flags="--model_mb=0.25",
                worker_flags_for=[], worker_cmd="", worker_cmd_for=[], ddp_cmd="",
                backend="local", cluster="", max_restarts="0", run_dir="/run", server_flags="",
                auth="none", keys_dir="", resume="", checkpoint_every="")
    args.update(changes)
    return argparse.Namespace(**args)


class PlanTest(unittest.TestCase):
    def test_processes_take_per_process_workers_and_the_last_the_rest(self):
        self.assertEqual(worker_processes.plan(10, 4), [
            WorkerProcess(0, 0, 4), WorkerProcess(1, 4, 4), WorkerProcess(2, 8, 2)])
        self.assertEqual(len(worker_processes.plan(1024, 64)), 16)
        self.assertEqual(worker_processes.plan(2, 1), [WorkerProcess(0, 0, 1),
                                                       WorkerProcess(1, 1, 1)])

    def test_zero_per_process_is_refused(self):
        with self.assertRaisesRegex(ValueError, "^--workers_per_process must be at least 1$"):
            worker_processes.plan(4, 0)


class CheckTest(unittest.TestCase):
    def test_synthetic_local_jobs_pass(self):
        worker_processes.check(job_args())
        worker_processes.check(job_args(worker_flags="--model=synthetic --iterations=3"))
        # One per process takes everything, real models included.
        worker_processes.check(job_args(workers_per_process=1, worker_flags="--model=cnn"))

    def test_refusals_say_why(self):
        for changes, message in (
                (dict(worker_flags="--model=cnn"),
                 "--workers_per_process runs synthetic workers only (--model=cnn loads its data "
                 "and network once per process): leave it at 1, or train --model=synthetic"),
                (dict(worker_cmd="python3 train.py"),
                 "--workers_per_process cannot run Python workers (--worker_cmd): each of its "
                 "processes runs the worker binary for several workers at once"),
                (dict(worker_flags_for=["3:--compute_slowdown=2"]),
                 "--workers_per_process cannot run flags for one worker (--worker_flags_for)"),
                (dict(ddp_cmd="python3 x.py"), "--workers_per_process cannot run a DDP job"),
                (dict(backend="ssh", cluster="c.toml"),
                 "--workers_per_process is for jobs on this machine (--backend=local without "
                 "--cluster)"),
                (dict(max_restarts="2"),
                 "--workers_per_process cannot take --max_restarts: a replacement would "
                 "restart every worker of the dead process"),
                (dict(workers_per_process=0), "--workers_per_process must be at least 1")):
            with self.subTest(changes=changes):
                with self.assertRaises(ValueError) as e:
                    worker_processes.check(job_args(**changes))
                self.assertTrue(str(e.exception).startswith(message), str(e.exception))


class CommandsTest(unittest.TestCase):
    def test_each_process_runs_its_count_of_workers_with_files_of_its_own(self):
        binaries = {"server": "/b/server", "worker": "/b/worker"}
        commands = local_commands.node_commands(job_args(), binaries,
                                                lambda name: ["--bind=tcp://127.0.0.1:*"], "EP")
        self.assertEqual([name for name, _, _ in commands],
                         ["server0", "worker0", "worker1", "worker2"])
        self.assertEqual(commands[3][1], [
            "/b/worker", "--scheduler=EP", "--bind=tcp://127.0.0.1:*",
            "--metrics=/run/metrics_worker2.jsonl", "--timeline=/run/timeline_worker2.json",
            "--workers_per_process=2", "--model_mb=0.25"])
        self.assertIn("--workers_per_process=4", commands[1][1])


if __name__ == "__main__":
    junit_main.main()
