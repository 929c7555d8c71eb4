"""tools/launch --workers_per_process=N: a job's synthetic workers as threads of fewer worker
processes (the worker binary's --workers_per_process), so that hundreds of workers fit on one
machine: which process runs how many, and the options such a job cannot take."""

import dataclasses
import shlex

from . import supervisor


@dataclasses.dataclass(frozen=True)
class WorkerProcess:
    """Worker process `index` runs `count` workers as threads (the job's workers `first` to
    `first + count - 1` in start order; their ranks follow registration)."""
    index: int
    first: int
    count: int


def plan(workers, per_process):
    """The worker processes of a job of `workers` workers, at most `per_process` each: one per
    worker when per_process is 1; the last process takes the remainder."""
    if per_process < 1:
        raise ValueError("--workers_per_process must be at least 1")
    return [WorkerProcess(i, first, min(per_process, workers - first))
            for i, first in enumerate(range(0, workers, per_process))]


def _model(worker_flags):
    """The --model the worker flags give (the last one), or "synthetic" (the binary's default)."""
    model = "synthetic"
    for flag in shlex.split(worker_flags):
        if flag.startswith("--model="):
            model = flag.split("=", 1)[1]
    return model


def check(args):
    """ValueError saying which of the launch options `args` a job of threaded workers
    (--workers_per_process above 1) cannot take, and what to do instead."""
    per_process = getattr(args, "workers_per_process", 1)
    if per_process < 1:
        raise ValueError("--workers_per_process must be at least 1")
    if per_process == 1:
        return
    model = _model(args.worker_flags)
    if model != "synthetic":
        raise ValueError(f"--workers_per_process runs synthetic workers only (--model={model} "
                         "loads its data and network once per process): leave it at 1, or "
                         "train --model=synthetic")
    for name, what in (("worker_cmd", "Python workers"), ("worker_cmd_for", "Python workers"),
                       ("ddp_cmd", "a DDP job"), ("worker_flags_for", "flags for one worker")):
        if getattr(args, name, None):
            raise ValueError(f"--workers_per_process cannot run {what} (--{name}): each of its "
                             "processes runs the worker binary for several workers at once")
    if getattr(args, "backend", "local") != "local" or getattr(args, "cluster", ""):
        raise ValueError("--workers_per_process is for jobs on this machine (--backend=local "
                         "without --cluster)")
    if supervisor.parse_max_restarts(getattr(args, "max_restarts", "0") or "0")["worker"]:
        raise ValueError("--workers_per_process cannot take --max_restarts: a replacement "
                         "would restart every worker of the dead process")
