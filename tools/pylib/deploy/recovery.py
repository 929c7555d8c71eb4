"""What makes a remote job recover as a local one does (the backends that supervise their
processes with job.supervisor: ssh, Slurm and EC2): the flags the local launcher gives its scheduler
and servers (job.local_commands, job.resume), here with paths on the hosts, and the start of a
dead process's replacement under the name the local launcher gives it (worker1.r1).

  scheduler  --absorb_orphaned_shards --epoch_plans=OUT/epoch_plans.pb unless dead workers are
             replaced (the survivors take over a dead worker's data from the next epoch);
             --server_replace_s=60 with --max_restarts=server:N outside bsp (the scheduler
             waits for a lost server's replacement in asp, ssp, r2sp and eawild; bsp, easgd:
             the job fails, as locally)
  server     --checkpoint_dir=OUT/checkpoints unless the file's or the launcher's server flags
             name one, and --checkpoint_every when given: a replacement started on the same
             host restores the lost shard from there; --resume with tools/launch --resume
  scheduler  also --job_id=r2sp-JOB-RUN (the servers' checkpoints name it)

OUT is the host's run directory (WORKDIR/runs/JOB-RUN), as the backend's commands name it.
With the cluster file's checkpoint_url, servers copy their checkpoints to URL/JOB-RUN
(run_role --checkpoint_url; file:// or s3://), and a dead server's replacement runs on another
host that runs servers (elsewhere; on EC2 a new instance), restoring from there."""

import dataclasses
import os
import shlex
import subprocess

from ..job import local_commands
from ..job.errors import JobError
from ..job import resume
from ..job import supervisor


def role_flags(args, cluster, out_dir, job_dir):
    """{role: [flags]} of recovery for the job `args` (tools/launch's options, the cluster's
    adopted) runs on `cluster`, its hosts writing under `out_dir` (a path or shell variable the
    backend's commands expand); job_dir: JOB-RUN, which names the job in its checkpoints."""
    limits = supervisor.parse_max_restarts(args.max_restarts or "0")
    # As locally: the job id follows the run, so that a resumed run's servers accept the
    # checkpoints of the attempt before (the file's or the launcher's --job_id, after, wins).
    scheduler = ["--job_id=r2sp-" + job_dir]
    if not limits["worker"]:
        scheduler += ["--absorb_orphaned_shards", f"--epoch_plans={out_dir}/{resume.EPOCH_PLANS}"]
    if limits["server"] and cluster.mode != "bsp":
        scheduler.append(f"--server_replace_s={local_commands.SERVER_REPLACE_SECONDS:g}")
    server = []
    named = cluster.flags.get("server", []) + shlex.split(args.server_flags or "")
    if resume.flag_value(named, "checkpoint_dir") is None:
        server.append(f"--checkpoint_dir={out_dir}/{resume.CHECKPOINTS}")
    if args.checkpoint_every:
        server.append("--checkpoint_every=" + args.checkpoint_every)
    if getattr(args, "resume", ""):
        server.append("--resume")
    return {"scheduler": scheduler, "server": server, "worker": []}


def checkpoint_url(cluster, job_dir):
    """The run's checkpoint URL: the cluster file's checkpoint_url/JOB-RUN (each run its own, so
    a server never comes across another run's checkpoints there), or None."""
    return f"{cluster.checkpoint_url.rstrip('/')}/{job_dir}" if cluster.checkpoint_url else None


def check_resume(cluster, args, job_dir):
    """JobError unless the remote run `args` (tools/launch --resume) can be resumed: its
    checkpoints are at the cluster file's checkpoint_url (file:// or s3://), some server's
    there."""
    url = checkpoint_url(cluster, job_dir)
    if not url:
        raise JobError(f"cannot resume {args.run_dir} on --backend={args.backend}: a remote job "
                       "resumes from its checkpoint_url, and the cluster file gives none")
    there = url.removeprefix("file://")
    if args.backend == "k8s" and url.startswith("file://") and not os.path.isdir(there):
        # The claim ([k8s] checkpoint_volume) is mounted in the server pods, not here.
        print(f"launch: {there} is not mounted here: the server pods restore from their "
              "claim what the previous attempt's servers copied there", flush=True)
        return
    if not any(n.startswith("server") for n in names_at(url)):
        raise JobError(f"cannot resume {args.run_dir}: no server's checkpoints at {url}")


def names_at(url):
    """The names directly under `url` (file:///PATH, or s3://BUCKET/PREFIX through the aws
    CLI); [] where there is nothing. JobError when S3 cannot be listed."""
    if url.startswith("file://"):
        there = url.removeprefix("file://")
        return os.listdir(there) if os.path.isdir(there) else []
    # `aws s3 ls` exits 1 when nothing matches; its lines end in the name ("PRE server0/").
    r = subprocess.run(["aws", "s3", "ls", url.rstrip("/") + "/"], capture_output=True,
                       text=True, stdin=subprocess.DEVNULL)
    if r.returncode not in (0, 1):
        raise JobError(f"cannot list {url}: {(r.stderr or r.stdout).strip()}")
    return [line.split()[-1].rstrip("/") for line in r.stdout.splitlines() if line.split()]


def check_backend(cluster, backend):
    """JobError for a checkpoint_url the backend would not honour; the local backend's servers
    keep theirs in RUN_DIR, on this machine, and need none."""
    if cluster.checkpoint_url and backend not in ("local", "ssh", "slurm", "ec2", "k8s"):
        raise JobError(f"the cluster file's checkpoint_url is for the ssh, slurm, ec2 and k8s "
                       f"backends, not {backend}: remove it, or run the job with one of those")


def with_recovery(extra_flags, recovery):
    """The launcher's {role: [flags]} with the recovery flags before them (theirs win)."""
    return {role: recovery.get(role, []) + extra_flags.get(role, [])
            for role in ("scheduler", "server", "worker")}


def placement(cluster, name):
    """(host index, host, process) of the cluster file's process `name`, or of the process a
    replacement (worker1.r2) stands in for: the replacement runs on the same host, as the same
    process under its own name (its log, metrics and timeline files are its own)."""
    slot = supervisor.slot(name)
    for index, host in enumerate(cluster.hosts):
        for process in host.processes:
            if process.name == slot:
                return index, host, dataclasses.replace(process, name=name)
    raise KeyError(f"no process {slot} in the cluster file")


def elsewhere(cluster, index, process, moved):
    """(host index, host, process) of a server's replacement `process` with a checkpoint_url:
    the next host after the index-th (in file order, wrapping) that runs servers, so that a
    host that lost a server is not trusted with its replacement; the same host when it is the
    only one. Elsewhere it listens on the first server port past that host's own servers and
    the replacements moved there before (`moved`: {host index: count}, updated)."""
    count = len(cluster.hosts)
    for step in range(1, count + 1):
        target = (index + step) % count
        host = cluster.hosts[target]
        if any(p.role == "server" for p in host.processes):
            break
    if target == index:
        return index, host, process
    servers = sum(p.role == "server" for p in host.processes)
    port = cluster.ports["server"] + servers + moved.get(target, 0)
    moved[target] = moved.get(target, 0) + 1
    return target, host, dataclasses.replace(process, port=port)


def supervise(args, job, started, cpu, restart):
    """Supervises `job` until the scheduler has exited (job.supervisor.Supervisor: a dead worker
    or server is recorded, and `restart(dead, new)` starts its replacement while --max_restarts
    allows); the Outcome once the job completed, JobError when the scheduler failed."""
    limits = supervisor.parse_max_restarts(args.max_restarts or "0")
    outcome = supervisor.Supervisor(job, started, limits, cpu, restart=restart).run()
    if not outcome.completed:
        raise JobError(f"the scheduler exited with status {outcome.scheduler_status}: "
                       f"the job did not complete; see {args.run_dir}/scheduler.log")
    return outcome
