"""What each process of a cluster-file job runs on its host: the arguments of the bundle's
share/r2sp/deploy/run_role (options, role, flags), the same for every remote backend (ssh,
Slurm, Kubernetes, EC2). The scheduler listens on its fixed port and the others find it at
cluster.scheduler_endpoint(); every process binds all interfaces on its own port and advertises
its host's address (or the address of the host's interface, looked up by run_role). With
--auth=curve each also gets --auth=curve --keys_dir=DIR, DIR where its backend put the keys.
A worker with a worker_cmd (a Python worker) gets run_role --worker_cmd=CMD and its rank, world
size and local rank: run_role runs CMD from the bundle's worker_files/ through python_worker,
with the same flags in its environment (R2SP_WORKER_FLAGS)."""

import os
import shlex

from ..job import keys as job_keys

RUN_ROLE = "share/r2sp/deploy/run_role"


def remote_path(path):
    """`path` for a POSIX shell on the host: quoted, but a leading ~ still means $HOME."""
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def bundle_dir(host, bundle_name):
    """Where the bundle unpacks on `host` (unexpanded; see remote_path)."""
    return f"{host.workdir.rstrip('/')}/{bundle_name}"


def run_dir(host, job_dir):
    """The host's directory for this run's stats, metrics and timelines (unexpanded)."""
    return f"{host.workdir.rstrip('/')}/runs/{job_dir}"


def keys_dir(host, job_dir):
    """The host's directory for this run's keys (unexpanded): beside the run directory, not in
    it, so that fetching the run directory never brings keys back."""
    return f"{host.workdir.rstrip('/')}/keys/{job_dir}"


def job_dir(cluster, run_dir):
    """The run's directory name on the hosts: JOB-RUN (RUN: the local run directory's name,
    TIMESTAMP before it is chosen)."""
    return f"{cluster.job_name}-{os.path.basename(os.path.normpath(run_dir)) if run_dir else 'TIMESTAMP'}"


def run_role_args(cluster, host, process, out_dir, extra_flags=None, keys=None, data_dir=None,
                  checkpoint_url=None):
    """run_role's arguments for `process` on `host`, writing its files under `out_dir` (a path
    on the host, already expanded or relative to the bundle; the caller quotes). extra_flags:
    {role: [flags]} appended after the cluster file's (the launcher's command-line flags).
    keys: the directory of the job's keys on the host (as `out_dir`), for --auth=curve.
    data_dir: where the host staged the [data] set (as `out_dir`): a worker's --data_dir,
    unless its own flags give one. checkpoint_url: a server's run_role --checkpoint_url (its
    checkpoints copied there; the run's URL, deploy/recovery.checkpoint_url)."""
    args = []
    if host.interface:
        args.append("--advertise_interface=" + host.interface)
    if process.role == "server" and checkpoint_url:
        args.append("--checkpoint_url=" + checkpoint_url)
    if process.role == "worker" and process.worker_cmd:
        args += python_worker_args(cluster, host, process)
    args.append(process.role)
    args += [f"--bind=tcp://0.0.0.0:{process.port}"]
    if host.address:
        args.append("--advertise_host=" + host.address)
    if keys:
        args += job_keys.node_flags(keys)
    if process.role == "scheduler":
        args += [f"--num_servers={cluster.num_servers}", f"--num_workers={cluster.num_workers}",
                 "--sync=" + cluster.mode, f"--stats_json={out_dir}/stats.json"]
    else:
        args.append("--scheduler=" + cluster.scheduler_endpoint())
    if process.role == "worker":
        args += [f"--metrics={out_dir}/metrics_{process.name}.jsonl",
                 f"--timeline={out_dir}/timeline_{process.name}.json",
                 f"--model_dir={out_dir}/model"]
        if process.gpu is not None:
            args.append(f"--gpu={process.gpu}")
    own = cluster.flags.get(process.role, []) + (
        shlex.split(host.worker_flags or "") if process.role == "worker" else [])
    own += (extra_flags or {}).get(process.role, [])
    if process.role == "worker" and data_dir and not any(
            f == "--data_dir" or f.startswith("--data_dir=") for f in own):
        args.append("--data_dir=" + data_dir)
    return args + own


def slot(name):
    """The cluster file's process a (replacement) name stands for: "worker1.r2" -> "worker1"."""
    return name.partition(".")[0]


def worker_rank(process):
    """The rank of a worker process: worker3 -> 3 (its replacement worker3.r1 too)."""
    return int(slot(process.name)[len("worker"):])


def python_worker_args(cluster, host, process):
    """run_role's options that make `process` (a worker of `host` with a worker_cmd) a Python
    worker: its command, rank, the job's workers and its index among the host's workers."""
    local = [p.name for p in host.processes if p.role == "worker"].index(slot(process.name))
    return ["--worker_cmd=" + process.worker_cmd, f"--rank={worker_rank(process)}",
            f"--world_size={cluster.num_workers}", f"--local_rank={local}"]


def python_workers(cluster):
    """Whether any worker of the cluster has a worker_cmd (so the bundle needs the package)."""
    return any(p.worker_cmd for p in cluster.processes())


def roles_of(host):
    """The roles of the host's processes, in job_keys.ROLES order: the secret keys it needs."""
    return [r for r in job_keys.ROLES if any(p.role == r for p in host.processes)]


def extra_flags_from(args):
    """{role: [flags]} from tools/launch's --scheduler_flags, --server_flags, --worker_flags."""
    return {role: shlex.split(getattr(args, role + "_flags", "") or "")
            for role in ("scheduler", "server", "worker")}


def uses_cuda(flags):
    """Whether worker flags pick --device=cuda (the last --device wins, as in gflags)."""
    device = "cpu"
    for i, flag in enumerate(flags):
        if flag.startswith("--device="):
            device = flag.split("=", 1)[1]
        elif flag == "--device" and i + 1 < len(flags):
            device = flags[i + 1]
    return device == "cuda"


def scheduler_first(cluster):
    """[(host index, host, process)] of every process of the job, the scheduler first (the
    others find it there), then the file's order: the order every backend starts them in."""
    return sorted(((i, h, p) for i, h in enumerate(cluster.hosts) for p in h.processes),
                  key=lambda t: t[2].role != "scheduler")


def hosts_scheduler_first(cluster):
    """The cluster's hosts, the scheduler's first, then the file's order."""
    return sorted(cluster.hosts, key=lambda h: h.name != cluster.scheduler_host().name)
