"""Tests of examples/pytorch/fashion_mnist_cnn.py: the PyTorch cnn's tensors are the built-in
cnn's (names and shapes from models/graph.cc, printed by model_tensors), its initialisation
follows the built-in's rules, and the script trains a few steps on tiny idx files alone
(--backend=single) and as two DDP processes, and refuses bad input with a message."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    import fashion_mnist_cnn

import junit_main  # noqa: E402
from idx_files import write_idx  # noqa: E402

MODEL_TENSORS = os.path.join(example_paths.ROOT, "tests", "examples", "pytorch", "model_tensors")
SCRIPT = os.path.join(example_paths.EXAMPLES, "fashion_mnist_cnn.py")


def run_script(argv, timeout=120):
    return subprocess.run([sys.executable, SCRIPT] + argv, capture_output=True, text=True,
                          timeout=timeout)


def result(stdout):
    """The final JSON line."""
    return json.loads(stdout.strip().splitlines()[-1])


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class CnnTest(unittest.TestCase):
    def test_tensors_are_the_built_in_cnns(self):
        if not os.path.exists(MODEL_TENSORS):
            self.skipTest("model_tensors not built (bazel test //tests/examples/pytorch:...)")
        built_in = subprocess.run([MODEL_TENSORS, "cnn", "1", "28", "28"], capture_output=True,
                                  text=True, check=True).stdout.split("\n")
        ours = [f"{name} {','.join(str(d) for d in p.shape)}"
                for name, p in fashion_mnist_cnn.Cnn().named_parameters()]
        self.assertEqual(ours, [line for line in built_in if line])
        self.assertEqual(ours[0], "conv1.weight 32,1,5,5")  # the helper printed something real

    def test_initialisation_follows_the_built_in_rules(self):
        torch.manual_seed(3)
        model = fashion_mnist_cnn.Cnn()
        fan_in = {"conv1": 25, "conv2": 32 * 25, "fc1": 3136, "fc2": 1024}
        for name, p in model.named_parameters():
            layer, kind = name.split(".")
            bound = fan_in[layer] ** -0.5
            if kind == "weight" and layer.startswith("conv"):  # He normal: std sqrt(2/fan_in)
                self.assertAlmostEqual(p.std().item() / (2 ** 0.5 * bound), 1.0, delta=0.1)
            else:  # U(-1/sqrt(fan_in), 1/sqrt(fan_in))
                self.assertLessEqual(p.abs().max().item(), bound * (1 + 1e-6))  # float32
                self.assertGreater(p.abs().max().item(), 0.75 * bound)  # 32+ draws

    def test_forward_gives_ten_logits(self):
        self.assertEqual(tuple(fashion_mnist_cnn.Cnn()(torch.zeros(3, 1, 28, 28)).shape), (3, 10))


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class ScriptTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        write_idx(cls.tmp.name, "train", 40, seed=1)
        write_idx(cls.tmp.name, "t10k", 12, seed=2)
        cls.flags = [f"--data_dir={cls.tmp.name}", "--batch_size=8", "--threads=1"]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_single_trains_the_steps_asked_and_repeats_itself(self):
        runs = [run_script(["--backend=single", "--epochs=2", "--max_steps=7", "--seed=5"]
                           + self.flags) for _ in range(2)]
        for out in runs:
            self.assertEqual(out.returncode, 0, out.stderr)
        lines = runs[0].stdout.splitlines()
        self.assertEqual([l[:25] for l in lines[:2]],
                         ["epoch 1: test accuracy 0.", "epoch 2: test accuracy 0."])
        self.assertTrue(lines[0].endswith("(5 steps)") and lines[1].endswith("(7 steps)"), lines)
        line = result(runs[0].stdout)
        self.assertEqual({k: line[k] for k in ("backend", "rank", "world", "steps", "samples")},
                         {"backend": "single", "rank": 0, "world": 1, "steps": 7, "samples": 56})
        self.assertEqual(float(lines[1].split()[4].rstrip(",")), round(line["test_accuracy"], 4))
        self.assertEqual(line["test_accuracy"] * 12, round(line["test_accuracy"] * 12))
        self.assertEqual(result(runs[1].stdout)["test_accuracy"], line["test_accuracy"])
        self.assertEqual(runs[1].stdout.splitlines()[:2], lines[:2])  # same seed, same run

    def test_ddp_two_processes_split_the_data(self):
        # Plain all-reduce, and DDP's fp16 compression hook (tools/compare_modes' ddp+fp16).
        for hook in ("none", "fp16"):
            with self.subTest(hook=hook):
                launcher = os.path.join(example_paths.EXAMPLES, "ddp_launch.py")
                out = subprocess.run([sys.executable, launcher, "--nproc=2", "--", SCRIPT,
                                      "--backend=ddp", "--epochs=1", f"--ddp_comm_hook={hook}"]
                                     + self.flags, capture_output=True, text=True, timeout=180)
                self.assertEqual(out.returncode, 0, out.stderr)
                lines = sorted((json.loads(l) for l in out.stdout.splitlines()
                                if l.startswith("{")), key=lambda r: r["rank"])
                # 40 samples over 2 ranks: 20 each, batches of 8: 8, 8, 4.
                self.assertEqual([(r["rank"], r["world"], r["steps"], r["samples"])
                                  for r in lines], [(0, 2, 3, 20), (1, 2, 3, 20)])
                self.assertIsNone(lines[1]["test_accuracy"])
                self.assertEqual(lines[0]["test_accuracy"] * 12,
                                 round(lines[0]["test_accuracy"] * 12))

    def test_ctrl_c_while_training_exits_130_without_a_traceback(self):
        proc = subprocess.Popen([sys.executable, SCRIPT, "--backend=single", "--epochs=100000"]
                                + self.flags, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            first = proc.stdout.readline()  # epoch 1 is over: the loop is training epoch 2
            self.assertTrue(first.startswith("epoch 1: test accuracy "), first)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual((proc.returncode, err), (130, "interrupted\n"))
        self.assertNotIn("samples_per_s", out)

    def test_bad_input_gets_a_message_not_a_traceback(self):
        missing = os.path.join(self.tmp.name, "nothing")
        cases = [(["--backend=single", f"--data_dir={missing}"],
                  f"error: {missing}: not a directory (--data_dir or R2SP_DATA_DIR)\n"),
                 (["--backend=ddp", f"--data_dir={self.tmp.name}"],
                  "error: --backend=ddp needs torchrun's environment (RANK, WORLD_SIZE, "
                  "MASTER_ADDR, MASTER_PORT not set): run it as torchrun --nproc_per_node=N "
                  "SCRIPT --backend=ddp ...\n")]
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE",
                                                                "MASTER_ADDR", "MASTER_PORT")}
        for argv, message in cases:
            with self.subTest(argv=argv):
                out = subprocess.run([sys.executable, SCRIPT] + argv, capture_output=True,
                                     text=True, timeout=60, env=env)
                self.assertEqual((out.returncode, out.stderr, out.stdout), (2, message, ""))


if __name__ == "__main__":
    junit_main.main()
