"""r2sp-run's command line: torchrun's options (same names, with dashes or underscores), R2SP's
own, and the defaults the environment gives: torchrun's PET_<OPTION> variables (what a Kubeflow
PyTorchJob sets for torchrun), else a PyTorchJob pod's MASTER_ADDR, MASTER_PORT, WORLD_SIZE
(pods) and RANK (this pod), else Slurm's SLURM_NNODES, SLURM_NODEID and SLURM_JOB_NODELIST
(its first host the master) under srun. parse() returns a Plan or raises UsageError."""

import argparse
import dataclasses
import os
import re
import shlex
import sys
import time

SYNC_MODES = ("bsp", "ssp", "asp", "r2sp", "easgd", "eawild")


class UsageError(ValueError):
    """A bad command line or environment; says what to give."""


@dataclasses.dataclass
class Plan:
    nnodes: int
    node_rank: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    max_restarts: int
    run_dir: str
    command: list  # a worker's argv
    servers: int
    sync: str
    scheduler_flags: str
    server_flags: str
    worker_flags: str
    timeout: float
    standalone: bool
    auth: str = "none"
    keys_dir: str = ""

    @property
    def world_size(self):
        return self.nnodes * self.nproc_per_node

    @property
    def local_ranks(self):
        first = self.node_rank * self.nproc_per_node
        return range(first, first + self.nproc_per_node)


def _option(p, name, **kwargs):
    """--name and, when it has an underscore, --na-me (torchrun takes both spellings; --help
    shows the first)."""
    action = p.add_argument("--" + name, dest=name, **kwargs)
    if "_" in name:
        p.add_argument("--" + name.replace("_", "-"), dest=name,
                       **dict(kwargs, default=action.default, help=argparse.SUPPRESS))


def parser():
    from . import __doc__ as description  # the package's docstring is r2sp-run's help
    p = argparse.ArgumentParser(prog="r2sp-run", description=description, allow_abbrev=False,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    _option(p, "standalone", action="store_true",
            help="one node: the job's scheduler and servers here, on 127.0.0.1 (any port)")
    _option(p, "nnodes", default=None, help="nodes (N, or N:N; default 1)")
    _option(p, "node_rank", default=None, help="this node's rank, 0 the master (default 0)")
    _option(p, "nproc_per_node", default=None,
            help="workers on each node: N, cpu, gpu or auto (default 1)")
    _option(p, "master_addr", default=None, help="node 0's address (default 127.0.0.1)")
    _option(p, "master_port", default=None, help="the scheduler's port on node 0 (default 29500)")
    _option(p, "rdzv_endpoint", default="", help="HOST[:PORT]: the master, as --master_addr/port")
    _option(p, "rdzv_backend", default="static", help="static or c10d: R2SP's scheduler is the "
            "rendezvous, so either names it")
    _option(p, "rdzv_id", default="", help="the job's id (the scheduler's --job_id)")
    _option(p, "max_restarts", default=None,
            help="restarts of a failed worker on this node, in all (default 0: the job goes on "
                 "without it, its samples taken over by the others)")
    _option(p, "log_dir", default="", help="the run directory: logs, metrics, summary.json "
            "(default runs/TIMESTAMP here)")
    _option(p, "no_python", action="store_true", help="run the script as a program, not python")
    p.add_argument("-m", "--module", action="store_true", help="the script is a module (python -m)")
    _option(p, "servers", type=int, default=1, help="parameter servers on node 0 (default 1)")
    _option(p, "sync", default="bsp", choices=SYNC_MODES, help="consistency mode (default bsp)")
    _option(p, "hetero_batching", action="store_true",
            help="the scheduler tunes each worker's batch from its speed")
    _option(p, "push_codec", default="", help="the workers' gradient codec (fp16, topk:R, ...)")
    _option(p, "scheduler_flags", default="", help="more flags for the scheduler (one string)")
    _option(p, "server_flags", default="", help="more flags for every server (one string)")
    _option(p, "worker_flags", default="", help="more worker flags (one string), e.g. "
            "'--epochs=2 --batch_size=64'")
    _option(p, "auth", default="none", choices=("none", "curve"),
            help="curve: CurveZMQ encryption and authentication between the processes, with "
                 "the keys in --keys_dir (docs/SECURITY.md)")
    _option(p, "keys_dir", default="", help="--auth=curve: the job's keys (tools/keygen DIR), "
            "which every node reads (a shared file system, or a copy on each)")
    _option(p, "timeout", type=float, default=86400, help="stop the job after this many seconds")
    p.add_argument("training_script", help="the script (or module, or program) each worker runs")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p


def _first_slurm_host(nodelist):
    """The first host of a Slurm node list: 'a,b' -> a; 'node[03-05,9]' -> node03."""
    head = re.match(r"([^,\[]+)(\[([^\]]+)\])?", nodelist)
    if not head:
        raise UsageError(f"SLURM_JOB_NODELIST={nodelist!r}: cannot read its first host")
    prefix, _, ranges = head.groups()
    return prefix + ranges.split(",")[0].split("-")[0] if ranges else prefix


def environment_defaults(environ):
    """{option: value} the environment gives (PET_*, a PyTorchJob pod's, Slurm's)."""
    found = {}
    if environ.get("SLURM_NNODES") and environ.get("SLURM_NODEID"):
        found.update(nnodes=environ["SLURM_NNODES"], node_rank=environ["SLURM_NODEID"])
        if environ.get("SLURM_JOB_NODELIST"):
            found["master_addr"] = _first_slurm_host(environ["SLURM_JOB_NODELIST"])
    if environ.get("MASTER_ADDR") and environ.get("WORLD_SIZE") and environ.get("RANK"):
        found.update(master_addr=environ["MASTER_ADDR"], nnodes=environ["WORLD_SIZE"],
                     node_rank=environ["RANK"])  # a PyTorchJob pod's: pods and this pod
        if environ.get("MASTER_PORT"):
            found["master_port"] = environ["MASTER_PORT"]
    for name in ("nnodes", "node_rank", "nproc_per_node", "master_addr", "master_port",
                 "max_restarts"):
        if environ.get("PET_" + name.upper()):
            found[name] = environ["PET_" + name.upper()]
    return found


def _count(name, text, minimum):
    if not re.fullmatch(r"[0-9]+", str(text).strip()) or int(text) < minimum:
        raise UsageError(f"--{name}={text}: want a whole number of at least {minimum}")
    return int(text)


def _nnodes(text):
    low, colon, high = str(text).partition(":")
    if colon and low != high:
        raise UsageError(f"--nnodes={text}: an elastic range is not taken; R2SP's workers join "
                         "and leave a running job by themselves, so give --nnodes=N")
    return _count("nnodes", low, 1)


def _nproc(text):
    if text in ("cpu", "auto"):
        return os.cpu_count() or 1
    if text == "gpu":
        import torch
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise UsageError("--nproc_per_node=gpu: this node has no CUDA device")
        return torch.cuda.device_count()
    return _count("nproc_per_node", text, 1)


def _command(args):
    script = args.training_script
    if args.no_python and args.module:
        raise UsageError("--no_python and --module do not go together")
    if args.no_python:
        return [script] + args.training_script_args
    if args.module:
        return [sys.executable, "-u", "-m", script] + args.training_script_args
    if not os.path.isfile(script):
        raise UsageError(f"{script}: no such file (the training script)")
    return [sys.executable, "-u", os.path.abspath(script)] + args.training_script_args


def _flags(args):
    """(scheduler flags, worker flags) with R2SP's own options folded in."""
    scheduler = args.scheduler_flags + (" --hetero_batching" if args.hetero_batching else "")
    if args.rdzv_id:
        scheduler += " --job_id=" + shlex.quote(args.rdzv_id)
    worker = args.worker_flags + (f" --push_codec={args.push_codec}" if args.push_codec else "")
    return scheduler.strip(), worker.strip()


def parse(argv, environ):
    """The Plan of r2sp-run's `argv` (without the program) under `environ`."""
    args = parser().parse_args(argv)
    given = {k: v for k, v in vars(args).items() if v is not None}
    settings = {"nnodes": "1", "node_rank": "0", "nproc_per_node": "1",
                "master_addr": "127.0.0.1", "master_port": "29500", "max_restarts": "0"}
    if not args.standalone:
        settings.update(environment_defaults(environ))
    settings.update({k: given[k] for k in settings if k in given})
    if args.rdzv_endpoint:
        host, colon, port = args.rdzv_endpoint.rpartition(":")
        settings["master_addr"], settings["master_port"] = (host, port) if colon else \
            (args.rdzv_endpoint, settings["master_port"])
    if args.rdzv_backend not in ("static", "c10d"):
        raise UsageError(f"--rdzv_backend={args.rdzv_backend}: static or c10d")
    nnodes = _nnodes(settings["nnodes"])
    node_rank = _count("node_rank", settings["node_rank"], 0)
    if node_rank >= nnodes:
        raise UsageError(f"--node_rank={node_rank} is not a node of --nnodes={nnodes}")
    if args.standalone and nnodes != 1:
        raise UsageError("--standalone is one node: leave --nnodes out or give 1")
    port = _count("master_port", settings["master_port"], 1)
    if port > 65535:
        raise UsageError(f"--master_port={port}: not a port (1 to 65535)")
    if args.auth == "curve" and not args.keys_dir:
        raise UsageError("--auth=curve needs --keys_dir=DIR, the job's keys every node reads "
                         "(make them with tools/keygen DIR)")
    if args.keys_dir and args.auth != "curve":
        raise UsageError("--keys_dir needs --auth=curve")
    scheduler_flags, worker_flags = _flags(args)
    return Plan(
        nnodes=nnodes, node_rank=node_rank, nproc_per_node=_nproc(settings["nproc_per_node"]),
        master_addr="127.0.0.1" if args.standalone else settings["master_addr"],
        master_port=port, max_restarts=_count("max_restarts", settings["max_restarts"], 0),
        run_dir=os.path.abspath(args.log_dir or os.path.join(
            "runs", time.strftime("%Y%m%d-%H%M%S") + f"-node{node_rank}")),
        command=_command(args), servers=_count("servers", args.servers, 1), sync=args.sync,
        scheduler_flags=scheduler_flags, server_flags=args.server_flags,
        worker_flags=worker_flags, timeout=args.timeout, standalone=args.standalone,
        auth=args.auth, keys_dir=os.path.abspath(args.keys_dir) if args.keys_dir else "")
