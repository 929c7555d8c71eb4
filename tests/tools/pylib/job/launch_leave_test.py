"""tools/launch with the real binaries when a worker is stopped with SIGTERM (what a
pod's deletion, a Slurm job's preemption or a spot warning sends): the worker leaves after its
current step and tells the scheduler (LEAVE), which counts it dead at once instead of after the
heartbeat timeout. A bsp job (the survivors' pulls wait for every live worker's push, so a
death noticed late stalls them) of the synthetic model with a 20 s heartbeat timeout: the leave
is in the scheduler's log within 3 s of the signal, the job completes well before the timeout
could have noticed the death, the launcher records the death (status 143), and the stats say
the worker left."""

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main
from launched_worker import pid_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
LAUNCH = os.path.join(ROOT, "tools", "launch")
HEARTBEAT_TIMEOUT_S = 20
WORKER = ("--model_mb=1 --layers=2 --iterations=200 --compute_ms=20 --log_every=10 "
          "--heartbeat_ms=200")


def cannot_run():
    binaries = [os.path.join(BIN_DIR, role, role) for role in ("scheduler", "server", "worker")]
    missing = [p for p in binaries if not os.access(p, os.X_OK)]
    return f"needs the built binaries: {', '.join(missing)}" if missing else None


def progress(run_dir, worker):
    """(rank, iterations) from the last progress line in worker<worker>.log (None before)."""
    lines = re.findall(r"worker (\d+): iteration (\d+)/", read(os.path.join(run_dir, f"worker{worker}.log")))
    return tuple(map(int, lines[-1])) if lines else (None, 0)


def read(path):
    with contextlib.suppress(OSError), open(path) as f:
        return f.read()
    return ""


@unittest.skipIf(cannot_run(), cannot_run() or "")
class WorkerLeavesOnSigtermTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="launch_leave_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def test_sigterm_is_a_clean_leave_noticed_at_once(self):
        run_dir = os.path.join(self.dir, "run")
        proc = subprocess.Popen(
            [sys.executable, LAUNCH, "--bin_dir=" + BIN_DIR, "--quiet", "--run_dir=" + run_dir,
             "--servers=1", "--workers=3", "--sync=bsp", "--timeout=120",
             f"--scheduler_flags=--heartbeat_timeout_ms={HEARTBEAT_TIMEOUT_S * 1000}",
             "--server_flags=--heartbeat_ms=200", "--worker_flags=" + WORKER],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.addCleanup(lambda: proc.poll() is None and os.killpg(proc.pid, signal.SIGKILL))
        deadline = time.time() + 60
        while progress(run_dir, 1)[1] < 120:
            if proc.poll() is not None or time.time() > deadline:
                self.fail("worker1 never reached step 120: " + proc.communicate()[0])
            time.sleep(0.05)
        rank = progress(run_dir, 1)[0]
        os.kill(pid_of(run_dir, 1), signal.SIGTERM)
        signalled = time.time()

        left = re.compile(rf"worker {rank} at \S+ left the job \(signal 15\) after (\d+) iter")
        scheduler_log = os.path.join(run_dir, "scheduler.log")
        while not left.search(read(scheduler_log)):
            self.assertLess(time.time() - signalled, 3, read(scheduler_log))
            time.sleep(0.02)
        recorded = time.time()
        out, _ = proc.communicate(timeout=120)
        ended = time.time()
        print(f"leave recorded {recorded - signalled:.2f} s after SIGTERM; job ended "
              f"{ended - signalled:.2f} s after it (heartbeat timeout {HEARTBEAT_TIMEOUT_S} s)",
              file=sys.stderr)
        self.assertEqual(proc.returncode, 0, out)
        self.assertLess(ended - signalled, HEARTBEAT_TIMEOUT_S - 5, out)

        log = read(scheduler_log)
        self.assertNotIn("declared dead", log)
        done = int(left.search(log).group(1))
        self.assertIn(f"worker {rank}: left the job (signal 15) after step {done}",
                      read(os.path.join(run_dir, "worker1.log")))
        with open(os.path.join(run_dir, "stats.json")) as f:
            stats = json.load(f)
        self.assertEqual([(w["state"], w["left"]) for w in stats["workers"]],
                         [("dead", True) if r == rank else ("finished", False) for r in range(3)])
        self.assertEqual(stats["workers"][rank]["iterations"], done)
        self.assertGreaterEqual(done, 120)
        self.assertLess(done, 200)
        with open(os.path.join(run_dir, "summary.json")) as f:
            s = json.load(f)
        self.assertTrue(s["completed"], s)
        self.assertEqual(s["deaths"]["worker"], 1, s)
        died = [e for e in s["events"] if e["event"] == "died"]
        self.assertEqual([(e["process"], e["status"]) for e in died], [("worker1", 143)], s)


if __name__ == "__main__":
    junit_main.main()
