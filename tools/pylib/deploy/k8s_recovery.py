"""What replaces a process of a Kubernetes job (tools/launch --backend=k8s), and how a pod's
SIGTERM ends it cleanly: the changes to k8s_backend's manifests and the recovery flags.

  workers    the Indexed Job's controller: a worker pod that fails (its container killed, a
             clean leave on SIGTERM: exit 143, an evicted or deleted pod) is replaced by a new
             pod of the same completion index while --max_restarts=worker:N allows
             (backoffLimitPerIndex N; restartPolicy Never, so every replacement is a fresh pod,
             anywhere). Its command is the same: the worker registers with the running job
             and joins it as a replacement, taking over the dead worker's data shard. N counts
             per index, not in all as on the other backends: Kubernetes's only limit in all,
             backoffLimit, fails the whole Job when it is passed, where the other backends stop
             replacing and go on. Past an index's limit (with N = 0, at its first failure) the
             index is failed and the others run on: the job goes on without that worker (the
             survivors take over its data), as on every backend, and k8s_outcome judges the
             job by the scheduler's exit status. backoffLimitPerIndex needs Kubernetes 1.29
             (1.28 with the JobBackoffLimitPerIndex feature gate); [k8s]
             retries_per_index = false gives older clusters backoffLimit N instead: a worker
             pod that fails past N retries in all fails the Job, and the job.
  servers    the StatefulSet: the kubelet restarts a server's container in its pod
             (restartPolicy Always), the same pod name, so the same advertised name; its
             checkpoints are on the pod's emptyDir volume at OUT (--checkpoint_dir=
             OUT/checkpoints), which outlives the container, and with --max_restarts=server:N
             (N > 0; asp, ssp, r2sp, eawild) the scheduler waits --server_replace_s for it: it
             takes the lost rank and restores the shard. Kubernetes bounds these restarts only by
             its back-off, not by N. A deleted pod's emptyDir goes with it: its replacement
             restores from the cluster file's checkpoint_url (k8s_checkpoints.py), if any.
  scheduler  a Deployment's pod, restarted too, but a scheduler is not replaced: a job whose
             scheduler died fails, as on every backend.

SIGTERM (a pod's deletion, a node's drain or preemption) reaches the role through
k8s_entrypoint and run_role: a worker finishes its step and leaves (LEAVE; the scheduler counts
it dead at once), a server writes a checkpoint; terminationGracePeriodSeconds (GRACE_SECONDS)
leaves them the time for it before the SIGKILL."""

from ..job import supervisor
from . import recovery

# A worker leaves within 20 s of its SIGTERM (worker/main.cc's kLeaveWait) and then prints its
# results; a server writes a checkpoint of its shard.
GRACE_SECONDS = 60
OUT_VOLUME = "out"


def limits(args):
    """{"worker": N, "server": M} of --max_restarts (ValueError on a bad one)."""
    return supervisor.parse_max_restarts(getattr(args, "max_restarts", None) or "0")


def role_flags(args, cluster, out_dir, job_dir):
    """recovery.role_flags for the pods' `out_dir` (k8s_backend.OUT_DIR): the scheduler's
    --server_replace_s and epoch plans, the servers' --checkpoint_dir on the out volume."""
    return recovery.role_flags(args, cluster, out_dir, job_dir)


def apply(manifests, restarts, out_dir, per_index=True):
    """Changes k8s_backend.render's `manifests` in place for `restarts` (limits()): the worker
    Job's backoffLimitPerIndex (`per_index`; else its backoffLimit), the servers' out volume,
    every pod's grace period. Returns them."""
    for manifest in manifests.values():
        spec = pod_template(manifest)
        if spec is not None:
            spec["terminationGracePeriodSeconds"] = GRACE_SECONDS
    job = manifests["30-worker-job.yaml"]["spec"]
    if per_index:
        # With backoffLimitPerIndex and no backoffLimit, no number of failures in all fails
        # the Job (backoffLimit defaults to the largest int32).
        job.pop("backoffLimit", None)
        job["backoffLimitPerIndex"] = restarts["worker"]
    else:
        job["backoffLimit"] = restarts["worker"]
    job["template"]["spec"]["restartPolicy"] = "Never"
    server = manifests["21-server-statefulset.yaml"]["spec"]["template"]["spec"]
    server["restartPolicy"] = "Always"
    server.setdefault("volumes", []).append({"name": OUT_VOLUME, "emptyDir": {}})
    container = server["containers"][0]
    container.setdefault("volumeMounts", []).append({"name": OUT_VOLUME, "mountPath": out_dir})
    return manifests


def pod_template(manifest):
    """The pod spec of a workload manifest (Deployment, StatefulSet, Job), or None."""
    if manifest.get("kind") not in ("Deployment", "StatefulSet", "Job"):
        return None
    return manifest["spec"]["template"]["spec"]
