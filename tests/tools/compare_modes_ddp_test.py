"""tools/compare_modes with a PyTorch script on loopback: 2 workers of
examples/pytorch/fashion_mnist_cnn.py through the r2sp client (r2sp) and the same script under
DDP (ddp, gloo), same shards, batch and epochs, on tiny idx files. The table holds both rows,
says which worker trained, and its figures are those of each run's metrics lines (recomputed
here from the files); with --ddp_timing tools/run_report splits out DDP's all-reduce. Runs itself under /usr/bin/python3 (Debian's torch); skipped where torch
or the built binaries are missing."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

TORCH_PYTHON = "/usr/bin/python3"
if importlib.util.find_spec("torch") is None and os.path.exists(TORCH_PYTHON) \
        and os.path.realpath(sys.executable) != os.path.realpath(TORCH_PYTHON):
    os.execv(TORCH_PYTHON, [TORCH_PYTHON] + sys.argv)

import junit_main  # noqa: E402
from idx_files import write_idx  # noqa: E402


def _root():
    srcdir, workspace = os.environ.get("TEST_SRCDIR"), os.environ.get("TEST_WORKSPACE")
    if srcdir and workspace:
        return os.path.join(srcdir, workspace)
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))


ROOT = _root()
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)
NEEDED = [os.path.join(BIN_DIR, p) for p in ("scheduler/scheduler", "server/server",
                                             "worker/worker", "worker/python/_core.so")]


def cannot_run():
    if importlib.util.find_spec("torch") is None:
        return "no Python with torch here (Debian's python3-torch at /usr/bin/python3)"
    missing = [p for p in NEEDED if not os.path.exists(p)]
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


def metrics(run_dir):
    """(iteration rows by worker in time order, evaluation rows in time order)."""
    rows, evals = {}, []
    for name in sorted(os.listdir(run_dir)):
        if name.startswith("metrics_worker") and name.endswith(".jsonl"):
            with open(os.path.join(run_dir, name)) as f:
                for line in f:
                    row = json.loads(line)
                    if row.get("event") == "eval":
                        evals.append(row)
                    else:
                        rows.setdefault(row["worker"], []).append(row)
    return ({w: sorted(r, key=lambda x: x["t"]) for w, r in rows.items()},
            sorted(evals, key=lambda e: e["t"]))


def job_rate(rows, skip=2):
    """All samples after each worker's first `skip` iterations over their span."""
    start = min(r[skip]["t"] for r in rows.values())
    end = max(r[-1]["t"] for r in rows.values())
    return sum(x["batch"] for r in rows.values() for x in r[skip + 1:]) / (end - start)


@unittest.skipIf(cannot_run(), cannot_run())
class CompareModesDdpTest(unittest.TestCase):
    def test_r2sp_and_ddp_rows_from_their_metrics(self):
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "data")
            os.makedirs(data)
            write_idx(data, "train", 64, seed=1)
            write_idx(data, "t10k", 16, seed=2)
            out = os.path.join(tmp, "out")
            r = subprocess.run(
                [sys.executable, os.path.join(ROOT, "tools", "compare_modes"),
                 f"--bin_dir={BIN_DIR}", f"--out={out}", "--modes=r2sp,ddp", "--workers=2",
                 "--servers=1", "--script=examples/pytorch/fashion_mnist_cnn.py",
                 "--script_flags=--threads=1 --ddp_timing", "--target_accuracy=0.0", "--timeout=240",
                 f"--worker_flags=--batch_size=8 --epochs=2 --seed=3 --data_dir={data}"],
                cwd=ROOT, capture_output=True, text=True, timeout=400)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(out, "results.md")) as f:
                table = f.read()
            with open(os.path.join(out, "results.json")) as f:
                figures = json.load(f)["runs"][0]
            runs = {mode: metrics(os.path.join(out, mode)) for mode in ("r2sp", "ddp")}
            report = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "run_report"),
                                     os.path.join(out, "ddp"), "--skip=2"],
                                    capture_output=True, text=True, timeout=60)
        lines = table.splitlines()
        header = next(l for l in lines if l.startswith("| mode |"))
        headers = [h.strip() for h in header.strip("|").split("|")]
        rows = {}
        for line in lines[lines.index(header) + 2:]:
            if not line.startswith("| "):
                break
            cells = dict(zip(headers, (c.strip() for c in line.strip("|").split("|"))))
            rows[cells["mode"]] = cells
        self.assertEqual(sorted(rows), ["ddp", "r2sp"], table)
        self.assertEqual((rows["r2sp"]["worker"], rows["ddp"]["worker"]),
                         ("r2sp client (script)", "DDP (script)"))
        for mode, (by_worker, evals) in runs.items():
            with self.subTest(mode=mode):
                # Same shards and batch: 32 samples a worker per epoch, 4 steps of 8, 2 epochs.
                self.assertEqual(sorted(by_worker), [0, 1])
                self.assertEqual([[x["batch"] for x in r] for r in by_worker.values()],
                                 [[8] * 8, [8] * 8])
                self.assertEqual([e["epoch"] for e in evals], [1, 2])
                f = figures[mode]
                self.assertEqual(f["job_samples_per_s"], job_rate(by_worker))
                self.assertEqual(f["time_to_target_s"], evals[0]["elapsed_s"])
                self.assertAlmostEqual(f["final_accuracy"], evals[-1]["test_accuracy"], places=6)
                self.assertEqual(rows[mode]["job samples/s"], f"{job_rate(by_worker):.0f}")
                self.assertEqual(rows[mode]["time to 0.00 (s)"], f"{evals[0]['elapsed_s']:.1f}")
                self.assertEqual(rows[mode]["final accuracy"], f"{f['final_accuracy']:.4f}")
                self.assertEqual(rows[mode]["samples/s"], f"{f['samples_per_s']:.0f}")
        self.assertEqual(rows["ddp"]["vs ddp (samples/s)"], "1.00")
        self.assertEqual(rows["ddp"]["mean wait per iteration (ms)"], "0.0")
        self.assertEqual(rows["ddp"]["servers' CPU (cores)"], "n/a")
        self.assertNotEqual(rows["r2sp"]["servers' CPU (cores)"], "n/a")
        self.assertEqual(rows["r2sp"]["vs ddp (samples/s)"],
                         f"{figures['r2sp']['samples_per_s'] / figures['ddp']['samples_per_s']:.2f}")
        self.assertIn("RESULT r2sp_vs_ddp_throughput=", r.stdout)
        # --ddp_timing: the DDP rows' all-reduce (the cnn's 3,274,634 fp32 parameters a step),
        # which run_report splits out; the r2sp workers ignore the flag.
        for w in (0, 1):
            self.assertEqual({x["allreduce_bytes"] for x in runs["ddp"][0][w]}, {13098536})
            self.assertNotIn("allreduce_s", runs["r2sp"][0][w][0])
            self.assertIn(f"worker  {w} DDP all-reduce per step: ", report.stdout)
        self.assertIn("13.10 MB reduced", report.stdout)


if __name__ == "__main__":
    junit_main.main()
