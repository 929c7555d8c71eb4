"""A job run on this machine (tools/launch, tools/netcluster: processes inside network
namespaces): the run directory, starting the scheduler then the servers and workers
(processes.Job, with the command lines of local_commands), supervising them until the scheduler
decides the job's outcome (supervisor), and summarising the run (analysis.summary); also the
--dry_run text of such a job. The remote backends share prepare_run_dir and finish_job
(deploy.driver).

Failures are raised as errors.JobError; whatever the exception, run_job stops every process it
started before passing it on. Signal handlers belong to the entry scripts: theirs raise
errors.Interrupted."""

import argparse
import contextlib
import json
import os
import shlex
import time

from . import keys as job_keys
from . import resume
from . import supervisor
from ..analysis.cpu_meter import CpuMeter
from ..analysis.summary import write_summary
from .errors import JobError
from .local_commands import node_commands, roles_run, scheduler_command
from .processes import Job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ("scheduler", "server", "worker")


def loopback_bind(name):
    return ["--bind=tcp://127.0.0.1:*"]


def wait_for_endpoint(scheduler, endpoint_file, run_dir):
    """The endpoint the scheduler wrote to `endpoint_file`; JobError if it exits first."""
    while True:
        if scheduler.poll() is not None:
            raise JobError(f"the scheduler exited ({scheduler.returncode}); see {run_dir}/scheduler.log")
        if os.path.exists(endpoint_file):
            with open(endpoint_file) as f:
                endpoint = f.read().strip()
            if endpoint:
                return endpoint
        time.sleep(0.05)


def start_processes(job, bind_flags, endpoint_file, stats_file):
    """Starts the scheduler, waits for its endpoint, then starts the servers and the workers."""
    args = job.args
    binaries = {role: job.binary(role) for role in roles_run(args)}  # found before anything starts
    if not args.resume:  # a fresh job takes up no epoch plans a run before it left here
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(args.run_dir, resume.EPOCH_PLANS))
    scheduler = job.start("scheduler", scheduler_command(args, binaries["scheduler"], bind_flags,
                                                         endpoint_file, stats_file), echo=False)
    endpoint = wait_for_endpoint(scheduler, endpoint_file, args.run_dir)
    for name, argv, echo in node_commands(args, binaries, bind_flags, endpoint):
        job.start(name, argv, echo=echo)
    auth = "; auth=curve, keys in " + job_keys.keys_dir(args) if job_keys.curve(args) else ""
    print(f"launch: {args.servers} servers, {args.workers} workers, sync={args.sync}{auth}; "
          f"logs in {args.run_dir}")


def describe_local(args, bind_flags=loopback_bind):
    """The commands run_job would run, as shell lines (--dry_run); runs nothing."""
    run_dir = args.run_dir or os.path.join(ROOT, "runs", "TIMESTAMP")
    args = argparse.Namespace(**{**vars(args), "run_dir": run_dir})
    binaries = {role: os.path.join(args.bin_dir, role, role) for role in ROLES}
    endpoint_file, stats_file = (os.path.join(run_dir, n) for n in ("scheduler.endpoint", "stats.json"))
    lines = [job_keys.describe(args)] if job_keys.curve(args) else []
    lines += ["# scheduler; the others start once it has written " + endpoint_file,
              shlex.join(scheduler_command(args, binaries["scheduler"], bind_flags, endpoint_file,
                                           stats_file)) + " > " + os.path.join(run_dir, "scheduler.log")]
    for name, argv, _ in node_commands(args, binaries, bind_flags, "ENDPOINT"):
        lines.append(shlex.join(argv) + " > " + os.path.join(run_dir, name + ".log"))
    return "\n".join(lines)


def prepare_run_dir(args):
    """Creates the run directory (runs/TIMESTAMP unless --run_dir) and removes a previous run's
    endpoint and stats files; returns their paths."""
    if not args.run_dir:
        args.run_dir = os.path.join(ROOT, "runs", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(args.run_dir, exist_ok=True)
    endpoint_file = os.path.join(args.run_dir, "scheduler.endpoint")
    stats_file = os.path.join(args.run_dir, "stats.json")
    for f in (endpoint_file, stats_file):
        if os.path.exists(f):
            os.remove(f)
    return endpoint_file, stats_file


def run_job(args, prefix=None, on_start=None, bind_flags=loopback_bind, during=None):
    """Runs the job `args` describes (see tools/launch; its options saved to RUN_DIR/launch.json
    first) and returns its summary (also written to RUN_DIR/summary.json) once the scheduler
    has exited 0. bind_flags(name): where a process listens; during(): called every 0.1 s while
    it runs. Raises JobError if the job does not complete: a scheduler that exits non-zero
    (after summary.json is written, "completed": false), --timeout; on any exception
    (Interrupted included) every process is stopped first."""
    endpoint_file, stats_file = prepare_run_dir(args)
    resume.save_options(args)
    job_keys.prepare(args)  # --auth=curve: RUN_DIR/keys, before anything starts
    job = Job(args, prefix, on_start)
    start = time.time()
    cpu = CpuMeter()
    try:
        start_processes(job, bind_flags, endpoint_file, stats_file)
        outcome = supervisor.Supervisor(job, start, supervisor.parse_max_restarts(args.max_restarts),
                                        cpu, during).run()
    except BaseException:
        job.stop_all()
        raise
    wall = time.time() - start
    cpu_use = cpu.summary()  # over the job, before the timelines are merged
    summary = finish_job(args, wall, cpu_use, stats_file, outcome)
    if not outcome.completed:
        raise JobError(f"the scheduler exited with status {outcome.scheduler_status}: the job did "
                       f"not complete; see {args.run_dir}/scheduler.log")
    return summary


def finish_job(args, wall, cpu_use, stats_file, outcome=None):
    """The end of every backend's job: writes RUN_DIR/summary.json (analysis.summary.write_summary
    over the run directory's files and the job's Outcome, by default a completed job's),
    prints it and returns it."""
    summary = write_summary(args, wall, cpu_use, stats_file, outcome)
    print("launch: summary " + json.dumps(summary))
    return summary
