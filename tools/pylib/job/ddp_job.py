"""A PyTorch DDP job in place of an R2SP one (tools/launch --ddp_cmd, tools/netcluster
--ddp_cmd): one process per worker running the user's command with torchrun's environment
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), rank 0's host the rendezvous, no
scheduler and no servers. Each process gets --metrics=RUN_DIR/metrics_workerN.jsonl and the
job's --worker_flags (and its --worker_flags_for) as its own flags, so the run directory holds
what an R2SP job's does: NAME.log, the metrics lines and summary.json, which tools/compare_modes
and tools/run_report read alike.

Why not torch.distributed.run: Debian's torch 1.13 under Python 3.11 fails in its own argument
handling before starting anything (examples/pytorch/ddp_launch.py); its one job per node is
what this does, one process per emulated machine, with the same variables."""

import json
import os
import shlex
import socket
import time

from ..analysis.cpu_meter import CpuMeter
from ..analysis.run_files import evaluations, worker_metrics
from ..analysis.summary import iteration_summary
from . import python_workers
from .errors import JobError
from .launcher import prepare_run_dir
from .local_commands import per_worker_flags
from .processes import Job

# The rendezvous port on rank 0's host in an emulated cluster (its own namespace: always free).
CLUSTER_PORT = 29500


def check_options(args):
    """ValueError for options a DDP job cannot honour (it has no scheduler, servers or
    checkpoints, and its processes are the command's, not worker binaries)."""
    refused = [("--worker_cmd", bool(args.worker_cmd)),
               ("--worker_cmd_for", bool(args.worker_cmd_for)),
               ("--cluster", bool(args.cluster)),
               ("--resume", bool(args.resume)),
               ("--auth=curve", args.auth == "curve"),
               ("--max_restarts", args.max_restarts not in ("0", "", None)),
               ("--checkpoint_every", bool(args.checkpoint_every))]
    given = [name for name, on in refused if on]
    if given:
        raise ValueError(f"--ddp_cmd runs a DDP job (no scheduler, servers or checkpoints): "
                         f"leave out {', '.join(given)}")
    try:
        words = shlex.split(args.ddp_cmd)
    except ValueError as e:
        raise ValueError(f"--ddp_cmd: cannot split {args.ddp_cmd!r} into words: {e}") from None
    if not words:
        raise ValueError("--ddp_cmd: the command is empty")


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago (the loopback rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world, master_addr, master_port, ifname=None):
    """torchrun's variables for process `rank` of `world` (one per host: LOCAL_RANK 0, unless
    every process shares this host's loopback), as env(1) arguments. `ifname`: the interface
    gloo binds to (GLOO_SOCKET_IFNAME), which a network namespace needs: gloo otherwise takes
    the address the machine's host name resolves to, which is not the namespace's."""
    local = "0" if ifname else str(rank)
    env = [f"RANK={rank}", f"WORLD_SIZE={world}", f"LOCAL_RANK={local}",
           f"LOCAL_WORLD_SIZE={1 if ifname else world}", f"MASTER_ADDR={master_addr}",
           f"MASTER_PORT={master_port}"]
    return env + ([f"GLOO_SOCKET_IFNAME={ifname}"] if ifname else [])


def package_env(bin_dir, environ=os.environ):
    """env(1) arguments that let the command import the r2sp package (a script's
    --data_order=r2sp or --init=builtin, which use its extension without a job): the sources on
    PYTHONPATH, ahead of the caller's, and the extension built under `bin_dir`, if it is there,
    as R2SP_CORE."""
    path = python_workers.PACKAGE_DIR
    if environ.get("PYTHONPATH"):
        path += os.pathsep + environ["PYTHONPATH"]
    core = os.path.join(bin_dir, python_workers.CORE)
    return [f"PYTHONPATH={path}"] + ([f"R2SP_CORE={core}"] if os.path.isfile(core) else [])


def commands(args, master_addr, master_port, ifname=None):
    """[(name, argv)] of the job's processes, worker0 first: env(1) with rank_env and
    package_env, the command, its --metrics file, then --worker_flags and the rank's
    --worker_flags_for."""
    extra = per_worker_flags(args.worker_flags_for)
    package = package_env(args.bin_dir)
    result = []
    for i in range(args.workers):
        argv = ["env"] + rank_env(i, args.workers, master_addr, master_port, ifname) + \
            package + shlex.split(args.ddp_cmd) + [
                f"--metrics={os.path.join(args.run_dir, f'metrics_worker{i}.jsonl')}"] + \
            shlex.split(args.worker_flags) + extra.get(i, [])
        result.append((f"worker{i}", argv))
    return result


def summarise(run_dir, workers, wall, cpu_use):
    """summary.json of a finished DDP job from its metrics lines: the keys tools/launch writes
    that a DDP job has (no servers, so no bytes, codecs or recovery)."""
    rows = worker_metrics(run_dir)
    evals = evaluations(run_dir)
    samples = sum(r["batch"] for w in rows.values() for r in w)
    summary = {
        "backend": "ddp", "mode": "ddp", "workers": workers, "servers": 0,
        "epochs": max((e["epoch"] for e in evals), default=0),
        "final_test_accuracy": evals[-1]["test_accuracy"] if evals else None,
        "samples_per_second": round(samples / wall, 1) if samples and wall > 0 else None,
        "iterations": max((len(w) for w in rows.values()), default=0),
        "wall_seconds": round(wall, 3), "run_dir": run_dir,
        "completed": True, "events": [], "dead_workers": 0,
    }
    summary.update(iteration_summary(rows))
    summary.update(cpu_use or {})
    return summary


def describe(args):
    """The processes' command lines (--dry_run), with a placeholder port."""
    return "\n".join(shlex.join(argv) + " > " + os.path.join(args.run_dir or "RUN_DIR",
                                                             name + ".log")
                     for name, argv in commands(args, "127.0.0.1", "PORT"))


def _log_tail(run_dir, name, chars=1500):
    try:
        with open(os.path.join(run_dir, name + ".log"), errors="replace") as f:
            return f.read()[-chars:]
    except OSError:
        return ""


def supervise(job, deadline, cpu, during):
    """Waits until every process exited 0; JobError (after stopping the others) once one fails
    or at `deadline` (time.time())."""
    while True:
        cpu.sample(job.procs())
        if during:
            during()
        codes = {name: proc.poll() for name, proc in job.procs()}
        failed = [(n, c) for n, c in codes.items() if c not in (None, 0)]
        if failed:
            job.stop_all()
            name, code = failed[0]
            raise JobError(f"DDP process {name} exited with status {code}; "
                           f"{job.args.run_dir}/{name}.log ends:\n"
                           f"{_log_tail(job.args.run_dir, name)}")
        if all(c == 0 for c in codes.values()):
            return
        if time.time() > deadline:
            job.stop_all()
            raise JobError(f"the DDP job did not finish within --timeout={job.args.timeout:g} s")
        time.sleep(0.1)


def run(args, prefix=None, on_start=None, master_addr="127.0.0.1", ifname=None, during=None,
        port=None):
    """Runs the DDP job `args` describes (tools/launch options with ddp_cmd) and returns its
    summary, also written to RUN_DIR/summary.json. `prefix(name)`: the argv prefix a process
    runs under (a network namespace); `master_addr`: rank 0's address; `port`: the rendezvous
    port (default: a free one on loopback). JobError if a process fails or --timeout passes;
    on any exception every process is stopped first."""
    prepare_run_dir(args)
    for name in os.listdir(args.run_dir):  # a previous run's lines would mix with these
        if name.startswith("metrics_worker") and name.endswith(".jsonl"):
            os.remove(os.path.join(args.run_dir, name))
    job = Job(args, prefix, on_start)
    start, cpu = time.time(), CpuMeter()
    try:
        for name, argv in commands(args, master_addr, port or free_port(), ifname):
            job.start(name, argv, echo=True)
        print(f"launch: DDP job, {args.workers} processes; logs in {args.run_dir}", flush=True)
        supervise(job, start + args.timeout, cpu, during)
    except BaseException:
        job.stop_all()
        raise
    summary = summarise(args.run_dir, args.workers, time.time() - start, cpu.summary())
    with open(os.path.join(args.run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print("launch: summary " + json.dumps(summary))
    return summary
