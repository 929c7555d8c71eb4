"""tools/launch --cluster=FILE: runs the job a cluster file describes (cluster_file.py) with the
chosen backend. The cluster's mode and process counts replace --sync, --servers and --workers;
the launcher's --scheduler_flags, --server_flags and --worker_flags come after the file's own.

  local  every process on this machine, on loopback: the file's roles, flags and GPU indices,
         not its hosts and ports (try a cluster file here before deploying it)
  ssh    the file's hosts over ssh (ssh_backend.py), shipping a release bundle; every remote
         backend runs through driver.py
  slurm, k8s, ec2   slurm_backend.py, k8s_backend.py, ec2_backend.py

The file's [job] auth is the default of --auth; with curve every backend gives each process
--auth=curve and the job's keys (job/keys.py), each host or pod only what its roles need.
Python workers: the file's worker_cmd ([job], [[host]]), then the launcher's --worker_cmd and
--worker_cmd_for; remotely they run from the bundle, which must then carry the r2sp package.
Every backend leaves the same run directory: logs, stats.json, metrics, timelines, summary.json.
A [data] table (cluster/data_table.py) is staged on the remote hosts before the workers start
(staging.py); a "bundle" source travels in a copy of the bundle (data_bundle.py). The local
backend stages nothing: its workers read their flags' --data_dir or the data set's default."""

import dataclasses
import importlib
import json
import os
import shlex
import shutil
import tempfile

from ..cluster import cluster_file
from ..job import launcher
from ..cluster import bundle as release_bundle
from ..cluster import role_commands
from ..job import python_workers
from ..job.errors import JobError
from . import data_bundle
from . import recovery

# The remote backends: each module's run(args, cluster, tarball) runs the job (or with
# --dry_run prints what it would run) and returns the summary, raising JobError.
BACKENDS = {name: (lambda name=name: importlib.import_module(f".{name}_backend", __package__))
            for name in ("ssh", "slurm", "k8s", "ec2")}

PACKAGE_CORE = "python/r2sp/_core.so"  # in the bundle (cluster.bundle)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def load(path):
    """The Cluster in `path`; JobError (with the file and line) if it is malformed."""
    try:
        return cluster_file.load(path)
    except OSError as e:
        raise JobError(f"cannot read the cluster file: {e}")
    except cluster_file.ClusterFileError as e:
        raise JobError(str(e))


def adopt(args, cluster):
    """Puts the cluster's mode, process counts and (unless --auth was given) auth into
    tools/launch's options `args`; JobError for --keys_dir without curve."""
    args.sync = cluster.mode
    args.servers = cluster.num_servers
    args.workers = cluster.num_workers
    if getattr(args, "auth", None) is None:
        args.auth = cluster.auth
    if getattr(args, "keys_dir", "") and args.auth != "curve":
        raise JobError('--keys_dir needs --auth=curve (or auth = "curve" in the '
                                "cluster file's [job])")


def merge_flags(args, cluster):
    """Puts the file's flags before the command line's in `args` (gflags keeps the last value)."""
    for role in ("scheduler", "server", "worker"):
        own = getattr(args, role + "_flags")
        setattr(args, role + "_flags", shlex.join(cluster.flags.get(role, [])) + (" " + own if own else ""))


def local_worker_flags(cluster):
    """tools/launch --worker_flags_for items for the cluster's per-host worker flags and GPUs."""
    items = []
    for host in cluster.hosts:
        for p in host.processes:
            if p.role != "worker":
                continue
            rank = int(p.name[len("worker"):])
            flags = ([f"--gpu={p.gpu}"] if p.gpu is not None else []) + shlex.split(host.worker_flags or "")
            if flags:
                items.append(f"{rank}:{shlex.join(flags)}")
    return items


def worker_commands(args, cluster):
    """{rank: command} of the Python workers: the file's worker_cmd, then the launcher's
    --worker_cmd and --worker_cmd_for; JobError for a bad option."""
    defaults = {role_commands.worker_rank(p): p.worker_cmd for p in cluster.processes()
                if p.worker_cmd}
    try:
        return python_workers.worker_commands(getattr(args, "worker_cmd", "") or "",
                                              getattr(args, "worker_cmd_for", None) or [],
                                              cluster.num_workers, defaults)
    except ValueError as e:
        raise JobError(str(e))


def with_worker_commands(cluster, commands):
    """The cluster whose workers run `commands` ({rank: command}; the others the binary)."""
    def process(p):
        if p.role != "worker":
            return p
        return dataclasses.replace(p, worker_cmd=commands.get(role_commands.worker_rank(p), ""))
    hosts = tuple(dataclasses.replace(h, processes=tuple(process(p) for p in h.processes))
                  for h in cluster.hosts)
    return dataclasses.replace(cluster, hosts=hosts)


def check_python_package(tarball):
    """JobError unless the release bundle `tarball` carries the r2sp package and its extension
    (Python workers import them from the bundle's python/)."""
    _, manifest = release_bundle.tarball_manifest(tarball)
    if PACKAGE_CORE not in json.loads(manifest)["files"]:
        raise JobError(f"{tarball} has no Python package ({PACKAGE_CORE}), which the Python "
                       "workers (worker_cmd) need: build //worker/python:_core.so, then make the "
                       "bundle again with tools/package")


def default_bundle(cluster):
    """dist/r2sp-VERSION-VARIANT.tar.gz; cuda when any worker has a GPU or --device=cuda."""
    with open(os.path.join(ROOT, "VERSION")) as f:
        version = f.read().strip()
    cuda = any(p.gpu is not None for p in cluster.processes()) or any(
        role_commands.uses_cuda(cluster.flags.get("worker", []) + shlex.split(h.worker_flags or ""))
        for h in cluster.hosts if any(p.role == "worker" for p in h.processes))
    variant = "cuda" if cuda else "cpu"
    path = os.path.join(ROOT, "dist", f"r2sp-{version}-{variant}.tar.gz")
    if not os.path.exists(path):
        raise JobError(f"no release bundle at {path}: make it with tools/package"
                                f"{' --variant=cuda' if cuda else ''}, or name one with --bundle")
    return path


def check_resume(args):
    """For tools/launch --resume (job.resume.prepare): False for a job of this machine; True
    for a remote one (ssh, slurm, ec2, k8s) that can resume from its cluster file's checkpoint_url,
    JobError for one that cannot."""
    if not getattr(args, "cluster", "") or args.backend == "local":
        return False
    cluster = load(args.cluster)
    recovery.check_resume(cluster, args, role_commands.job_dir(cluster, args.run_dir))
    return True


def run(args):
    """Runs (or with --dry_run prints) the cluster-file job `args` names; returns its summary."""
    cluster = load(args.cluster)
    recovery.check_backend(cluster, args.backend)
    adopt(args, cluster)
    commands = worker_commands(args, cluster)
    if args.backend == "local":
        args.worker_cmd = ""
        args.worker_cmd_for = [f"{rank}:{command}" for rank, command in sorted(commands.items())]
        # Per worker: the file's [flags].worker, its host's flags and GPU, then the command line's.
        own = shlex.split(args.worker_flags)
        merge_flags(args, cluster)
        args.worker_flags = shlex.join(cluster.flags.get("worker", []))
        args.worker_flags_for = (local_worker_flags(cluster) +
                                 [f"{r}:{shlex.join(own)}" for r in range(cluster.num_workers) if own] +
                                 list(args.worker_flags_for))
        if args.dry_run:
            print(launcher.describe_local(args))
            return None
        return launcher.run_job(args)
    cluster = with_worker_commands(cluster, commands)
    backend = BACKENDS[args.backend]()
    # Kubernetes pulls an image: with [k8s] image given, no bundle is needed here.
    image_given = args.backend == "k8s" and cluster.backend_options["k8s"].get("image")
    try:
        tarball = args.bundle or (None if image_given else default_bundle(cluster))
        if tarball and commands:
            check_python_package(tarball)
        if data_bundle.prepare(tarball, cluster, None) == tarball:  # no data set to ship
            return backend.run(args, cluster, tarball)
        if args.dry_run:
            print(f"# data: {tarball} is shipped as a copy that also carries "
                  f"{cluster.data.path} (as worker_files/{cluster.data.name}/)")
            return backend.run(args, cluster, tarball)
        scratch = tempfile.mkdtemp(prefix="r2sp-launch.")
        try:  # a "bundle" data source: the bundle's copy that carries the data set
            return backend.run(args, cluster, data_bundle.prepare(tarball, cluster, scratch))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    except release_bundle.BundleError as e:
        raise JobError(str(e))
