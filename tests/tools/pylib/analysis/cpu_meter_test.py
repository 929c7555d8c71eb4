"""tools/pylib/cpu_meter.py on this machine's /proc: a process's CPU seconds, sampling at most
once a period, and the summary's shape."""

import subprocess
import sys
import unittest

from pylib.analysis import cpu_meter
import junit_main

BUSY = "import time\nend = time.time() + 0.3\nwhile time.time() < end: pass\n"


class CpuMeterTest(unittest.TestCase):
    def test_a_busy_process_uses_cpu_and_a_gone_one_has_none(self):
        proc = subprocess.Popen([sys.executable, "-c", BUSY + "time.sleep(30)"])
        try:
            meter = cpu_meter.CpuMeter(period=0.0)
            seconds = 0.0
            while seconds < 0.1 and proc.poll() is None:
                meter.sample([("busy", proc)])
                seconds = meter.seconds.get("busy", 0.0)
            self.assertGreaterEqual(seconds, 0.1)
        finally:
            proc.kill()
            proc.wait()
        self.assertIsNone(cpu_meter._process_seconds(proc.pid))
        meter.sample([("busy", proc)])  # an exited process keeps its last sample
        self.assertEqual(meter.seconds["busy"], seconds)

    def test_samples_at_most_once_a_period(self):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            meter = cpu_meter.CpuMeter(period=3600)
            meter.sample([("first", proc)])
            meter.sample([("second", proc)])
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(list(meter.seconds), ["first"])

    def test_summary(self):
        meter = cpu_meter.CpuMeter()
        meter.seconds = {"worker1": 0.0, "scheduler": 0.0}
        summary = meter.summary()
        self.assertEqual(list(summary), ["cpu_cores", "machine_busy_cores", "machine_cores"])
        self.assertEqual(list(summary["cpu_cores"]), ["scheduler", "worker1"])
        self.assertGreaterEqual(summary["machine_cores"], 1)


if __name__ == "__main__":
    junit_main.main()
