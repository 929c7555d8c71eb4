"""Running an R2SP job's processes: the launch options, starting the processes, echoing
progress, supervising them until the scheduler decides the job's outcome (supervisor: deaths are
recorded, dead workers replaced), and summarising the run (job_summary). Used by tools/launch
(local processes) and tools/netcluster (processes inside network namespaces).

Failures are raised as JobError; whatever the exception, run_job stops every process it started
before passing it on. Signal handlers belong to the entry scripts: theirs raise Interrupted."""

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

from . import keys as job_keys
from . import resume
from . import supervisor
from .local_commands import node_commands, scheduler_command
from ..analysis.cpu_meter import CpuMeter
from .errors import Interrupted, JobError  # noqa: F401 (the scripts' launcher.JobError)
from ..analysis.summary import write_summary

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLES = ("scheduler", "server", "worker")


def parse_args(argv, description, parser=None):
    """The launch options (see tools/launch), added to `parser` if given. With --resume only
    the options resume.RESUME_OVERRIDES may be given too, and those not given are None (the
    saved ones stand: resume.prepare)."""
    p = parser or argparse.ArgumentParser(description=description,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", type=int, default=2, help="number of servers (default 2)")
    p.add_argument("--workers", type=int, default=3, help="number of workers (default 3)")
    p.add_argument("--sync", default="asp", choices=["bsp", "ssp", "asp", "r2sp"], help="consistency mode")
    p.add_argument("--run_dir", default="", help="where logs and summary.json go (default runs/TIMESTAMP)")
    p.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"),
                   help="directory holding scheduler/scheduler, server/server, worker/worker")
    p.add_argument("--timeout", type=float, default=3600, help="stop everything after this many seconds")
    p.add_argument("--scheduler_flags", default="", help="extra flags for the scheduler (one string)")
    p.add_argument("--server_flags", default="", help="extra flags for every server (one string)")
    p.add_argument("--worker_flags", default="", help="extra flags for every worker (one string)")
    p.add_argument("--quiet", action="store_true", help="do not echo worker progress")
    p.add_argument("--worker_flags_for", action="append", default=[], metavar="RANK:FLAGS",
                   help="extra flags for the RANK-th worker started (0-based), e.g. "
                        "'3:--compute_slowdown=2'; repeatable")
    p.add_argument("--cluster", default="", metavar="FILE",
                   help="a cluster file (TOML; examples/cluster/): hosts, roles, ports, flags. Its "
                        "counts and mode replace --servers, --workers and --sync; the *_flags "
                        "options add to its flags")
    p.add_argument("--backend", default="local", choices=["local", "ssh", "slurm", "k8s", "ec2"],
                   help="where the processes run: local (this machine), or with --cluster: ssh "
                        "(the file's hosts), slurm (an sbatch job), k8s (manifests applied with "
                        "kubectl), ec2 (instances launched with the AWS CLI); docs/DEPLOY.md")
    p.add_argument("--bundle", default="", metavar="TARBALL",
                   help="ssh: the release bundle to ship (default dist/r2sp-VERSION-VARIANT.tar.gz "
                        "from tools/package)")
    p.add_argument("--auth", choices=job_keys.AUTH_MODES, default=None,
                   help="none (default), or curve: CurveZMQ encryption and authentication between "
                        "the processes with the job's keys, one pair per role, made into "
                        "RUN_DIR/keys unless --keys_dir; with --cluster the default is the file's "
                        "[job] auth (docs/SECURITY.md)")
    p.add_argument("--keys_dir", default="", metavar="DIR",
                   help="--auth=curve: use the keys in DIR (tools/keygen DIR) instead of making "
                        "the job's own")
    p.add_argument("--dry_run", action="store_true",
                   help="print every command that would run, and run nothing")
    p.add_argument("--max_restarts", default="0", metavar="N|worker:N,server:M",
                   help="replace dead workers (exited non-zero or by a signal), at most N in all "
                        "(default 0: a death is only recorded; the scheduler decides whether the "
                        "job completes); server:M also replaces up to M dead servers (needs "
                        "--checkpoint_every): in asp, ssp and r2sp the replacement restores the "
                        "lost shard from its newest checkpoint while the job goes on; a bsp job "
                        "fails and is resumed from the checkpoints, as with --resume")
    p.add_argument("--checkpoint_every", default="", metavar="SPEC",
                   help="servers checkpoint their shards every SPEC: 30s (seconds) or 200steps "
                        "(default: only on SIGTERM, on losing the scheduler and at the end); into "
                        "RUN_DIR/checkpoints unless --server_flags name a --checkpoint_dir")
    p.add_argument("--resume", default="", metavar="RUN_DIR",
                   help="run the job of RUN_DIR (tools/launch's, its launch.json) again there, "
                        "its servers from their newest checkpoints; the previous attempt's files "
                        "move to RUN_DIR/attempt-K/. Only --timeout, --quiet and --max_restarts "
                        "may be given with it")
    args = p.parse_args(argv)
    if args.backend != "local" and not args.cluster:
        p.error(f"--backend={args.backend} needs --cluster")
    if args.auth is None and not args.cluster:  # with --cluster: the file's (cluster_launch)
        args.auth = "none"
    if args.keys_dir:
        if args.auth == "none":
            p.error("--keys_dir needs --auth=curve")
        args.keys_dir = os.path.abspath(args.keys_dir)  # launch.json: --resume from anywhere
    if args.servers < 1 or args.workers < 1:
        p.error("--servers and --workers must be at least 1")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    try:
        restarts = supervisor.parse_max_restarts(args.max_restarts)
        resume.check_checkpoint_every(args.checkpoint_every)
    except ValueError as e:
        p.error(str(e))
    if args.backend != "local" and (restarts["worker"] or restarts["server"]
                                    or args.checkpoint_every):
        p.error("--max_restarts and --checkpoint_every need --backend=local")
    if restarts["server"] and not args.resume:
        if not args.checkpoint_every and "--checkpoint_dir" not in args.server_flags:
            p.error("--max_restarts=server:N: a replacement server restores its shard from the "
                    "checkpoints, so it needs --checkpoint_every")
    if args.resume:
        given = given_options(p, argv, vars(args))
        others = sorted(given - {"resume", *resume.RESUME_OVERRIDES})
        if others:
            p.error("--resume runs the options saved in RUN_DIR/launch.json: only --timeout, "
                    "--quiet and --max_restarts may be given with it, not "
                    + ", ".join("--" + o for o in others))
        for name in set(resume.RESUME_OVERRIDES) - given:
            setattr(args, name, None)
    return args


class _Unset(list):
    """given_options' default (a list: append options copy and extend their default)."""


def given_options(parser, argv, names):
    """Which of the options `names` (dests) `argv` gives, even with their default value. Changes
    the parser's defaults: call it last."""
    unset = _Unset()
    parser.set_defaults(**{name: unset for name in names})
    parsed = vars(parser.parse_args(argv))
    return {name for name in names if parsed[name] is not unset}


class Job:
    """The processes of one job. `prefix(name)` gives the argv prefix a process runs under
    (e.g. ip netns exec NS; for a replacement, worker1.r1, that of the process it replaces,
    worker1), `on_start(name, pid)` sees each new process (replacements included). Processes
    are added from the main thread; the echo threads only read their own process's output."""

    def __init__(self, args, prefix=None, on_start=None, hold_stdin=False):
        self.args = args
        # With hold_stdin each process gets a pipe as stdin that stays open while it runs (the
        # ssh backend: its end of file stops the remote process).
        self.hold_stdin = hold_stdin
        self._procs = []  # (name, Popen), guarded by _lock
        self._commands = {}  # name -> (argv, echo) it was started with; main thread only
        self._lock = threading.Lock()
        self.prefix = prefix or (lambda name: [])
        self.on_start = on_start

    def binary(self, role):
        path = os.path.join(self.args.bin_dir, role, role)
        if not os.access(path, os.X_OK):
            raise JobError(f"{path} not found; build first: bazel build -c opt //scheduler //server //worker")
        return path

    def procs(self):
        """[(name, Popen)] started so far."""
        with self._lock:
            return list(self._procs)

    def command(self, name):
        """(argv, echo) process `name` was started with."""
        return self._commands[name]

    def start(self, name, argv, echo):
        """Starts `argv` as process `name`, stdout and stderr into RUN_DIR/NAME.log; with `echo`
        its stdout also goes to ours (unless --quiet)."""
        self._commands[name] = (argv, echo)
        with open(os.path.join(self.args.run_dir, name + ".log"), "wb") as log:
            proc = subprocess.Popen(self.prefix(supervisor.slot(name)) + argv,
                                    stdout=subprocess.PIPE if echo else log,
                                    stderr=log, start_new_session=True,
                                    stdin=subprocess.PIPE if self.hold_stdin else None)
            # The echo thread writes through a duplicate: one file offset with the child's stderr.
            echo_fd = os.dup(log.fileno()) if echo else None
        if echo:
            threading.Thread(target=self._echo, args=(proc, echo_fd), daemon=True).start()
        with self._lock:
            self._procs.append((name, proc))
        if self.on_start:
            self.on_start(name, proc.pid)
        return proc

    def _echo(self, proc, log_fd):
        with open(log_fd, "wb") as log:
            for line in iter(proc.stdout.readline, b""):
                log.write(line)
                log.flush()
                if not self.args.quiet:
                    sys.stdout.write(line.decode(errors="replace"))
                    sys.stdout.flush()

    def failure(self):
        """Why the job failed (a process exited with a non-zero status), or None; for the ssh
        backend's strict supervision (supervise)."""
        failed = None
        for name, proc in self.procs():
            code = proc.poll()
            if code not in (None, 0):
                failed = f"{name} exited with status {code}; see {self.args.run_dir}/{name}.log"
        return failed

    def finished(self):
        return all(proc.poll() is not None for _, proc in self.procs())

    def stop_all(self):
        """SIGTERM to every process group still running; SIGKILL to those left after 5 s.
        Returns [(name, exit status)] of the processes it stopped."""
        procs = self.procs()
        running = [(name, proc) for name, proc in procs if proc.poll() is None]
        for _, proc in running:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.time() + 5
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return [(name, proc.returncode) for name, proc in running]


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
    binaries = {role: job.binary(role) for role in ROLES}  # all found before anything starts
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


def supervise(job, cpu, start, during=None):
    """The ssh backend's strict supervision (run_job's is supervisor.Supervisor): returns once
    every process exited with status 0, sampling their CPU use and calling during() every 0.1 s
    meanwhile; JobError when one fails or the job runs past --timeout."""
    while True:
        failed = job.failure()
        if failed:
            raise JobError(failed)
        if job.finished():
            return
        cpu.sample(job.procs())
        if time.time() - start > job.args.timeout:
            raise JobError(f"the job ran past --timeout={job.args.timeout:g}s")
        if during:
            during()
        time.sleep(0.1)


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
    """The end of every backend's job: writes RUN_DIR/summary.json (job_summary.write_summary
    over the run directory's files and the job's Outcome, by default a completed job's),
    prints it and returns it."""
    summary = write_summary(args, wall, cpu_use, stats_file, outcome)
    print("launch: summary " + json.dumps(summary))
    return summary
