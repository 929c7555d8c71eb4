"""The cluster file's checkpoint_url on Kubernetes (k8s_backend): every server pod copies its
checkpoints there and back, as the ssh, Slurm and EC2 hosts do (run_role --checkpoint_url,
which k8s_entrypoint passes on from R2SP_CHECKPOINT_URL, the run's URL: checkpoint_url/JOB-RUN).

  s3://BUCKET/PREFIX  through the image's aws CLI, with credentials the pod is given (an IAM
                      role for its service account, IRSA or EKS Pod Identity, or AWS_* variables
                      from a Secret): nothing is mounted
  file:///PATH        a shared file system: [k8s] checkpoint_volume names a ReadWriteMany
                      PersistentVolumeClaim, mounted at PATH in every server pod (a file:// path
                      without one would be each pod's own disk, which dies with it)

A server's container restarted in its pod still has its checkpoints on the pod's out volume; a
pod deleted or rescheduled (a drained node, a preemption) starts with an empty one, and run_role
copies the checkpoints at the URL into it before the server starts, so it restores its shard
from them (with --max_restarts=server:N), and tools/launch --resume restores every server."""

from ..job.errors import JobError

VOLUME = "checkpoints"  # the claim's volume in the server pods
SERVER_FILE = "21-server-statefulset.yaml"
RESERVED = ("/r2sp", "/opt/r2sp", "/etc/r2sp")  # the pods' own mounts and the image's install


def mount_path(url):
    """Where a file:// checkpoint_url's claim is mounted: the URL's path."""
    return url.removeprefix("file://").rstrip("/") or "/"


def check(url, claim):
    """JobError unless the cluster file's checkpoint_url `url` (or None) and [k8s]
    checkpoint_volume `claim` (or None) make sense together."""
    if claim and not (url or "").startswith("file:///"):
        raise JobError("[k8s] checkpoint_volume is the claim a file:///PATH checkpoint_url lives "
                       f"on, but checkpoint_url is {url or 'not given'}: give checkpoint_url = "
                       "\"file:///PATH\" ([job]), or remove checkpoint_volume")
    if not url or url.startswith("s3://"):
        return
    if not url.startswith("file:///"):
        raise JobError(f"checkpoint_url {url}: Kubernetes takes s3://BUCKET/PREFIX or "
                       "file:///PATH (with [k8s] checkpoint_volume)")
    if not claim:
        raise JobError(f"checkpoint_url {url} is a path in each server pod's own file system, "
                       "which goes with the pod: name a ReadWriteMany PersistentVolumeClaim "
                       "to mount there, [k8s] checkpoint_volume = \"CLAIM\", or use s3://")
    path = mount_path(url)
    if path == "/" or any(path == r or path.startswith(r + "/") for r in RESERVED):
        raise JobError(f"checkpoint_url {url}: the claim cannot be mounted at {path} (the "
                       f"pods use {', '.join(RESERVED)}): name another path")


def apply(manifests, url, run_url, claim):
    """Changes k8s_backend.render's `manifests` in place for the cluster file's checkpoint_url
    `url` (None: nothing): the server pods get R2SP_CHECKPOINT_URL=`run_url` (the run's) and,
    with `claim`, the claim mounted at the URL's path. Returns them; JobError (check)."""
    check(url, claim)
    if not url:
        return manifests
    spec = manifests[SERVER_FILE]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    container["env"].append({"name": "R2SP_CHECKPOINT_URL", "value": run_url})
    if claim:
        spec.setdefault("volumes", []).append(
            {"name": VOLUME, "persistentVolumeClaim": {"claimName": claim}})
        container.setdefault("volumeMounts", []).append(
            {"name": VOLUME, "mountPath": mount_path(url)})
    return manifests
