"""tools/pylib/launcher.py: per-worker flags, option checks, and run_job on stand-in binaries
(small Python programs in place of the scheduler, server and worker): the summary, the logs,
and that every failure is a JobError (or the exception passed on) with every process stopped."""

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import unittest

import junit_main
import launcher

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# One stand-in for all three roles (its name says which). Flags it understands besides the
# real ones it is given: --exit=N (worker: fail), --sleep=S (worker: run on), --die (scheduler:
# exit before writing its endpoint).
FAKE = r'''#!PYTHON
import json, os, sys, time
role = os.path.basename(sys.argv[0])
flags = dict(a[2:].partition("=")[::2] for a in sys.argv[1:] if a.startswith("--"))
if role == "scheduler":
    if "die" in flags:
        sys.exit(1)
    with open(flags["endpoint_file"], "w") as f:
        f.write("tcp://127.0.0.1:1\n")
    time.sleep(0.3)
    n = int(flags["num_workers"])
    with open(flags["stats_json"], "w") as f:
        json.dump({"workers": [{"model": "mlp", "epochs": 1, "samples": 100, "iterations": 2,
                                "test_accuracy": 0.5 if i == 0 else -1} for i in range(n)],
                   "servers": []}, f)
elif role == "server":
    time.sleep(0.2)
else:
    rank = int(flags["metrics"].rsplit("worker", 1)[1].split(".")[0])
    print(f"worker {rank}: step 1", flush=True)
    print(f"worker {rank}: a warning", file=sys.stderr, flush=True)
    with open(flags["metrics"], "w") as f:
        for i in range(2):
            f.write(json.dumps({"worker": rank, "batch": 50, "compute_s": 0.01, "wait_s": 0.0,
                                "push_s": 0.0, "pull_s": 0.0, "gap_s": 0.0, "t": i}) + "\n")
    with open(flags["timeline"], "w") as f:
        json.dump([{"name": "push", "tid": rank, "ts": 0, "dur": 1}], f)
    time.sleep(float(flags.get("sleep", 0.1)))
    sys.exit(int(flags.get("exit", 0)))
'''


class Args:
    """tools/launch's options with their defaults."""

    def __init__(self, **kwargs):
        self.__dict__.update(vars(launcher.parse_args([], "")))
        self.__dict__.update(kwargs)


class PerWorkerFlagsTest(unittest.TestCase):
    def test_ranks_and_repeats(self):
        got = launcher.per_worker_flags(["3:--compute_slowdown=2", "0:--a --b='x y'", "3:--c"])
        self.assertEqual(got, {3: ["--compute_slowdown=2", "--c"], 0: ["--a", "--b=x y"]})

    def test_none(self):
        self.assertEqual(launcher.per_worker_flags([]), {})


class ParseArgsTest(unittest.TestCase):
    def parse(self, argv):
        with contextlib.redirect_stderr(io.StringIO()):
            return launcher.parse_args(argv, "")

    def test_defaults(self):
        args = self.parse([])
        self.assertEqual((args.servers, args.workers, args.sync, args.timeout), (2, 3, "asp", 3600))
        self.assertEqual(args.worker_flags_for, [])

    def test_impossible_values_are_usage_errors(self):
        for argv in (["--workers=0"], ["--servers=0"], ["--timeout=0"], ["--sync=fast"]):
            with self.subTest(argv=argv), self.assertRaises(SystemExit) as e:
                self.parse(argv)
            self.assertEqual(e.exception.code, 2)


class FakeBinariesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.bin_dir = os.path.join(self.dir, "bin")
        for role in launcher.ROLES:
            os.makedirs(os.path.join(self.bin_dir, role))
            path = os.path.join(self.bin_dir, role, role)
            with open(path, "w") as f:
                f.write(FAKE.replace("PYTHON", sys.executable))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        self.run_dir = os.path.join(self.dir, "run")
        self.pids = {}

    def tearDown(self):
        self._tmp.cleanup()


class RunJobTest(FakeBinariesTest):
    def run_job(self, during=None, **options):
        args = Args(bin_dir=self.bin_dir, run_dir=self.run_dir, servers=1, workers=2, quiet=True,
                    **options)
        with contextlib.redirect_stdout(io.StringIO()):
            return launcher.run_job(args, on_start=lambda name, pid: self.pids.update({name: pid}),
                                    during=during)

    def read(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return f.read()

    def assert_all_stopped(self):
        self.assertTrue(self.pids)
        for name, pid in self.pids.items():
            self.assertFalse(os.path.exists(f"/proc/{pid}"), name)

    def test_a_job_that_finishes(self):
        summary = self.run_job(worker_flags_for=["1:--sleep=0.2"])
        self.assertEqual(json.loads(self.read("summary.json")), summary)
        self.assertEqual((summary["mode"], summary["workers"], summary["servers"]), ("asp", 2, 1))
        self.assertEqual(summary["final_test_accuracy"], 0.5)
        self.assertEqual(summary["iterations"], 2)
        self.assertEqual(summary["mean_iteration_seconds"], 0.01)
        self.assertEqual(set(summary["cpu_cores"]) - {"scheduler", "server0", "worker0", "worker1"},
                         set())
        self.assertEqual(len(json.loads(self.read("timeline.json"))["traceEvents"]), 2)
        # A worker's log has its output and its errors.
        self.assertIn("worker 1: step 1", self.read("worker1.log"))
        self.assertIn("worker 1: a warning", self.read("worker1.log"))
        self.assertEqual(sorted(self.pids), ["scheduler", "server0", "worker0", "worker1"])

    def test_a_missing_binary_starts_nothing(self):
        os.remove(os.path.join(self.bin_dir, "worker", "worker"))
        with self.assertRaisesRegex(launcher.JobError, "worker/worker not found; build first"):
            self.run_job()
        self.assertEqual(self.pids, {})

    def test_a_scheduler_that_exits_early(self):
        with self.assertRaisesRegex(launcher.JobError, r"the scheduler exited \(1\); see .*scheduler.log"):
            self.run_job(scheduler_flags="--die")
        self.assertEqual(list(self.pids), ["scheduler"])

    def test_a_failing_worker_stops_the_others(self):
        with self.assertRaisesRegex(launcher.JobError, r"worker1 exited with status 3; see .*worker1.log"):
            self.run_job(worker_flags="--sleep=30", worker_flags_for=["1:--exit=3 --sleep=0"])
        self.assert_all_stopped()
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "summary.json")))

    def test_a_job_past_its_timeout_is_stopped(self):
        with self.assertRaisesRegex(launcher.JobError, r"the job ran past --timeout=1s"):
            self.run_job(worker_flags="--sleep=30", timeout=1.0)
        self.assert_all_stopped()

    def test_an_interruption_stops_every_process_and_is_passed_on(self):
        def during():
            if len(self.pids) == 4:
                raise launcher.Interrupted(2)

        with self.assertRaises(launcher.Interrupted) as e:
            self.run_job(worker_flags="--sleep=30", during=during)
        self.assertEqual(e.exception.signum, 2)
        self.assert_all_stopped()

    def test_a_previous_runs_endpoint_is_not_reused(self):
        os.makedirs(self.run_dir)
        with open(os.path.join(self.run_dir, "scheduler.endpoint"), "w") as f:
            f.write("tcp://stale:1\n")
        with self.assertRaises(launcher.JobError):
            self.run_job(scheduler_flags="--die")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "scheduler.endpoint")))


class LaunchScriptTest(FakeBinariesTest):
    """tools/launch: messages and exit statuses."""

    def launch(self, *flags):
        return subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "launch"),
                                 "--bin_dir=" + self.bin_dir, "--run_dir=" + self.run_dir,
                                 "--servers=1", "--workers=2", "--quiet", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))  # lines as printed

    def test_success(self):
        out, err = self.launch().communicate(timeout=60)
        self.assertIn("launch: summary {", out)
        self.assertEqual(err, "")

    def test_a_failure_is_reported_with_status_1(self):
        proc = self.launch("--worker_flags_for=0:--exit=3")
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(f"launch: error: worker0 exited with status 3; see {self.run_dir}/worker0.log",
                      err)

    def test_a_missing_binary_is_reported_with_status_1(self):
        os.remove(os.path.join(self.bin_dir, "server", "server"))
        proc = self.launch()
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("launch: error: ", err)
        self.assertIn("server/server not found", err)

    def test_a_signal_stops_the_job_with_status_130(self):
        for signum in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=signum):
                proc = self.launch("--worker_flags=--sleep=30")
                for line in proc.stdout:  # every process has started
                    if line.startswith("launch: 1 servers"):
                        break
                proc.send_signal(signum)
                _, err = proc.communicate(timeout=60)
                self.assertEqual(proc.returncode, 130)
                self.assertIn(f"launch: signal {int(signum)}: stopping every process", err)
                self.assertEqual(self.running(), [])

    def running(self):
        """Command lines of the processes still running from the stand-in binaries."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
            except OSError:
                continue
            if self.bin_dir in cmdline:
                found.append(cmdline)
        return found


if __name__ == "__main__":
    junit_main.main()
