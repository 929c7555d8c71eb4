"""examples/pytorch/vit_recipe.py (a ViT with AdamW, no-decay groups, warm-up and cosine,
bf16 autocast, clipping, accumulation over 2 micro-batches, 2 DataLoader workers, a
checkpoint) on Fashion-MNIST, 2 processes and one epoch (468 steps of 64 samples each):
through R2SP, in bsp and in r2sp (asynchronous Adam updates, each pull predicted from the
moments), it ends within half a point of the same script under DDP (the same batches: DDP
trains R2SP's order). The evaluating worker's
checkpoint holds the final model, the optimizer's groups and state (AdamW's moments and step,
pulled from the servers, and the job's step) and the schedule's position; the
script also runs alone. Skipped without the data set, the binaries or torch."""

import json
import os
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
SCRIPT = os.path.join(example_paths.EXAMPLES, "vit_recipe.py")
DDP_LAUNCH = os.path.join(example_paths.EXAMPLES, "ddp_launch.py")
DATA = "/usr/share/datasets/fashion-mnist"
NEEDED = [os.path.join(BIN_DIR, p) for p in ("scheduler/scheduler", "server/server",
                                             "worker/worker", "worker/python/_core.so")]
FLAGS = ["--threads=1", "--epochs=1"]
STEPS = 468


def cannot_run():
    if not HAVE_TORCH:
        return example_paths.NO_TORCH
    missing = [p for p in NEEDED if not os.path.exists(p)]
    if not os.path.isdir(DATA):
        missing.append(DATA + " (dataset-fashion-mnist)")
    return f"needs {', '.join(missing)}" if missing else None


def last_json(text):
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


@unittest.skipIf(cannot_run(), cannot_run())
class VitRecipeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "worker", "python"),
                   R2SP_CORE=os.path.join(BIN_DIR, "worker", "python", "_core.so"))
        ddp = subprocess.run([sys.executable, DDP_LAUNCH, "--nproc=2", "--", SCRIPT,
                              "--backend=ddp", *FLAGS], capture_output=True, text=True,
                             timeout=600, env=env, cwd=example_paths.EXAMPLES)
        assert ddp.returncode == 0, ddp.stdout + ddp.stderr
        cls.ddp = last_json(ddp.stdout)
        cls.env = env

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def r2sp(self, sync, *flags):
        run_dir = os.path.join(self.tmp.name, sync)
        command = " ".join([example_paths.TORCH_PYTHON, SCRIPT, *FLAGS, *flags])
        r = subprocess.run([sys.executable, LAUNCH, f"--bin_dir={BIN_DIR}", "--quiet",
                            f"--run_dir={run_dir}", f"--sync={sync}", "--servers=1",
                            "--workers=2", "--timeout=600", f"--worker_cmd={command}"],
                           capture_output=True, text=True, timeout=700)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual(summary["iterations"], STEPS, summary)
        return summary["final_test_accuracy"]

    def test_bsp_within_half_a_point_of_ddp_and_the_checkpoint(self):
        checkpoint = os.path.join(self.tmp.name, "final.pt")
        accuracy = self.r2sp("bsp", "--checkpoint=" + checkpoint)
        print(f"bsp {accuracy}, ddp {self.ddp['test_accuracy']}", file=sys.stderr)
        self.assertGreater(self.ddp["test_accuracy"], 0.75)  # it learned
        self.assertLessEqual(abs(accuracy - self.ddp["test_accuracy"]), 0.005)
        import torch
        import vit_recipe
        state = torch.load(checkpoint)
        self.assertEqual(state["steps"], STEPS)
        self.assertEqual(state["schedule"]["last_epoch"], STEPS)
        self.assertEqual([g["weight_decay"] for g in state["optimizer"]["param_groups"]],
                         [0.05, 0.0])
        self.assertEqual([g["r2sp_steps"] for g in state["optimizer"]["param_groups"]],
                         [float(STEPS)] * 2)
        moments = state["optimizer"]["state"]
        self.assertEqual(len(moments), len(list(vit_recipe.ViT().parameters())))
        self.assertEqual({float(m["step"]) for m in moments.values()}, {float(STEPS)})
        self.assertTrue(all(float(m["exp_avg_sq"].sum()) > 0 for m in moments.values()))
        model = vit_recipe.ViT()
        model.load_state_dict(state["model"])  # every tensor, by name and shape

    def test_r2sp_within_half_a_point_of_ddp(self):
        accuracy = self.r2sp("r2sp")
        print(f"r2sp {accuracy}, ddp {self.ddp['test_accuracy']}", file=sys.stderr)
        self.assertLessEqual(abs(accuracy - self.ddp["test_accuracy"]), 0.005)

    def test_alone(self):
        r = subprocess.run([sys.executable, SCRIPT, "--backend=single", "--threads=1",
                            "--max_steps=20", "--epochs=1", "--loader_workers=0"],
                           capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=example_paths.EXAMPLES)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(last_json(r.stdout)["steps"], 20)

    def test_paced_alone(self):
        # 10 steps of 64 samples at 5 ms a sample: at least 3.2 s of training.
        r = subprocess.run([sys.executable, SCRIPT, "--backend=single", "--threads=1",
                            "--max_steps=10", "--epochs=1", "--loader_workers=0",
                            "--emulate_ms_per_sample=5"],
                           capture_output=True, text=True, timeout=300, env=self.env,
                           cwd=example_paths.EXAMPLES)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertGreaterEqual(last_json(r.stdout)["seconds"], 3.2)


@unittest.skipIf(not HAVE_TORCH, example_paths.NO_TORCH)
class VitRecipeFlagsTest(unittest.TestCase):
    def test_paces_by_rank_and_their_refusals(self):
        import vit_recipe
        self.assertEqual(vit_recipe.parse(["--backend=ddp",
                                           "--emulate_ms_per_sample=1,3"]).paces, [1.0, 3.0])
        for bad in (["--backend=r2sp", "--emulate_ms_per_sample=1"],
                    ["--backend=ddp", "--emulate_ms_per_sample=1,x"],
                    ["--backend=ddp", "--emulate_ms_per_sample=-1"]):
            with self.subTest(argv=bad), self.assertRaises(SystemExit):
                vit_recipe.parse(bad)


if __name__ == "__main__":
    junit_main.main()
