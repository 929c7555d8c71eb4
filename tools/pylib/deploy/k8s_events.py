"""The deaths and restarts of a Kubernetes job's pods (k8s_recovery.py says what replaces
what), as summary.json reports them on every backend: `events`, `deaths`, `restarts`, and the
names the local launcher gives replacements.

  workers  the pods of one completion index in creation order: the first is workerI, the k-th
           after it workerI.rK (its log RUN_DIR/workerI.rK.log, its files metrics_workerI.rK.jsonl
           and timeline_workerI.rK.json). A pod that failed is a death ("died", its container's
           exit status: 137 killed, 143 a clean leave on SIGTERM); its successor a "restarted".
  servers  a container the kubelet restarted in its pod: each restart a death of serverK (the
           status of the container that ended) and a "restarted" serverK.rN.

Pods are seen as kubectl reports them, every poll; what happened between two polls to one pod
is read from its container's restartCount and lastState, so nothing is counted twice."""

import calendar
import re
import time

from ..analysis.summary import Event, Outcome
from .k8s_kubectl import pod_log_name


def _created(pod):
    stamp = pod["metadata"].get("creationTimestamp", "")
    try:
        return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return 0


def process_names(pods):
    """{pod name: process name} (workerI, workerI.rK, serverK, scheduler) of `pods`."""
    names, by_index = {}, {}
    for pod in pods:
        name = pod_log_name(pod)
        if re.fullmatch(r"worker\d+", name):
            by_index.setdefault(name, []).append(pod)
        else:
            names[pod["metadata"]["name"]] = name
    for slot, group in by_index.items():
        group.sort(key=lambda p: (_created(p), p["metadata"]["name"]))
        for k, pod in enumerate(group):
            names[pod["metadata"]["name"]] = slot if k == 0 else f"{slot}.r{k}"
    return names


def _container(pod):
    statuses = pod.get("status", {}).get("containerStatuses", [])
    return statuses[0] if statuses else {}


def _exit_code(state):
    return state.get("terminated", {}).get("exitCode")


class PodEvents:
    """Turns successive kubectl views of the job's pods into an Outcome (not thread-safe: the
    launcher's poll calls update)."""

    def __init__(self, start):
        self.start = start  # time.time() when the job started
        # started_at: summary.json's recovery.after_deaths, from the pods' metrics files (their
        # deaths timed when the launcher's poll saw them).
        self.outcome = Outcome(started_at=start)
        self._failed = set()  # worker pods whose death is recorded
        self._restarted = set()  # worker replacements recorded
        self._server_restarts = {}  # server process -> restarts recorded
        self._last_status = {}  # workerI -> the exit status of its latest pod that failed

    def update(self, pods, now=None):
        """Records what `pods` (kubectl's items of kind Pod) show that was not recorded yet;
        returns {pod name: process name}."""
        now = time.time() if now is None else now
        names = process_names(pods)
        for pod in sorted(pods, key=lambda p: (_created(p), p["metadata"]["name"])):
            pod_name, name = pod["metadata"]["name"], names[pod["metadata"]["name"]]
            if name.startswith("worker"):
                self._worker(pod, pod_name, name, now)
            elif name.startswith("server"):
                self._server(pod, name, now)
        return names

    def _worker(self, pod, pod_name, name, now):
        if "." in name and pod_name not in self._restarted:
            self._restarted.add(pod_name)
            self._record(now, name, "restarted", self._last_status.get(name.partition(".")[0]))
            self.outcome.restarts["worker"] += 1
        if pod.get("status", {}).get("phase") == "Failed" and pod_name not in self._failed:
            self._failed.add(pod_name)
            status = _exit_code(_container(pod).get("state", {}))
            self._last_status[name.partition(".")[0]] = status
            self._record(now, name, "died", status)
            self.outcome.deaths["worker"] += 1

    def _server(self, pod, name, now):
        container = _container(pod)
        restarts = container.get("restartCount", 0)
        for n in range(self._server_restarts.get(name, 0) + 1, restarts + 1):
            status = _exit_code(container.get("lastState", {}))
            self._record(now, name if n == 1 else f"{name}.r{n - 1}", "died", status)
            self._record(now, f"{name}.r{n}", "restarted", status)
            self.outcome.deaths["server"] += 1
            self.outcome.restarts["server"] += 1
        self._server_restarts[name] = max(restarts, self._server_restarts.get(name, 0))

    def _record(self, now, name, event, status):
        self.outcome.events.append(Event(round(now - self.start, 3), name, event, status))
