"""A job on 127.0.0.1 for the Python client's tests: the real scheduler and server binaries
(from the test's runfiles, or $R2SP_BIN_DIR), C++ workers and Python workers as processes, each
logging to a file of the job's directory. close() kills what still runs and removes the
directory."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

# The runfiles under Bazel; else the checkout, whose binaries are in bazel-bin.
if "TEST_SRCDIR" in os.environ:
    ROOT = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "r2sp"))
    BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)
else:
    ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    BIN_DIR = os.environ.get("R2SP_BIN_DIR", os.path.join(ROOT, "bazel-bin"))
CORE_DIR = os.path.join(BIN_DIR, "worker", "python")  # _core.so
BINARIES = [os.path.join(BIN_DIR, *p) for p in
            (("scheduler", "scheduler"), ("server", "server"), ("worker", "worker"))]
NODE = ["--heartbeat_ms=200"]


def cannot_run():
    """Why these tests cannot run here, or None."""
    missing = [p for p in BINARIES if not os.access(p, os.X_OK)]
    if not os.path.exists(os.path.join(CORE_DIR, "_core.so")):
        missing.append(os.path.join(CORE_DIR, "_core.so"))
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


class Job:
    """The scheduler (its endpoint in .endpoint) and `servers` servers of a job of `workers`."""

    def __init__(self, name, workers, servers=1, scheduler_flags=(), server_flags=()):
        self.dir = tempfile.mkdtemp(prefix=name + "_")
        self.processes = []
        endpoint_file = os.path.join(self.dir, "endpoint")
        self.scheduler = self._start("scheduler", [
            BINARIES[0], "--bind=tcp://127.0.0.1:*", "--endpoint_file=" + endpoint_file,
            f"--num_workers={workers}", f"--num_servers={servers}", "--heartbeat_timeout_ms=1000",
            "--stats_json=" + os.path.join(self.dir, "stats.json"), *scheduler_flags])
        deadline = time.time() + 30
        while not os.path.exists(endpoint_file) and time.time() < deadline:
            time.sleep(0.05)
        with open(endpoint_file) as f:
            self.endpoint = f.read().strip()
        for s in range(servers):
            self._start(f"server{s}", [BINARIES[1], "--scheduler=" + self.endpoint, *NODE,
                                        *server_flags])

    def _start(self, name, argv, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, env=env)
        p.name = name
        self.processes.append(p)
        return p

    def path(self, name):
        return os.path.join(self.dir, name)

    def log(self, name):
        with open(self.path(name + ".log")) as f:
            return f.read()

    def cpp_worker(self, name, flags):
        return self._start(name, [BINARIES[2], "--scheduler=" + self.endpoint, *NODE, *flags])

    def python_worker(self, name, script, args, interpreter=sys.executable, env=None):
        """`script` with `args`; `env`: its environment (default this process's)."""
        return self._start(name, [interpreter, script, *args], env)

    def wait(self, processes, timeout=120):
        """The exit status of each of `processes` (None: still running at the deadline)."""
        deadline = time.time() + timeout
        codes = []
        for p in processes:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    def close(self):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
