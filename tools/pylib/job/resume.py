"""Checkpoints and resuming for the local launcher: the servers' checkpoint flags, the launch
options saved as RUN_DIR/launch.json, and tools/launch --resume=RUN_DIR, which runs the saved
job again in RUN_DIR after moving the previous attempt's files into RUN_DIR/attempt-K/, with
every server told to --resume from the newest checkpoint of its shard (the workers learn where
to start from the scheduler) and, with --auth=curve, the job's keys in RUN_DIR/keys kept; and
run_resuming, which resumes a bsp job that lost a server by itself."""

import argparse
import json
import os
import re
import shlex

from .errors import JobError
from .keys import KEYS
from . import supervisor

LAUNCH_FILE = "launch.json"
# The scheduler's epoch plans (--absorb_orphaned_shards): a resumed job maps its step with them.
EPOCH_PLANS = "epoch_plans.pb"
CHECKPOINTS = "checkpoints"  # RUN_DIR/checkpoints/server<R>/..., unless the server flags say
# The options that may be given with --resume; any other is the saved one.
RESUME_OVERRIDES = ("timeout", "quiet", "max_restarts")
# What launch.json keeps that is not an option: the attempt a resumed run was.
RUN_STATE = ("attempt",)


def check_checkpoint_every(text):
    """ValueError unless `text` is a server --checkpoint_every: "" (no periodic checkpoints),
    a positive number of seconds ("30s", "0.5s") or a positive whole number of steps
    ("200steps")."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(s|steps)", text)
    if text and not (m and float(m.group(1)) > 0 and (m.group(2) == "s" or m.group(1).isdigit())):
        raise ValueError(f"bad --checkpoint_every '{text}' (use e.g. 30s or 200steps)")


def flag_value(flags, name):
    """The last value `flags` (a list, gflags syntax: --NAME=V, -NAME=V, --NAME V) give flag
    NAME, or None."""
    value = None
    for i, flag in enumerate(flags):
        bare = flag.lstrip("-")
        if not flag.startswith("-") or bare.partition("=")[0] != name:
            continue
        if "=" in bare:
            value = bare.partition("=")[2]
        elif i + 1 < len(flags):
            value = flags[i + 1]
    return value


def checkpoint_dir(args):
    """Where the servers of the job `args` describes (tools/launch options) write their
    checkpoints: the --checkpoint_dir of the server flags, else RUN_DIR/checkpoints."""
    return (flag_value(shlex.split(args.server_flags), "checkpoint_dir")
            or os.path.join(args.run_dir, CHECKPOINTS))


def server_flags(args):
    """The checkpoint flags every server gets, put before the user's server flags so that
    theirs win: --checkpoint_dir=RUN_DIR/checkpoints unless those name one, --checkpoint_every
    when set, --resume when resuming."""
    flags = []
    if flag_value(shlex.split(args.server_flags), "checkpoint_dir") is None:
        flags.append("--checkpoint_dir=" + os.path.join(args.run_dir, CHECKPOINTS))
    if args.checkpoint_every:
        flags.append("--checkpoint_every=" + args.checkpoint_every)
    if args.resume:
        flags.append("--resume")
    return flags


def save_options(args):
    """Writes the options the job runs with (`args`) to RUN_DIR/launch.json."""
    with open(os.path.join(args.run_dir, LAUNCH_FILE), "w") as f:
        json.dump(vars(args), f, indent=2, sort_keys=True, default=str)
        f.write("\n")


def load_options(run_dir):
    """The options saved in RUN_DIR/launch.json; JobError if there is none or it is not one."""
    path = os.path.join(run_dir, LAUNCH_FILE)
    try:
        with open(path) as f:
            options = json.load(f)
    except FileNotFoundError:
        raise JobError(f"{run_dir} has no {LAUNCH_FILE}: was it started by tools/launch?")
    except (OSError, ValueError) as e:
        raise JobError(f"{path} cannot be read ({e}): was {run_dir} started by tools/launch?")
    if not isinstance(options, dict):
        raise JobError(f"{path} holds no options: was {run_dir} started by tools/launch?")
    return options


def missing_shards(directory, servers):
    """The server ranks < `servers` with no DIRECTORY/server<R>/ of checkpoints."""
    return [r for r in range(servers) if not os.path.isdir(os.path.join(directory, f"server{r}"))]


def kept_names(run_dir, checkpoints):
    """The entries of RUN_DIR that stay when an attempt is archived: launch.json, the
    checkpoints (RUN_DIR/checkpoints, or where the server flags put them inside RUN_DIR), the
    job's keys (RUN_DIR/keys: a resumed job keeps them), the epoch plans and the earlier
    attempts."""
    keep = {LAUNCH_FILE, CHECKPOINTS, KEYS, EPOCH_PLANS}
    inside = os.path.relpath(os.path.abspath(checkpoints), os.path.abspath(run_dir))
    if inside == ".":  # the shards' directories are RUN_DIR's own
        keep.update(n for n in os.listdir(run_dir) if re.fullmatch(r"server\d+", n))
    elif not inside.startswith(".."):
        keep.add(inside.split(os.sep)[0])
    return keep


def archive_attempt(run_dir, keep):
    """Moves every entry of RUN_DIR except those named in `keep` and the attempt-*/ directories
    into RUN_DIR/attempt-K/, K the first number free; returns K."""
    k = 1
    while os.path.exists(os.path.join(run_dir, f"attempt-{k}")):
        k += 1
    archive = os.path.join(run_dir, f"attempt-{k}")
    os.mkdir(archive)
    for name in sorted(os.listdir(run_dir)):
        if name in keep or re.fullmatch(r"attempt-\d+", name):
            continue
        os.rename(os.path.join(run_dir, name), os.path.join(archive, name))
    return k


def prepare(args, remote=None):
    """The options to run the resumed job with, from tools/launch's `args` (--resume=RUN_DIR,
    and the RESUME_OVERRIDES given, the others None: launcher.parse_args): the saved options,
    the overrides, --resume for the servers, and `attempt`. Checks that some server has
    checkpoints (a remote job's: `remote`), then archives the previous attempt. JobError if
    RUN_DIR cannot be resumed (nothing is moved then)."""
    run_dir = os.path.normpath(args.resume)
    saved = load_options(run_dir)
    unknown = set(saved) - set(vars(args)) - set(RUN_STATE)
    if unknown:
        raise JobError(f"{run_dir}/{LAUNCH_FILE} has options tools/launch does not take "
                       f"({', '.join(sorted(unknown))}): only tools/launch's jobs can be resumed")
    options = {**vars(args), **saved}
    options.update({k: getattr(args, k) for k in RESUME_OVERRIDES if getattr(args, k) is not None})
    options.update(run_dir=run_dir, resume=run_dir, dry_run=False)
    resumed = argparse.Namespace(**options)
    checkpoints = checkpoint_dir(resumed)
    # A remote job's checkpoints are at its cluster file's checkpoint_url: remote(resumed)
    # checks them (JobError) and returns True; False for a job of this machine.
    missing = [] if remote and remote(resumed) else missing_shards(checkpoints, resumed.servers)
    if len(missing) == resumed.servers:
        raise JobError(f"cannot resume {run_dir}: no checkpoints of any server in {checkpoints} "
                       "(server<R>/ directories written by the previous attempt's servers)")
    if missing:
        # A server whose shard is empty (a small model) has nothing to checkpoint; one whose
        # shard is not stops with a clear error of its own.
        print(f"launch: no checkpoints of server {', '.join(map(str, missing))} in "
              f"{checkpoints}; those servers must hold no partitions", flush=True)
    k = archive_attempt(run_dir, kept_names(run_dir, checkpoints))
    resumed.attempt = k + 1
    print(f"launch: resuming {run_dir} (attempt {k + 1}); the previous attempt's files are in "
          f"{os.path.join(run_dir, f'attempt-{k}')}", flush=True)
    return resumed


def server_died(run_dir):
    """Whether RUN_DIR/summary.json records the death of a server."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            return json.load(f).get("deaths", {}).get("server", 0) > 0
    except (OSError, ValueError, AttributeError):
        return False


def run_resuming(run_job, args):
    """run_job(args), the job tools/launch's `args` describe; then, while --max_restarts=server:M
    allows (each time counts one), a bsp job that failed because a server died is run again
    from the servers' checkpoints, as --resume=RUN_DIR would (its servers share the clocks, so
    none is replaced while the job runs: docs/RELIABILITY.md). Returns the summary of the
    attempt that completed; JobError as run_job."""
    limits = supervisor.parse_max_restarts(args.max_restarts or "0")
    left = limits["server"] if args.sync in supervisor.ROUND_SYNCHRONOUS else 0
    while True:
        try:
            return run_job(args)
        except JobError:
            if left <= 0 or not server_died(args.run_dir):
                raise
        left -= 1
        print(f"launch: a server of this bsp job died; resuming it from the servers' "
              f"checkpoints ({left} such restarts left)", flush=True)
        again = argparse.Namespace(**vars(args))
        again.resume = args.run_dir
        again.max_restarts = f"worker:{limits['worker']},server:{left}"
        args = prepare(again)
