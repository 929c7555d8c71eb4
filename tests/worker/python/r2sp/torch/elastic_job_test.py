"""r2sp.torch in easgd and eawild against real jobs (the scheduler and server binaries, Python
workers running elastic_train.py through the built extension): the exchange is exact against a
hand-computed reference (known parameters and gradients, torch.optim.SGD as the local step,
alpha 0.5: easgd over two periods, eawild over one in each order the servers may see), what
the elastic modes refuse fails the join with the C++ worker's message, an optimizer the servers
do not apply (RMSprop) in asp leaves the job with a TypeError, and through
tools/launch --worker_cmd a 2-worker eawild job with torch.optim.Adam as the local step and an
easgd job with SGD train to a stated test accuracy of the centre (summary.json). Skipped
where the binaries are not built."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import job_harness
import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic_train.py")
SIZE = 8
INITIAL = [0.5 * (i % 3) for i in range(SIZE)]
ALPHA, LR, MOMENTUM = 0.5, 0.25, 0.5


def cannot_run():
    return SKIP or job_harness.cannot_run()


def local_steps(rank, steps, x, m, first):
    """`steps` of torch.optim.SGD(lr=LR, momentum=MOMENTUM) from global step `first` on the
    known gradients rank + 1 + step + i % 4 (momentum buffer `m`: None before the first)."""
    for s in range(first, first + steps):
        g = [float(rank + 1 + s + i % 4) for i in range(SIZE)]
        m = g if m is None else [MOMENTUM * mi + gi for mi, gi in zip(m, g)]
        x = [xi - LR * mi for xi, mi in zip(x, m)]
    return x, m


def difference(x, centre):
    return [ALPHA * (xi - ci) for xi, ci in zip(x, centre)]


def minus(a, b):
    return [ai - bi for ai, bi in zip(a, b)]


def plus(*vectors):
    return [sum(v) for v in zip(*vectors)]


def easgd_reference(rounds, period):
    """Both workers' copies and the centre after `rounds` periods: every difference of a round
    against the same centre, their sum added."""
    x, m, centre = [INITIAL, INITIAL], [None, None], INITIAL
    for k in range(rounds):
        d = []
        for r in range(2):
            x[r], m[r] = local_steps(r, period, x[r], m[r], k * period)
            d.append(difference(x[r], centre))
            x[r] = minus(x[r], d[r])
        centre = plus(centre, *d)
    return x, centre


def eawild_outcomes(period):
    """After one period: {(copy 0, copy 1, centre)} for each centre the workers may have pulled
    (both the initial one; or one worker's difference already added before the other pulled)."""
    after = [local_steps(r, period, INITIAL, None, 0)[0] for r in range(2)]
    outcomes = []
    for first in (None, 0, 1):  # the worker whose difference the other one's pull saw
        d = [None, None]
        if first is None:
            d = [difference(after[r], INITIAL) for r in range(2)]
        else:
            d[first] = difference(after[first], INITIAL)
            d[1 - first] = difference(after[1 - first], plus(INITIAL, d[first]))
        outcomes.append((minus(after[0], d[0]), minus(after[1], d[1]), plus(INITIAL, *d)))
    return outcomes


class Job(job_harness.Job):
    """A job of 2 Python workers in `sync` (period 2, alpha 0.5) running elastic_train.py."""

    def __init__(self, sync, period=2):
        super().__init__("r2sp_elastic", 2, scheduler_flags=[
            "--sync=" + sync, f"--elastic_period={period}", f"--elastic_alpha={ALPHA}"])

    def worker(self, index, flags, samples, local="sgd"):
        env = dict(os.environ, RANK=str(index), R2SP_SCHEDULER=self.endpoint,
                   ELASTIC_LOCAL=local,
                   R2SP_WORKER_FLAGS="--bind=tcp://127.0.0.1:* " + " ".join(job_harness.NODE)
                   + " " + flags, R2SP_CORE=r2sp_testing.core_path(),
                   PYTHONPATH=os.path.join(r2sp_testing.ROOT, "worker", "python"),
                   ELASTIC_SAMPLES=str(samples), ELASTIC_OUT=self.path(f"worker{index}.json"))
        return self.python_worker(f"worker{index}", SCRIPT, ["known"], env=env)

    def run(self, flags, samples, local="sgd"):
        """Both workers to their end (local: the local step's optimizer, sgd or adam); their
        exit statuses and outputs, ordered by rank."""
        workers = [self.worker(i, flags[i] if isinstance(flags, list) else flags, samples, local)
                   for i in range(2)]
        codes = self.wait(workers, timeout=120)
        outputs = []
        for i in range(2):
            with open(self.path(f"worker{i}.json")) as f:
                outputs.append(json.load(f))
        return codes, sorted(outputs, key=lambda o: o.get("rank", 0))


@unittest.skipIf(cannot_run(), cannot_run() or "")
class ElasticJobTest(unittest.TestCase):
    def job(self, sync):
        job = Job(sync)
        self.addCleanup(job.close)
        return job

    def test_easgd_two_rounds_are_exact(self):
        job = self.job("easgd")
        # 8 samples in 2 shards, batch 1: 4 steps each, 2 rounds of period 2.
        codes, (a, b) = job.run("--epochs=1 --batch_size=1", 8)
        self.assertEqual(codes, [0, 0], job.log("worker0") + job.log("worker1"))
        x, centre = easgd_reference(rounds=2, period=2)
        self.assertNotEqual(x[0], x[1])
        for r, out in enumerate((a, b)):
            self.assertEqual((out["rank"], out["mode"], out["steps"]), (r, "easgd", 4))
            self.assertEqual(out["local"], x[r])
            self.assertEqual(out["centre"], centre)  # after both workers' second round
            self.assertEqual(out["final"], centre)   # finish()'s final pull

    def test_eawild_one_period_is_exact_in_the_order_the_servers_saw(self):
        job = self.job("eawild")
        codes, (a, b) = job.run("--epochs=1 --batch_size=1", 4)
        self.assertEqual(codes, [0, 0], job.log("worker0") + job.log("worker1"))
        self.assertEqual((a["steps"], b["steps"], a["mode"]), (2, 2, "eawild"))
        outcomes = eawild_outcomes(period=2)
        self.assertEqual(len({json.dumps(o) for o in outcomes}), 3)  # the orders differ
        self.assertIn((a["local"], b["local"], a["final"]), outcomes)
        self.assertEqual(a["final"], b["final"])
        # The centre pulled after a worker's own push: with or without the other's difference.
        for r, out in enumerate((a, b)):
            own = plus(INITIAL, minus(local_steps(r, 2, INITIAL, None, 0)[0], out["local"]))
            self.assertIn(out["centre"], (own, out["final"]))

    def test_what_the_elastic_modes_refuse_fails_the_join(self):
        job = self.job("eawild")
        codes, outputs = job.run(["--epochs=1 --batch_size=1 --overlap",
                                  "--epochs=1 --batch_size=1 --push_codec=topk:0.5 "
                                  "--momentum_correction=0.9"], 4)
        self.assertEqual(codes, [3, 3])
        self.assertEqual(sorted(o["error"] for o in outputs), sorted([
            ["R2SPError", "INVALID_ARGUMENT",
             "--overlap does not go with --sync=eawild yet (docs/MODES.md)"],
            ["R2SPError", "INVALID_ARGUMENT",
             "--momentum_correction does not go with --sync=eawild yet (docs/MODES.md)"]]))

    def test_an_optimizer_the_servers_do_not_apply_in_asp_leaves_the_job(self):
        job = self.job("asp")
        codes, outputs = job.run("--epochs=1 --batch_size=1", 4, local="rmsprop")
        self.assertEqual(codes, [3, 3])
        self.assertEqual(outputs[0]["error"], [
            "TypeError", None, "r2sp.torch.DistributedOptimizer: RMSprop cannot be applied in "
            "--sync=asp: the servers apply torch.optim.SGD, Adam and AdamW (each parameter "
            "group with its own settings), and each push is applied on its own, with no "
            "averaged gradient a worker could step with. Use one of those, or --sync=bsp (each "
            "worker applies any optimizer to the averaged gradient), easgd or eawild (any "
            "optimizer as the local step)"])
        self.assertEqual(outputs[0], outputs[1])

    def launch(self, sync, optimizer, epochs, period):
        """tools/launch --worker_cmd of 2 workers training elastic_train.py; summary.json and
        the workers' outputs (by rank)."""
        tmp = tempfile.TemporaryDirectory(prefix="r2sp_elastic_launch_")
        self.addCleanup(tmp.cleanup)
        run_dir = os.path.join(tmp.name, "run")
        out = os.path.join(tmp.name, "worker{rank}.json")
        launch = subprocess.run(
            [sys.executable, os.path.join(r2sp_testing.ROOT, "tools", "launch"),
             "--bin_dir=" + job_harness.BIN_DIR, "--quiet", "--run_dir=" + run_dir,
             "--servers=1", "--workers=2", "--sync=" + sync,
             f"--scheduler_flags=--elastic_period={period}",
             f"--worker_flags=--epochs={epochs} --batch_size=16",
             f"--worker_cmd={sys.executable} {SCRIPT} train {optimizer} {epochs}"],
            env=dict(os.environ, ELASTIC_OUT=out), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=240)
        self.assertEqual(launch.returncode, 0, launch.stdout)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        results = []
        for i in range(2):
            with open(out.replace("{rank}", str(i))) as f:
                results.append(json.load(f))
        return summary, results

    def check_training(self, sync, optimizer, want_accuracy):
        summary, results = self.launch(sync, optimizer, epochs=3, period=4)
        self.assertEqual((summary["completed"], summary["mode"], summary["workers"],
                          summary["epochs"], summary["events"]), (True, sync, 2, 3, []))
        # 512 samples in 2 shards of batch 16: 16 steps an epoch.
        self.assertEqual(summary["iterations"], 48)
        evaluator = next(r for r in results if r["evals"])
        accuracies = [a for a, reported in evaluator["evals"]]
        self.assertEqual([reported for _, reported in evaluator["evals"]], [True] * 3)
        self.assertEqual(summary["final_test_accuracy"], round(accuracies[-1], 6))
        self.assertGreaterEqual(accuracies[-1], want_accuracy, accuracies)
        return accuracies

    def test_eawild_with_adam_trains_through_tools_launch(self):
        # Measured 0.94 to 0.98 after the third epoch in 4 runs (eawild's order varies).
        print("eawild adam accuracies", self.check_training("eawild", "adam", 0.9))

    def test_easgd_with_sgd_trains_through_tools_launch(self):
        # Measured 0.97 (0.91, 0.96, 0.97 after each epoch).
        print("easgd sgd accuracies", self.check_training("easgd", "sgd", 0.93))


if __name__ == "__main__":
    junit_main.main()
