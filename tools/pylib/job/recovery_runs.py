"""One fault run of tools/bench/recovery_time on any backend whose processes run on this
machine (local, the ssh and Slurm test hosts, the EC2 stand-in's instances): tools/launch in the
background, waiting until a worker's metrics file (wherever the backend writes it) shows some
iterations, a fault (SIGKILL or SIGTERM to one of the run's worker or server processes, found in
/proc by its binary's name and an argument naming the run; or the backend's own, a spot
reclaim), and the figures of its summary.json, also counted from the death itself."""

import glob
import json
import os
import signal
import subprocess
import time

from ..analysis.recovery_times import metrics_by_process, recoveries
from ..analysis.summary import Event
from . import fault_runs
from .errors import JobError


def find(binary, needle, proc="/proc"):
    """The pids, newest first, of the processes running a binary named `binary` (worker,
    server) with an argument containing `needle` (a path only that run uses)."""
    found = []
    for entry in filter(str.isdigit, os.listdir(proc)):
        argv = fault_runs.cmdline(entry, proc)
        if argv and os.path.basename(argv[0]) == binary and any(needle in a for a in argv[1:]):
            found.append(int(entry))
    return sorted(found, reverse=True)


def iterations(pattern):
    """The iteration lines of the metrics files `pattern` (a glob) matches, together."""
    return sum(fault_runs.iteration_lines(path) for path in glob.glob(pattern))


def kill(binary, needle, sig=signal.SIGKILL):
    """A fault for run_with_fault: sends `sig` to the newest `binary` process with an argument
    containing `needle` (find) and returns the Unix time it did. JobError if none runs."""
    def act():
        victims = find(binary, needle)
        if not victims:
            raise JobError(f"no {binary} process with an argument containing {needle}")
        at = time.time()
        os.kill(victims[0], sig)
        return at
    return act


def run_with_fault(argv, env, metrics_glob, at, fault, timeout=300):
    """Starts tools/launch `argv`; once the metrics files `metrics_glob` match hold `at`
    iterations, calls `fault()` (kill(), or a backend's own: a spot reclaim), which returns the
    Unix time its process died; waits for the launcher and returns that time (the run's
    summary.json path is the caller's to read). JobError if the fault failed or the launcher
    did (its output's tail)."""
    launcher = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    try:
        deadline = time.time() + timeout
        while iterations(metrics_glob) < at:
            if launcher.poll() is not None or time.time() > deadline:
                raise JobError(f"no {at} iterations in {metrics_glob}: "
                               f"{(launcher.communicate()[0] or '')[-2000:]}")
            time.sleep(0.05)
        died_at = fault()
        out, _ = launcher.communicate(timeout=timeout)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    if launcher.returncode != 0:
        raise JobError(f"the launcher failed ({launcher.returncode}): {out[-2000:]}")
    return died_at


def run_and_kill(argv, env, metrics_glob, at, binary, needle, timeout=300, sig=signal.SIGKILL):
    """run_with_fault with kill(binary, needle, sig): the Unix time of the kill."""
    return run_with_fault(argv, env, metrics_glob, at, kill(binary, needle, sig), timeout)


def figures(summary_path):
    """(seconds to full strength after the first death or None, updates_lost_steps) of a run."""
    with open(summary_path) as f:
        summary = json.load(f)
    if not summary.get("completed"):
        raise JobError(f"{summary_path}: the job did not complete")
    deaths = summary["recovery"].get("after_deaths") or [{}]
    return deaths[0].get("recovered_s"), summary["recovery"]["updates_lost_steps"]


def recovered_since(summary_path, died_at):
    """The seconds from `died_at` (Unix time: when the benchmark killed the process, on this
    machine's clock) until every worker still training, a replacement included, finished an
    iteration begun after it: recovery_times' figure counted from the death itself instead of
    from the launcher seeing it, which on EC2 comes up to a poll (5 s) later. None if the job
    never trained at full strength again; JobError if the run recorded no death."""
    with open(summary_path) as f:
        summary = json.load(f)
    events = [Event(**e) for e in summary.get("events", [])]
    first = next((e for e in events if e.event == "died" and
                  e.process.startswith(("worker", "server"))), None)
    if first is None:
        raise JobError(f"{summary_path}: no worker or server died")
    # The job's start moved so that the first death falls at died_at.
    spans = metrics_by_process(os.path.dirname(summary_path))
    return recoveries(events, died_at - first.t, spans)[0]["recovered_s"]
