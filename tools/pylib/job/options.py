"""tools/launch's options (also taken by tools/netcluster): declared by concern (the job and its
processes, cluster files and backends, authentication, recovery) and checked once parsed.
parse_args is what the entry scripts call; argparse's own error (usage and exit status 2) is how
a bad option is refused, as every tool here does."""

import argparse
import os

from . import ddp_job
from . import keys as job_keys
from . import python_workers
from . import resume
from . import supervisor
from . import worker_processes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BACKENDS = ("local", "ssh", "slurm", "k8s", "ec2")


def add_job_options(p):
    """The job itself: counts, mode, where it runs from and writes to, the processes' flags."""
    p.add_argument("--servers", type=int, default=2, help="number of servers (default 2)")
    p.add_argument("--workers", type=int, default=3, help="number of workers (default 3)")
    p.add_argument("--sync", default="asp", choices=["bsp", "ssp", "asp", "r2sp", "easgd", "eawild"], help="consistency mode")
    p.add_argument("--run_dir", default="", help="where logs and summary.json go (default runs/TIMESTAMP)")
    p.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"),
                   help="directory holding scheduler/scheduler, server/server, worker/worker")
    p.add_argument("--timeout", type=float, default=3600, help="stop everything after this many seconds")
    p.add_argument("--scheduler_flags", default="", help="extra flags for the scheduler (one string)")
    p.add_argument("--server_flags", default="", help="extra flags for every server (one string)")
    p.add_argument("--worker_flags", default="", help="extra flags for every worker (one string)")
    p.add_argument("--quiet", action="store_true", help="do not echo worker progress")
    p.add_argument("--workers_per_process", type=int, default=1, metavar="N",
                   help="synthetic workers: run them as threads, N to a worker process (the "
                        "worker binary's --workers_per_process; --workers=1024 "
                        "--workers_per_process=64 starts 16 processes), each thread a whole "
                        "worker with its own connections, registration and rank")
    p.add_argument("--worker_flags_for", action="append", default=[], metavar="RANK:FLAGS",
                   help="extra flags for the RANK-th worker started (0-based), e.g. "
                        "'3:--compute_slowdown=2'; repeatable")
    p.add_argument("--worker_cmd", default="", metavar="CMD",
                   help="every worker runs CMD (a command line, split as a shell would and run "
                        "without one, e.g. '/usr/bin/python3 train.py --lr=0.1') in place of the "
                        "worker binary: a Python worker (r2sp.torch) that gets the flags the "
                        "binary would have got in R2SP_WORKER_FLAGS, and R2SP_SCHEDULER, RANK, "
                        "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, R2SP_DATA_DIR, "
                        "PYTHONPATH, R2SP_CORE (docs/PYTORCH.md)")
    p.add_argument("--worker_cmd_for", action="append", default=[], metavar="RANKS:CMD",
                   help="workers RANKS (0-based, comma-separated) run CMD as with --worker_cmd, "
                        "the others the worker binary (a mixed job), e.g. "
                        "\"1,3:/usr/bin/python3 train.py\"; repeatable, after --worker_cmd")
    p.add_argument("--ddp_cmd", default="", metavar="CMD",
                   help="run a PyTorch DDP job instead of an R2SP one: one process of CMD (a "
                        "script that takes --backend=ddp, e.g. '/usr/bin/python3 "
                        "examples/pytorch/fashion_mnist_cnn.py --backend=ddp') per worker, with "
                        "torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, "
                        "--metrics=RUN_DIR/metrics_workerN.jsonl and --worker_flags (and "
                        "--worker_flags_for) as the script's own flags; no scheduler or servers")
    p.add_argument("--dry_run", action="store_true",
                   help="print every command that would run, and run nothing")


def add_cluster_options(p):
    """Cluster files and the backends that run them."""
    p.add_argument("--cluster", default="", metavar="FILE",
                   help="a cluster file (TOML; examples/cluster/): hosts, roles, ports, flags. Its "
                        "counts and mode replace --servers, --workers and --sync; the *_flags "
                        "options add to its flags")
    p.add_argument("--backend", default="local", choices=BACKENDS,
                   help="where the processes run: local (this machine), or with --cluster: ssh "
                        "(the file's hosts), slurm (an sbatch job), k8s (manifests applied with "
                        "kubectl), ec2 (instances launched with the AWS CLI); docs/DEPLOY.md")
    p.add_argument("--write_data_manifest", default="", metavar="DIR",
                   help="print the sha256 manifest of every file under DIR (sha256sum's format) "
                        "for a cluster file's [data] table, and run nothing")
    p.add_argument("--bundle", default="", metavar="TARBALL",
                   help="ssh: the release bundle to ship (default dist/r2sp-VERSION-VARIANT.tar.gz "
                        "from tools/package)")


def add_auth_options(p):
    p.add_argument("--auth", choices=job_keys.AUTH_MODES, default=None,
                   help="none (default), or curve: CurveZMQ encryption and authentication between "
                        "the processes with the job's keys, one pair per role, made into "
                        "RUN_DIR/keys unless --keys_dir; with --cluster the default is the file's "
                        "[job] auth (docs/SECURITY.md)")
    p.add_argument("--keys_dir", default="", metavar="DIR",
                   help="--auth=curve: use the keys in DIR (tools/keygen DIR) instead of making "
                        "the job's own")


def add_recovery_options(p):
    """Replacing dead processes, checkpoints, and --resume."""
    p.add_argument("--max_restarts", default="0", metavar="N|worker:N,server:M",
                   help="replace dead workers (exited non-zero or by a signal), at most N in all "
                        "(default 0: a death is only recorded; the scheduler decides whether the "
                        "job completes); server:M also replaces up to M dead servers (needs "
                        "--checkpoint_every): in asp, ssp, r2sp and eawild the replacement "
                        "restores the lost shard from its newest checkpoint while the job goes "
                        "on; a bsp or easgd job fails and is resumed from the checkpoints, as "
                        "with --resume (locally; over ssh, Slurm or EC2 it fails). --backend=ssh "
                        "and slurm start a "
                        "replacement on the dead process's host (a new ssh, a new step), ec2 on "
                        "a new instance of its host entry; k8s: the worker Job's controller "
                        "starts a new pod (backoffLimit N), the kubelet restarts a server's "
                        "container")
    p.add_argument("--checkpoint_every", default="", metavar="SPEC",
                   help="servers checkpoint their shards every SPEC: 30s (seconds) or 200steps "
                        "(default: only on SIGTERM, on losing the scheduler and at the end); into "
                        "RUN_DIR/checkpoints (ssh, slurm: WORKDIR/runs/JOB-RUN/checkpoints on each "
                        "server's host) unless the server flags name a --checkpoint_dir")
    p.add_argument("--resume", default="", metavar="RUN_DIR",
                   help="run the job of RUN_DIR (tools/launch's, its launch.json) again there, "
                        "its servers from their newest checkpoints; the previous attempt's files "
                        "move to RUN_DIR/attempt-K/ (an ssh, Slurm, EC2 or Kubernetes job: from its cluster "
                        "file's checkpoint_url). Only --timeout, --quiet and --max_restarts "
                        "may be given with it")


def parse_args(argv, description, parser=None, refused=None):
    """The launch options (see tools/launch), added to `parser` if given. With --resume only
    the options resume.RESUME_OVERRIDES may be given too, and those not given are None (the
    saved ones stand: resume.prepare). refused: {option's dest: why} of the options the calling
    tool does not take (tools/netcluster's): their help says why, and one given with a value
    other than its default is an error naming it, before any other check."""
    p = parser or argparse.ArgumentParser(description=description,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
    for add in (add_job_options, add_cluster_options, add_auth_options, add_recovery_options):
        add(p)
    refused = refused or {}
    for action in p._actions:  # argparse has no public way to reword an added option's help
        if action.dest in refused:
            action.help = "refused here: " + refused[action.dest]
    args = p.parse_args(argv)
    try:
        check_refused(p, args, refused)
        check_job(args)
        check_auth(args)
        check_recovery(args)
    except ValueError as e:
        p.error(str(e))
    if args.resume:
        check_resume(p, argv, args)
    return args


def check_refused(parser, args, refused):
    """ValueError naming the first option of `refused` that `args` gives a value other than its
    default, and why the tool refuses it."""
    for name, why in refused.items():
        if getattr(args, name) != parser.get_default(name):
            raise ValueError(f"--{name} is not taken here: {why}")


def check_job(args):
    """ValueError for counts, timeout or backend that cannot run."""
    if args.backend != "local" and not args.cluster:
        raise ValueError(f"--backend={args.backend} needs --cluster")
    if args.servers < 1 or args.workers < 1:
        raise ValueError("--servers and --workers must be at least 1")
    if args.timeout <= 0:
        raise ValueError("--timeout must be positive")
    if getattr(args, "ddp_cmd", ""):
        ddp_job.check_options(args)
    if not args.cluster:  # with one: once its worker count is known (deploy.launch)
        python_workers.from_args(args)
    worker_processes.check(args)


def check_auth(args):
    """Defaults --auth to none without a cluster file (with one: the file's, cluster launch);
    ValueError for --keys_dir without curve. Makes --keys_dir absolute (launch.json: --resume
    from anywhere)."""
    if args.auth is None and not args.cluster:
        args.auth = "none"
    if args.keys_dir:
        if args.auth == "none":
            raise ValueError("--keys_dir needs --auth=curve")
        args.keys_dir = os.path.abspath(args.keys_dir)


def check_recovery(args):
    """ValueError for a bad --max_restarts or --checkpoint_every, or one its backend or a
    replaced server cannot honour."""
    restarts = supervisor.parse_max_restarts(args.max_restarts)
    resume.check_checkpoint_every(args.checkpoint_every)
    if restarts["server"] and not args.resume:
        if not args.checkpoint_every and "--checkpoint_dir" not in args.server_flags:
            raise ValueError("--max_restarts=server:N: a replacement server restores its shard "
                             "from the checkpoints, so it needs --checkpoint_every")


def check_resume(parser, argv, args):
    """--resume takes the saved options: refuses others given with it; those of
    resume.RESUME_OVERRIDES not given become None."""
    given = given_options(parser, argv, vars(args))
    others = sorted(given - {"resume", *resume.RESUME_OVERRIDES})
    if others:
        parser.error("--resume runs the options saved in RUN_DIR/launch.json: only --timeout, "
                     "--quiet and --max_restarts may be given with it, not "
                     + ", ".join("--" + o for o in others))
    for name in set(resume.RESUME_OVERRIDES) - given:
        setattr(args, name, None)


class _Unset(list):
    """given_options' default (a list: append options copy and extend their default)."""


def given_options(parser, argv, names):
    """Which of the options `names` (dests) `argv` gives, even with their default value. Changes
    the parser's defaults: call it last."""
    unset = _Unset()
    parser.set_defaults(**{name: unset for name in names})
    parsed = vars(parser.parse_args(argv))
    return {name for name in names if parsed[name] is not unset}
