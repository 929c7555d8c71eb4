"""tools/bench/recipe_vs_ddp without running jobs: the evaluating process's line is the one
with a test accuracy, and the summary gives each configuration's median [min, max] seconds,
accuracy and DDP/configuration ratio within rounds; a _hetero mode runs with the scheduler's
hetero batching and --pace paces each process (the job's worker flag); bad paces are refused."""

import importlib.machinery
import importlib.util
import os
import unittest

import junit_main

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                    "recipe_vs_ddp")


def load():
    loader = importlib.machinery.SourceFileLoader("recipe_vs_ddp", PATH)
    spec = importlib.util.spec_from_loader("recipe_vs_ddp", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class RecipeVsDdpTest(unittest.TestCase):
    def setUp(self):
        self.tool = load()

    def test_the_evaluators_line(self):
        quiet = 'log\n{"test_accuracy": null, "seconds": 9.0}\n'
        evaluator = 'epoch 1: test accuracy 0.8\n{"test_accuracy": 0.8, "seconds": 12.5}\n'
        self.assertEqual(self.tool.evaluator_line([quiet, evaluator]),
                         {"test_accuracy": 0.8, "seconds": 12.5})
        with self.assertRaises(RuntimeError):
            self.tool.evaluator_line([quiet])

    def test_a_paced_hetero_mode(self):
        args = self.tool.parse_args(["--pace=1,3", "--bin_dir=BIN", "--out=OUT"])
        argv = self.tool.launch_argv(args, "r2sp_hetero", "RUN")
        self.assertEqual(argv[2:], [
            "--bin_dir=BIN", "--quiet", "--run_dir=RUN", "--sync=r2sp", "--servers=1",
            "--workers=2", "--timeout=3600", "--worker_flags_for=0:--emulate_ms_per_sample=1",
            "--worker_flags_for=1:--emulate_ms_per_sample=3",
            "--scheduler_flags=--hetero_batching --global_batch=128",
            f"--worker_cmd=/usr/bin/python3 {self.tool.SCRIPT} --threads=1 --epochs=1"])
        plain = self.tool.launch_argv(self.tool.parse_args(["--out=OUT"]), "bsp", "RUN")
        self.assertEqual([a for a in plain if "flags" in a or a.startswith("--sync")],
                         ["--sync=bsp"])

    def test_bad_paces(self):
        for pace in ("1", "1,x", "1,0", "1,2,3"):
            with self.subTest(pace=pace), self.assertRaises(SystemExit):
                self.tool.parse_args(["--pace=" + pace])

    def test_summary_of_rounds(self):
        runs = [{"config": "ddp", "round": 0, "seconds": 40.0, "accuracy": 0.84},
                {"config": "bsp", "round": 0, "seconds": 20.0, "accuracy": 0.845},
                {"config": "ddp", "round": 1, "seconds": 60.0, "accuracy": 0.83},
                {"config": "bsp", "round": 1, "seconds": 40.0, "accuracy": 0.835},
                {"config": "ddp", "round": 2, "seconds": 50.0, "accuracy": 0.85},
                {"config": "bsp", "round": 2, "seconds": 25.0, "accuracy": 0.84}]
        self.assertEqual(self.tool.summarize(runs, ["bsp"]), [
            "| configuration | seconds | test accuracy | DDP seconds / seconds |",
            "|---|---|---|---|",
            "| ddp | 50.0 [40.0, 60.0] | 0.84 [0.83, 0.85] | 1.0 [1.0, 1.0] |",
            "| bsp | 25.0 [20.0, 40.0] | 0.84 [0.835, 0.845] | 2.0 [1.5, 2.0] |"])


if __name__ == "__main__":
    junit_main.main()
