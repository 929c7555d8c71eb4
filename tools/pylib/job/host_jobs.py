"""Jobs of synthetic workers as threads on this machine for tools/bench/simulator_check: one
tools/launch job (a scheduler, servers, and --workers_per_process workers to a process), pinned
to chosen cores with taskset, and its figures: the steady iterations/s of all workers, the
mean compute, push and pull, the job's CPU per byte moved, and the r2sp slot's achieved gap."""

import dataclasses
import json
import os
import shutil
import subprocess
import statistics

from ..analysis import mode_comparison, run_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


@dataclasses.dataclass(frozen=True)
class HostJob:
    """One job: `workers` synthetic workers in `mode` on `servers` servers, a model of
    `model_mb` MiB cut into partitions of `partition_bytes`, `compute_ms` of emulated compute
    (a sleep) per iteration, every process pinned to `cores` (taskset's list: this machine's
    two by default; on a larger one they keep the job to 2 cores, as here); r2sp's slot gap at
    most `gap_holds` smoothed holds (the scheduler's --r2sp_gap_holds)."""
    workers: int
    mode: str
    servers: int = 4
    model_mb: float = 0.0625
    partition_bytes: int = 16384
    compute_ms: int = 200
    iterations: int = 30
    workers_per_process: int = 64
    cores: str = "0,1"
    gap_holds: float = 2

    def name(self):
        return f"{self.mode}_{self.workers}"


@dataclasses.dataclass
class JobFigures:
    """What one run of a HostJob measured."""
    iterations_per_s: float    # steady, all workers (compare_modes' it/s)
    compute_s: float           # mean emulated compute per iteration (the sleeps overshoot)
    compute_cv: float          # its spread (standard deviation / mean)
    push_s: float              # mean over every iteration's push
    pull_s: float              # mean pull (a bsp pull includes its barrier wait)
    bytes_per_s: float         # pushed and pulled, all workers, over the steady span
    cpu_ns_per_byte: float     # the job's processes' CPU over the bytes pushed and pulled
    job_cores: float           # the job's mean CPU use in cores
    machine_busy_cores: float  # the whole machine's, other users included
    gap_achieved_ms: float     # r2sp: the mean spacing of the slot's grants (else 0)
    wall_s: float


def launch_argv(job, bin_dir, run_dir):
    """The command line of `job`: taskset, then tools/launch with the job's flags."""
    flags = (f"--model_mb={job.model_mb} --layers=4 --iterations={job.iterations} "
             f"--compute_ms={job.compute_ms} --log_every=100000")
    return ["taskset", "-c", job.cores, os.path.join(ROOT, "tools", "launch"),
            f"--servers={job.servers}", f"--workers={job.workers}",
            f"--workers_per_process={job.workers_per_process}", f"--sync={job.mode}",
            "--quiet", f"--run_dir={run_dir}", f"--bin_dir={bin_dir}",
            f"--scheduler_flags=--partition_bytes={job.partition_bytes} "
            f"--r2sp_gap_holds={job.gap_holds:g}",
            f"--worker_flags={flags}"]


def steady_bytes_per_s(rows, skip=2):
    """Bytes pushed and pulled per second by all workers together in the steady window: from
    the earliest end of a worker's first `skip` iterations to the last iteration's end, every
    iteration that ended inside it counted, whoever ran it (a worker that started late still
    moves bytes in the window: counting only each worker's own steady iterations undercounts
    a job whose workers are staggered, as 1,024 threads on 2 cores are). 0 if no worker got
    past its first `skip` + 1 iterations."""
    by_worker = {}
    for r in rows:
        by_worker.setdefault(r["worker"], []).append(r)
    ends = [sorted(r["t"] for r in mine) for mine in by_worker.values()]
    steady = [e for e in ends if len(e) > skip + 1]
    if not steady:
        return 0.0
    start, end = min(e[skip] for e in steady), max(e[-1] for e in steady)
    moved = sum(r["push_bytes"] + r["pull_bytes"] for r in rows if start < r["t"] <= end)
    return moved / (end - start) if end > start else 0.0


def figures(rows, summary, stats):
    """JobFigures from a finished job's metrics rows, summary.json and scheduler stats.json.
    ValueError if the job left too few iterations for a steady rate."""
    rate = mode_comparison.steady_iterations_per_second(rows)
    if not rate:
        raise ValueError("the job left too few iterations per worker for a steady rate")
    cores = sum(summary["cpu_cores"].values())
    moved = summary["bytes_pushed"] + summary["bytes_pulled"]
    slots = stats.get("scale", {}).get("slots", {})
    compute = [r["compute_s"] for r in rows]
    mean_compute = statistics.mean(compute)
    return JobFigures(
        iterations_per_s=rate, compute_s=mean_compute,
        compute_cv=statistics.pstdev(compute) / mean_compute if mean_compute > 0 else 0.0,
        push_s=statistics.mean(r["push_s"] for r in rows),
        pull_s=statistics.mean(r["pull_s"] for r in rows),
        bytes_per_s=steady_bytes_per_s(rows),
        cpu_ns_per_byte=cores * summary["wall_seconds"] / moved * 1e9,
        job_cores=cores, machine_busy_cores=summary.get("machine_busy_cores") or 0.0,
        gap_achieved_ms=slots.get("gap_achieved_mean_ms", 0.0), wall_s=summary["wall_seconds"])


def run(job, bin_dir, run_dir, timeout_s=900):
    """Runs `job` in `run_dir` (replaced; removed afterwards) and returns its JobFigures.
    RuntimeError with the launcher's last lines if the job fails or outlasts `timeout_s`."""
    if shutil.which("taskset") is None:
        raise RuntimeError("taskset is missing: install util-linux (apt-get install util-linux)")
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        try:
            done = subprocess.run(launch_argv(job, bin_dir, run_dir), capture_output=True,
                                  text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"{job.name()}: not done within {timeout_s} s") from e
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
            raise RuntimeError(f"{job.name()}: tools/launch exited {done.returncode}:\n{tail}")
        rows = [r for _, r in run_files.metrics_records(run_dir) if "event" not in r]
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(run_dir, "stats.json")) as f:
            stats = json.load(f)
        return figures(rows, summary, stats)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
