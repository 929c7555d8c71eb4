"""k8s_events: the deaths and restarts of a Kubernetes job's pods as summary.json reports them,
from successive views of the pods as kubectl gives them (fabricated here: a worker pod that
failed and the new pod of its index, a server container the kubelet restarted), and the names
of replacements' logs and result files."""

import base64
import io
import os
import shutil
import tarfile
import tempfile
import unittest

import junit_main
from pylib.deploy import k8s_backend, k8s_events


def pod(name, component, created, phase="Running", index=None, exit_code=None, restarts=0,
        last_exit=None):
    meta = {"name": name, "creationTimestamp": created,
            "labels": {"app.kubernetes.io/component": component}}
    if index is not None:
        meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    state = {"terminated": {"exitCode": exit_code}} if exit_code is not None else {"running": {}}
    container = {"state": state, "restartCount": restarts}
    if last_exit is not None:
        container["lastState"] = {"terminated": {"exitCode": last_exit}}
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": [container]}}


W1 = pod("j-worker-1-aaaaa", "worker", "2026-11-27T03:00:00Z", index=1)
W1_FAILED = pod("j-worker-1-aaaaa", "worker", "2026-11-27T03:00:00Z", "Failed", 1, 143)
W1_NEW = pod("j-worker-1-bbbbb", "worker", "2026-11-27T03:01:00Z", index=1)
W0 = pod("j-worker-0-ccccc", "worker", "2026-11-27T03:00:00Z", index=0)
S0 = pod("j-server-0", "server", "2026-11-27T03:00:00Z")


class PodEventsTest(unittest.TestCase):
    def events(self, tracker):
        return [(e.t, e.process, e.event, e.status) for e in tracker.outcome.events]

    def test_a_failed_worker_pod_and_its_successor(self):
        tracker = k8s_events.PodEvents(start=100.0)
        self.assertEqual(tracker.update([W0, W1, S0], now=110.0),
                         {"j-worker-0-ccccc": "worker0", "j-worker-1-aaaaa": "worker1",
                          "j-server-0": "server0"})
        self.assertEqual(self.events(tracker), [])
        names = tracker.update([W0, W1_FAILED, W1_NEW, S0], now=112.5)
        self.assertEqual(names["j-worker-1-bbbbb"], "worker1.r1")
        self.assertEqual(self.events(tracker), [(12.5, "worker1", "died", 143),
                                                (12.5, "worker1.r1", "restarted", 143)])
        # Seen again: nothing counted twice.
        tracker.update([W0, W1_FAILED, W1_NEW, S0], now=113.0)
        self.assertEqual(tracker.outcome.deaths, {"worker": 1, "server": 0})
        self.assertEqual(tracker.outcome.restarts, {"worker": 1, "server": 0})

    def test_a_server_container_restarted_in_its_pod(self):
        tracker = k8s_events.PodEvents(start=0.0)
        tracker.update([S0], now=1.0)
        restarted = pod("j-server-0", "server", "2026-11-27T03:00:00Z", restarts=1, last_exit=137)
        tracker.update([restarted], now=5.0)
        tracker.update([restarted], now=6.0)
        twice = pod("j-server-0", "server", "2026-11-27T03:00:00Z", restarts=2, last_exit=143)
        tracker.update([twice], now=9.0)
        self.assertEqual(self.events(tracker), [
            (5.0, "server0", "died", 137), (5.0, "server0.r1", "restarted", 137),
            (9.0, "server0.r1", "died", 143), (9.0, "server0.r2", "restarted", 143)])
        self.assertEqual(tracker.outcome.deaths, {"worker": 0, "server": 2})
        self.assertEqual(tracker.outcome.restarts, {"worker": 0, "server": 2})


class ReplacementResultsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_events_test.")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def log_with(self, path, files):
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz") as t:
            for name, body in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(body)
                t.addfile(info, io.BytesIO(body))
        with open(path, "w") as f:
            f.write("trained\nR2SP-RESULTS-BEGIN worker1\n"
                    + base64.b64encode(data.getvalue()).decode() + "\nR2SP-RESULTS-END\n")

    def test_a_replacements_files_take_its_name_beside_the_dead_pods(self):
        files = {"./metrics_worker1.jsonl": b"new\n", "./timeline_worker1.json": b"[]"}
        self.log_with(os.path.join(self.dir, "worker1.r1.log"), files)
        self.log_with(os.path.join(self.dir, "worker1.log"), {"./metrics_worker1.jsonl": b"old\n"})
        self.assertEqual(sorted(k8s_backend.collect_results(
            os.path.join(self.dir, "worker1.r1.log"), self.dir, "worker1.r1")),
            ["metrics_worker1.r1.jsonl", "timeline_worker1.r1.json"])
        self.assertEqual(k8s_backend.collect_results(
            os.path.join(self.dir, "worker1.log"), self.dir, "worker1"), ["metrics_worker1.jsonl"])
        with open(os.path.join(self.dir, "metrics_worker1.r1.jsonl")) as f:
            self.assertEqual(f.read(), "new\n")
        with open(os.path.join(self.dir, "metrics_worker1.jsonl")) as f:
            self.assertEqual(f.read(), "old\n")
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["metrics_worker1.jsonl", "metrics_worker1.r1.jsonl",
                          "timeline_worker1.r1.json", "worker1.log", "worker1.r1.log"])


if __name__ == "__main__":
    junit_main.main()
