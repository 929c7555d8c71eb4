"""The PyTorch cnn through R2SP reaches the built-in cnn's accuracy: on Fashion-MNIST, 1 server
and 2 workers, the same steps, seed policy (the C++ worker's initial values, --init=builtin,
and its sample order, r2sp.torch's sampler), lr and batch, the Python workers'
(examples/pytorch/fashion_mnist_cnn.py through tools/launch --worker_cmd) final test accuracy is
within 1 point of the C++ workers' (--model=cnn), in bsp and in r2sp. 200 steps of 64 samples a
worker (a good part of an epoch) keep the test to minutes. Skipped without the data set, the
binaries or torch."""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
import junit_main  # noqa: E402

ROOT = example_paths.ROOT
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)
LAUNCH = os.path.join(ROOT, "tools", "launch")
SCRIPT = os.path.join(example_paths.EXAMPLES, "fashion_mnist_cnn.py")
DATA = "/usr/share/datasets/fashion-mnist"
NEEDED = [os.path.join(BIN_DIR, p) for p in ("scheduler/scheduler", "server/server",
                                             "worker/worker", "worker/python/_core.so")]
WORKER_FLAGS = "--batch_size=64 --epochs=1 --max_steps=200 --seed=1 --threads=1"
# At lr 0.05 the first steps' loss spikes (to 4.2 at step 2) make r2sp's trajectory chaotic:
# the C++ and the PyTorch runs match to 4 decimals over their first steps, and both are
# deterministic, yet oneDNN's and PyTorch's rounding differences grew to 1.8 points by step 200
# (0.8693 against 0.8510). At 0.02 the same comparison is 0.8595 against 0.8582.
SERVER_FLAGS = "--lr=0.02 --momentum=0.9"  # the C++ workers'; the script's SGD takes --lr=0.02


def cannot_run():
    if not HAVE_TORCH:
        return example_paths.NO_TORCH
    missing = [p for p in NEEDED if not os.path.exists(p)]
    if not os.path.isdir(DATA):
        missing.append(DATA + " (dataset-fashion-mnist)")
    return f"needs {', '.join(missing)}" if missing else None


@unittest.skipIf(cannot_run(), cannot_run())
class AccuracyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def accuracy(self, name, sync, *flags):
        run_dir = os.path.join(self.tmp.name, name)
        r = subprocess.run([sys.executable, LAUNCH, f"--bin_dir={BIN_DIR}", "--quiet",
                            f"--run_dir={run_dir}", f"--sync={sync}", "--servers=1", "--workers=2",
                            f"--server_flags={SERVER_FLAGS}", "--timeout=600", *flags],
                           capture_output=True, text=True, timeout=700)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["iterations"], 200, summary)
        return summary["final_test_accuracy"]

    def compare(self, sync):
        cpp = self.accuracy(f"cpp_{sync}", sync, f"--worker_flags=--model=cnn {WORKER_FLAGS}")
        python = self.accuracy(
            f"python_{sync}", sync, f"--worker_flags={WORKER_FLAGS}",
            "--worker_cmd=" + shlex.join([example_paths.TORCH_PYTHON, SCRIPT, "--threads=1",
                                          "--init=builtin", "--lr=0.02"]))
        print(f"{sync}: C++ cnn {cpp}, PyTorch cnn {python}", file=sys.stderr)
        self.assertIsNotNone(python, "the Python workers' evaluation did not reach summary.json")
        self.assertGreater(cpp, 0.75)  # it learned
        self.assertLessEqual(abs(python - cpp), 0.01, (cpp, python))

    def test_bsp(self):
        self.compare("bsp")

    def test_r2sp(self):
        self.compare("r2sp")


if __name__ == "__main__":
    junit_main.main()
