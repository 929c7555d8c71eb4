"""CPU use of a job's processes and of the whole machine, from /proc: how many cores the
scheduler, each server and each worker kept busy, and how busy the machine was over the job.
On a small machine that hosts a whole emulated cluster this tells whether a mode was limited by
the modes' logic or by the cores (a server starved by its workers, say). Processes are sampled
while they run (every `period` seconds), so up to one period of a process's last CPU time
before it exits is missed. The /proc directory, the clock tick, the core count and the clock
can be given (tests fabricate them)."""

import dataclasses
import os
import time


@dataclasses.dataclass(frozen=True)
class System:
    """Where CpuMeter reads from: a /proc-style directory, its clock ticks per second, the
    machine's cores, and a clock."""
    proc: str = "/proc"
    ticks_per_second: int = os.sysconf("SC_CLK_TCK")
    cores: int = os.cpu_count() or 1
    clock: object = time.time


def _process_seconds(pid, system=System()):
    """utime + stime of process `pid` in seconds, or None once it is gone."""
    try:
        with open(os.path.join(system.proc, str(pid), "stat")) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / system.ticks_per_second


def _machine_jiffies(system=System()):
    """(all, idle + iowait) jiffies summed over every CPU since boot."""
    with open(os.path.join(system.proc, "stat")) as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return sum(values), values[3] + values[4]


class CpuMeter:
    def __init__(self, period=0.5, system=System()):
        self.period = period
        self.system = system
        self.seconds = {}  # name -> CPU seconds at the latest sample
        self.last_sample = 0.0
        self.start = system.clock()
        self.machine_start = _machine_jiffies(system)

    def sample(self, procs):
        """Samples [(name, Popen)] if a period has passed since the last sample."""
        now = self.system.clock()
        if now - self.last_sample < self.period:
            return
        self.last_sample = now
        for name, proc in procs:
            seconds = _process_seconds(proc.pid, self.system) if proc.poll() is None else None
            if seconds is not None:
                self.seconds[name] = seconds

    def summary(self):
        """{"cpu_cores": {name: mean cores over the job}, "machine_busy_cores": ...,
        "machine_cores": N}."""
        wall = max(1e-6, self.system.clock() - self.start)
        total, idle = _machine_jiffies(self.system)
        d_total, d_idle = total - self.machine_start[0], idle - self.machine_start[1]
        cores = self.system.cores
        busy = cores * (1 - d_idle / d_total) if d_total > 0 else None
        return {"cpu_cores": {n: round(s / wall, 3) for n, s in sorted(self.seconds.items())},
                "machine_busy_cores": round(busy, 3) if busy is not None else None,
                "machine_cores": cores}
