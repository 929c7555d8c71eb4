"""tools/pylib/job/python_workers.py and tools/launch --worker_cmd: which workers run a command
(--worker_cmd, --worker_cmd_for, a cluster file's defaults), the argv that starts one, bad
options refused with their message, a Python worker's flags read from its environment in /proc,
and real jobs (tools/launch) of stand-in binaries whose Python workers are a recorder script:
the exact environment and argv each gets (tools/deploy/python_worker), a mixed job, a dead
Python worker replaced with its own files, one killed as the failure benchmarks kill workers
(fault_runs.kill_child), summary.json and the merged timeline as for binary workers; and the
same job under tools/netcluster (root), each Python worker in its host's network namespace."""

import json
import os
import shlex
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main
from pylib.emulation import netcluster
from pylib.job import fault_runs, launcher, python_workers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
LAUNCH = os.path.join(ROOT, "tools", "launch")

# Stand-in scheduler, server and worker binaries: the scheduler writes its endpoint and the
# stats, the others write what a worker writes and exit.
FAKE = r'''#!PYTHON
import json, os, sys, time
role = os.path.basename(sys.argv[0])
flags = dict(a[2:].partition("=")[::2] for a in sys.argv[1:] if a.startswith("--"))
if role == "scheduler":
    with open(flags["endpoint_file"], "w") as f:
        f.write("tcp://127.0.0.1:7777\n")
    time.sleep(float(flags.get("sleep", 0.5)))
    n = int(flags["num_workers"])
    with open(flags["stats_json"], "w") as f:
        json.dump({"workers": [{"model": "mlp", "epochs": 1, "samples": 100, "iterations": 2,
                                "test_accuracy": 0.5 if i == 0 else -1} for i in range(n)],
                   "servers": []}, f)
elif role == "worker":
    rank = int(flags["metrics"].rsplit("worker", 1)[1].split(".")[0])
    with open(flags["metrics"], "w") as f:
        f.write(json.dumps({"worker": rank, "batch": 50, "compute_s": 0.01, "wait_s": 0.0,
                            "push_s": 0.0, "pull_s": 0.0, "gap_s": 0.0, "t": 0}) + "\n")
    with open(flags["timeline"], "w") as f:
        json.dump([{"name": "push", "tid": rank, "ts": 0, "dur": 1}], f)
'''
# The Python worker: records its argv, working directory and environment into
# RUN_DIR/recorded_NAME.json (NAME from its --metrics file), writes a worker's metrics and
# timeline from R2SP_WORKER_FLAGS, and with --fail_first exits 1 unless it is a replacement.
RECORDER = r'''
import json, os, shlex, sys
flags = dict(a[2:].partition("=")[::2] for a in shlex.split(os.environ["R2SP_WORKER_FLAGS"]))
name = os.path.basename(flags["metrics"])[len("metrics_"):-len(".jsonl")]
keys = ("R2SP_SCHEDULER", "R2SP_WORKER_FLAGS", "R2SP_DATA_DIR", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "R2SP_CORE")
with open(os.path.join(os.path.dirname(flags["metrics"]), f"recorded_{name}.json"), "w") as f:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(),
               "env": {k: os.environ[k] for k in keys if k in os.environ}}, f)
rank = int(os.environ["RANK"])
with open(flags["metrics"], "w") as f:
    f.write(json.dumps({"worker": rank, "batch": 50, "compute_s": 0.02, "wait_s": 0.0,
                        "push_s": 0.0, "pull_s": 0.0, "gap_s": 0.0, "t": 0}) + "\n")
with open(flags["timeline"], "w") as f:
    json.dump([{"name": "compute", "tid": rank, "ts": 0, "dur": 2}], f)
print(f"python worker {rank} done", flush=True)
if "--sleep" in sys.argv:
    import time
    time.sleep(60)
sys.exit(1 if "--fail_first" in sys.argv and ".r" not in name else 0)
'''


class WorkerCommandsTest(unittest.TestCase):
    def test_every_worker(self):
        self.assertEqual(python_workers.worker_commands("python3 t.py", [], 3),
                         {0: "python3 t.py", 1: "python3 t.py", 2: "python3 t.py"})

    def test_some_workers_and_later_items_win(self):
        got = python_workers.worker_commands("", ["1,3:python3 a.py", "3:python3 b.py --x=1:2"], 4)
        self.assertEqual(got, {1: "python3 a.py", 3: "python3 b.py --x=1:2"})

    def test_after_worker_cmd_and_over_the_defaults(self):
        self.assertEqual(python_workers.worker_commands("", ["0:b"], 2, {0: "f", 1: "g"}),
                         {0: "b", 1: "g"})
        self.assertEqual(python_workers.worker_commands("a", ["0:b"], 2, {1: "g"}),
                         {0: "b", 1: "a"})

    def test_none(self):
        self.assertEqual(python_workers.worker_commands("", [], 3), {})

    def test_bad_items(self):
        cases = [("", ["1"], "--worker_cmd_for=1: want RANKS:CMD, e.g. 1,3:'python3 train.py'"),
                 ("", ["3:x"], "--worker_cmd_for=3:x: rank '3' is not a worker (0..2)"),
                 ("", ["-1:x"], "--worker_cmd_for=-1:x: rank '-1' is not a worker (0..2)"),
                 ("", ["1,1:x"], "--worker_cmd_for=1,1:x: rank 1 is given twice"),
                 ("", ["0: "], "--worker_cmd_for=0: : the command is empty"),
                 ("python3 'x", [], "--worker_cmd: cannot split \"python3 'x\" into words: "
                                    "No closing quotation")]
        for worker_cmd, items, message in cases:
            with self.subTest(items=items), self.assertRaises(ValueError) as e:
                python_workers.worker_commands(worker_cmd, items, 3)
            self.assertEqual(str(e.exception), message)

    def test_options_refuse_them(self):
        r = subprocess.run([sys.executable, LAUNCH, "--workers=2", "--dry_run",
                            "--worker_cmd_for=2:python3 t.py"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("launch: error: --worker_cmd_for=2:python3 t.py: rank '2' is not a "
                      "worker (0..1)", r.stderr)


class FlagsOfTest(unittest.TestCase):
    def test_from_the_environment_in_proc(self):
        with tempfile.TemporaryDirectory() as proc:
            for pid, environ in ((7, b"A=1\0R2SP_WORKER_FLAGS=--x=1 '--y=a b'\0B=2\0"),
                                 (8, b"A=1\0"), (9, b"R2SP_WORKER_FLAGS=--x='\0")):
                os.makedirs(os.path.join(proc, str(pid)))
                with open(os.path.join(proc, str(pid), "environ"), "wb") as f:
                    f.write(environ)
            self.assertEqual(python_workers.flags_of(7, proc), ["--x=1", "--y=a b"])
            self.assertEqual(python_workers.flags_of("8", proc), [])  # not a Python worker
            self.assertEqual(python_workers.flags_of(9, proc), [])  # flags that do not split
            self.assertEqual(python_workers.flags_of(10, proc), [])  # gone


class CommandArgvTest(unittest.TestCase):
    def test_local(self):
        self.assertEqual(python_workers.local_argv("python3 t.py", 1, 3, "/b"), [
            os.path.join(ROOT, "tools", "deploy", "python_worker"), "--command=python3 t.py",
            "--rank=1", "--world_size=3", "--local_rank=1",
            "--pythonpath=" + os.path.join(ROOT, "worker", "python"),
            "--core=/b/worker/python/_core.so", "--"])

    def test_local_from_a_bundles_bin_on_a_node_of_several(self):
        """A bundle's bin/ (the wheel's, r2sp-run's) has no extension: the installed r2sp's."""
        with tempfile.TemporaryDirectory() as bin_dir:
            open(os.path.join(bin_dir, "worker"), "w").close()
            self.assertEqual(python_workers.local_argv("python3 t.py", 5, 8, bin_dir,
                                                       local_rank=1, local_world_size=4), [
                os.path.join(ROOT, "tools", "deploy", "python_worker"), "--command=python3 t.py",
                "--rank=5", "--world_size=8", "--local_rank=1",
                "--pythonpath=" + os.path.join(ROOT, "worker", "python"),
                "--local_world_size=4", "--"])

    def test_remote_has_a_working_directory_and_no_core(self):
        self.assertEqual(
            python_workers.command_argv("x", 2, 4, 0, "/w/python", cwd="/w/worker_files",
                                        python_worker="/w/pw"),
            ["/w/pw", "--command=x", "--rank=2", "--world_size=4", "--local_rank=0",
             "--pythonpath=/w/python", "--cwd=/w/worker_files", "--"])


class StandInJob(unittest.TestCase):
    """Jobs of the stand-ins whose Python workers are RECORDER."""

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
        self.recorder = os.path.join(self.dir, "recorder.py")
        with open(self.recorder, "w") as f:
            f.write(RECORDER)
        self.run_dir = os.path.join(self.dir, "run")

    def tearDown(self):
        self._tmp.cleanup()

    def launch_argv(self, *argv):
        return [sys.executable, LAUNCH, f"--bin_dir={self.bin_dir}", f"--run_dir={self.run_dir}",
                "--servers=1", "--workers=2", "--quiet"] + list(argv)

    def run_job(self, *argv):
        """tools/launch ARGV (1 server, 2 workers); its summary.json."""
        r = subprocess.run(self.launch_argv(*argv), capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            return json.load(f)

    def recorded(self, name):
        with open(os.path.join(self.run_dir, f"recorded_{name}.json")) as f:
            return json.load(f)

    def expected_env(self, rank, name, user_flags):
        flags = ["--scheduler=tcp://127.0.0.1:7777", "--bind=tcp://127.0.0.1:*",
                 f"--metrics={self.run_dir}/metrics_{name}.jsonl",
                 f"--timeline={self.run_dir}/timeline_{name}.json"] + user_flags
        inherited = os.environ.get("PYTHONPATH")
        return {"R2SP_SCHEDULER": "tcp://127.0.0.1:7777", "R2SP_WORKER_FLAGS": shlex.join(flags),
                "R2SP_DATA_DIR": "/data/set", "RANK": str(rank), "WORLD_SIZE": "2",
                "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "7777",
                "PYTHONPATH": os.path.join(ROOT, "worker", "python") +
                (":" + inherited if inherited else ""),
                "R2SP_CORE": os.path.join(self.bin_dir, "worker", "python", "_core.so")}


class LaunchTest(StandInJob):
    def test_every_worker_a_python_worker(self):
        os.remove(os.path.join(self.bin_dir, "worker", "worker"))  # not needed
        summary = self.run_job(f"--worker_cmd={sys.executable} {self.recorder} --lr='0.1 x'",
                               "--worker_flags=--data_dir=/data/set --batch_size=8",
                               "--worker_flags_for=1:--seed=3")
        for rank in (0, 1):
            got = self.recorded(f"worker{rank}")
            self.assertEqual(got["argv"], ["--lr=0.1 x"])
            self.assertEqual(got["cwd"], os.getcwd())
            self.assertEqual(got["env"], self.expected_env(
                rank, f"worker{rank}", ["--data_dir=/data/set", "--batch_size=8"] +
                (["--seed=3"] if rank else [])))
        self.assertEqual((summary["completed"], summary["workers"], summary["iterations"]),
                         (True, 2, 2))
        self.assertEqual(summary["mean_iteration_seconds"], 0.02)
        with open(os.path.join(self.run_dir, "worker1.log")) as f:
            self.assertEqual(f.read(), "python worker 1 done\n")
        with open(os.path.join(self.run_dir, "timeline.json")) as f:
            self.assertEqual(sorted((e["name"], e["tid"]) for e in json.load(f)["traceEvents"]),
                             [("compute", 0), ("compute", 1)])

    def test_a_mixed_job(self):
        summary = self.run_job(f"--worker_cmd_for=1:{sys.executable} {self.recorder}",
                               "--worker_flags=--data_dir=/data/set")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "recorded_worker0.json")))
        self.assertEqual(self.recorded("worker1")["env"],
                         self.expected_env(1, "worker1", ["--data_dir=/data/set"]))
        self.assertEqual(summary["mean_iteration_seconds"], 0.015)  # 0.01 (binary), 0.02
        with open(os.path.join(self.run_dir, "timeline.json")) as f:
            self.assertEqual(sorted((e["name"], e["tid"]) for e in json.load(f)["traceEvents"]),
                             [("compute", 1), ("push", 0)])

    def test_a_dead_python_worker_is_replaced_with_its_own_files(self):
        summary = self.run_job(f"--worker_cmd_for=0:{sys.executable} {self.recorder} --fail_first",
                               "--worker_flags=--data_dir=/data/set", "--max_restarts=1",
                               "--scheduler_flags=--sleep=3")
        self.assertEqual([(e["process"], e["event"], e["status"]) for e in summary["events"]],
                         [("worker0", "died", 1), ("worker0.r1", "restarted", 1)])
        self.assertEqual(self.recorded("worker0")["env"],
                         self.expected_env(0, "worker0", ["--data_dir=/data/set"]))
        self.assertEqual(self.recorded("worker0.r1")["env"],
                         self.expected_env(0, "worker0.r1", ["--data_dir=/data/set"]))

    def test_a_command_that_cannot_run_is_a_dead_worker(self):
        summary = self.run_job("--worker_cmd_for=1:/no/such/python t.py")
        self.assertEqual([(e["process"], e["event"], e["status"]) for e in summary["events"]],
                         [("worker1", "died", 127)])
        with open(os.path.join(self.run_dir, "worker1.log")) as f:
            self.assertEqual(f.read(), "python_worker: error: cannot run '/no/such/python': "
                                       "No such file or directory\n")

    def test_a_killed_python_worker_is_found_by_its_flags_and_recorded(self):
        launch = fault_runs.start_launch(self.bin_dir, self.run_dir, [
            "--servers=1", "--workers=2", "--scheduler_flags=--sleep=4",
            f"--worker_cmd_for=1:{sys.executable} {self.recorder} --sleep"])
        self.addCleanup(launch.wait)
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(self.run_dir, "recorded_worker1.json")):
            self.assertLess(time.time(), deadline, "the Python worker never started")
            time.sleep(0.05)
        victim = fault_runs.kill_child(launch, "metrics_worker1")
        self.assertIsNotNone(victim)
        self.assertEqual(launch.wait(timeout=60), 0)
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual([(e["process"], e["event"], e["status"]) for e in summary["events"]],
                         [("worker1", "died", -9)])

    def test_the_worker_binary_is_needed_only_for_binary_workers(self):
        os.remove(os.path.join(self.bin_dir, "worker", "worker"))
        r = subprocess.run(self.launch_argv(f"--worker_cmd_for=1:{sys.executable} {self.recorder}"),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, f"launch: error: {self.bin_dir}/worker/worker not found; build "
                                   "first: bazel build -c opt //scheduler //server //worker\n")

    def test_dry_run_prints_the_python_workers_command(self):
        r = subprocess.run([sys.executable, LAUNCH, "--dry_run", f"--bin_dir={self.bin_dir}",
                            f"--run_dir={self.run_dir}", "--servers=1", "--workers=2",
                            "--worker_cmd_for=1:python3 train.py --x='a b'"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[-1], shlex.join(
            python_workers.local_argv("python3 train.py --x='a b'", 1, 2, self.bin_dir) +
            ["--scheduler=ENDPOINT", "--bind=tcp://127.0.0.1:*",
             f"--metrics={self.run_dir}/metrics_worker1.jsonl",
             f"--timeline={self.run_dir}/timeline_worker1.json"])
            + f" > {self.run_dir}/worker1.log")


class NetclusterTest(StandInJob):
    @unittest.skipIf(netcluster.can_run(), f"tools/netcluster cannot run here: {netcluster.can_run()}")
    def test_python_workers_run_in_their_hosts_namespaces(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "netcluster")] +
                           self.launch_argv(f"--worker_cmd={sys.executable} {self.recorder}",
                                            "--worker_flags=--data_dir=/data/set")[2:],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for rank in (0, 1):
            env = self.recorded(f"worker{rank}")["env"]
            flags = shlex.split(env["R2SP_WORKER_FLAGS"])
            # The worker binds its own host's address (198.18.0.0/15), as a binary worker would.
            self.assertRegex(flags[1], r"^--bind=tcp://198\.1[89]\.\d+\.\d+:\*$")
            expected = self.expected_env(rank, f"worker{rank}", ["--data_dir=/data/set"])
            expected["R2SP_WORKER_FLAGS"] = expected["R2SP_WORKER_FLAGS"].replace(
                "'--bind=tcp://127.0.0.1:*'", shlex.quote(flags[1]))
            self.assertEqual(env, expected)
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            self.assertEqual(json.load(f)["completed"], True)


if __name__ == "__main__":
    junit_main.main()
