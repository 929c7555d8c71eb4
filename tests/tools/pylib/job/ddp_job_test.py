"""tools/pylib/job/ddp_job.py: the options a DDP job refuses, its processes' environment and
command lines, its summary from the metrics lines, and whole jobs of a stand-in script (no
torch): one that trains, one that fails, one that outlives --timeout."""

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

import junit_main
from pylib.job import ddp_job
from pylib.job.errors import JobError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))

# A stand-in DDP process: checks torchrun's variables, writes 3 steps of batch 8 (and rank 0
# an evaluation) to its --metrics file, then exits with STATUS after SLEEP seconds.
STAND_IN = r"""
import json, os, sys, time
flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
rank = int(os.environ["RANK"])
assert os.environ["WORLD_SIZE"] == "2" and os.environ["MASTER_ADDR"] == "127.0.0.1"
print("rank", rank, "flags", sorted(flags), flush=True)
time.sleep(float(flags.get("sleep", "0")))
with open(flags["metrics"], "w") as f:
    for i in range(3):
        f.write(json.dumps({"worker": rank, "t": 100.0 + i + rank, "batch": 8, "compute_s": 0.5,
                            "wait_s": 0.0, "push_s": 0.0, "pull_s": 0.0, "gap_s": 0.0}) + "\n")
    if rank == 0:
        f.write(json.dumps({"worker": 0, "event": "eval", "epoch": 1, "test_accuracy": 0.75,
                            "elapsed_s": 3.0, "t": 103.0}) + "\n")
sys.exit(int(flags.get("status", "0")))
"""


def options(**more):
    base = dict(workers=2, servers=1, run_dir="/r", worker_flags="--epochs=2",
                worker_flags_for=[], ddp_cmd="python3 t.py --backend=ddp", worker_cmd="",
                worker_cmd_for=[], cluster="", resume="", auth="none", max_restarts="0",
                checkpoint_every="", timeout=60.0, quiet=True, bin_dir="/nowhere")
    base.update(more)
    return argparse.Namespace(**base)


class CheckOptionsTest(unittest.TestCase):
    def test_a_plain_ddp_job_passes(self):
        ddp_job.check_options(options())

    def test_what_a_ddp_job_cannot_honour_is_named(self):
        with self.assertRaisesRegex(ValueError, r"^--ddp_cmd runs a DDP job \(no scheduler, "
                                                r"servers or checkpoints\): leave out "
                                                r"--worker_cmd, --auth=curve, --max_restarts$"):
            ddp_job.check_options(options(worker_cmd="x", auth="curve", max_restarts="2"))

    def test_a_command_that_does_not_split(self):
        with self.assertRaisesRegex(ValueError, r"^--ddp_cmd: cannot split"):
            ddp_job.check_options(options(ddp_cmd="python3 't.py"))
        with self.assertRaisesRegex(ValueError, r"^--ddp_cmd: the command is empty$"):
            ddp_job.check_options(options(ddp_cmd=" "))


class CommandsTest(unittest.TestCase):
    def test_loopback_ranks_share_the_host(self):
        self.assertEqual(ddp_job.rank_env(1, 4, "127.0.0.1", 555),
                         ["RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
                          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=555"])

    def test_one_process_per_machine_binds_gloo_to_its_interface(self):
        self.assertEqual(ddp_job.rank_env(2, 4, "198.18.0.10", 29500, "eth0"),
                         ["RANK=2", "WORLD_SIZE=4", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=1",
                          "MASTER_ADDR=198.18.0.10", "MASTER_PORT=29500",
                          "GLOO_SOCKET_IFNAME=eth0"])

    def test_the_r2sp_package_is_importable(self):
        # The sources ahead of the caller's path; the extension of --bin_dir where it is built.
        package = os.path.join(ROOT, "worker", "python")
        self.assertEqual(ddp_job.package_env("/nowhere", {}), [f"PYTHONPATH={package}"])
        with tempfile.TemporaryDirectory() as bin_dir:
            os.makedirs(os.path.join(bin_dir, "worker", "python"))
            core = os.path.join(bin_dir, "worker", "python", "_core.so")
            open(core, "w").close()
            self.assertEqual(ddp_job.package_env(bin_dir, {"PYTHONPATH": "/a:/b"}),
                             [f"PYTHONPATH={package}:/a:/b", f"R2SP_CORE={core}"])

    def test_each_process_gets_its_metrics_the_flags_and_its_own(self):
        args = options(worker_flags_for=["1:--emulate_ms_per_sample=8"])
        commands = ddp_job.commands(args, "127.0.0.1", 700)
        self.assertEqual([name for name, _ in commands], ["worker0", "worker1"])
        self.assertTrue(commands[1][1][7].startswith("PYTHONPATH="), commands[1][1])
        self.assertEqual(commands[1][1][8:], ["python3", "t.py", "--backend=ddp",
                                              "--metrics=/r/metrics_worker1.jsonl", "--epochs=2",
                                              "--emulate_ms_per_sample=8"])
        self.assertEqual(commands[0][1][:2], ["env", "RANK=0"])
        self.assertEqual(commands[0][1][-1], "--epochs=2")

    def test_dry_run_lines(self):
        lines = ddp_job.describe(options()).splitlines()
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[1].endswith("--epochs=2 > /r/worker1.log"), lines[1])


class SummaryTest(unittest.TestCase):
    def test_from_the_metrics_lines(self):
        with tempfile.TemporaryDirectory() as run_dir:
            for rank in (0, 1):
                with open(os.path.join(run_dir, f"metrics_worker{rank}.jsonl"), "w") as f:
                    for i in range(2 + rank):
                        f.write(json.dumps({"worker": rank, "t": i, "batch": 10, "compute_s": 0.2,
                                            "wait_s": 0.0, "push_s": 0.0, "pull_s": 0.0,
                                            "gap_s": 0.0}) + "\n")
                    if rank == 0:
                        for epoch, accuracy in ((1, 0.5), (2, 0.625)):
                            f.write(json.dumps({"worker": 0, "event": "eval", "epoch": epoch,
                                                "test_accuracy": accuracy, "t": 5 + epoch,
                                                "elapsed_s": epoch}) + "\n")
            summary = ddp_job.summarise(run_dir, 2, 2.0, {"cpu_cores": {"worker0": 0.5}})
        self.assertEqual({k: summary[k] for k in (
            "mode", "workers", "servers", "epochs", "final_test_accuracy", "samples_per_second",
            "iterations", "wall_seconds", "completed", "events", "mean_iteration_seconds",
            "wait_fraction", "cpu_cores")},
            {"mode": "ddp", "workers": 2, "servers": 0, "epochs": 2, "final_test_accuracy": 0.625,
             "samples_per_second": 25.0, "iterations": 3, "wall_seconds": 2.0, "completed": True,
             "events": [], "mean_iteration_seconds": 0.2, "wait_fraction": 0.0,
             "cpu_cores": {"worker0": 0.5}})


class RunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.script = os.path.join(self.tmp.name, "stand_in.py")
        with open(self.script, "w") as f:
            f.write(STAND_IN)

    def tearDown(self):
        self.tmp.cleanup()

    def run_job(self, flags="", timeout=60.0):
        args = options(run_dir=os.path.join(self.tmp.name, "run"), worker_flags=flags,
                       ddp_cmd=f"{sys.executable} {self.script}", timeout=timeout)
        with contextlib.redirect_stdout(io.StringIO()):
            return args, ddp_job.run(args)

    def test_a_job_that_trains(self):
        args, summary = self.run_job("--epochs=1")
        self.assertEqual((summary["iterations"], summary["final_test_accuracy"],
                          summary["samples_per_second"] > 0), (3, 0.75, True))
        with open(os.path.join(args.run_dir, "summary.json")) as f:
            self.assertEqual(json.load(f)["iterations"], 3)
        with open(os.path.join(args.run_dir, "worker1.log")) as f:
            self.assertEqual(f.read(), "rank 1 flags ['epochs', 'metrics']\n")

    def test_a_failing_process_fails_the_job_with_its_log(self):
        # Both processes exit 3; the first the supervisor sees exited is named, with its log
        # (which one raced: worker0 when both had exited, worker1 when it had exited alone).
        with self.assertRaisesRegex(JobError, r"DDP process worker([01]) exited with status 3; "
                                              r".*worker\1.log ends:\nrank \1 flags"):
            self.run_job("--status=3")

    def test_timeout_stops_the_processes(self):
        with self.assertRaisesRegex(JobError, r"^the DDP job did not finish within "
                                              r"--timeout=0.5 s$"):
            self.run_job("--sleep=30", timeout=0.5)


if __name__ == "__main__":
    junit_main.main()
