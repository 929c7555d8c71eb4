"""One fault run of tools/bench/recovery_time on any backend whose processes run on this
machine (local, and the ssh and Slurm test hosts): tools/launch in the background, waiting until
a worker's metrics file (wherever the backend writes it) shows some iterations, SIGKILL (or
SIGTERM) to one
of the run's worker or server processes, found in /proc by its binary's name and an argument
naming the run, and the figures of its summary.json."""

import glob
import json
import os
import signal
import subprocess
import time

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


def run_and_kill(argv, env, metrics_glob, at, binary, needle, timeout=300, sig=signal.SIGKILL):
    """Starts tools/launch `argv`; once the metrics files `metrics_glob` match hold `at`
    iterations, sends `sig` (SIGKILL) to the newest `binary` process with an argument
    containing `needle`; waits
    for the launcher; the run's summary.json path is the caller's to read. JobError if the kill
    found nothing or the launcher failed (its output's tail)."""
    launcher = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
    try:
        deadline = time.time() + timeout
        while iterations(metrics_glob) < at:
            if launcher.poll() is not None or time.time() > deadline:
                raise JobError(f"no {at} iterations in {metrics_glob}: "
                               f"{(launcher.communicate()[0] or '')[-2000:]}")
            time.sleep(0.05)
        victims = find(binary, needle)
        if not victims:
            raise JobError(f"no {binary} process with an argument containing {needle}")
        os.kill(victims[0], sig)
        out, _ = launcher.communicate(timeout=timeout)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    if launcher.returncode != 0:
        raise JobError(f"the launcher failed ({launcher.returncode}): {out[-2000:]}")


def figures(summary_path):
    """(seconds to full strength after the first death or None, updates_lost_steps) of a run."""
    with open(summary_path) as f:
        summary = json.load(f)
    if not summary.get("completed"):
        raise JobError(f"{summary_path}: the job did not complete")
    deaths = summary["recovery"].get("after_deaths") or [{}]
    return deaths[0].get("recovered_s"), summary["recovery"]["updates_lost_steps"]
