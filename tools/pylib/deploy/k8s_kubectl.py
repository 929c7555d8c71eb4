"""kubectl as the Kubernetes backend (k8s_backend) drives it: commands on the job's namespace,
following every pod's log into the run directory, and the worker Job's state."""

import os
import re
import subprocess
import time

from ..job.errors import JobError

# Waiting reasons of a container that will not start without the user's help.
STUCK = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError")


class Kubectl:
    """kubectl commands on the job's namespace (the context's when None)."""

    def __init__(self, namespace):
        self.prefix = ["kubectl"] + (["--namespace", namespace] if namespace else [])

    def argv(self, *args):
        return self.prefix + list(args)

    def check(self, *args):
        try:
            r = subprocess.run(self.argv(*args), capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JobError(f"kubectl {' '.join(args)}: {e}")
        if r.returncode != 0:
            raise JobError(f"kubectl {' '.join(args)} failed ({r.returncode}): "
                                    f"{(r.stderr or r.stdout).strip()}")
        return r.stdout


def pod_log_name(pod):
    """The process a pod runs ("scheduler", "server1", "worker3"), from its labels and names."""
    meta = pod["metadata"]
    role = meta.get("labels", {}).get("app.kubernetes.io/component", "pod")
    if role == "worker":
        index = meta.get("annotations", {}).get("batch.kubernetes.io/job-completion-index")
        return f"worker{index}" if index is not None else meta["name"]
    if role == "server":
        found = re.search(r"-(\d+)$", meta["name"])
        return f"server{found.group(1)}" if found else meta["name"]
    return role


class Follower:
    """`kubectl logs -f` of every pod of the job, each into RUN_DIR/NAME.log."""

    def __init__(self, kubectl, run_dir):
        self.kubectl, self.run_dir = kubectl, run_dir
        self.procs = {}  # log name -> the kubectl logs process

    def poll(self, pods, names=None):
        """Starts following the pods that have started, each into the log of its process
        (`names`: {pod name: process name}, k8s_events.process_names; else pod_log_name);
        JobError for one that cannot start."""
        for pod in pods:
            for status in pod.get("status", {}).get("containerStatuses", []):
                waiting = status.get("state", {}).get("waiting", {})
                if waiting.get("reason") in STUCK:
                    raise JobError(
                        f"pod {pod['metadata']['name']}: {waiting['reason']}: "
                        f"{waiting.get('message', '')} (build and push the image: tools/deploy/Dockerfile)")
            name = (names or {}).get(pod["metadata"]["name"]) or pod_log_name(pod)
            if name in self.procs or pod.get("status", {}).get("phase") not in ("Running", "Succeeded", "Failed"):
                continue
            with open(os.path.join(self.run_dir, name + ".log"), "ab") as log:
                self.procs[name] = subprocess.Popen(
                    self.kubectl.argv("logs", "-f", pod["metadata"]["name"]), stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait(self, names, seconds):
        """Waits up to `seconds` for the logs of `names` to end (their containers exited)."""
        deadline = time.time() + seconds
        for name in names:
            if name in self.procs:
                try:
                    self.procs[name].wait(timeout=max(0.1, deadline - time.time()))
                except subprocess.TimeoutExpired:
                    pass

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            proc.wait()


def job_state(job):
    """"complete", "failed" or None (still running) from the Job's conditions."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return condition["type"].lower()
    return None
