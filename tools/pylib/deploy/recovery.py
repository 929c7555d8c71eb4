"""What makes a remote job recover as a local one does (the backends that supervise their
processes with job.supervisor: ssh, and Slurm): the flags the local launcher gives its scheduler
and servers (job.local_commands, job.resume), here with paths on the hosts, and the start of a
dead process's replacement under the name the local launcher gives it (worker1.r1).

  scheduler  --absorb_orphaned_shards --epoch_plans=OUT/epoch_plans.pb unless dead workers are
             replaced (the survivors take over a dead worker's data from the next epoch);
             --server_replace_s=60 with --max_restarts=server:N in asp, ssp and r2sp (the
             scheduler waits for a lost server's replacement; bsp: the job fails, as locally)
  server     --checkpoint_dir=OUT/checkpoints unless the file's or the launcher's server flags
             name one, and --checkpoint_every when given: a replacement started on the same
             host restores the lost shard from there

OUT is the host's run directory (WORKDIR/runs/JOB-RUN), as the backend's commands name it."""

import dataclasses
import shlex

from ..job import local_commands
from ..job import resume
from ..job import supervisor


def role_flags(args, cluster, out_dir):
    """{role: [flags]} of recovery for the job `args` (tools/launch's options, the cluster's
    adopted) runs on `cluster`, its hosts writing under `out_dir` (a path or shell variable the
    backend's commands expand)."""
    limits = supervisor.parse_max_restarts(args.max_restarts or "0")
    scheduler = []
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
    return {"scheduler": scheduler, "server": server, "worker": []}


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
