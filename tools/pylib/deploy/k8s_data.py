"""The cluster file's [data] set on Kubernetes (k8s_backend.render): every worker pod stages it
with an init container before the worker starts. The init container runs the image's stage_data
(the same program the other backends run on their hosts) into the pod's data volume, checking
every file against the manifest, which a ConfigMap (JOB-data-manifest) carries; the worker then
reads it at --data_dir=/r2sp/data/NAME-DIGEST, mounted read-only.

The data volume is an emptyDir (the pod's own: staged on every run), or with [k8s]
data_volume = "CLAIM" the PersistentVolumeClaim CLAIM, which keeps the cache between jobs (a
later job reuses the files that verify). s3:// sources need the aws CLI in the image and
credentials in the pod (e.g. an IAM role for its service account); a "bundle" source reads the
image's own /opt/r2sp/worker_files/NAME."""

from . import staging

DATA_MOUNT = "/r2sp/data"  # the data volume, in the init container and the worker
MANIFEST_MOUNT = "/etc/r2sp/data"  # the ConfigMap's volume
MANIFEST_FILE = "manifest.sha256"
FILE_NAME = "05-data-manifest-configmap.yaml"  # before the pods (kubectl apply -f DIR: name order)


def configmap_name(job_name):
    return f"{job_name}-data-manifest"


def data_dir(data):
    """The workers' --data_dir in the pod."""
    return f"{DATA_MOUNT}/{data.dir_name}"


def configmap(data, job_name, meta):
    """The ConfigMap that carries the manifest (`meta`: its metadata without the name)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {**meta, "name": configmap_name(job_name)},
            "data": {MANIFEST_FILE: data.manifest_text}}


def init_container(data, image, install_dir):
    """The container that stages the data set before the worker's starts."""
    program, *args = staging.stage_args(data, _Pod, install_dir,
                                        f"{MANIFEST_MOUNT}/{MANIFEST_FILE}")
    args[2] = "--target=" + data_dir(data)
    args[3] = "--host=$(POD_NAME)"  # Kubernetes expands $(VAR) in args from the env
    return {"name": "stage-data", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": [program], "args": args,
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "volumeMounts": [{"name": "data", "mountPath": DATA_MOUNT},
                             {"name": "data-manifest", "mountPath": MANIFEST_MOUNT,
                              "readOnly": True}]}


class _Pod:
    """A stand-in host for staging.stage_args: the pod's paths replace the host's."""
    name = "$(POD_NAME)"
    data_cache = DATA_MOUNT


def stage_in(data, pod, image, install_dir, volume, meta):
    """Adds the staging of `data` (None: nothing) to the worker pod template `pod` (in place):
    the init container, the worker's read-only data mount, the data volume (`volume`: a claim's
    name, else emptyDir) and the manifest's. Returns {file name: the manifest's ConfigMap}
    ({} without data); `meta`: the job's metadata (its name is the job's)."""
    if data is None:
        return {}
    job_name = meta["name"]
    spec = pod["spec"]
    spec["initContainers"] = [init_container(data, image, install_dir)]
    container = spec["containers"][0]
    container.setdefault("volumeMounts", []).append(
        {"name": "data", "mountPath": DATA_MOUNT, "readOnly": True})
    source = {"persistentVolumeClaim": {"claimName": volume}} if volume else {"emptyDir": {}}
    spec.setdefault("volumes", []).extend([
        {"name": "data", **source},
        {"name": "data-manifest", "configMap": {"name": configmap_name(job_name)}}])
    return {FILE_NAME: configmap(data, job_name, meta)}
