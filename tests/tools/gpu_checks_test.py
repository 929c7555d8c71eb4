"""tools/bench/gpu_checks without a GPU: its options, the command lines of the threshold-check
steps (--dry_run) and the time budget that skips a step whose estimate would overrun it."""

import os
import subprocess
import tempfile
import unittest

import junit_main

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "bench",
                      "gpu_checks")


def run(*args):
    """(exit status, OUT/summary.txt's lines, stderr) of gpu_checks --out=a temporary folder."""
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([SCRIPT, f"--out={out}", *args], capture_output=True, text=True,
                           timeout=60)
        lines = []
        if os.path.exists(os.path.join(out, "summary.txt")):
            with open(os.path.join(out, "summary.txt")) as f:
                lines = [l.replace(out, "OUT") for l in f.read().splitlines()]
        return p.returncode, lines, p.stderr


class GpuChecksTest(unittest.TestCase):
    def test_threshold_check_steps_command_lines(self):
        status, lines, _ = run("--dry_run", "--steps=goals", "--repeats=5", "--epochs=2",
                               "--data_dir=/data/fm")
        self.assertEqual(status, 0)
        self.assertEqual([l.split()[0] for l in lines], ["curve_io6", "curve_io8", "job_repeats"])
        self.assertTrue(lines[0].endswith(
            "pushpull_benchmark --auth=curve --sizes_mb=16 --curve_io_threads=6 "
            "--curve_connections=6"), lines[0])
        self.assertIn("--curve_io_threads=8 --curve_connections=8", lines[1])
        self.assertIn(
            "python3 tools/compare_modes --out=OUT/job_repeats --bin_dir=OUT/.bins --servers=2 "
            "--workers=4 --modes=bsp\\,r2sp\\,r2sp_auto\\,r2sp@w2\\,r2sp@w4 "
            "--scheduler_variant=w2=--r2sp_slot_width=2 "
            "--scheduler_variant=w4=--r2sp_slot_width=4 --repeats=5 --target_accuracy=0.85 ",
            lines[2])
        self.assertIn("--data_dir=/data/fm\\ --epochs=2\\ --batch_size=64", lines[2])

    def test_every_step_has_a_dry_run(self):
        status, lines, _ = run("--dry_run", "--budget_s=0")
        self.assertEqual(status, 0)
        names = [l.split()[0] for l in lines]
        self.assertEqual(names[:4], ["info", "curve_io6", "curve_io8", "job_repeats"])
        self.assertEqual(names[-4:], ["job", "pytorch_cuda_test", "pytorch", "proxy"])
        self.assertEqual(len([n for n in names if n.startswith("san_")]), 6)
        self.assertTrue(all(l.split()[1] == "dry" for l in lines), lines)

    def test_pytorch_codecs_reach_pytorch_gpu(self):
        status, lines, _ = run("--dry_run", "--steps=pytorch", "--pytorch_codecs=fp32",
                               "--pytorch_steps=50", "--data_dir=/data/fm")
        self.assertEqual(status, 0)
        self.assertTrue(lines[-1].endswith(
            "python3 tools/bench/pytorch_gpu --bin_dir=OUT/.pybins --data_dir=/data/fm "
            "--out=OUT/pytorch --steps=50 --codecs=fp32"), lines[-1])
        _, lines, _ = run("--dry_run", "--steps=pytorch", "--data_dir=/data/fm")
        self.assertTrue(lines[-1].endswith("--steps=100 --codecs=fp32\\,fp16"), lines[-1])

    def test_the_proxy_runs_chain_proxy_in_the_pytorch_configurations(self):
        status, lines, _ = run("--dry_run", "--steps=proxy", "--pytorch_codecs=fp32,fp32+ep",
                               "--pytorch_steps=60")
        self.assertEqual(status, 0)
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].endswith(
            "python3 tools/bench/chain_proxy --bin_dir=OUT/.pybins --out=OUT/chain_proxy "
            "--steps=60 --codecs=fp32\\,fp32+ep --python=python3"), lines[0])

    def test_a_step_past_the_budget_is_skipped(self):
        # job_repeats is estimated at 110 s: past a 100 s budget; info (5 s) is not.
        status, lines, _ = run("--dry_run", "--steps=info,job_repeats", "--budget_s=100")
        self.assertEqual(status, 0)
        self.assertEqual([l.split()[:2] for l in lines[:2]], [["info", "dry"],
                                                               ["job_repeats", "skip"]])
        self.assertEqual(lines[-1], "skipped for the budget: run next with --steps=job_repeats")

    def test_check_lines_from_a_stand_in_benchmark(self):
        # A bundle whose pushpull_benchmark prints the RESULT line of its I/O thread count.
        with tempfile.TemporaryDirectory() as bundle:
            os.mkdir(os.path.join(bundle, "bin"))
            open(os.path.join(bundle, "env.sh"), "w").close()
            fake = os.path.join(bundle, "bin", "pushpull_benchmark")
            with open(fake, "w") as f:
                f.write('#!/bin/sh\ncase "$*" in *threads=6*) r=0.64 ;; *) r=0.55 ;; esac\n'
                        'echo "RESULT push_vs_zmq_16MB=0.9 curve_vs_plain_pushpull_16MB=$r"\n')
            os.chmod(fake, 0o755)
            status, lines, _ = run(f"--bundle={bundle}", f"--data_dir={bundle}",
                                   "--steps=curve_io")
        self.assertEqual(status, 0)
        self.assertEqual([l.split()[:2] for l in lines if not l.startswith("check:")],
                         [["curve_io6", "ok"], ["curve_io8", "ok"]])
        self.assertEqual([l for l in lines if l.startswith("check:")], [
            "check: CurveZMQ / plain TCP at 16 MB, 6 I/O threads and connections = 0.64 (>= 0.6): "
            "met",
            "check: CurveZMQ / plain TCP at 16 MB, 8 I/O threads and connections = 0.55 (>= 0.6): "
            "not met"])

    def test_bad_options(self):
        for args, message in ((["--steps=gpu"], "unknown step gpu"),
                              (["--repeats=three"], "three is not a whole number"),
                              (["--fast"], "unknown argument --fast")):
            status, _, err = run("--dry_run", *args)
            self.assertEqual(status, 2, args)
            self.assertIn(message, err)


if __name__ == "__main__":
    junit_main.main()
