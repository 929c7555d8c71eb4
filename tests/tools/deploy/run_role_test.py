"""tools/deploy/run_role, the script every remote backend starts a process with, run from a
bundle-shaped directory whose bin/ holds stand-ins: the process's exit status comes back;
SIGTERM stops the process, also when it arrives at once, and the trap is set before the process
starts (a SIGTERM between the two used to end the script and leave the process running); with
--watch_stdin the end of stdin stops it; a bad role or an interface without an address is refused.
With --worker_cmd a worker is a Python worker: the command runs from the bundle's worker_files/
with the exact environment python_worker gives (the flags in R2SP_WORKER_FLAGS, the bundle's
python/ on PYTHONPATH); --worker_cmd for another role, or a rank without it, is refused. The pod
entrypoint (k8s_entrypoint) turns R2SP_WORKER_CMD into the same."""

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# The stand-in: sleeps, named after its path (so leftovers can be found), or exits.
STAND_IN = """#!/bin/bash
case "$1" in
  --exit=*) exit "${1#--exit=}" ;;
esac
exec -a "standin-$0" sleep 30
"""


class RunRoleTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="run_role_test.")
        os.makedirs(os.path.join(self.dir, "bin"))
        os.makedirs(os.path.join(self.dir, "share", "r2sp", "deploy"))
        self.run_role = os.path.join(self.dir, "share", "r2sp", "deploy", "run_role")
        shutil.copy(os.path.join(ROOT, "tools", "deploy", "run_role"), self.run_role)
        for script in ("python_worker", "checkpoint_sync"):
            shutil.copy(os.path.join(ROOT, "tools", "deploy", script),
                        os.path.join(self.dir, "share", "r2sp", "deploy", script))
        for role in ("scheduler", "server", "worker"):
            path = os.path.join(self.dir, "bin", role)
            with open(path, "w") as f:
                f.write(STAND_IN)
            os.chmod(path, 0o755)

    def tearDown(self):
        subprocess.run(["pkill", "-KILL", "-f", "standin-" + self.dir], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def leftovers(self, seconds=10):
        deadline = time.time() + seconds
        while True:
            r = subprocess.run(["pgrep", "-f", "standin-" + self.dir], capture_output=True, text=True)
            if not r.stdout.split() or time.time() > deadline:
                return r.stdout.split()
            time.sleep(0.1)

    def test_exit_status_comes_back(self):
        r = subprocess.run([self.run_role, "worker", "--exit=3"], capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 3)

    def test_sigterm_stops_the_process_even_at_once(self):
        for delay in [0.0, 0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.3] * 3:
            proc = subprocess.Popen([self.run_role, "server"], stdin=subprocess.DEVNULL)
            time.sleep(delay)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        self.assertEqual(self.leftovers(), [])

    def test_the_trap_is_set_before_the_process_starts(self):
        # The race this guards against (a SIGTERM between the start and the trap; seen once in
        # CI, on a loaded machine) is microseconds wide and could not be hit here on purpose, so
        # the order itself is checked.
        with open(self.run_role) as f:
            lines = f.read().splitlines()
        trap = next(i for i, l in enumerate(lines) if l.startswith("trap "))
        start = next(i for i, l in enumerate(lines) if l.startswith('"${program[@]}"'))
        self.assertLess(trap, start)

    def test_end_of_stdin_stops_the_process(self):
        proc = subprocess.Popen([self.run_role, "--watch_stdin", "server"], stdin=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline and not subprocess.run(
                ["pgrep", "-f", "standin-" + self.dir], capture_output=True).stdout:
            time.sleep(0.05)
        self.assertLess(time.time(), deadline, "the process never started")
        proc.stdin.close()
        self.assertNotEqual(proc.wait(timeout=30), 0)
        self.assertEqual(self.leftovers(), [])

    def test_a_server_with_a_checkpoint_url_takes_its_checkpoints_and_copies_its_own(self):
        url, local = os.path.join(self.dir, "url"), os.path.join(self.dir, "local")
        for where, rank, data in ((url, 1, b"from elsewhere"), (local, 0, b"its own")):
            path = os.path.join(where, f"server{rank}", "ckpt-00000001")
            os.makedirs(path)
            with open(os.path.join(path, "shard.bin"), "wb") as f:
                f.write(data)
            with open(os.path.join(path, "MANIFEST"), "w") as f:
                f.write(f'files {{\n  name: "shard.bin"\n  bytes: {len(data)}\n}}\n')
        r = subprocess.run([self.run_role, "--checkpoint_url=file://" + url, "server", "--exit=0",
                            "--checkpoint_dir=" + local],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        for where in (url, local):  # down before the server starts, up after it ends
            self.assertEqual(sorted(os.listdir(where)), ["server0", "server1"], where)
        with open(os.path.join(local, "server1", "ckpt-00000001", "shard.bin"), "rb") as f:
            self.assertEqual(f.read(), b"from elsewhere")

    def test_a_checkpoint_url_is_for_a_server_with_a_checkpoint_dir(self):
        for argv in (["worker", "--checkpoint_dir=/c"], ["server"]):
            r = subprocess.run([self.run_role, "--checkpoint_url=file:///u", *argv],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual((r.returncode, r.stderr), (2, "run_role: error: --checkpoint_url is "
                                                           "for a server with --checkpoint_dir=DIR\n"))

    def test_a_bad_role_is_refused(self):
        r = subprocess.run([self.run_role, "ps"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("the role must be scheduler, server or worker", r.stderr)

    def test_an_interface_without_an_address_is_refused(self):
        r = subprocess.run([self.run_role, "--advertise_interface=nosuchif0", "worker"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)
        self.assertIn("interface 'nosuchif0' has no IPv4 address", r.stderr)


# A Python worker's stand-in: records its argv, working directory and environment into the file
# its first argument names.
RECORDER = """
import json, os, sys
keys = ("R2SP_SCHEDULER", "R2SP_WORKER_FLAGS", "R2SP_DATA_DIR", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "R2SP_CORE")
with open(sys.argv[1], "w") as f:
    json.dump({"argv": sys.argv[2:], "cwd": os.getcwd(),
               "env": {k: os.environ[k] for k in keys if k in os.environ}}, f)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


class PythonWorkerTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="run_role_test.")
        self.dir = os.path.realpath(self._tmp.name)
        deploy = os.path.join(self.dir, "share", "r2sp", "deploy")
        os.makedirs(deploy)
        os.makedirs(os.path.join(self.dir, "python", "r2sp"))
        os.makedirs(os.path.join(self.dir, "worker_files"))
        for name in ("run_role", "python_worker", "k8s_entrypoint"):
            shutil.copy(os.path.join(ROOT, "tools", "deploy", name), os.path.join(deploy, name))
        self.run_role = os.path.join(deploy, "run_role")
        with open(os.path.join(self.dir, "worker_files", "record.py"), "w") as f:
            f.write(RECORDER)
        self.out = os.path.join(self.dir, "recorded.json")

    def tearDown(self):
        self._tmp.cleanup()

    def run_role_with(self, *argv, env=None):
        return subprocess.run([self.run_role] + list(argv), capture_output=True, text=True,
                              timeout=30, env={**os.environ, **(env or {})})

    def test_the_command_gets_the_flags_and_the_bundle(self):
        flags = ["--bind=tcp://0.0.0.0:9201", "--advertise_host=10.0.0.2",
                 "--scheduler=tcp://node0:9000", "--metrics=/out/metrics_worker3.jsonl",
                 "--data_dir=/data/fm", "--note=a b"]
        r = self.run_role_with(f"--worker_cmd={sys.executable} record.py {self.out} --lr='0.1 x'",
                               "--rank=3", "--world_size=4", "--local_rank=1", "worker", *flags,
                               env={"PYTHONPATH": "/site"})
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.out) as f:
            got = json.load(f)
        self.assertEqual(got["argv"], ["--lr=0.1 x"])
        self.assertEqual(got["cwd"], os.path.join(self.dir, "worker_files"))
        self.assertEqual(got["env"], {
            "R2SP_SCHEDULER": "tcp://node0:9000", "R2SP_WORKER_FLAGS": shlex.join(flags),
            "R2SP_DATA_DIR": "/data/fm", "RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1",
            "MASTER_ADDR": "node0", "MASTER_PORT": "9000",
            "PYTHONPATH": os.path.join(self.dir, "python") + ":/site"})

    def test_the_commands_exit_status_comes_back(self):
        r = self.run_role_with(f"--worker_cmd={sys.executable} record.py {self.out}", "--rank=0",
                               "--world_size=1", "--local_rank=0", "worker",
                               "--scheduler=tcp://h:1", env={"EXIT": "5"})
        self.assertEqual(r.returncode, 5, r.stderr)

    def test_worker_cmd_is_for_workers_only(self):
        r = self.run_role_with("--worker_cmd=python3 t.py", "--rank=0", "server")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "run_role: error: --worker_cmd is for workers, not the server\n")

    def test_a_rank_needs_worker_cmd(self):
        r = self.run_role_with("--rank=0", "worker")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "run_role: error: --rank=0 needs --worker_cmd\n")

    def test_the_pod_entrypoint_runs_r2sp_worker_cmd(self):
        out = os.path.join(self.dir, "out")
        entrypoint = os.path.join(self.dir, "share", "r2sp", "deploy", "k8s_entrypoint")
        r = subprocess.run([entrypoint, "worker"], capture_output=True, text=True, timeout=30, env={
            "PATH": os.environ["PATH"], "R2SP_OUT": out, "JOB_COMPLETION_INDEX": "2",
            "R2SP_NUM_WORKERS": "3", "R2SP_SCHEDULER": "tcp://j-scheduler:9000",
            "POD_IP": "10.1.0.7", "R2SP_PORT": "9200", "R2SP_FLAGS": "--batch_size=8",
            "R2SP_WORKER_CMD": f"{sys.executable} record.py {self.out}"})
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.out) as f:
            got = json.load(f)
        flags = ["--advertise_host=10.1.0.7", "--bind=tcp://0.0.0.0:9200",
                 f"--metrics={out}/metrics_worker2.jsonl", f"--timeline={out}/timeline_worker2.json",
                 "--scheduler=tcp://j-scheduler:9000", "--batch_size=8"]
        self.assertEqual(got["env"], {
            "R2SP_SCHEDULER": "tcp://j-scheduler:9000", "R2SP_WORKER_FLAGS": shlex.join(flags),
            "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "0", "MASTER_ADDR": "j-scheduler",
            "MASTER_PORT": "9000", "PYTHONPATH": os.path.join(self.dir, "python")})
        r = subprocess.run([entrypoint, "worker"], capture_output=True, text=True, timeout=30, env={
            "PATH": os.environ["PATH"], "R2SP_OUT": out, "JOB_COMPLETION_INDEX": "2",
            "R2SP_WORKER_CMD": "python3 t.py"})
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "k8s_entrypoint: error: a Python worker (R2SP_WORKER_CMD) "
                                   "needs R2SP_NUM_WORKERS\n")

    def test_a_worker_without_a_scheduler_is_refused(self):
        r = self.run_role_with("--worker_cmd=python3 t.py", "--rank=0", "--world_size=1",
                               "--local_rank=0", "worker")
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, "python_worker: error: the worker flags give no "
                                   "--scheduler=tcp://HOST:PORT\n")


if __name__ == "__main__":
    junit_main.main()
