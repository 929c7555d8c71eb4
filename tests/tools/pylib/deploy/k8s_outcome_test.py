"""k8s_outcome: a Kubernetes job judged from kubectl's JSON (recorded in the shape `kubectl get
pods,jobs -o json` gives for a Job with backoffLimitPerIndex: 0 whose index 1 failed), and the
dead worker recorded as summary.json reports it (k8s_events)."""

import json
import unittest

import junit_main
from pylib.deploy import k8s_events, k8s_outcome

# `kubectl get pods,jobs -o json` once every index has ended and index 1 failed (trimmed to
# the fields read; the rest as a 1.31 API server writes them).
RECORDED = json.loads("""{"apiVersion": "v1", "kind": "List", "items": [
 {"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "j-scheduler-5f7c9-x2x4q", "creationTimestamp": "2026-11-27T03:00:00Z",
   "labels": {"app.kubernetes.io/component": "scheduler", "app.kubernetes.io/instance": "j"}},
  "status": {"phase": "Running", "containerStatuses": [{"name": "scheduler", "restartCount": 1,
   "state": {"running": {"startedAt": "2026-11-27T03:04:10Z"}},
   "lastState": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}},
 {"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "j-worker-0-hj2kd", "creationTimestamp": "2026-11-27T03:00:00Z",
   "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
   "labels": {"app.kubernetes.io/component": "worker", "app.kubernetes.io/instance": "j"}},
  "status": {"phase": "Succeeded", "containerStatuses": [{"name": "worker", "restartCount": 0,
   "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}},
 {"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "j-worker-1-9qz8w", "creationTimestamp": "2026-11-27T03:00:00Z",
   "annotations": {"batch.kubernetes.io/job-completion-index": "1",
                   "batch.kubernetes.io/job-index-failure-count": "0"},
   "labels": {"app.kubernetes.io/component": "worker", "app.kubernetes.io/instance": "j"}},
  "status": {"phase": "Failed", "containerStatuses": [{"name": "worker", "restartCount": 0,
   "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}},
 {"apiVersion": "batch/v1", "kind": "Job",
  "metadata": {"name": "j-worker"},
  "spec": {"completions": 2, "completionMode": "Indexed", "backoffLimitPerIndex": 0},
  "status": {"failed": 1, "succeeded": 1, "completedIndexes": "0", "failedIndexes": "1",
   "conditions": [
    {"type": "FailureTarget", "status": "True", "reason": "FailedIndexes",
     "message": "Job has failed indexes"},
    {"type": "Failed", "status": "True", "reason": "FailedIndexes",
     "message": "Job has failed indexes"}]}}]}""")["items"]


def with_scheduler(items, container):
    """`items` with the scheduler's container status replaced by `container`."""
    copy = json.loads(json.dumps(items))
    copy[0]["status"]["containerStatuses"] = [container]
    return copy


def with_job_status(items, status):
    copy = json.loads(json.dumps(items))
    copy[-1]["status"] = status
    return copy


def verdict(items):
    v = k8s_outcome.judge(items)
    return v.state, v.reason


class JudgeTest(unittest.TestCase):
    def test_failed_indexes_and_a_scheduler_that_exited_0_complete_the_job(self):
        self.assertEqual(verdict(RECORDED), ("complete", ""))

    def test_the_scheduler_still_running_is_waited_for(self):
        running = with_scheduler(RECORDED, {"restartCount": 0, "state": {"running": {}}})
        self.assertEqual(verdict(running), (None, ""))

    def test_a_scheduler_that_failed_fails_the_job(self):
        failed = with_scheduler(RECORDED, {"restartCount": 0,
                                           "state": {"terminated": {"exitCode": 1}}})
        self.assertEqual(verdict(failed), ("failed", "workers [1] failed and the scheduler "
                                                     "exited with status 1"))

    def test_other_failures_fail_the_job_whatever_the_scheduler_says(self):
        status = {"failed": 3, "conditions": [
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}
        self.assertEqual(verdict(with_job_status(RECORDED, status)),
                         ("failed", "the worker Job failed (BackoffLimitExceeded)"))

    def test_a_running_and_a_complete_job(self):
        self.assertEqual(verdict(with_job_status(RECORDED, {"active": 2})), (None, ""))
        complete = {"succeeded": 2, "conditions": [
            {"type": "Complete", "status": "True", "reason": "CompletionsReached"}]}
        self.assertEqual(verdict(with_job_status(RECORDED, complete)), ("complete", ""))

    def test_failed_indexes_ranges(self):
        self.assertEqual(k8s_outcome.failed_indexes({"status": {"failedIndexes": "1,3-5,9"}}),
                         [1, 3, 4, 5, 9])
        self.assertEqual(k8s_outcome.failed_indexes({"status": {}}), [])

    def test_scheduler_status_reads_state_then_last_state(self):
        pods = [i for i in RECORDED if i["kind"] == "Pod"]
        self.assertEqual(k8s_outcome.scheduler_status(pods), 0)
        self.assertIsNone(k8s_outcome.scheduler_status(pods[1:]))  # workers only


class DeathRecordedTest(unittest.TestCase):
    def test_the_failed_index_is_a_death_without_a_restart(self):
        events = k8s_events.PodEvents(start=1000.0)
        names = events.update([i for i in RECORDED if i["kind"] == "Pod"], now=1012.25)
        self.assertEqual(names["j-worker-1-9qz8w"], "worker1")
        self.assertEqual([(e.t, e.process, e.event, e.status) for e in events.outcome.events],
                         [(12.25, "worker1", "died", 137)])
        self.assertEqual((events.outcome.deaths["worker"], events.outcome.restarts["worker"]),
                         (1, 0))


if __name__ == "__main__":
    junit_main.main()
