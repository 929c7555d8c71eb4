"""tools/launch --backend=slurm: a cluster-file job as one Slurm batch job, one job step (srun)
per process.

The allocation has one node per [[host]], in file order (host i runs on the allocation's i-th
node; the hosts' names are only labels). The batch script expands SLURM_JOB_NODELIST with
scontrol and writes the names to the shared storage (slurm_steps), so every role finds the
scheduler through Slurm's environment: the scheduler's endpoint is the node that runs it (or its
host's `address` when the file gives one), and every process advertises its own node's name (or
its host's address / interface). The launcher starts each process as a step of the allocation
(srun --jobid --overlap on its node) and supervises the steps as the local launcher does its
processes (job.supervisor): the scheduler's step decides the outcome; a worker's or server's
step that exits non-zero (its process died, or Slurm lost its node) is recorded and the job goes
on, the survivors taking over a dead worker's data; under --max_restarts its replacement
(worker1.r1) is a new step on the same node, a server restoring its shard from the checkpoints
in the shared run directory (recovery.py). The batch job holds the allocation until the
launcher releases it.

The workdir must be on storage the login node and the compute nodes share (as Slurm clusters
have): the launcher unpacks the release bundle there (unless the same one is there intact:
bundle.installed; archive.safe_extract, so a crafted bundle cannot write elsewhere), the steps'
output streams back through srun into RUN_DIR/NAME.log, they write their stats, metrics,
timelines and checkpoints to WORKDIR/runs/JOB-RUN/, and the launcher copies the files there
into RUN_DIR at the end, also when it fails. It submits with `sbatch --wait`, stops the steps
and cancels the job (scancel) on Ctrl-C or --timeout, and summarises as tools/launch does.
The [slurm] table: partition, account, time (sbatch --time), sbatch_options (more #SBATCH
lines, e.g. ["--gres=gpu:8", "--exclusive"]), signal_seconds (default 120): sbatch
--signal=TERM@N, so that Slurm sends every step SIGTERM N seconds before the time limit (and on
a preemption with a grace time). A step's SIGTERM, from there or `scancel --signal=TERM
JOB.STEP`, reaches the role through run_role: a worker finishes its step and leaves the job
(LEAVE: the scheduler counts it dead at once; its step exits 143, recorded as a death and
replaced under --max_restarts), a server writes a checkpoint.

With --auth=curve the launcher copies the job's keys into WORKDIR/runs/JOB-RUN/keys/ on the
shared storage (0700, files 0600) and every step gets --auth=curve --keys_dir=that directory;
it deletes them once the job has ended. Every step runs as the submitting user, so on Slurm the
files cannot keep one role's secret key from another role's process: the keys keep out other
users and other machines (docs/SECURITY.md).

With a [data] table the script first stages the data set on every node with workers, one step
per node (the bundle's stage_data, the manifest copied to WORKDIR/runs/JOB-RUN/data.sha256),
into the host's cache on the node's own disk (a `~` there is the node's $HOME); a node that
fails ends the job before any process starts, and the launcher's error names the host and the
URL. Workers get --data_dir=CACHE/NAME-DIGEST.

The run's skeleton (run directory, keys, timeout, cleanup, summary) is deploy.driver's;
SlurmBackend supplies its hooks."""

import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import time

from ..analysis.cpu_meter import CpuMeter

from ..cluster import bundle as release_bundle
from ..cluster import role_commands
from ..job import keys as job_keys
from ..job.deadline import Deadline
from ..job.errors import JobError
from ..job.processes import Job
from . import archive
from . import driver
from . import recovery
from . import shell
from . import slurm_steps
from . import staging

# Shell words the script leaves for bash to expand: a node of the allocation, the run dir, and
# the $HOME a data cache's ~ stands for (staging.home_path).
_EXPANDED = re.compile(r"\$\{nodes\[\d+\]\}|\$R2SP_OUT(?![A-Za-z0-9_])|\$HOME(?![A-Za-z0-9_])")
MANIFEST = "data.sha256"  # in OUT_DIR: the manifest the staging steps read
# [slurm] signal_seconds' default: SIGTERM to the steps two minutes before the end (as a spot
# instance's warning), time for the servers' checkpoints and the workers' clean leave.
SIGNAL_SECONDS = 120
STAGING_FAILED = "staging.failed"  # in OUT_DIR: why the staging failed, if it did


def shell_word(arg):
    """`arg` quoted for bash with everything literal except the _EXPANDED references."""
    return shell.shell_word(arg, _EXPANDED)


def slurm_cluster(cluster):
    """The cluster as the steps see it: a host without an explicit address advertises its node's
    name, which the batch script knows as ${nodes[i]}."""
    hosts = tuple(dataclasses.replace(h, address=f"${{nodes[{i}]}}")
                  if h.address == h.name else h for i, h in enumerate(cluster.hosts))
    return dataclasses.replace(cluster, hosts=hosts)


def batch_script(cluster, bundle, out_dir):
    """The sbatch script (text) that holds the job's allocation: it stages the data set, then
    publishes the nodes and waits for the launcher, which runs every process as a step
    (slurm_steps). `bundle` and `out_dir` are absolute paths on the shared storage."""
    options = cluster.backend_options.get("slurm", {})
    per_node = max(len(h.processes) for h in cluster.hosts)
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={cluster.job_name}",
             f"#SBATCH --nodes={len(cluster.hosts)}",
             f"#SBATCH --ntasks-per-node={per_node}",
             f"#SBATCH --output={out_dir}/slurm-%j.out"]
    for key in ("partition", "account", "time"):
        if options.get(key):
            lines.append(f"#SBATCH --{key}={options[key]}")
    # Every step (not the batch shell) gets SIGTERM that long before the time limit, or before
    # a preemption where the cluster's PreemptMode gives a grace time.
    lines.append(f"#SBATCH --signal=TERM@{options.get('signal_seconds', SIGNAL_SECONDS)}")
    lines += [f"#SBATCH {o}" for o in options.get("sbatch_options", [])]
    lines += [
        "# Generated by tools/launch --backend=slurm: the allocation of an R2SP job.",
        "set -uo pipefail",
        f"R2SP_OUT={shell_word(out_dir)}",
        'mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
    ]
    return "\n".join(lines + staging_lines(cluster, bundle) + slurm_steps.hold_lines()) + "\n"


def step_commands(cluster, bundle, out_dir, extra_flags, auth=False, checkpoint_url=None):
    """{process name: (node index, the step's bash command)} of every process of the job, the
    scheduler first (slurm_steps.step_command). `bundle` and `out_dir` are absolute paths on the
    shared storage; with `auth` every step uses the keys in OUT_DIR/keys; servers copy their
    checkpoints to `checkpoint_url` (recovery.checkpoint_url) if given."""
    return {process.name: (index, step_command(cluster, bundle, out_dir, extra_flags, auth,
                                               index, host, process, checkpoint_url))
            for index, host, process in role_commands.scheduler_first(cluster)}


def step_command(cluster, bundle, out_dir, extra_flags, auth, index, host, process,
                 checkpoint_url=None):
    """The bash command of the step that runs `process` (of the index-th host)."""
    view = slurm_cluster(cluster)
    keys = f"$R2SP_OUT/{job_keys.KEYS}" if auth else None
    data_dir = staging.home_path(cluster.data.host_dir(host)) if cluster.data else None
    args = role_commands.run_role_args(view, view.hosts[index], process, "$R2SP_OUT",
                                       extra_flags, keys, data_dir, checkpoint_url)
    return slurm_steps.step_command(f"{bundle}/{role_commands.RUN_ROLE}", out_dir, args,
                                    shell_word)


def staging_lines(cluster, bundle):
    """The script's data step: stage_data on every node with workers, in parallel, one step
    each; any failure is written to OUT_DIR/staging.failed and ends the job before the steps."""
    if cluster.data is None:
        return []
    lines = [
        f"# Stage the data set {cluster.data.name} on every node with workers, once per node.",
        "declare -A staging",
        "stage() {  # HOST NODE ARGS...: stage_data on the NODE-th node, output to stage_HOST.log",
        "  local host=$1 node=$2; shift 2",
        '  srun --nodes=1 --ntasks=1 --relative="$node" --overlap --output="$R2SP_OUT/stage_$host.log" "$@" &',
        "  staging[$host]=$!",
        "}",
    ]
    index = {h.name: i for i, h in enumerate(cluster.hosts)}
    for host in staging.hosts(cluster):
        args = staging.stage_args(cluster.data, host, bundle, f"$R2SP_OUT/{MANIFEST}")
        args[3] = "--target=" + staging.home_path(cluster.data.host_dir(host))
        args[4] = f"--host={host.name} (${{nodes[{index[host.name]}]}})"
        lines.append(f"stage {shell_word(host.name)} {index[host.name]} " +
                     " ".join(shell_word(a) for a in args))
    lines += [
        'for host in "${!staging[@]}"; do',
        '  wait "${staging[$host]}" && continue',
        f'  {{ echo "staging the data set {cluster.data.name} on $host failed, so no process was '
        'started:"; cat "$R2SP_OUT/stage_$host.log"; } | tee -a "$R2SP_OUT/' + STAGING_FAILED + '" >&2',
        "done",
        f'[ -e "$R2SP_OUT/{STAGING_FAILED}" ] && exit 1',
    ]
    return lines


def install_bundle(tarball, workdir):
    """Unpacks the bundle into `workdir` unless the same one is there intact; its directory.
    JobError for a bundle with a member that would land outside `workdir`."""
    top, manifest = release_bundle.tarball_manifest(tarball)
    target = os.path.join(workdir, top)
    if release_bundle.installed(target, manifest):
        return target
    shutil.rmtree(target, ignore_errors=True)
    os.makedirs(workdir, exist_ok=True)
    try:
        with tarfile.open(tarball) as t:
            archive.safe_extract(t, workdir)
    except archive.UnsafeArchive as e:
        raise JobError(f"{tarball}: not unpacked: {e}")
    return target


def copy_results(out_dir, run_dir):
    """Copies the steps' files (logs, stats, metrics, timelines) into RUN_DIR; directories (the
    keys) stay."""
    if os.path.isdir(out_dir) and os.path.abspath(out_dir) != os.path.abspath(run_dir):
        for name in os.listdir(out_dir):
            if os.path.isfile(os.path.join(out_dir, name)):
                shutil.copy(os.path.join(out_dir, name), os.path.join(run_dir, name))


def install_keys(keys, out_dir):
    """Copies the job's keys from the local directory `keys` into OUT_DIR/keys, where the
    steps read them; returns that directory (`keys` itself when it is the same)."""
    target = os.path.join(out_dir, job_keys.KEYS)
    if os.path.abspath(target) != os.path.abspath(keys):
        job_keys.copy(keys, target, job_keys.files_for(job_keys.ROLES))
    return target


def remove_keys(keys, installed):
    """Deletes the steps' copy of the keys (`installed`), unless it is the launcher's own."""
    if installed and os.path.abspath(installed) != os.path.abspath(keys):
        shutil.rmtree(installed, ignore_errors=True)


class SlurmBackend(driver.Backend):
    """deploy.driver's hooks for Slurm: the script, bundle and keys in prepare; sbatch --wait
    and the steps (srun --jobid, slurm_steps) in launch; the local launcher's supervision in
    poll (job.supervisor, a replacement started as a new step on the dead one's node); the
    allocation released in finish; the steps stopped and scancel in stop; the keys' copy
    removed in clean_up; the steps' files copied in collect."""

    poll_seconds = 0.1
    resumable = True

    def __init__(self, run):
        super().__init__(run)
        cluster, tarball = run.cluster, run.tarball
        self.workdir = os.path.expanduser(cluster.hosts[0].workdir)
        self.bundle = os.path.join(self.workdir, os.path.basename(tarball).removesuffix(".tar.gz"))
        self.out_dir = os.path.join(self.workdir, "runs", run.job_dir)
        self.script = batch_script(cluster, self.bundle, self.out_dir)
        self.flags = recovery.with_recovery(run.extra_flags, recovery.role_flags(
            run.args, cluster, "$R2SP_OUT", run.job_dir))
        self.checkpoint_url = recovery.checkpoint_url(cluster, run.job_dir)
        self.installed_keys = None
        self.sbatch = None
        self.job_id = None
        self.job = None
        self.nodes = {}  # replacement name -> the index of the node it runs on
        self.moved = {}  # node index -> servers' replacements moved there (recovery.elsewhere)

    def describe(self):
        lines = [f"# unpack {self.run.tarball} into {self.workdir} (unless the same bundle is there)"]
        if self.run.keys:
            lines.append(f"{job_keys.describe(self.run.args)}\n# copy them into "
                         f"{self.out_dir}/{job_keys.KEYS} (0700, files 0600); deleted when the job ends")
        lines.append(f"sbatch --parsable --wait RUN_DIR/job.sbatch\n# RUN_DIR/job.sbatch:\n{self.script}")
        lines.append("# once the script has written the node names, one step per process:")
        for name, (node, command) in self.commands().items():
            lines.append(shlex.join(slurm_steps.step_argv("JOBID", node, command)) + f" > {name}.log")
        return "\n".join(lines)

    def commands(self):
        return step_commands(self.run.cluster, self.bundle, self.out_dir, self.flags,
                             self.run.keys is not None, self.checkpoint_url)

    def prepare(self):
        self.script_path = os.path.join(self.run.args.run_dir, "job.sbatch")
        with open(self.script_path, "w") as f:
            f.write(self.script)
        with contextlib.suppress(FileNotFoundError):  # an earlier run's in this RUN_DIR
            os.remove(os.path.join(self.run.args.run_dir, "job.steps"))
        install_bundle(self.run.tarball, self.workdir)
        os.makedirs(self.out_dir, exist_ok=True)
        for name in (slurm_steps.NODES, slurm_steps.RELEASE):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.out_dir, name))
        if self.run.cluster.data:
            with open(os.path.join(self.out_dir, MANIFEST), "w") as f:
                f.write(self.run.cluster.data.manifest_text)
        if self.run.keys:
            self.installed_keys = install_keys(self.run.keys, self.out_dir)

    def launch(self):
        cluster, args = self.run.cluster, self.run.args
        self.started = time.time()
        self.sbatch = subprocess.Popen(["sbatch", "--parsable", "--wait", self.script_path],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.job_id = self.sbatch.stdout.readline().strip().split(";")[0]
        if not self.job_id:
            raise JobError(f"sbatch failed: {self.sbatch.stderr.read().strip()}")
        slurm_steps.wait_for_nodes(self.out_dir, self.sbatch, Deadline(self.started, args.timeout),
                                   self.failed)
        self.job = Job(args)
        for name, (node, command) in self.commands().items():
            self.start_step(name, node, command, echo=name.startswith("worker"))
        print(f"launch: slurm job {self.job_id}: {cluster.num_servers} servers, {cluster.num_workers} "
              f"workers, sync={cluster.mode} on {len(cluster.hosts)} nodes; logs in "
              f"{args.run_dir}", flush=True)

    def failed(self):
        """Raises the batch job's failure: the staging's, or sbatch's status."""
        failed = os.path.join(self.out_dir, STAGING_FAILED)
        if os.path.exists(failed):
            with open(failed) as f:
                raise JobError(" ".join(f.read().split()))
        raise JobError(f"slurm job {self.job_id} failed (sbatch status {self.sbatch.returncode}); "
                       f"see {self.run.args.run_dir}/slurm-{self.job_id}.out and the step logs")

    def poll(self):
        """Supervises the steps until the scheduler's has exited (job.supervisor.Supervisor);
        True once the job completed, JobError when the scheduler failed."""
        self.outcome = recovery.supervise(self.run.args, self.job, self.started, CpuMeter(),
                                          self.restart)
        return True

    def restart(self, dead, new):
        """Starts `new`, the replacement of the process `dead`, as a new step on its node."""
        cluster = self.run.cluster
        index, host, process = recovery.placement(cluster, new)
        if process.role == "server" and self.checkpoint_url:
            index, host, process = recovery.elsewhere(cluster, self.nodes.get(dead, index),
                                                      process, self.moved)
        self.nodes[new] = index
        command = step_command(cluster, self.bundle, self.out_dir, self.flags,
                               self.run.keys is not None, index, host, process,
                               self.checkpoint_url)
        self.start_step(new, index, command, echo=self.job.command(dead)[1])

    def start_step(self, name, node, command, echo):
        """Starts process `name` as a step on the allocation's `node`-th node; its srun line is
        kept in RUN_DIR/job.steps (the record of what ran, replacements included)."""
        argv = slurm_steps.step_argv(self.job_id, node, command)
        with open(os.path.join(self.run.args.run_dir, "job.steps"), "a") as f:
            f.write(f"{shlex.join(argv)}   # {name}\n")
        self.job.start(name, argv, echo)

    def finish(self):
        slurm_steps.release(self.out_dir)
        try:
            self.sbatch.wait(timeout=30)
        except subprocess.TimeoutExpired:
            raise JobError(f"slurm job {self.job_id} did not end once released")
        if self.sbatch.returncode != 0:
            self.failed()

    def stop(self):
        if self.job:
            self.job.stop_all()
        if self.job_id:
            subprocess.run(["scancel", self.job_id], capture_output=True)
        if self.sbatch:
            self.sbatch.kill()
            self.sbatch.wait()

    def clean_up(self):
        if self.run.keys:
            remove_keys(self.run.keys, self.installed_keys)
        return []

    def collect(self):
        copy_results(self.out_dir, self.run.args.run_dir)


def run(args, cluster, tarball):
    """Runs the job as a Slurm batch job (deploy.driver with SlurmBackend); returns its summary."""
    return driver.run(args, cluster, tarball, SlurmBackend)
