"""tools/launch --backend=k8s: a cluster-file job as Kubernetes objects, applied with kubectl.

  JOB-scheduler  a Deployment (1 replica) and a ClusterIP Service on the scheduler's port: the
                 others reach it as tcp://JOB-scheduler:PORT
  JOB-server     a StatefulSet (S replicas, started in parallel) and its headless Service:
                 server k is the pod JOB-server-k and advertises JOB-server-k.JOB-server
  JOB-worker     an Indexed Job (W completions, all in parallel, --max_restarts=worker:N
                 retries: k8s_recovery.py): worker k is the pod of completion index k; with
                 GPUs (a host lists gpus, or --device=cuda in the worker flags) each asks for
                 one `nvidia.com/gpu` (or [k8s] gpu_resource) and uses the card it is given
                 (the file's GPU indices name cards of its hosts)

Every pod runs the image's share/r2sp/deploy/k8s_entrypoint, which turns the pod's environment
(the downward API's POD_IP and POD_NAME, Kubernetes's JOB_COMPLETION_INDEX, the R2SP_*
variables below) into run_role's flags. The cluster file gives the mode, the counts, the ports
and the flags; hosts' names, addresses and GPU indices mean nothing here, and since every worker
comes from one pod template, hosts may not give workers different worker_flags, nor different
worker_cmd (Python workers: every worker runs the same command, R2SP_WORKER_CMD; the image must
then hold a Python with the client's dependencies, e.g. torch).

The [k8s] table: image (default r2sp:VERSION-VARIANT of the bundle: build it with
tools/deploy/Dockerfile and push it where the cluster can pull it), namespace (default: the
kubectl context's), gpu_resource, image_pull_secret (a Secret the pods pull the image with),
data_volume (a PersistentVolumeClaim that caches the [data] set between jobs; default: each
worker pod's own emptyDir), checkpoint_volume (the claim of a file:// checkpoint_url:
k8s_checkpoints.py), retries_per_index (k8s_recovery.py). With a [data] table every worker pod stages the data set in an init
container before it starts (k8s_data.py) and reads it at --data_dir.
Needs Kubernetes >= 1.24 (Indexed Jobs) and kubectl. What replaces a dead pod, the servers'
checkpoint volume, the recovery flags and the pods' SIGTERM grace period: k8s_recovery.py.

With --auth=curve (or [job] auth = "curve") the job's keys (RUN_DIR/keys, made by keygen, or
--keys_dir) become one Secret per role, JOB-keys-ROLE, holding the three public keys and that
role's secret key only; each pod mounts its own role's Secret read-only at /etc/r2sp/keys with
defaultMode 0400 and gets R2SP_AUTH=curve, which the entrypoint turns into --auth=curve
--keys_dir=/etc/r2sp/keys. One Secret per role rather than one Secret with items projected per
pod: a kubelet fetches whole Secrets, so a node that runs only workers never receives the
scheduler's or the servers' secret keys, and access to each role's Secret can be granted apart.
The Secrets' files in RUN_DIR/k8s/ are 0600; --dry_run prints them with placeholders for the
keys (which it neither makes nor reads). Do not give the pods an fsGroup: Kubernetes would make the key files group-readable, and
the binaries refuse a secret key file that is.

run() writes the manifests to RUN_DIR/k8s/, applies them, follows every pod's log into
RUN_DIR/NAME.log, waits for the job's end (k8s_outcome.py) or --timeout, takes the files the
scheduler and workers print at their end (R2SP-RESULTS blocks) out of the logs into RUN_DIR,
summarises the run as tools/launch does, and always deletes the objects: on success, failure and
Ctrl-C. A launcher killed outright leaves them: `kubectl delete -f RUN_DIR/k8s/` removes them,
and the Job's activeDeadlineSeconds (--timeout) bounds the workers meanwhile. --dry_run writes
nothing: it prints the manifests it would write and the commands. The run's skeleton (run
directory, keys, timeout, cleanup, summary) is deploy.driver's; K8sBackend supplies its hooks."""

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time

from ..cluster import role_commands
from ..job import keys as job_keys
from ..job.errors import JobError
from . import driver
from . import k8s_checkpoints
from . import k8s_data
from . import k8s_outcome
from . import k8s_recovery
from . import recovery
from . import k8s_yaml
from .k8s_events import PodEvents
from .k8s_keys import key_secret, read_keys, redacted, secret_name
from .k8s_kubectl import Follower, Kubectl
from .k8s_results import extract_results

INSTALL_DIR = "/opt/r2sp"  # where tools/deploy/Dockerfile unpacks the bundle
ENTRYPOINT = f"{INSTALL_DIR}/share/r2sp/deploy/k8s_entrypoint"
OUT_DIR = "/r2sp/out"
KEYS_MOUNT = "/etc/r2sp/keys"  # k8s_entrypoint's --keys_dir
KEYS_MODE = 0o400  # the Secret volume's defaultMode: the binaries refuse group/other bits


def dns_label(name):
    """`name` as a DNS-1035 label short enough for every object and pod name derived from it:
    lower case letters, digits and '-', starting with a letter."""
    label = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", name.lower())).strip("-")
    if not label or not label[0].isalpha():
        label = "r2sp-" + label
    return label[:40].rstrip("-")


def uses_gpus(cluster, worker_flags):
    """Whether the workers need a GPU: a host lists gpus, or their flags pick --device=cuda."""
    return any(p.gpu is not None for p in cluster.processes()) or role_commands.uses_cuda(worker_flags)


def worker_host_flags(cluster):
    """The worker_flags every host with workers gives (split); JobError if they differ."""
    given = {h.worker_flags for h in cluster.hosts if any(p.role == "worker" for p in h.processes)}
    if len(given) > 1:
        raise JobError("k8s runs every worker from one pod template, but the hosts give "
                                f"different worker_flags: {sorted(given)}")
    return shlex.split(given.pop() if given else "")


def worker_command(cluster):
    """The command every worker runs ("" for the binary); JobError if they differ."""
    given = {p.worker_cmd for p in cluster.processes() if p.role == "worker"}
    if len(given) > 1:
        raise JobError("k8s runs every worker from one pod template, but the workers run "
                       f"different commands: {sorted(given)} ('' is the worker binary)")
    return given.pop()


def role_flags(cluster, extra):
    """{role: flags} of the pods: the file's, then `extra` (the launcher's); the workers' with
    their hosts' worker_flags and, with a [data] table, --data_dir first (unless they give one)."""
    flags = {role: cluster.flags.get(role, []) + extra.get(role, [])
             for role in ("scheduler", "server")}
    flags["worker"] = cluster.flags.get("worker", []) + worker_host_flags(cluster) + extra.get("worker", [])
    if cluster.data and not any(f == "--data_dir" or f.startswith("--data_dir=")
                                for f in flags["worker"]):
        flags["worker"] = ["--data_dir=" + k8s_data.data_dir(cluster.data)] + flags["worker"]
    return flags


def _env(**values):
    return [{"name": k, "value": str(v)} for k, v in values.items()]


def worker_env(cluster, scheduler):
    """The worker template's own variables: the scheduler, results at the end, and for Python
    workers their command and the job's worker count (k8s_entrypoint's R2SP_WORKER_CMD)."""
    command = worker_command(cluster)
    python = _env(R2SP_WORKER_CMD=command, R2SP_NUM_WORKERS=cluster.num_workers) if command else []
    return _env(R2SP_SCHEDULER=scheduler, R2SP_EMIT_RESULTS=1) + python


def _field(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _meta(name, labels, namespace):
    meta = {"name": name, "labels": dict(labels)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _secret_files(keys, job_name, labels, namespace):
    """{file name: Secret} of the job's keys, one per role ({} without keys), named to come
    before the pods that mount them (kubectl apply -f DIR takes the files in name order)."""
    if not keys:
        return {}
    return {f"0{i + 1}-{role}-keys-secret.yaml":
            key_secret(role, keys, _meta(secret_name(job_name, role), labels(role), namespace))
            for i, role in enumerate(job_keys.ROLES)}


def render(cluster, job_name, image, namespace=None, extra_flags=None,
           gpu_resource="nvidia.com/gpu", image_pull_secret=None, deadline_s=None, keys=None,
           data_volume=None):
    """{file name: manifest dict} of the job; `job_name` must be a dns_label(). extra_flags:
    {role: [flags]} after the file's (the launcher's); deadline_s: the workers'
    activeDeadlineSeconds; keys: --auth=curve's {file name: key text} (read_keys), which
    become one Secret per role, each pod mounting its own role's. data_volume: the claim that
    holds the [data] cache (k8s_data)."""
    flags = role_flags(cluster, extra_flags or {})
    ports = cluster.ports
    scheduler = f"tcp://{job_name}-scheduler:{ports['scheduler']}"
    base = {"app.kubernetes.io/name": "r2sp", "app.kubernetes.io/instance": job_name}

    def labels(role):
        return {**base, "app.kubernetes.io/component": role}

    def pod(role, env, restart, resources=None):
        container = {"name": role, "image": image, "imagePullPolicy": "IfNotPresent",
                     "command": [ENTRYPOINT], "args": [role],
                     "env": [_field("POD_IP", "status.podIP"), _field("POD_NAME", "metadata.name")]
                     + env + _env(R2SP_PORT=ports[role], R2SP_OUT=OUT_DIR)
                     + (_env(R2SP_AUTH="curve") if keys else [])
                     + (_env(R2SP_FLAGS=shlex.join(flags[role])) if flags[role] else []),
                     "ports": [{"name": "r2sp", "containerPort": ports[role], "protocol": "TCP"}]}
        if resources:
            container["resources"] = resources
        spec = {"restartPolicy": restart, "containers": [container]}
        if keys:
            container["volumeMounts"] = [{"name": "keys", "mountPath": KEYS_MOUNT, "readOnly": True}]
            spec["volumes"] = [{"name": "keys", "secret": {"secretName": secret_name(job_name, role),
                                                          "defaultMode": KEYS_MODE}}]
        if image_pull_secret:
            spec["imagePullSecrets"] = [{"name": image_pull_secret}]
        return {"metadata": {"labels": labels(role)}, "spec": spec}

    def service(role, **spec):
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": _meta(f"{job_name}-{role}", labels(role), namespace),
                "spec": {**spec, "selector": labels(role),
                         "ports": [{"name": "r2sp", "port": ports[role], "targetPort": ports[role],
                                    "protocol": "TCP"}]}}

    server_env = _env(R2SP_SCHEDULER=scheduler,
                      R2SP_ADVERTISE_HOST=f"$(POD_NAME).{job_name}-server")
    gpus = {"limits": {gpu_resource: "1"}} if uses_gpus(cluster, flags["worker"]) else None
    job_spec = {"completions": cluster.num_workers, "parallelism": cluster.num_workers,
                "completionMode": "Indexed", "backoffLimit": 0}
    if deadline_s:
        job_spec["activeDeadlineSeconds"] = int(deadline_s)
    job_spec["template"] = pod("worker", worker_env(cluster, scheduler), "Never", gpus)
    data_files = k8s_data.stage_in(cluster.data, job_spec["template"], image, INSTALL_DIR,
                                   data_volume, _meta(job_name, labels("worker"), namespace))
    return {
        **_secret_files(keys, job_name, labels, namespace),
        **data_files,
        "10-scheduler-service.yaml": service("scheduler", type="ClusterIP"),
        "11-scheduler-deployment.yaml": {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(f"{job_name}-scheduler", labels("scheduler"), namespace),
            "spec": {"replicas": 1, "selector": {"matchLabels": labels("scheduler")},
                     "template": pod("scheduler", _env(
                         R2SP_NUM_SERVERS=cluster.num_servers, R2SP_NUM_WORKERS=cluster.num_workers,
                         R2SP_SYNC=cluster.mode, R2SP_EMIT_RESULTS=1), "Always")}},
        # Names resolve before the pods are ready: a server is reachable once it has started.
        "20-server-service.yaml": service("server", clusterIP="None", publishNotReadyAddresses=True),
        "21-server-statefulset.yaml": {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": _meta(f"{job_name}-server", labels("server"), namespace),
            "spec": {"serviceName": f"{job_name}-server", "replicas": cluster.num_servers,
                     "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": labels("server")},
                     "template": pod("server", server_env, "Always")}},
        "30-worker-job.yaml": {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": _meta(f"{job_name}-worker", labels("worker"), namespace),
            "spec": job_spec},
    }


def manifest_paths(manifests, directory):
    """Where write_manifests puts each manifest: [path], in kubectl apply's order (by name)."""
    return [os.path.join(directory, name) for name in sorted(manifests)]


def write_manifests(manifests, directory):
    """Writes each manifest as YAML into `directory` (made if needed); returns the paths. A
    Secret's file is the user's only (0600) from its creation on."""
    os.makedirs(directory, exist_ok=True)
    paths = manifest_paths(manifests, directory)
    for path in paths:
        manifest = manifests[os.path.basename(path)]
        if os.path.exists(path):
            os.remove(path)
        mode = 0o600 if manifest.get("kind") == "Secret" else 0o644
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w") as f:
            f.write(k8s_yaml.dump(manifest))
    return paths


def image_for(cluster, tarball):
    """[k8s] image, else r2sp:VERSION-VARIANT from the bundle's name."""
    image = cluster.backend_options.get("k8s", {}).get("image")
    if image:
        return image
    name = os.path.basename(tarball or "")
    found = re.fullmatch(r"r2sp-(.+)\.tar\.gz", name)
    if not found:
        raise JobError(f"cannot name the image after the bundle {tarball!r}: set "
                                "image in the cluster file's [k8s] table")
    return f"r2sp:{found.group(1)}"


def describe(paths, kubectl, job_name, manifests, keys_dir=None):
    """--dry_run: every manifest (the Secrets' keys as placeholders, naming their files in
    `keys_dir`) and the kubectl commands run() would run."""
    directory = os.path.dirname(paths[0])
    lines = []
    for path in paths:
        manifest = redacted(manifests[os.path.basename(path)], keys_dir or "KEYS_DIR")
        lines += [f"# --- {path}", "---", k8s_yaml.dump(manifest).rstrip()]
    lines += ["# --- the commands",
              shlex.join(kubectl.argv("apply", "-f", directory)),
              f"# every pod: {shlex.join(kubectl.argv('logs', '-f', 'POD'))} > RUN_DIR/NAME.log",
              f"# until the Job ends: {shlex.join(kubectl.argv('get', 'pods,jobs', '-l', f'app.kubernetes.io/instance={job_name}', '-o', 'json'))}",
              shlex.join(kubectl.argv("delete", "--ignore-not-found", "--wait=false", "-f", directory))]
    return "\n".join(lines)


class K8sBackend(driver.Backend):
    """deploy.driver's hooks for Kubernetes: the manifests written in prepare, applied in
    launch, the worker Job's state in poll, the last logs awaited in finish, the objects
    deleted in clean_up, the results taken out of the logs in collect."""

    ships_bundle = False  # the pods run an image (tools/deploy/Dockerfile), not the tarball
    resumable = True  # from the cluster file's checkpoint_url (k8s_checkpoints)

    def __init__(self, run):
        super().__init__(run)
        cluster, args = run.cluster, run.args
        options = cluster.backend_options.get("k8s", {})
        self.job_name = dns_label(cluster.job_name)
        self.kubectl = Kubectl(options.get("namespace"))
        # A dry run's Secrets hold placeholders (redacted): it neither makes nor reads keys.
        keys = None
        if run.keys:
            keys = (dict.fromkeys(job_keys.files_for(job_keys.ROLES), "") if run.dry_run
                    else read_keys(run.keys))
        flags = recovery.with_recovery(run.extra_flags, k8s_recovery.role_flags(
            args, cluster, OUT_DIR, run.job_dir))
        self.manifests = k8s_recovery.apply(
            render(cluster, self.job_name, image_for(cluster, run.tarball),
                   options.get("namespace"), flags,
                   options.get("gpu_resource") or "nvidia.com/gpu",
                   options.get("image_pull_secret"), deadline_s=args.timeout, keys=keys,
                   data_volume=options.get("data_volume")),
            k8s_recovery.limits(args), OUT_DIR, options.get("retries_per_index", True))
        k8s_checkpoints.apply(self.manifests, cluster.checkpoint_url,
                              recovery.checkpoint_url(cluster, run.job_dir),
                              options.get("checkpoint_volume"))
        self.directory = os.path.join(run.run_dir, "k8s")
        self.follower = None

    def describe(self):
        return describe(manifest_paths(self.manifests, self.directory), self.kubectl,
                        self.job_name, self.manifests, self.run.keys)

    def prepare(self):
        write_manifests(self.manifests, self.directory)

    def launch(self):
        cluster = self.run.cluster
        self.follower = Follower(self.kubectl, self.run.run_dir)
        self.events = PodEvents(time.time())
        self.outcome = self.events.outcome  # the pods' deaths and restarts, for summary.json
        self.kubectl.check("apply", "-f", self.directory)
        print(f"launch: {cluster.num_servers} servers, {cluster.num_workers} workers, "
              f"sync={cluster.mode} as Kubernetes job {self.job_name}; logs in {self.run.run_dir}",
              flush=True)

    def poll(self):
        items = json.loads(self.kubectl.check(
            "get", "pods,jobs", "-l", f"app.kubernetes.io/instance={self.job_name}", "-o", "json"))["items"]
        pods = [i for i in items if i.get("kind") == "Pod"]
        self.follower.poll(pods, self.events.update(pods))
        verdict = k8s_outcome.judge(items)
        if verdict.state == "failed":
            staged = (" (and, for the data set, `kubectl logs POD -c stage-data`: a worker pod's "
                      "staging)") if self.run.cluster.data else ""
            raise JobError(f"{verdict.reason}; see the logs in {self.run.run_dir}{staged}")
        return verdict.state == "complete"

    def finish(self):
        # The scheduler prints its results once every worker has left.
        workers = [f"worker{k}" for k in range(self.run.cluster.num_workers)]
        self.follower.wait(["scheduler"] + workers, 60)

    def clean_up(self):
        if self.follower:
            self.follower.stop()
        subprocess.run(self.kubectl.argv("delete", "--ignore-not-found", "--wait=false", "-f",
                                         self.directory),
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        return []

    def collect(self):
        for name in self.follower.procs if self.follower else ():
            try:
                collect_results(os.path.join(self.run.run_dir, name + ".log"), self.run.run_dir,
                                name)
            except JobError as e:  # the job's own outcome matters more
                print(f"launch: {name}.log: {e}", flush=True)


def collect_results(log_path, run_dir, name):
    """extract_results of process `name`'s log into `run_dir`; a replacement's files (its pod
    names them after its completion index: metrics_worker1.jsonl) take its own name
    (metrics_worker1.r1.jsonl), as the local launcher names them, beside the dead pod's."""
    slot = name.partition(".")[0]
    if slot == name:
        return extract_results(log_path, run_dir)
    written = []
    with tempfile.TemporaryDirectory(prefix="k8s_results.") as unpacked:
        for file in extract_results(log_path, unpacked):
            renamed = file.replace(slot, name, 1)
            shutil.move(os.path.join(unpacked, file), os.path.join(run_dir, renamed))
            written.append(renamed)
    return written


def run(args, cluster, tarball):
    """Runs the job on the kubectl context's cluster (deploy.driver with K8sBackend); returns
    its summary, or None with --dry_run."""
    return driver.run(args, cluster, tarball, K8sBackend)
