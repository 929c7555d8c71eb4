"""tools/pylib/analysis/client_runs.py: the exact command lines of tools/bench/pytorch_client's
jobs (C++ workers, Python workers through tools/launch --worker_cmd, with another script or
binaries too, DDP through ddp_launch.py) and the DDP run's reading of its processes' result
lines, on a stand-in Python."""

import os
import stat
import tempfile
import unittest

import junit_main
from pylib.analysis import client_bench, client_runs
from pylib.job.errors import JobError

ROOT = client_runs.ROOT
SCRIPT = os.path.join(ROOT, "examples", "pytorch", "fashion_mnist_cnn.py")


def options(*argv):
    return client_bench.parse_args(["--bin_dir=/b"] + list(argv))


class CommandsTest(unittest.TestCase):
    def test_worker_flags_are_the_same_for_both_kinds(self):
        self.assertEqual(client_runs.worker_flags(options("--emulate_ms_per_sample=0.5")), [
            "--model=cnn", "--data=fashion-mnist", "--batch_size=64", "--epochs=1",
            "--max_steps=60", "--threads=1", "--push_codec=fp32", "--log_every=100000",
            "--emulate_ms_per_sample=0.5"])
        self.assertEqual(client_runs.worker_flags(options(
            "--worker_flags=--overlap --nooverlap_pulls"))[-2:], ["--overlap", "--nooverlap_pulls"])

    def test_cpp_and_python_jobs_differ_only_in_worker_cmd(self):
        a = options("--push_codec=fp16", "--steps=30")
        flags = ("--model=cnn --data=fashion-mnist --batch_size=64 --epochs=1 --max_steps=30 "
                 "--threads=1 --push_codec=fp16 --log_every=100000")
        cpp = client_runs.launch_command(a, "asp", 2, "/r", python=False)
        self.assertEqual(cpp, [os.path.join(ROOT, "tools", "launch"), "--sync=asp",
                               "--run_dir=/r", "--servers=1", "--workers=2",
                               "--server_flags=--lr=0.01 --momentum=0.9",
                               f"--worker_flags={flags}", "--timeout=1800", "--quiet",
                               "--bin_dir=/b"])
        python = client_runs.launch_command(a, "asp", 2, "/r", python=True)
        self.assertEqual(python, cpp + [f"--worker_cmd=/usr/bin/python3 {SCRIPT} --threads=1 "
                                        "--lr=0.01"])

    def test_the_script_with_its_step_times_and_environment(self):
        a = options("--threads=2")
        self.assertEqual(client_runs.script_command(a, "/r/t_{rank}.jsonl", ["A=1", "B=2"]),
                         ["env", "A=1", "B=2", "/usr/bin/python3", SCRIPT, "--threads=2",
                          "--lr=0.01", "--step_times=/r/t_{rank}.jsonl"])
        self.assertEqual(client_runs.script_command(a),
                         ["/usr/bin/python3", SCRIPT, "--threads=2", "--lr=0.01"])
        # Another script and binaries for one job: only --bin_dir and --worker_cmd change.
        cmd = client_runs.launch_command(a, "asp", 2, "/r", True, ["python3", "s.py"], "/o")
        plain = client_runs.launch_command(a, "asp", 2, "/r", python=True)
        self.assertEqual(cmd, plain[:-2] + ["--bin_dir=/o", "--worker_cmd=python3 s.py"])

    def test_a_variant_adds_its_flags_and_keeps_the_mode(self):
        a = options("--worker_flags=--overlap", "--modes=asp@after",
                    "--variant=after=--nooverlap_pulls")
        cmd = client_runs.launch_command(a, "asp@after", 2, "/r", python=True)
        self.assertEqual(cmd[1], "--sync=asp")
        self.assertEqual(cmd[6], "--worker_flags=--model=cnn --data=fashion-mnist "
                         "--batch_size=64 --epochs=1 --max_steps=60 --threads=1 "
                         "--push_codec=fp32 --log_every=100000 --overlap --nooverlap_pulls")

    def test_scheduler_flags_for_every_job_and_a_variants_own(self):
        a = options("--scheduler_flags=--r2sp_headroom=1.5", "--modes=r2sp,r2sp@fc",
                    "--scheduler_variant=fc=--r2sp_order=first_come")
        plain = client_runs.launch_command(a, "r2sp", 2, "/r", python=True)
        fc = client_runs.launch_command(a, "r2sp@fc", 2, "/r", python=True)
        self.assertIn("--scheduler_flags=--r2sp_headroom=1.5", plain)
        self.assertIn("--scheduler_flags=--r2sp_headroom=1.5 --r2sp_order=first_come", fc)
        self.assertEqual([c for c in plain if "scheduler" in c],
                         ["--scheduler_flags=--r2sp_headroom=1.5"])
        self.assertEqual(plain[6], fc[6])   # the same workers' flags
        # Without either, no --scheduler_flags at all (the commands above stay as they were).
        self.assertFalse(any("scheduler_flags" in c for c in client_runs.launch_command(
            options(), "asp", 2, "/r", python=True)))

    def test_ddp_takes_the_servers_lr_and_the_same_steps(self):
        a = options("--server_flags=--momentum=0.9 --lr=0.05", "--batch_size=32")
        self.assertEqual(client_runs.ddp_command(a, 4), [
            "/usr/bin/python3", os.path.join(ROOT, "examples", "pytorch", "ddp_launch.py"),
            "--nproc=4", "--", SCRIPT, "--backend=ddp", "--batch_size=32", "--epochs=1",
            "--max_steps=60", "--threads=1", "--lr=0.05"])
        self.assertEqual(client_runs.lr(options("--server_flags=--momentum=0.9")), "0.01")


class DdpRunTest(unittest.TestCase):
    """ddp_throughput_run on a stand-in --python that prints what the processes would: the
    job's samples over the span from the first start to the last end."""

    def stand_in(self, directory, body):
        path = os.path.join(directory, "python")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
        return path

    def test_sums_the_processes_result_lines(self):
        with tempfile.TemporaryDirectory() as d:
            a = options()
            a.python = self.stand_in(
                d, "echo 'epoch 1: ...'\n"
                   "echo '{\"samples_per_s\": 400, \"samples\": 800, \"started\": 10, "
                   "\"ended\": 12, \"rank\": 0}'\n"
                   "echo '{\"samples_per_s\": 400, \"samples\": 800, \"started\": 10.5, "
                   "\"ended\": 12.5, \"rank\": 1}'\n")
            self.assertEqual(client_runs.ddp_throughput_run(a, 2, os.path.join(d, "run")), 640.0)
            with open(os.path.join(d, "run", "ddp.log")) as f:
                self.assertEqual(f.read().splitlines()[0], "epoch 1: ...")

    def test_a_failure_or_a_missing_line_is_a_job_error(self):
        with tempfile.TemporaryDirectory() as d:
            run = os.path.join(d, "run")
            a = options()
            a.python = self.stand_in(d, "exit 3\n")
            with self.assertRaises(JobError) as e:
                client_runs.ddp_throughput_run(a, 2, run)
            self.assertEqual(str(e.exception),
                             f"DDP, 2 processes, failed (status 3); see {run}/ddp.log")
            a.python = self.stand_in(d, "echo '{\"samples_per_s\": 1}'\n")
            with self.assertRaises(JobError) as e:
                client_runs.ddp_throughput_run(a, 2, run)
            self.assertEqual(str(e.exception),
                             f"DDP, 2 processes: 1 result lines; see {run}/ddp.log")


if __name__ == "__main__":
    junit_main.main()
