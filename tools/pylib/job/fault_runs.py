"""What the failure benchmarks (tools/bench/resume_accuracy, tools/bench/worker_loss_accuracy)
share: optimised binaries, tools/launch run in the background, waiting until a worker has done
some steps, killing one of the job's processes, and the job's outcome. A process is killed by
its pid, and only one the launcher this module started has started itself (its child, found in
/proc): never a process of another job that happens to match."""

import json
import os
import signal
import subprocess
import sys
import time

from . import python_workers
from .errors import JobError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAUNCH = os.path.join(ROOT, "tools", "launch")


def opt_binaries(targets=("//scheduler", "//server", "//worker")):
    """Builds `targets` (default the three binaries) with -c opt; their bazel-bin directory."""
    subprocess.run(["bazel", "build", "-c", "opt", *targets], cwd=ROOT, check=True,
                   capture_output=True)
    return subprocess.run(["bazel", "info", "-c", "opt", "bazel-bin"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def start_launch(bin_dir, run_dir, options):
    """tools/launch --quiet with `options` (a list), in its own session, output discarded."""
    return subprocess.Popen([sys.executable, LAUNCH, "--bin_dir=" + bin_dir, "--quiet",
                             "--run_dir=" + run_dir] + options, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)


def iteration_lines(path):
    """The iteration lines of one metrics file (evaluation records left out; 0 before it
    exists)."""
    try:
        with open(path) as f:
            return sum(1 for line in f if '"event"' not in line)
    except OSError:
        return 0


def steps_done(run_dir, worker):
    """The iterations metrics_worker<worker>.jsonl records (0 before it exists)."""
    return iteration_lines(os.path.join(run_dir, f"metrics_worker{worker}.jsonl"))


def wait_for_steps(proc, run_dir, worker, steps):
    """Returns once `worker` has done `steps` iterations, or the launcher `proc` has ended."""
    while proc.poll() is None and steps_done(run_dir, worker) < steps:
        time.sleep(0.05)


def cmdline(pid, proc="/proc"):
    """A process's arguments ([] once it is gone)."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def children(parent, proc="/proc"):
    """[(start time in clock ticks, pid, argv)] of the live processes whose parent is `parent`;
    a Python worker's argv ends with its worker flags (from its environment: flags_of)."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat")) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        argv = cmdline(entry, proc)
        if int(fields[1]) == parent:
            found.append((int(fields[19]), int(entry), argv + python_workers.flags_of(entry, proc)))
    return found


def kill_child(launcher, contains, proc="/proc"):
    """SIGKILLs the newest process the launcher `launcher` (a Popen, or its pid) started whose
    arguments include one containing `contains` (e.g. a worker's metrics file); its pid, or None
    if none does."""
    pid = getattr(launcher, "pid", launcher)
    matching = [(start, child) for start, child, argv in children(pid, proc)
                if any(contains in arg for arg in argv)]
    if not matching:
        return None
    victim = max(matching)[1]
    os.kill(victim, signal.SIGKILL)
    return victim


def outcome(run_dir, returncode, tool):
    """RUN_DIR/summary.json of a job that must have completed; JobError naming `tool` if not."""
    if returncode != 0:
        raise JobError(f"{tool}: the job in {run_dir} failed (status {returncode})")
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def not_evaluating(run_dir, workers):
    """A launched worker (its index) that is not rank 0, which evaluates: ranks follow the order
    of registration, which the metrics rows ("worker": rank) tell."""
    for i in range(workers):
        try:
            with open(os.path.join(run_dir, f"metrics_worker{i}.jsonl")) as f:
                if json.loads(f.readline()).get("worker") != 0:
                    return i
        except (OSError, ValueError):
            continue
    return None
