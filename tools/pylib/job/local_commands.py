"""The command lines of a job tools/launch runs on this machine (launcher.py starts them): the
scheduler's, with the flags the launcher's options imply (live server replacement, survivors
taking over dead workers' data), and the servers' and workers' (a Python worker's: its command
through tools/deploy/python_worker, python_workers.py)."""

import os
import shlex

from . import keys as job_keys
from . import python_workers
from . import resume
from . import supervisor
from . import worker_processes

# With --max_restarts=server:N: how long the scheduler waits for a lost server's replacement.
SERVER_REPLACE_SECONDS = 60


def per_worker_flags(items):
    """{rank: [flags]} from --worker_flags_for values 'RANK:FLAGS' (repeats accumulate)."""
    flags = {}
    for item in items:
        rank, _, text = item.partition(":")
        flags.setdefault(int(rank), []).extend(shlex.split(text))
    return flags


def scheduler_command(args, binary, bind_flags, endpoint_file, stats_file):
    # The job id names the run directory, so that a resumed job's servers accept the
    # checkpoints its first attempt wrote (the user's --job_id, after it, wins).
    job_id = "r2sp-" + os.path.basename(os.path.normpath(args.run_dir))
    return [binary] + bind_flags("scheduler") + job_keys.flags(args) + [
        "--endpoint_file=" + endpoint_file, "--stats_json=" + stats_file,
        f"--num_servers={args.servers}", f"--num_workers={args.workers}",
        "--sync=" + args.sync, "--job_id=" + job_id] + server_replace_flags(args) + \
        absorb_flags(args) + shlex.split(args.scheduler_flags)


def absorb_flags(args):
    """Unless dead workers are replaced (--max_restarts=N), the survivors take over their data
    from the next epoch, the scheduler keeping the epochs' plans in RUN_DIR for --resume (a
    resumed job whose first attempt made plans goes on with them, whatever its restarts)."""
    plans = os.path.join(args.run_dir, resume.EPOCH_PLANS)
    workers = supervisor.parse_max_restarts(args.max_restarts or "0")["worker"]
    if workers and not (args.resume and os.path.exists(plans)):
        return []
    return ["--absorb_orphaned_shards", "--epoch_plans=" + plans]


def server_replace_flags(args):
    """With --max_restarts=server:N the scheduler waits for a lost server's replacement (bsp,
    easgd: the job resumes from the checkpoints instead, resume.run_resuming)."""
    servers = supervisor.parse_max_restarts(args.max_restarts or "0")["server"]
    if not servers or args.sync in supervisor.ROUND_SYNCHRONOUS:
        return []
    return [f"--server_replace_s={SERVER_REPLACE_SECONDS:g}"]


def model_dir_flags(args):
    """Real models: the evaluating worker's model files go to RUN_DIR/model (worker
    --eval_only --init=checkpoint:RUN_DIR/model evaluates the newest)."""
    synthetic = "--model=" not in args.worker_flags or "--model=synthetic" in args.worker_flags
    return [] if synthetic else [f"--model_dir={args.run_dir}/model"]


def node_commands(args, binaries, bind_flags, endpoint):
    """[(name, argv, echo)] of the servers and the workers, which find the scheduler at
    `endpoint`."""
    def common(name):
        return ["--scheduler=" + endpoint] + bind_flags(name) + job_keys.flags(args)

    server_flags = resume.server_flags(args) + shlex.split(args.server_flags)
    commands = [(f"server{i}", [binaries["server"]] + common(f"server{i}") + server_flags, False)
                for i in range(args.servers)]
    per_process = getattr(args, "workers_per_process", 1)
    if per_process > 1:
        return commands + threaded_worker_commands(args, binaries, common, per_process)
    extra = per_worker_flags(args.worker_flags_for)
    python = python_workers.from_args(args)
    # r2sp-run: this node's workers alone (args.local_workers, a range of ranks), their local
    # ranks counted from its first, LOCAL_WORLD_SIZE its count.
    local = getattr(args, "local_workers", range(args.workers))
    for i in local:
        trace = [f"--metrics={args.run_dir}/metrics_worker{i}.jsonl",
                 f"--timeline={args.run_dir}/timeline_worker{i}.json"] + model_dir_flags(args)
        # A Python worker gets the same flags, after python_worker's own options.
        program = python_workers.local_argv(
            python[i], i, args.workers, args.bin_dir, local_rank=i - local.start,
            local_world_size=getattr(args, "local_world_size", None)) \
            if i in python else [binaries["worker"]]
        commands.append((f"worker{i}", program + common(f"worker{i}") + trace
                         + shlex.split(args.worker_flags) + extra.get(i, []), True))
    return commands


def threaded_worker_commands(args, binaries, common, per_process):
    """[(name, argv, echo)] of the worker processes of a job of threaded workers
    (worker_processes): process P runs its workers with --workers_per_process, their metrics
    and timelines in RUN_DIR/metrics_workerP_tK.jsonl and timeline_workerP_tK.json (thread K;
    every row names its worker's rank)."""
    return [(f"worker{p.index}", [binaries["worker"]] + common(f"worker{p.index}") + [
        f"--metrics={args.run_dir}/metrics_worker{p.index}.jsonl",
        f"--timeline={args.run_dir}/timeline_worker{p.index}.json",
        f"--workers_per_process={p.count}"] + shlex.split(args.worker_flags), True)
        for p in worker_processes.plan(args.workers, per_process)]


def roles_run(args):
    """The roles whose binaries the job runs: the worker binary only when some worker is not a
    Python worker (--worker_cmd)."""
    python = python_workers.from_args(args)
    return ("scheduler", "server") + (("worker",) if len(python) < args.workers else ())
