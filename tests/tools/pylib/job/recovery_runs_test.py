"""job/recovery_runs.py: finding a run's process in /proc by its binary and an argument naming
the run (a fake /proc), killing it (a real process), a launcher run with a fault once its worker
has iterations (a stand-in launcher), counting iteration lines across metrics files, and a run's
figures, also counted from the death itself."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from pylib.job import recovery_runs
from pylib.job.errors import JobError
import junit_main


class RecoveryRunsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="recovery_runs_test.")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def process(self, pid, *argv):
        os.makedirs(os.path.join(self.dir, "proc", str(pid)))
        with open(os.path.join(self.dir, "proc", str(pid), "cmdline"), "wb") as f:
            f.write(b"\0".join(a.encode() for a in argv) + b"\0")

    def test_find_wants_the_binary_and_the_runs_path_newest_first(self):
        self.process(10, "/b/worker", "--metrics=/r/run1/metrics_worker1.jsonl")
        self.process(12, "/b/worker", "--metrics=/r/run1/metrics_worker1.jsonl")
        self.process(11, "/b/worker", "--metrics=/r/run2/metrics_worker1.jsonl")
        self.process(13, "/b/server", "--checkpoint_dir=/r/run1/checkpoints")
        self.process(14, "python3", "/b/worker", "/r/run1/metrics_worker1.jsonl")
        os.makedirs(os.path.join(self.dir, "proc", "self"))
        proc = os.path.join(self.dir, "proc")
        self.assertEqual(recovery_runs.find("worker", "run1/metrics_worker1.jsonl", proc), [12, 10])
        self.assertEqual(recovery_runs.find("server", "run1/checkpoints", proc), [13])
        self.assertEqual(recovery_runs.find("server", "run2/checkpoints", proc), [])

    def test_iterations_add_up_every_matching_file_without_evaluations(self):
        for host, lines in (("a", ['{"t": 1}', '{"t": 2}', '{"event": "eval"}']), ("b", ['{"t": 1}'])):
            os.makedirs(os.path.join(self.dir, host))
            with open(os.path.join(self.dir, host, "metrics_worker0.jsonl"), "w") as f:
                f.write("\n".join(lines) + "\n")
        self.assertEqual(recovery_runs.iterations(os.path.join(self.dir, "*", "metrics_worker0.jsonl")), 3)
        self.assertEqual(recovery_runs.iterations(os.path.join(self.dir, "none", "*.jsonl")), 0)

    def test_figures_of_the_first_death_and_a_job_that_failed(self):
        path = os.path.join(self.dir, "summary.json")
        summary = {"completed": True, "recovery": {
            "updates_lost_steps": 20.0, "after_deaths": [
                {"process": "server0", "died_s": 5.0, "recovered_s": 3.25, "replacement": "server0.r1"},
                {"process": "worker1", "died_s": 9.0, "recovered_s": 1.0, "replacement": None}]}}
        with open(path, "w") as f:
            json.dump(summary, f)
        self.assertEqual(recovery_runs.figures(path), (3.25, 20.0))
        summary["completed"] = False
        with open(path, "w") as f:
            json.dump(summary, f)
        with self.assertRaisesRegex(JobError, "the job did not complete"):
            recovery_runs.figures(path)


    def test_kill_signals_the_newest_match_and_says_when(self):
        os.symlink("/bin/sleep", os.path.join(self.dir, "worker"))
        needle = f"{os.getpid()}.{time.time_ns() % 1000000}"  # a sleep no other process runs
        old = subprocess.Popen([os.path.join(self.dir, "worker"), needle])
        new = subprocess.Popen([os.path.join(self.dir, "worker"), needle])
        self.addCleanup(old.kill)
        self.addCleanup(new.kill)
        while len(recovery_runs.find("worker", needle)) < 2:  # until both have exec'd
            time.sleep(0.01)
        before = time.time()
        at = recovery_runs.kill("worker", needle, signal.SIGTERM)()
        self.assertEqual(new.wait(timeout=10), -signal.SIGTERM)
        self.assertIsNone(old.poll())
        self.assertTrue(before <= at <= time.time(), (before, at))
        with self.assertRaisesRegex(JobError, "no server process with an argument containing x"):
            recovery_runs.kill("server", "x" + needle)()

    def launcher(self, status):
        """A stand-in for tools/launch: writes 5 iteration lines, waits for the fault's file,
        exits with `status`."""
        metrics, go = os.path.join(self.dir, "metrics_worker0.jsonl"), os.path.join(self.dir, "go")
        script = (f"import os, sys, time\nwith open({metrics!r}, 'w') as f:\n"
                  "    f.write('{\"t\": 1}\\n' * 5)\n"
                  f"while not os.path.exists({go!r}):\n    time.sleep(0.01)\n"
                  f"print('launch: the end'); sys.exit({status})\n")
        return [sys.executable, "-c", script], metrics, go

    def test_run_with_fault_faults_at_the_iterations_and_returns_the_death(self):
        argv, metrics, go = self.launcher(0)
        seen = []

        def fault():
            seen.append(recovery_runs.iterations(metrics))
            open(go, "w").close()
            return 1234.5
        self.assertEqual(recovery_runs.run_with_fault(argv, None, metrics, 5, fault, 30), 1234.5)
        self.assertEqual(seen, [5])

    def test_run_with_fault_fails_with_the_launchers_output(self):
        argv, metrics, go = self.launcher(3)
        with self.assertRaisesRegex(JobError, r"the launcher failed \(3\): launch: the end"):
            recovery_runs.run_with_fault(argv, None, metrics, 5,
                                         lambda: open(go, "w").close() or 1.0, 30)
        never = [sys.executable, "-c", "print('launch: no job')"]
        with self.assertRaisesRegex(JobError, "no 5 iterations in .*: launch: no job"):
            recovery_runs.run_with_fault(never, None, metrics + ".none", 5, lambda: 1.0, 30)

    def test_recovered_since_counts_from_the_death_not_from_the_launcher_seeing_it(self):
        # The launcher saw worker1's death 4 s after the kill (EC2 looks every 5 s); worker0
        # stalled until 1003.0 (the heartbeat timeout), worker1.r1 trained from 1005.0.
        rows = {"worker0": [(999.5, 1000.0), (1000.2, 1003.0), (1003.1, 1003.6)],
                "worker1": [(999.4, 999.9)], "worker1.r1": [(1005.0, 1005.5), (1005.6, 1006.0)]}
        for process, spans in rows.items():
            with open(os.path.join(self.dir, f"metrics_{process}.jsonl"), "w") as f:
                for start, end in spans:
                    f.write(json.dumps({"t": end, "compute_s": round(end - start, 3)}) + "\n")
        path = os.path.join(self.dir, "summary.json")
        events = [{"t": 5.0, "process": "server0", "event": "stopped", "status": -15},
                  {"t": 14.0, "process": "worker1", "event": "died", "status": 137},
                  {"t": 14.5, "process": "worker1.r1", "event": "restarted", "status": 137}]
        with open(path, "w") as f:
            json.dump({"completed": True, "events": events}, f)
        self.assertEqual(recovery_runs.recovered_since(path, 1000.0), 5.5)
        # A death the launcher never recorded leaves nothing to count from.
        with open(path, "w") as f:
            json.dump({"completed": True, "events": events[:1]}, f)
        with self.assertRaisesRegex(JobError, "no worker or server died"):
            recovery_runs.recovered_since(path, 1000.0)


if __name__ == "__main__":
    junit_main.main()
