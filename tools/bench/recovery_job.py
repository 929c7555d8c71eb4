"""The job and the faults tools/bench/recovery_time runs on every backend: the r2sp job's flags
and, per kind of fault, the process it hits, the tools/launch flags it needs and its signal."""

import signal

# kind: (binary, tools/launch flags, signal)
KINDS = {"replaced": ("worker", ["--max_restarts=1"], signal.SIGKILL),
         "worker": ("worker", [], signal.SIGKILL),
         "leave": ("worker", [], signal.SIGTERM),
         "server": ("server", ["--max_restarts=server:1", "--checkpoint_every=50steps"],
                    signal.SIGKILL),
         "reclaim": ("server", ["--max_restarts=server:1", "--checkpoint_every=50steps"], None)}
# What a backend can do: a spot reclaim needs the EC2 stand-in's metadata service.
HOST_KINDS = ("replaced", "worker", "leave", "server")

# One server: the Slurm fixture's nodes share this machine's address, so two servers on two of
# them would want the same port (and a node has 2 CPUs: 2 tasks).
SCHEDULER_FLAGS = "--partition_bytes=262144"


def job_flags(iterations):
    """The workers' flags: worker0 and worker1 train `iterations` iterations each."""
    return (f"--model=synthetic --model_mb=1 --layers=4 --iterations={iterations} "
            "--compute_ms=50 --log_every=1")
