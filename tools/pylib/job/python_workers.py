"""Python workers (tools/launch --worker_cmd, --worker_cmd_for; a cluster file's worker_cmd):
which workers run a command of the user's in place of the worker binary, and the argv that starts
one through tools/deploy/python_worker, which gives the command the environment r2sp.torch.init()
reads (R2SP_SCHEDULER, R2SP_WORKER_FLAGS, RANK, ... : docs/PYTORCH.md) and becomes it. Once
started, a Python worker's argv is the user's command: tools that find a job's workers in /proc
read its flags from its environment (flags_of)."""

import os
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# What starts a Python worker: tools/deploy's in a checkout, share/r2sp/deploy's in a bundle
# (ROOT being the bundle, as in the wheel's r2sp/_launch/).
PYTHON_WORKER = next((p for p in (os.path.join(ROOT, "tools", "deploy", "python_worker"),
                                  os.path.join(ROOT, "share", "r2sp", "deploy", "python_worker"))
                      if os.path.exists(p)), os.path.join(ROOT, "tools", "deploy", "python_worker"))
# Where the r2sp package's sources are (worker/python/r2sp/), and the extension under a bazel-bin.
PACKAGE_DIR = os.path.join(ROOT, "worker", "python")
CORE = os.path.join("worker", "python", "_core.so")


def check_command(text, what="--worker_cmd"):
    """ValueError unless `text` splits (as a shell would) into at least one word."""
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"{what}: cannot split {text!r} into words: {e}") from None
    if not words:
        raise ValueError(f"{what}: the command is empty")


def parse_ranks(text, workers, what):
    """The ranks of a comma-separated list such as "1,3"; ValueError unless each is a whole
    number in [0, workers), given once."""
    ranks = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) >= workers:
            raise ValueError(f"{what}: rank {item!r} is not a worker (0..{workers - 1})")
        if int(item) in ranks:
            raise ValueError(f"{what}: rank {item} is given twice")
        ranks.append(int(item))
    return ranks


def worker_commands(worker_cmd, worker_cmd_for, workers, defaults=None):
    """{rank: command line} of the workers that run a command instead of the worker binary:
    `defaults` ({rank: command}, a cluster file's), then --worker_cmd (every worker), then each
    --worker_cmd_for "RANKS:CMD" (RANKS comma-separated; later items win). ValueError for a bad
    item, rank or command."""
    commands = dict(defaults or {})
    if worker_cmd:
        check_command(worker_cmd)
        commands = dict.fromkeys(range(workers), worker_cmd)
    for item in worker_cmd_for:
        ranks, colon, command = item.partition(":")
        what = f"--worker_cmd_for={item}"
        if not colon:
            raise ValueError(f"{what}: want RANKS:CMD, e.g. 1,3:'python3 train.py'")
        check_command(command, what)
        for rank in parse_ranks(ranks, workers, what):
            commands[rank] = command
    return commands


def from_args(args):
    """worker_commands() of tools/launch's options `args` (for args.workers workers)."""
    return worker_commands(getattr(args, "worker_cmd", "") or "",
                           getattr(args, "worker_cmd_for", None) or [], args.workers)


def command_argv(command, rank, world_size, local_rank, pythonpath, core=None, cwd=None,
                 python_worker=PYTHON_WORKER, local_world_size=None):
    """The argv that starts `command` as worker `rank` (of world_size; local_rank on its host,
    of local_world_size when given) through python_worker; the worker flags follow it
    (python_worker takes them after '--')."""
    argv = [python_worker, "--command=" + command, f"--rank={rank}", f"--world_size={world_size}",
            f"--local_rank={local_rank}", "--pythonpath=" + pythonpath]
    if local_world_size is not None:
        argv.append(f"--local_world_size={local_world_size}")
    if core:
        argv.append("--core=" + core)
    if cwd:
        argv.append("--cwd=" + cwd)
    return argv + ["--"]


def flags_of(pid, proc="/proc"):
    """The worker flags of process `pid` if it is a Python worker (R2SP_WORKER_FLAGS in its
    environment, split); [] for any other process, or one that is gone or not ours to read."""
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as f:
            variables = f.read().split(b"\0")
    except OSError:
        return []
    for variable in variables:
        if variable.startswith(b"R2SP_WORKER_FLAGS="):
            try:
                return shlex.split(variable.split(b"=", 1)[1].decode(errors="replace"))
            except ValueError:
                return []
    return []


def local_argv(command, rank, workers, bin_dir, local_rank=None, local_world_size=None):
    """command_argv() of a worker of a job on this machine (its local rank its rank unless
    given): the package from the sources, the extension from BIN_DIR, a build tree; none from
    a bundle's bin/ (BIN_DIR/worker a program: the wheel's, whose installed r2sp has its own)."""
    bundle = os.path.isfile(os.path.join(bin_dir, "worker"))
    return command_argv(command, rank, workers, rank if local_rank is None else local_rank,
                        PACKAGE_DIR, None if bundle else os.path.join(bin_dir, CORE),
                        local_world_size=local_world_size)
