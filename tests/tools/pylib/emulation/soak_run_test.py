"""tools/soak's CI version on the real binaries: 60 s of the mlp on Fashion-MNIST with a
worker killed every 10-20 s; every check must pass (the accuracy rises, each kill recovers,
no stall, the scheduler's and servers' RSS bounded after warm-up)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
MNIST = "/usr/share/datasets/fashion-mnist"


@unittest.skipUnless(os.path.isdir(MNIST), "Fashion-MNIST is not installed (tools/install_deps)")
class SoakRunTest(unittest.TestCase):
    def test_sixty_seconds_of_worker_kills(self):
        run_dir = tempfile.mkdtemp(prefix="soak_run_")
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "soak"),
                              "--seconds=60", "--min_gap=10", "--max_gap=20",
                              "--warmup_s=30", f"--bin_dir={BIN_DIR}", f"--run_dir={run_dir}"],
                             capture_output=True, text=True, timeout=240)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("RESULT soak_ok=1", out.stdout)
        with open(os.path.join(run_dir, "soak.json")) as f:
            report = json.load(f)
        self.assertGreaterEqual(len(report["kills"]), 2, report["kills"])
        self.assertTrue(all(k["recovery_s"] < 30 for k in report["kills"]), report["kills"])
        self.assertEqual({p["role"] for p in report["rss"]}, {"scheduler", "server", "worker"})


if __name__ == "__main__":
    junit_main.main()
