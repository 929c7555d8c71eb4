"""tools/launch with the real binaries when the evaluating worker dies: rank 0 of 3,
killed with SIGKILL early in epoch 1 of the mlp on Fashion-MNIST, in bsp, ssp, asp and r2sp.
The lowest live rank takes over evaluation and the model files: the job completes, summary.json
has a final accuracy within 1 point of the same job run with one worker fewer, and the newest
model file, evaluated again by worker --eval_only, is the model of the job's final evaluation
(its step and its accuracy)."""

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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
MNIST = "/usr/share/datasets/fashion-mnist"  # tools/install_deps: the workers' default --data_dir
NODE = "--heartbeat_ms=200"
# The rate falls tenfold for the last epoch, so that the final accuracy settles (without it two
# runs of the same asynchronous job end a point apart).
SERVER = "--lr=0.02 --momentum=0.9 --lr_milestones=900 --lr_gamma=0.1 " + NODE
# Both jobs step through the data in global batches of 128 whatever the live workers (hetero
# batching shares them out): the job that lost a worker and the one with a worker fewer take
# the same steps, so their accuracies compare.
SCHEDULER = "--hetero_batching --global_batch=128"
# Each step's compute lasts at least 12.8 ms (0.2 ms a sample), so that an epoch (some 300 steps
# a worker) outlasts the death's detection (1 s) however fast the machine: stretching the compute
# (--compute_slowdown) left a quiet machine's steps at 3 ms, and the epoch ended undetected.
WORKER = ("--model=mlp --data=fashion-mnist --batch_size=64 --threads=1 --log_every=25 "
          "--epochs=3 --emulate_ms_per_sample=0.2 " + NODE)


def launch(run_dir, sync, workers):
    return subprocess.Popen([sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet",
                             "--run_dir=" + run_dir, "--servers=1", f"--workers={workers}",
                             "--sync=" + sync, "--scheduler_flags=--heartbeat_timeout_ms=1000 " + SCHEDULER,
                             "--server_flags=" + SERVER, "--worker_flags=" + WORKER],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def records(run_dir, worker):
    """metrics_worker<worker>.jsonl's rows (none before it exists)."""
    try:
        with open(os.path.join(run_dir, f"metrics_worker{worker}.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def evaluating_worker(run_dir, workers, steps, timeout=120):
    """The launched index of rank 0 (ranks follow registration: the metrics rows' "worker"),
    once it has done `steps` steps."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for i in range(workers):
            rows = records(run_dir, i)
            if rows and rows[0]["worker"] == 0 and sum("event" not in r for r in rows) >= steps:
                return i
        time.sleep(0.1)
    raise AssertionError(f"rank 0 never reached step {steps} in {run_dir}")


def finish(proc, run_dir):
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


@unittest.skipUnless(os.path.isdir(MNIST), "Fashion-MNIST is not installed (tools/install_deps)")
class EvaluatingWorkerDiesTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="launch_evaluator_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def test_bsp(self):
        self.evaluation_moves("bsp")

    def test_ssp(self):
        self.evaluation_moves("ssp")

    def test_asp(self):
        self.evaluation_moves("asp")

    def test_r2sp(self):
        self.evaluation_moves("r2sp")

    def evaluation_moves(self, sync):
        run_dir = os.path.join(self.dir, "killed-" + sync)
        proc = launch(run_dir, sync, 3)
        victim = evaluating_worker(run_dir, 3, 50)
        os.kill(pid_of(run_dir, victim), signal.SIGKILL)
        s = finish(proc, run_dir)
        self.assertTrue(s["completed"], s)
        self.assertEqual(s["deaths"]["worker"], 1, s)
        self.assertIsNotNone(s["final_test_accuracy"], s)

        # Rank 1 took over: it logged so, and every evaluation after epoch 1 is its own.
        survivors = [i for i in range(3) if i != victim]
        successor = next(i for i in survivors if records(run_dir, i)[0]["worker"] == 1)
        with open(os.path.join(run_dir, f"worker{successor}.log")) as f:
            self.assertIn("every lower rank is dead: this worker evaluates", f.read())
        evals = [r for i in survivors for r in records(run_dir, i) if r.get("event") == "eval"]
        self.assertEqual({r["worker"] for r in evals}, {1}, evals)
        last = max(evals, key=lambda r: r["step"])
        self.assertEqual(last["epoch"], 3, evals)
        self.assertAlmostEqual(s["final_test_accuracy"], last["test_accuracy"], places=4)

        # The newest model file is the final evaluation's model.
        eval_only = subprocess.run(
            [os.path.join(BIN_DIR, "worker", "worker"), "--eval_only", "--threads=1",
             "--init=checkpoint:" + os.path.join(run_dir, "model")],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(eval_only.returncode, 0, eval_only.stderr)
        found = re.search(r"step (\d+)\): test accuracy ([0-9.]+)", eval_only.stdout)
        self.assertIsNotNone(found, eval_only.stdout)
        self.assertEqual(int(found.group(1)), last["step"], eval_only.stdout)
        self.assertAlmostEqual(float(found.group(2)), s["final_test_accuracy"], places=4)

        # Within 1 point of the same job with one worker fewer.
        reference = finish(launch(os.path.join(self.dir, "two-" + sync), sync, 2),
                           os.path.join(self.dir, "two-" + sync))
        self.assertLessEqual(abs(s["final_test_accuracy"] - reference["final_test_accuracy"]),
                             0.01, (s["final_test_accuracy"], reference["final_test_accuracy"]))


if __name__ == "__main__":
    junit_main.main()
