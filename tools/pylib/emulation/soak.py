"""tools/soak's parts: finding a job's processes in /proc, sampling their memory, the kill
plan, and judging the outcome. The job itself runs under tools/launch (worker kills: the
launcher replaces the worker; server kills: the launcher replaces the server, which restores its
shard from its checkpoint while the job goes on; should the job fail instead, tools/launch
--resume runs it on from the servers' checkpoints).
"""

import json
import os
import random
import signal

from ..analysis.run_files import evaluations
from ..job import python_workers

ROLES = ("scheduler", "server", "worker")


def job_processes(run_dir, proc="/proc"):
    """{pid: role} of the live processes whose command line names `run_dir` and runs one of the
    R2SP binaries (the launcher's children: every role's argv carries a path under RUN_DIR), and
    the Python workers whose worker flags (in their environment) name it."""
    found = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if any(run_dir in a for a in python_workers.flags_of(entry, proc)):
            found[int(entry)] = "worker"
            continue
        if not argv or not any(run_dir in a for a in argv[1:]):
            continue
        role = os.path.basename(argv[0])
        if role in ROLES:
            found[int(entry)] = role
    return found


def rss_kib(pid, proc="/proc"):
    """VmRSS of `pid` in KiB, or None when it is gone."""
    try:
        with open(os.path.join(proc, str(pid), "status")) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_growth(samples, warmup):
    """How much a process's RSS grew after its first `warmup` samples (its warm-up): the largest
    later sample relative to the last warm-up one (0.05 = 5%). None for a process that did not
    live past warm-up by at least 3 samples."""
    warmup = max(1, warmup)
    if len(samples) < warmup + 3:
        return None
    base = samples[warmup - 1]
    return max(samples[warmup:]) / base - 1 if base > 0 else None


def kill_times(seconds, low, high, rng):
    """Offsets (s) in [low, seconds - low) at which to kill, gaps drawn in [low, high]."""
    times, t = [], rng.uniform(low, high)
    while t < seconds - low:
        times.append(t)
        t += rng.uniform(low, high)
    return times


def pick_victim(processes, kinds, rng):
    """(pid, role) of a random live worker or server (as `kinds` allows), or None."""
    roles = [r for r in ("worker", "server") if r in kinds]
    candidates = sorted((pid, role) for pid, role in processes.items() if role in roles)
    return rng.choice(candidates) if candidates else None


def metrics_files(run_dir):
    """{(name, inode): iteration rows} of RUN_DIR/metrics_*.jsonl (a resumed attempt's files
    are new inodes under the same names)."""
    rows = {}
    for name in os.listdir(run_dir) if os.path.isdir(run_dir) else []:
        if not (name.startswith("metrics_worker") and name.endswith(".jsonl")):
            continue
        path = os.path.join(run_dir, name)
        try:
            with open(path) as f:
                rows[(name, os.fstat(f.fileno()).st_ino)] = sum(
                    1 for line in f if line.strip() and '"event"' not in line)
        except OSError:
            continue
    return rows


def recovered(before, now, role="worker", workers=3):
    """Whether the job recovered from a kill of a `role` process: a worker's replacement (a
    metrics file not in `before`) has finished an iteration; after a server's loss, every
    iteration needs the lost shard, so the workers (`workers` of them) finishing more iterations
    than they had in flight at the kill shows its replacement serving."""
    if role == "server":
        return sum(max(0, n - before.get(key, 0)) for key, n in now.items()) > workers
    return any(n > 0 for key, n in now.items() if key not in before)


def all_evaluations(run_dir):
    """Evaluation records of every attempt (RUN_DIR/attempt-*/ and RUN_DIR), in time order."""
    dirs = [run_dir] + sorted(os.path.join(run_dir, d) for d in os.listdir(run_dir)
                              if d.startswith("attempt-"))
    return sorted((e for d in dirs for e in evaluations(d)), key=lambda e: e["t"])


def verdict(report, max_growth, max_stall):
    """The checks' failures (empty: all passed): accuracy rose, every kill recovered, no stall
    longer than max_stall, scheduler and server RSS grew less than max_growth (judged on at
    least one of them)."""
    failures = []
    acc = report["accuracy"]
    if len(acc) < 2 or acc[-1] <= acc[0]:
        failures.append(f"accuracy did not rise: {acc}")
    for k in report["kills"]:
        if k.get("recovery_s") is None:
            failures.append(f"no recovery from the kill of {k['role']} {k['pid']} at {k['at_s']} s")
    if report["longest_stall_s"] > max_stall:
        failures.append(f"no progress for {report['longest_stall_s']:.0f} s")
    judged = [p for p in report["rss"]
              if p["role"] in ("scheduler", "server") and p["growth"] is not None]
    if not judged:
        failures.append("RSS growth not judged: no scheduler or server lived past warm-up")
    for p in judged:
        if p["growth"] > max_growth:
            failures.append(f"{p['role']} {p['pid']} RSS grew {100 * p['growth']:.1f}%")
    return failures


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def write_report(path, report):
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


def new_rng(seed):
    return random.Random(seed)
