"""tools/pylib/job/fault_runs.py: a launcher's children found in /proc with their arguments, and
kill_child killing only the newest matching child of that launcher, by pid, never a process
elsewhere that matches too; steps counted from a metrics file; a failed job's outcome."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main
from pylib.job import fault_runs
from pylib.job.errors import JobError

# A stand-in launcher: starts children sleeping with the arguments it is given (one child per
# argument), prints their pids, and waits.
PARENT = r'''
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", arg])
        for arg in sys.argv[1:]]
print(" ".join(str(k.pid) for k in kids), flush=True)
for k in kids:
    k.wait()
'''


class KillChildTest(unittest.TestCase):
    def start(self, *args):
        parent = subprocess.Popen([sys.executable, "-c", PARENT, *args], stdout=subprocess.PIPE,
                                  text=True)
        pids = [int(p) for p in parent.stdout.readline().split()]

        def stop():
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            parent.wait()
        self.addCleanup(stop)
        return parent, pids

    def alive(self, pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def test_only_the_launchers_newest_matching_child_is_killed(self):
        stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                                     "--metrics=/r/metrics_worker1.jsonl"])
        self.addCleanup(stranger.wait)
        self.addCleanup(stranger.kill)
        parent, (w0, w1, w1_again) = self.start("--metrics=/r/metrics_worker0.jsonl",
                                                "--metrics=/r/metrics_worker1.jsonl",
                                                "--metrics=/r/metrics_worker1.r1.jsonl")
        children = {pid: argv[-1] for _, pid, argv in fault_runs.children(parent.pid)}
        self.assertEqual(children, {w0: "--metrics=/r/metrics_worker0.jsonl",
                                    w1: "--metrics=/r/metrics_worker1.jsonl",
                                    w1_again: "--metrics=/r/metrics_worker1.r1.jsonl"})
        self.assertEqual(fault_runs.kill_child(parent, "metrics_worker1"), w1_again)
        deadline = time.time() + 10
        while self.alive(w1_again) and time.time() < deadline:
            time.sleep(0.02)
        self.assertEqual([self.alive(p) for p in (w0, w1, w1_again, stranger.pid)],
                         [True, True, False, True])
        self.assertIsNone(fault_runs.kill_child(parent.pid, "metrics_worker7"))

    def test_a_python_workers_flags_come_from_its_environment(self):
        env = dict(os.environ, R2SP_WORKER_FLAGS="--scheduler=tcp://h:1 "
                                                 "'--metrics=/r/metrics_worker2.jsonl'")
        parent = subprocess.Popen([sys.executable, "-c", PARENT, "train.py"],
                                  stdout=subprocess.PIPE, text=True, env=env)
        (pid,) = [int(p) for p in parent.stdout.readline().split()]
        self.addCleanup(parent.wait)
        children = {p: argv[-3:] for _, p, argv in fault_runs.children(parent.pid)}
        self.assertEqual(children, {pid: ["train.py", "--scheduler=tcp://h:1",
                                          "--metrics=/r/metrics_worker2.jsonl"]})
        self.assertEqual(fault_runs.kill_child(parent, "metrics_worker2"), pid)


class RunFilesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fault_runs_test.")
        self.addCleanup(shutil.rmtree, self.dir)

    def test_steps_done_counts_iterations_not_events(self):
        self.assertEqual(fault_runs.steps_done(self.dir, 0), 0)
        with open(os.path.join(self.dir, "metrics_worker0.jsonl"), "w") as f:
            f.write('{"worker": 1, "iteration": 1}\n{"event": "joined"}\n{"worker": 1, "iteration": 2}\n')
        self.assertEqual(fault_runs.steps_done(self.dir, 0), 2)
        self.assertEqual(fault_runs.not_evaluating(self.dir, 2), 0)

    def test_a_failed_job_is_a_job_error(self):
        with self.assertRaisesRegex(JobError, rf"^bench: the job in {self.dir} failed \(status 3\)$"):
            fault_runs.outcome(self.dir, 3, "bench")


if __name__ == "__main__":
    junit_main.main()
