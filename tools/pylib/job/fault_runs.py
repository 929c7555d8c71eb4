"""What the failure benchmarks (tools/bench/resume_accuracy, tools/bench/worker_loss_accuracy)
share: optimised binaries, tools/launch run in the background, waiting until a worker has done
some steps, killing one of the job's processes, and the job's outcome."""

import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
LAUNCH = os.path.join(ROOT, "tools", "launch")


def opt_binaries():
    """Builds the three binaries with -c opt; their bazel-bin directory."""
    subprocess.run(["bazel", "build", "-c", "opt", "//scheduler", "//server", "//worker"],
                   cwd=ROOT, check=True, capture_output=True)
    return subprocess.run(["bazel", "info", "-c", "opt", "bazel-bin"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


def start_launch(bin_dir, run_dir, options):
    """tools/launch --quiet with `options` (a list), in its own session, output discarded."""
    return subprocess.Popen([sys.executable, LAUNCH, "--bin_dir=" + bin_dir, "--quiet",
                             "--run_dir=" + run_dir] + options, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, start_new_session=True)


def steps_done(run_dir, worker):
    """The iterations metrics_worker<worker>.jsonl records (0 before it exists)."""
    try:
        with open(os.path.join(run_dir, f"metrics_worker{worker}.jsonl")) as f:
            return sum(1 for line in f if '"event"' not in line)
    except OSError:
        return 0


def wait_for_steps(proc, run_dir, worker, steps):
    """Returns once `worker` has done `steps` iterations, or the launcher `proc` has ended."""
    while proc.poll() is None and steps_done(run_dir, worker) < steps:
        time.sleep(0.05)


def kill_newest(pattern):
    """SIGKILLs the newest process whose command line matches `pattern` (pgrep -f); its pid,
    or None if none matches."""
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    if not pids:
        return None
    pid = max(map(int, pids))
    os.kill(pid, signal.SIGKILL)
    return pid


def outcome(run_dir, returncode, tool):
    """RUN_DIR/summary.json of a job that must have completed; exits naming `tool` if not."""
    if returncode != 0:
        sys.exit(f"{tool}: the job in {run_dir} failed (status {returncode})")
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
