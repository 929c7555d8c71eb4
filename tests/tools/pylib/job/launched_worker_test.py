"""launched_worker.pid_of: the live process that names a worker's metrics file, and a clear
failure (the worker's log tail) when there is none."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import junit_main
from launched_worker import pid_of


class PidOfTest(unittest.TestCase):

    def setUp(self):
        self.run_dir = tempfile.mkdtemp(prefix="launched_worker_")
        self.addCleanup(shutil.rmtree, self.run_dir, ignore_errors=True)

    def test_the_process_that_names_the_workers_metrics_file(self):
        other = self.start(f"--metrics={self.run_dir}/metrics_worker1.jsonl")
        mine = self.start(f"--metrics={self.run_dir}/metrics_worker2.jsonl")
        self.assertEqual(pid_of(self.run_dir, 2), mine.pid)
        self.assertEqual(pid_of(self.run_dir, 1), other.pid)

    def test_no_such_worker_fails_with_its_log_tail(self):
        with open(os.path.join(self.run_dir, "worker3.log"), "w") as f:
            f.write("".join(f"line {i}\n" for i in range(30)))
        with self.assertRaises(AssertionError) as raised:
            pid_of(self.run_dir, 3, timeout=0.3)
        self.assertEqual(str(raised.exception),
                         f"no process of worker 3 in {self.run_dir} after 0.3 s; its log ends:\n"
                         + "".join(f"line {i}\n" for i in range(10, 30)))

    def start(self, flag):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", flag])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc


if __name__ == "__main__":
    junit_main.main()
