"""Whether a Kubernetes job (k8s_backend) has completed, judged from kubectl's view of its
objects: the worker Job's conditions and, when only worker indexes failed, the scheduler's
exit status, since on Kubernetes as locally the scheduler decides whether a job that lost
workers completed.

With backoffLimitPerIndex (k8s_recovery) a worker pod that failed past its index's retries
marks only that index failed; the others run on, and once every index has ended the Job is
Failed with reason FailedIndexes (status.failedIndexes "1,3-4"). That is a job whose survivors
took over the dead workers' data, and it completed if the scheduler exited 0."""

import dataclasses

from .k8s_kubectl import job_state

FAILED_INDEXES = "FailedIndexes"  # the Failed condition's reason when indexes failed


@dataclasses.dataclass
class Verdict:
    """The job's state: "complete", "failed" or None (still running); why, when it failed."""
    state: object = None
    reason: str = ""


def failed_indexes(job):
    """The completion indexes the Job's status lists as failed ("1,3-4" -> [1, 3, 4])."""
    indexes = []
    for part in filter(None, job.get("status", {}).get("failedIndexes", "").split(",")):
        first, _, last = part.partition("-")
        indexes += range(int(first), int(last or first) + 1)
    return indexes


def failed_reason(job):
    """The reason of the Job's Failed condition ("" when none)."""
    for condition in job.get("status", {}).get("conditions", []):
        if condition.get("type") == "Failed" and condition.get("status") == "True":
            return condition.get("reason", "")
    return ""


def scheduler_status(pods):
    """The exit status of the job's scheduler once it has exited, else None. Its Deployment
    restarts a scheduler that exited, so an exit is in the container's state or, after that
    restart, its lastState; an exit 0 anywhere is the job's end."""
    codes = []
    for pod in pods:
        if pod["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "scheduler":
            continue
        for status in pod.get("status", {}).get("containerStatuses", []):
            for key in ("state", "lastState"):
                code = status.get(key, {}).get("terminated", {}).get("exitCode")
                if code is not None:
                    codes.append(code)
    if not codes:
        return None
    return 0 if 0 in codes else codes[0]


def judge(items):
    """The Verdict on kubectl's items (Pods and the worker Job) of the job."""
    job = next((i for i in items if i.get("kind") == "Job"), None)
    state = job_state(job) if job else None
    if state != "failed":
        return Verdict(state)
    reason = failed_reason(job)
    if reason != FAILED_INDEXES:
        return Verdict("failed", f"the worker Job failed ({reason or 'no reason given'})")
    status = scheduler_status([i for i in items if i.get("kind") == "Pod"])
    if status is None:
        return Verdict(None)  # the survivors' last results are on their way to the scheduler
    if status == 0:
        return Verdict("complete")
    return Verdict("failed", f"workers {failed_indexes(job)} failed and the scheduler exited "
                             f"with status {status}")
