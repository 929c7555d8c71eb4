"""tools/pylib/analysis/cpu_meter.py on a fabricated /proc (a process's stat line, the machine's
cpu line) and a fake clock: exact CPU seconds, sampling at most once a period, a gone process
keeping its last sample, and the summary's exact cores. One check on this machine's real /proc
that a process's own CPU time reads back."""

import os
import shutil
import tempfile
import unittest

from pylib.analysis import cpu_meter
import junit_main


class Clock:
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now


class Proc:
    def __init__(self, pid, running=True):
        self.pid, self.running = pid, running

    def poll(self):
        return None if self.running else 0


class FakeProcTest(unittest.TestCase):
    def setUp(self):
        self.proc = tempfile.mkdtemp(prefix="cpu_meter_test.")
        self.addCleanup(shutil.rmtree, self.proc)
        self.clock = Clock()
        self.system = cpu_meter.System(proc=self.proc, ticks_per_second=100, cores=4,
                                       clock=self.clock)
        self.machine(total_busy=0, idle=0)

    def machine(self, total_busy, idle):
        """/proc/stat's cpu line: user `total_busy`, idle `idle`, the rest 0."""
        with open(os.path.join(self.proc, "stat"), "w") as f:
            f.write(f"cpu  {total_busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")

    def process(self, pid, utime, stime, name="a (b) c"):
        """/proc/PID/stat with a command name holding spaces and parentheses, as a real one may."""
        os.makedirs(os.path.join(self.proc, str(pid)), exist_ok=True)
        fields = ["S"] + ["0"] * 10 + [str(utime), str(stime)] + ["0"] * 30
        with open(os.path.join(self.proc, str(pid), "stat"), "w") as f:
            f.write(f"{pid} ({name}) " + " ".join(fields) + "\n")

    def test_process_seconds_are_utime_plus_stime_in_ticks(self):
        self.process(42, utime=250, stime=50)
        self.assertEqual(cpu_meter._process_seconds(42, self.system), 3.0)
        self.assertIsNone(cpu_meter._process_seconds(43, self.system))  # gone

    def test_machine_jiffies(self):
        self.machine(total_busy=300, idle=700)
        self.assertEqual(cpu_meter._machine_jiffies(self.system), (1000, 700))

    def test_samples_at_most_once_a_period_and_a_gone_process_keeps_its_last(self):
        meter = cpu_meter.CpuMeter(period=0.5, system=self.system)
        self.process(7, utime=100, stime=0)
        meter.sample([("worker0", Proc(7))])
        self.assertEqual(meter.seconds, {"worker0": 1.0})
        self.process(7, utime=200, stime=0)
        self.clock.now += 0.4  # within the period: not sampled
        meter.sample([("worker0", Proc(7))])
        self.assertEqual(meter.seconds, {"worker0": 1.0})
        self.clock.now += 0.1
        meter.sample([("worker0", Proc(7))])
        self.assertEqual(meter.seconds, {"worker0": 2.0})
        self.process(7, utime=900, stime=0)
        self.clock.now += 1
        meter.sample([("worker0", Proc(7, running=False))])  # exited: not read again
        self.assertEqual(meter.seconds, {"worker0": 2.0})
        shutil.rmtree(os.path.join(self.proc, "7"))
        self.clock.now += 1
        meter.sample([("worker0", Proc(7))])  # gone from /proc before its poll says so
        self.assertEqual(meter.seconds, {"worker0": 2.0})

    def test_summary_exact_cores(self):
        self.machine(total_busy=1000, idle=3000)
        meter = cpu_meter.CpuMeter(period=0.0, system=self.system)
        self.process(1, utime=150, stime=50)  # 2 s
        self.process(2, utime=500, stime=100)  # 6 s
        meter.sample([("worker1", Proc(2)), ("scheduler", Proc(1))])
        self.clock.now += 4.0
        # Over the job: 800 jiffies more, 200 of them idle: 4 cores * 600/800 = 3 busy.
        self.machine(total_busy=1600, idle=3200)
        self.assertEqual(meter.summary(), {"cpu_cores": {"scheduler": 0.5, "worker1": 1.5},
                                           "machine_busy_cores": 3.0, "machine_cores": 4})

    def test_summary_of_no_time_has_no_machine_figure(self):
        meter = cpu_meter.CpuMeter(system=self.system)
        self.assertEqual(meter.summary(), {"cpu_cores": {}, "machine_busy_cores": None,
                                           "machine_cores": 4})


class RealProcTest(unittest.TestCase):
    def test_this_process_reads_its_own_cpu_time(self):
        times = os.times()
        seconds = cpu_meter._process_seconds(os.getpid())
        self.assertAlmostEqual(seconds, times.user + times.system, delta=0.05)


if __name__ == "__main__":
    junit_main.main()
