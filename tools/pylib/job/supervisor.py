"""Supervising a job's processes (the local launcher's, launcher.run_job; the ssh backend's ssh
commands, deploy/ssh_backend.py, which starts replacements through the restart hook; the EC2
backend's processes on instances, deploy/ec2_supervision.py) until the
scheduler, the authority on the job's outcome, exits. A server or worker that exits non-zero or by a signal is recorded as
a death, not a failure of the job; a dead worker or server is replaced while --max_restarts
allows (a server's replacement restores its shard from the checkpoints). Once
the scheduler has exited 0 (the job completed) the others get GRACE_SECONDS to exit; whatever
still runs then, or after a scheduler that exited non-zero, is stopped and recorded."""

import re
import time

from .deadline import Deadline
from ..analysis.summary import Event, Outcome

# How long the servers and workers may take to exit after the scheduler (they exit within a
# few seconds of its SHUTDOWN, or of losing it).
GRACE_SECONDS = 30.0
ROLES_REPLACED = ("worker", "server")
# Modes whose servers complete rounds together (docs/MODES.md): a lost server is not replaced
# while the job runs; the job resumes from the checkpoints instead.
ROUND_SYNCHRONOUS = ("bsp", "easgd")


def parse_max_restarts(text):
    """{"worker": N, "server": M} from --max_restarts: "N" (workers only) or "worker:N,server:M".
    ValueError unless every count is a whole number >= 0."""
    limits = {"worker": 0, "server": 0}
    if re.fullmatch(r"\d+", text.strip()):
        limits["worker"] = int(text)
        return limits
    for item in text.split(","):
        role, colon, count = (part.strip() for part in item.partition(":"))
        if not colon or role not in limits or not re.fullmatch(r"\d+", count):
            raise ValueError(f"bad --max_restarts '{text}' (use N, or worker:N,server:M)")
        limits[role] = int(count)
    return limits


def slot(name):
    """The process a (replacement) name stands for: "worker1.r2" -> "worker1"."""
    return name.partition(".")[0]


def role(name):
    """"scheduler", "server" or "worker" from a process name ("server0", "worker1.r2")."""
    return slot(name).rstrip("0123456789")


def replacement_argv(argv, run_dir, name):
    """The dead process's `argv` for its replacement `name` (worker1.r1, server0.r1): a
    worker's metrics and timeline go to files of their own, so the dead one's are kept."""
    def rename(arg):
        if arg.startswith("--metrics="):
            return f"--metrics={run_dir}/metrics_{name}.jsonl"
        if arg.startswith("--timeline="):
            return f"--timeline={run_dir}/timeline_{name}.json"
        return arg
    return [rename(arg) for arg in argv]


class Supervisor:
    """Watches a started Job (processes.Job) every 0.1 s; not thread-safe (the launcher's main
    thread runs it). restart(dead, new) starts the replacement `new` (worker1.r1) of the process
    `dead` (worker1): by default the dead one's command (replacement_argv) on this machine; a
    remote backend passes its own (the ssh backend: a new ssh to the dead process's host)."""

    def __init__(self, job, start, max_restarts, cpu, during=None, restart=None):
        self.job = job
        self.restart = restart or self._restart_here
        self.start = start  # time.time() when the job started
        self.deadline = Deadline(start, job.args.timeout)
        self.max_restarts = max_restarts  # parse_max_restarts()
        self.cpu = cpu
        self.during = during
        self.outcome = Outcome(started_at=start)
        self._seen = set()  # processes whose end is recorded
        self._replaced = {}  # slot -> number of its latest replacement

    def run(self):
        """Returns the Outcome once the scheduler has exited and every other process has too
        (or was stopped). JobError when the job runs past --timeout (nothing recorded then:
        the caller stops every process)."""
        scheduler = dict(self.job.procs())["scheduler"]
        while scheduler.poll() is None:
            self._record_exits()
            self._tick()
            self.deadline.check()
        status = scheduler.returncode
        if status == 0:
            deadline = min(time.time() + GRACE_SECONDS, self.start + self.job.args.timeout)
            while not self.job.finished() and time.time() < deadline:
                self._record_exits()
                self._tick()
        self._record_exits()
        for name, stopped in self.job.stop_all():
            self._seen.add(name)
            self._event(name, "stopped", stopped)
        self._record_exits()  # those that exited on their own while the others were stopped
        self.outcome.completed = status == 0
        self.outcome.scheduler_status = status
        return self.outcome

    def _tick(self):
        self.cpu.sample(self.job.procs())
        if self.during:
            self.during()
        time.sleep(0.1)

    def _record_exits(self):
        procs = self.job.procs()
        scheduler_running = dict(procs)["scheduler"].poll() is None  # no replacement after it
        for name, proc in procs:
            if name == "scheduler" or name in self._seen:
                continue
            status = proc.poll()
            if status is not None:
                self._seen.add(name)
                if status != 0:
                    self._died(name, status, replace=scheduler_running)

    def _died(self, name, status, replace):
        kind = role(name)
        self.outcome.deaths[kind] += 1
        self._event(name, "died", status)
        if not replace:
            why = "after the scheduler exited"
        elif kind not in ROLES_REPLACED:
            why = f"{kind}s are not replaced"
        elif kind == "server" and self.job.args.sync in ROUND_SYNCHRONOUS:
            article = "an" if self.job.args.sync[0] in "ae" else "a"
            why = (f"{article} {self.job.args.sync} job's servers share its clocks: the job "
                   "resumes from the checkpoints")
        elif self.outcome.restarts[kind] >= self.max_restarts[kind]:
            why = f"no restarts left (--max_restarts={kind}:{self.max_restarts[kind]})"
        else:
            k = self._replaced.get(slot(name), 0) + 1
            new = f"{slot(name)}.r{k}"
            print(f"launch: {name} died (status {status}); starting replacement {new}", flush=True)
            self.restart(name, new)
            self._replaced[slot(name)] = k
            self.outcome.restarts[kind] += 1
            self._event(new, "restarted", status)
            return
        print(f"launch: {name} died (status {status}); {why}", flush=True)

    def _restart_here(self, dead, new):
        argv, echo = self.job.command(dead)
        self.job.start(new, replacement_argv(argv, self.job.args.run_dir, new), echo)

    def _event(self, name, event, status):
        self.outcome.events.append(Event(round(time.time() - self.start, 3), name, event, status))
