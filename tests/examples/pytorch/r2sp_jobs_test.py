"""The examples through real R2SP jobs, started as a user starts them: tools/launch with the
scheduler, server and worker binaries, the r2sp package and its extension, and
fashion_mnist_cnn.py as --worker_cmd. Two Python workers train the cnn in bsp on tiny idx files
(R2SP_DATA_DIR from the job's --data_dir) for the job's epochs, the evaluating worker's test
accuracy reaching summary.json (and in eawild, evaluating the centre); mixed jobs (r2sp, easgd), a C++ worker training the built-in cnn beside a
Python worker training the PyTorch one, completes (their tensors match); DDP given the R2SP
job's batches (--data_order=r2sp) takes bsp's steps; and two Python workers
train torchvision's ResNet-18 in r2sp on CIFAR-10-format files (make_cifar_like.py) with
--overlap: the example passes the model, so each pull but the last runs on into the next
forward. Skipped where the binaries or the extension are not built."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
from idx_files import write_idx  # noqa: E402
import make_cifar_like  # noqa: E402
import junit_main  # noqa: E402

ROOT = example_paths.ROOT
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
SCRIPT = os.path.join(example_paths.EXAMPLES, "fashion_mnist_cnn.py")
RESNET = os.path.join(example_paths.EXAMPLES, "resnet18_cifar.py")
NEEDED = [os.path.join(BIN_DIR, p) for p in ("scheduler/scheduler", "server/server",
                                             "worker/worker", "worker/python/_core.so")]


def cannot_run():
    if not HAVE_TORCH:
        return example_paths.NO_TORCH
    missing = [p for p in NEEDED if not os.path.exists(p)]
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


@unittest.skipIf(cannot_run(), cannot_run())
class R2spJobsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data = os.path.join(cls.tmp.name, "data")
        os.makedirs(cls.data)
        write_idx(cls.data, "train", 40, seed=1)
        write_idx(cls.data, "t10k", 12, seed=2)
        cls.big_data = os.path.join(cls.tmp.name, "big_data")
        os.makedirs(cls.big_data)
        write_idx(cls.big_data, "train", 96, seed=5)
        write_idx(cls.big_data, "t10k", 40, seed=6)
        cls.command = shlex.join([example_paths.TORCH_PYTHON, SCRIPT, "--threads=1"])
        cls.cifar = os.path.join(cls.tmp.name, "cifar")
        make_cifar_like.write(cls.cifar, train_per_batch=16, test_records=20, seed=4)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def launch(self, name, sync, worker_flags, *flags):
        run_dir = os.path.join(self.tmp.name, name)
        r = subprocess.run([sys.executable, LAUNCH, f"--bin_dir={BIN_DIR}", "--quiet",
                            f"--run_dir={run_dir}", f"--sync={sync}", "--servers=1",
                            "--workers=2", f"--worker_flags={worker_flags}", "--timeout=240",
                            *flags], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            return run_dir, json.load(f)

    def result(self, run_dir, rank):
        """The script's JSON line in its log (the worker's own lines come around it)."""
        with open(os.path.join(run_dir, f"worker{rank}.log")) as f:
            text = f.read()
        lines = [l for l in text.splitlines() if l.startswith('{"samples_per_s"')]
        self.assertEqual(len(lines), 1, text)
        return json.loads(lines[0])

    def evaluations(self, run_dir):
        rows = []
        for i in (0, 1):
            with open(os.path.join(run_dir, f"metrics_worker{i}.jsonl")) as f:
                rows += [json.loads(line) for line in f]
        return [r for r in rows if r.get("event") == "eval"]

    def test_two_python_workers_train_the_jobs_epochs_in_bsp(self):
        run_dir, summary = self.launch(
            "bsp", "bsp", f"--batch_size=8 --epochs=2 --seed=3 --data_dir={self.data}",
            f"--worker_cmd={self.command}")
        # 40 samples over 2 workers, 20 each: 2 steps of 8 per epoch, 2 epochs.
        # The scheduler ranks workers as they register: sort the processes' lines by rank.
        lines = sorted((self.result(run_dir, i) for i in (0, 1)), key=lambda l: l["rank"])
        self.assertEqual([(l["backend"], l["rank"], l["world"], l["steps"], l["samples"])
                          for l in lines], [("r2sp", 0, 2, 4, 32), ("r2sp", 1, 2, 4, 32)])
        self.assertIsNone(lines[1]["test_accuracy"])
        accuracy = lines[0]["test_accuracy"]
        self.assertEqual(accuracy * 12, round(accuracy * 12))  # k of the 12 test images
        self.assertEqual([(e["epoch"], round(e["test_accuracy"], 4))
                          for e in self.evaluations(run_dir)][-1], (2, round(accuracy, 4)))
        self.assertEqual(len(self.evaluations(run_dir)), 2)
        self.assertEqual((summary["completed"], summary["mode"], summary["iterations"],
                          round(summary["final_test_accuracy"], 4)),
                         (True, "bsp", 4, round(accuracy, 4)))

    def step_losses(self, run_dir):
        """{(worker rank, its step): loss} of a job's metrics lines (R2SP's or DDP's)."""
        losses = {}
        for i in (0, 1):
            with open(os.path.join(run_dir, f"metrics_worker{i}.jsonl")) as f:
                rows = [r for r in map(json.loads, f) if "event" not in r]
            for step, r in enumerate(rows):
                losses[(r["worker"], step)] = r["loss"]
        return losses

    def test_ddp_on_r2sps_batches_takes_bsps_steps(self):
        # The same script, seed, batches (--data_order=r2sp) and SGD: the servers' update of the
        # averaged gradients is DDP's all-reduce and torch.optim.SGD, step for step.
        settings = f"--batch_size=8 --epochs=2 --seed=3 --data_dir={self.big_data}"
        sgd = "--lr=0.01 --momentum=0.9"
        bsp_dir, bsp = self.launch("same_bsp", "bsp", settings, f"--server_flags={sgd}",
                                   f"--worker_cmd={self.command}")
        ddp = {}
        for order in ("r2sp", "torch"):
            ddp[order] = self.launch(f"same_ddp_{order}", "bsp", f"{settings} {sgd}",
                                     f"--ddp_cmd={self.command} --backend=ddp "
                                     f"--data_order={order}")
        expected = self.step_losses(bsp_dir)
        self.assertEqual(len(expected), 2 * 12)  # 96 samples, 2 shards: 6 steps an epoch
        got = self.step_losses(ddp["r2sp"][0])
        self.assertEqual(sorted(got), sorted(expected))
        for key, loss in expected.items():
            self.assertAlmostEqual(got[key], loss, delta=1e-4, msg=key)
        self.assertEqual(ddp["r2sp"][1]["final_test_accuracy"], bsp["final_test_accuracy"])
        # DistributedSampler's batches are others: the first steps' losses already differ.
        torch_order = self.step_losses(ddp["torch"][0])
        self.assertNotAlmostEqual(torch_order[(0, 0)], expected[(0, 0)], delta=1e-4)

    def test_a_cpp_worker_and_a_python_worker_train_the_cnn_together(self):
        run_dir, summary = self.launch(
            "mixed", "r2sp", f"--model=cnn --data=fashion-mnist --data_dir={self.data} "
            "--batch_size=8 --epochs=1 --threads=1", f"--worker_cmd_for=1:{self.command}")
        self.assertEqual((summary["completed"], summary["dead_workers"]), (True, 0))
        line = self.result(run_dir, 1)  # the launcher's worker1, whatever its rank
        self.assertEqual((line["backend"], line["world"], line["steps"], line["samples"]),
                         ("r2sp", 2, 2, 16))
        with open(os.path.join(run_dir, "metrics_worker0.jsonl")) as f:
            cpp_steps = [r for r in map(json.loads, f) if "event" not in r]
        self.assertEqual(len(cpp_steps), 2)  # the binary's two steps of 8

    def test_a_cpp_worker_and_a_python_worker_train_the_cnn_in_easgd(self):
        # Each its own local step (the binary's SGD, the script's torch.optim.SGD), one centre.
        run_dir, summary = self.launch(
            "mixed_easgd", "easgd", f"--model=cnn --data=fashion-mnist --data_dir={self.data} "
            "--batch_size=8 --epochs=1 --threads=1", "--scheduler_flags=--elastic_period=1",
            f"--worker_cmd_for=1:{self.command}")
        self.assertEqual((summary["completed"], summary["dead_workers"], summary["mode"]),
                         (True, 0, "easgd"))
        line = self.result(run_dir, 1)
        self.assertEqual((line["backend"], line["world"], line["steps"], line["samples"]),
                         ("r2sp", 2, 2, 16))
        with open(os.path.join(run_dir, "metrics_worker0.jsonl")) as f:
            cpp_steps = [r for r in map(json.loads, f) if "event" not in r]
        self.assertEqual(len(cpp_steps), 2)
        self.assertEqual([r["push_bytes"] > 0 for r in cpp_steps], [True, True])  # 2 rounds

    def test_two_python_workers_train_the_cnn_in_eawild_evaluating_the_centre(self):
        run_dir, summary = self.launch(
            "eawild", "eawild", f"--batch_size=8 --epochs=2 --seed=3 --data_dir={self.data}",
            "--scheduler_flags=--elastic_period=1", f"--worker_cmd={self.command}")
        lines = sorted((self.result(run_dir, i) for i in (0, 1)), key=lambda l: l["rank"])
        self.assertEqual([(l["rank"], l["steps"], l["samples"]) for l in lines],
                         [(0, 4, 32), (1, 4, 32)])
        accuracy = lines[0]["test_accuracy"]  # of the centre (backends.R2SP.evaluating)
        self.assertEqual(len(self.evaluations(run_dir)), 2)
        self.assertEqual((summary["completed"], summary["mode"], summary["iterations"],
                          round(summary["final_test_accuracy"], 4)),
                         (True, "eawild", 4, round(accuracy, 4)))

    def test_two_python_workers_train_torchvisions_resnet18_in_r2sp(self):
        command = shlex.join([example_paths.TORCH_PYTHON, RESNET, "--threads=1"])
        run_dir, summary = self.launch(
            "resnet", "r2sp", f"--batch_size=8 --epochs=1 --overlap --data_dir={self.cifar}",
            f"--worker_cmd={command}")
        # 80 samples over 2 workers: 5 steps of 8 each; batch-norm buffers stay local.
        lines = sorted((self.result(run_dir, i) for i in (0, 1)), key=lambda l: l["rank"])
        self.assertEqual([(l["rank"], l["steps"], l["samples"]) for l in lines],
                         [(0, 5, 40), (1, 5, 40)])
        accuracy = lines[0]["test_accuracy"]
        self.assertEqual(accuracy * 20, round(accuracy * 20))  # k of the 20 test images
        self.assertEqual((summary["completed"], summary["mode"],
                          round(summary["final_test_accuracy"], 4)),
                         (True, "r2sp", round(accuracy, 4)))
        for i in (0, 1):  # overlapped pulls: every step's but the worker's last
            with open(os.path.join(run_dir, f"metrics_worker{i}.jsonl")) as f:
                steps = [r for r in map(json.loads, f) if "event" not in r]
            self.assertEqual([r["pull_overlapped"] for r in steps], [True] * 4 + [False])


if __name__ == "__main__":
    junit_main.main()
