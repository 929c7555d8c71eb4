"""tools/launch with the real binaries through failures: the mlp on Fashion-MNIST
keeps training when a worker is killed with SIGKILL (the survivors taking over its data from
the next epoch, in every mode, and a job resumed after that going on with the same epoch plans;
or its replacement, --max_restarts=1,
takes over the dead worker's data shard; in bsp and ssp at a clock boundary), a server killed with SIGKILL is replaced from its
checkpoint while the job goes on (--max_restarts=server:1; a bsp job resumes from the
checkpoints by itself instead), and a job stopped with SIGTERM (the
servers write checkpoints) completes with `tools/launch --resume=RUN_DIR` at the accuracy of an undisturbed
run (>= 0.80, as tests/integration/training_test.cc)."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main
from launched_worker import pid_of
from pylib.job.fault_runs import not_evaluating, steps_done

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
MNIST = "/usr/share/datasets/fashion-mnist"  # tools/install_deps: the workers' default --data_dir
WORKER = "--model=mlp --data=fashion-mnist --batch_size=64 --threads=1 --log_every=25"
NODE = "--heartbeat_ms=200"


def launch(args, run_dir):
    return subprocess.Popen([sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet",
                             "--run_dir=" + run_dir] + args,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def wait_for_steps(proc, run_dir, worker, steps, timeout=120):
    deadline = time.time() + timeout
    while steps_done(run_dir, worker) < steps:
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"worker{worker} never reached step {steps}: " + proc.stdout.read())
        time.sleep(0.1)


def wait_for_log(proc, path, pattern, timeout=120):
    """The first group of the first match of `pattern` in the file at `path`, as an int, once
    it is there."""
    deadline = time.time() + timeout
    while True:
        with contextlib.suppress(OSError), open(path) as f:
            found = re.search(pattern, f.read())
            if found:
                return int(found.group(1))
        if proc.poll() is not None or time.time() > deadline:
            raise AssertionError(f"no '{pattern}' in {path}: " + proc.stdout.read())
        time.sleep(0.1)


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


@unittest.skipUnless(os.path.isdir(MNIST), "Fashion-MNIST is not installed (tools/install_deps)")
class LaunchFaultsTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="launch_faults_")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_killed_worker_is_replaced_and_the_job_completes(self):
        self.replace_a_killed_worker("asp")

    def test_killed_bsp_worker_is_replaced_at_a_clock_boundary(self):
        log = self.replace_a_killed_worker("bsp")
        self.assertIn("resuming at step", log)

    def test_killed_ssp_worker_is_replaced_at_a_clock_boundary(self):
        log = self.replace_a_killed_worker("ssp")
        self.assertIn("resuming at step", log)

    def test_killed_r2sp_worker_is_replaced_in_the_ring(self):
        self.replace_a_killed_worker("r2sp")

    def replace_a_killed_worker(self, sync):
        """Kills worker 1 of 3 under --max_restarts=1; the job completes with its replacement;
        the replacement's log."""
        run_dir = os.path.join(self.dir, "killed-" + sync)
        proc = launch(["--servers=1", "--workers=3", "--sync=" + sync, "--max_restarts=1",
                       "--scheduler_flags=--heartbeat_timeout_ms=1000", "--server_flags=" + NODE,
                       f"--worker_flags={WORKER} {NODE} --epochs=10 --max_steps=1500"], run_dir)
        wait_for_steps(proc, run_dir, 1, 100)
        os.kill(pid_of(run_dir, 1), signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, out)
        s = summary(run_dir)
        self.assertTrue(s["completed"], s)
        self.assertEqual([e["event"] for e in s["events"] if e["process"].startswith("worker1")],
                         ["died", "restarted"], s["events"])
        self.assertEqual(s["deaths"]["worker"], 1)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        with open(os.path.join(run_dir, "scheduler.log")) as f:
            self.assertIn("data shard", f.read())
        with open(os.path.join(run_dir, "worker1.r1.log")) as f:
            log = f.read()
        self.assertIn("joined the running job", log)
        self.assertIn("done", log)
        # The evaluating worker's model files (worker --eval_only reads them).
        models = sorted(os.listdir(os.path.join(run_dir, "model")))
        self.assertTrue(models and all(m.startswith("model-step") for m in models), models)
        return log

    def test_killed_asp_worker_not_replaced_leaves_its_data_to_the_survivors(self):
        self.absorb_a_killed_worker("asp")

    def test_killed_ssp_worker_not_replaced_leaves_its_data_to_the_survivors(self):
        self.absorb_a_killed_worker("ssp")

    def test_killed_r2sp_worker_not_replaced_leaves_its_data_to_the_survivors(self):
        self.absorb_a_killed_worker("r2sp")

    def test_killed_eawild_worker_not_replaced_leaves_its_data_to_the_survivors(self):
        self.absorb_a_killed_worker("eawild")

    def test_killed_easgd_worker_not_replaced_leaves_its_data_to_the_survivors(self):
        self.absorb_a_killed_worker("easgd")

    def absorb_a_killed_worker(self, sync):
        """Kills worker 1 of 3 early in epoch 1 (each step's compute at least 12.8 ms, so that
        the epoch outlasts the death's detection however fast the machine: stretched compute
        left a quiet machine's steps at 3 ms); the job completes, the survivors train its data
        in epoch 2."""
        run_dir = os.path.join(self.dir, "absorbed-" + sync)
        proc = launch(["--servers=1", "--workers=3", "--sync=" + sync,
                       "--scheduler_flags=--heartbeat_timeout_ms=1000", "--server_flags=" + NODE,
                       f"--worker_flags={WORKER} {NODE} --epochs=2 --emulate_ms_per_sample=0.2"],
                      run_dir)
        survivor = self.kill_one_not_evaluating(proc, run_dir, 50)
        out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, out)
        s = summary(run_dir)
        self.assertTrue(s["completed"], s)
        self.assertEqual(s["deaths"]["worker"], 1)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        with open(os.path.join(run_dir, f"worker{survivor}.log")) as f:
            self.assertIn("epoch 2 also trains a share of the data of 1 dead worker", f.read())

    def kill_one_not_evaluating(self, proc, run_dir, steps):
        """SIGKILLs a worker of 3 other than the evaluating one (rank 0) once launched worker
        0 has done `steps` steps; a survivor's launched index."""
        wait_for_steps(proc, run_dir, 0, steps)
        victim = not_evaluating(run_dir, 3)
        self.assertIsNotNone(victim)
        os.kill(pid_of(run_dir, victim), signal.SIGKILL)
        return 1 if victim == 0 else 0

    def test_killed_bsp_worker_not_replaced_leaves_its_data_to_the_survivors_and_resumes(self):
        """Without --max_restarts the survivors of a bsp job take over the dead worker's data
        from the next epoch: 312 steps an epoch for 3 workers, 468 (the data set in their 2
        batches of 64) once the death is known. A stop and --resume after that starts in the
        epoch its checkpoint falls in, as planned then (the scheduler's epoch plans, kept in
        the run directory), and plans the epochs after it from the 3 workers it has again."""
        run_dir = os.path.join(self.dir, "absorbed")
        proc = launch(["--servers=1", "--workers=3", "--sync=bsp", "--checkpoint_every=100steps",
                       "--scheduler_flags=--heartbeat_timeout_ms=1000", "--server_flags=" + NODE,
                       f"--worker_flags={WORKER} {NODE} --epochs=3"], run_dir)
        survivor = self.kill_one_not_evaluating(proc, run_dir, 100)
        # The first epoch planned once the death is known (2, or 3 if epoch 2 began before).
        epoch = wait_for_log(proc, os.path.join(run_dir, f"worker{survivor}.log"),
                             r"epoch (\d) also trains a share of the data of 1 dead worker")
        wait_for_steps(proc, run_dir, survivor, 312 * (epoch - 1) + 120)  # 120 steps into it
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, out)
        self.assertTrue(os.path.exists(os.path.join(run_dir, "epoch_plans.pb")))

        proc = subprocess.run([sys.executable, LAUNCH, "--resume=" + run_dir, "--quiet"],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        s = summary(run_dir)
        self.assertTrue(s["completed"] and s["resumed"], s)
        # 312 steps in each epoch of 3 workers, 468 in the one of 2 (as the first attempt
        # planned it; the resumed job has 3 workers again).
        self.assertEqual(s["iterations"], 312 * 2 + 468, s)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        with open(os.path.join(run_dir, f"worker{survivor}.log")) as f:
            self.assertIn(f"(epoch {epoch}, step", f.read())

    def kill_a_server(self, sync):
        """Runs the mlp on 2 servers under --max_restarts=server:1, kills a server with SIGKILL
        at worker 0's step 250 and waits for the launcher, which must exit 0; its run directory
        and output."""
        run_dir = os.path.join(self.dir, "server_killed_" + sync)
        proc = launch(["--servers=2", "--workers=2", "--sync=" + sync, "--max_restarts=server:1",
                       "--checkpoint_every=100steps",
                       # The mlp in 4 partitions, so that both servers hold some.
                       "--scheduler_flags=--heartbeat_timeout_ms=1000 --partition_bytes=262144",
                       "--server_flags=" + NODE,
                       f"--worker_flags={WORKER} {NODE} --max_steps=700"], run_dir)
        wait_for_steps(proc, run_dir, 0, 250)
        servers = subprocess.run(["pgrep", "-f", f"{run_dir}/checkpoints"], capture_output=True,
                                 text=True).stdout.split()
        os.kill(max(map(int, servers)), signal.SIGKILL)
        out, _ = proc.communicate(timeout=300)
        self.assertEqual(proc.returncode, 0, out)
        return run_dir, out

    def test_killed_server_is_replaced_from_its_checkpoint_and_the_job_completes(self):
        run_dir, _ = self.kill_a_server("r2sp")
        s = summary(run_dir)
        self.assertTrue(s["completed"], s)
        self.assertEqual([e["event"] for e in s["events"] if e["process"].startswith("server")],
                         ["died", "restarted"], s["events"])
        self.assertEqual(s["deaths"]["server"], 1)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        # The restored shard went back at most one checkpoint interval (100 steps of 128
        # samples), and a step or two the workers had in flight.
        self.assertLessEqual(s["recovery"]["updates_lost_steps"], 103, s)
        replacement = [e["process"] for e in s["events"] if e["event"] == "restarted"][0]
        with open(os.path.join(run_dir, replacement + ".log")) as f:
            self.assertIn("resumed from", f.read())
        with open(os.path.join(run_dir, "scheduler.log")) as f:
            self.assertIn("replaced by", f.read())

    def test_bsp_job_that_lost_a_server_resumes_from_the_checkpoints_by_itself(self):
        run_dir, out = self.kill_a_server("bsp")
        self.assertIn("resuming it from the servers' checkpoints", out)
        s = summary(run_dir)
        self.assertTrue(s["completed"], s)
        self.assertTrue(s["resumed"], s)
        self.assertEqual(s["attempt"], 2, s)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        with open(os.path.join(run_dir, "attempt-1", "summary.json")) as f:
            first = json.load(f)
        self.assertFalse(first["completed"], first)
        # The killed server; then the rest, told the job failed, exit 3.
        self.assertEqual((first["events"][0]["process"][:6], first["events"][0]["status"]),
                         ("server", -signal.SIGKILL), first)
        self.assertEqual(first["restarts"]["server"], 0, first)  # not replaced live
        with open(os.path.join(run_dir, "worker0.log")) as f:
            self.assertIn("servers resumed from checkpoints", f.read())

    def test_stopped_job_resumes_from_its_checkpoints(self):
        run_dir = os.path.join(self.dir, "resumed")
        proc = launch(["--servers=2", "--workers=2", "--sync=bsp", "--checkpoint_every=100steps",
                       "--server_flags=" + NODE, f"--worker_flags={WORKER} {NODE} --max_steps=400"],
                      run_dir)
        wait_for_steps(proc, run_dir, 0, 150)
        os.killpg(proc.pid, signal.SIGTERM)  # as a Ctrl-C or a spot instance's warning would
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 130, out)
        for rank in (0, 1):
            self.assertTrue(os.listdir(os.path.join(run_dir, "checkpoints", f"server{rank}")))

        proc = subprocess.run([sys.executable, LAUNCH, "--resume=" + run_dir, "--quiet"],
                              capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        s = summary(run_dir)
        self.assertTrue(s["completed"] and s["resumed"], s)
        self.assertEqual(s["attempt"], 2)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.80, s)
        with open(os.path.join(run_dir, "worker0.log")) as f:
            log = f.read()
        self.assertIn("servers resumed from checkpoints", log)
        self.assertTrue(os.path.isdir(os.path.join(run_dir, "attempt-1")))


if __name__ == "__main__":
    junit_main.main()
