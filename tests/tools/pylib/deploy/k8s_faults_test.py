"""tools/launch --backend=k8s when pods die or are stopped, without a Kubernetes
cluster: k8s_recovery's changes to the manifests, kubectl's offline decoding of them, and the
pods' commands run as Kubernetes would run them after a failure (borrowing k8s_backend_test's
namespaces, environment and bundle helpers), each pod in its own network namespace:

- worker1's container killed with SIGKILL mid-job: the Indexed Job's controller
  (backoffLimitPerIndex = --max_restarts' worker count, restartPolicy Never) starts a new pod of
  index 1 with the same command, which joins the running job;
- server1's container killed with SIGKILL: the kubelet restarts it in its pod (restartPolicy
  Always) with the pod's out volume (emptyDir) still there: it takes the lost rank and restores
  its shard from the checkpoint on that volume;
- worker0's pod stopped with SIGTERM (a deletion, a drain, a preemption) within its grace
  period: the worker leaves cleanly (the scheduler's log says so; no heartbeat timeout), its
  container exits 143, and its replacement pod joins too.
The asp job completes: every pod still running exits 0, and the scheduler's stats show the three
replacements' workers finished beside the two dead ones (one of them `left`).
Without --max_restarts (backoffLimitPerIndex 0) a worker pod killed with SIGKILL is not replaced:
the survivor takes over its data and the scheduler exits 0, which completes the job
(k8s_outcome), with the worker dead in the scheduler's stats. With a file:// checkpoint_url (the
claim's mount: a directory here) server1's pod is rescheduled with an empty out volume: the
replacement copies the checkpoints from the URL and restores its shard from them."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from pylib.cluster import cluster_file
import junit_main
from pylib.deploy import driver, k8s_backend, k8s_outcome, k8s_recovery
from pylib.emulation import netcluster
from pylib.job import options
import k8s_backend_test as kb

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# The runfiles under Bazel; k8s_backend_test's bundle is made from them too (imported, it finds
# itself in the source tree).
kb.BIN_DIR = BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)
JOB = "k8s-test"
NODE = "--heartbeat_ms=200"
WORKER = f"--model=synthetic --model_mb=1 --layers=4 --iterations=800 --compute_ms=20 --log_every=10 {NODE}"


def tearDownModule():
    kb.remove_bundle()


def cluster(k8s="", job=""):
    return cluster_file.parse(f"""{k8s}[job]
name = "{JOB}"
mode = "asp"
{job}[flags]
scheduler = "--heartbeat_timeout_ms=1000 --partition_bytes=65536"
server = "{NODE}"
worker = "{WORKER}"
[[host]]
name = "a"
scheduler = true
servers = 2
workers = 2
""")


def manifests(run_dir, max_restarts, k8s="", job=""):
    """K8sBackend's manifests for the job under `max_restarts` (what tools/launch applies);
    `k8s`: a [k8s] table for the cluster file, `job`: more [job] keys."""
    c = cluster(k8s, job)
    args = options.parse_args(["--cluster=x", "--backend=k8s", "--timeout=120",
                               "--max_restarts=" + max_restarts, "--checkpoint_every=1s",
                               "--run_dir=" + run_dir], "")
    args.sync, args.servers, args.workers = c.mode, c.num_servers, c.num_workers
    run = driver.Run(args, c, "/d/r2sp-1.0-cpu.tar.gz", None)
    return k8s_backend.K8sBackend(run).manifests


def flags_of(manifest):
    env = kb.env_of(kb.pod_spec(manifest)["containers"][0])
    return env.get("R2SP_FLAGS", "").split()


class RecoveryManifestTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_faults_manifest.")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_restarts_grace_and_the_servers_volume(self):
        m = manifests(os.path.join(self.dir, "run"), "worker:2,server:1")
        job = m["30-worker-job.yaml"]["spec"]
        self.assertEqual((job.get("backoffLimit"), job["backoffLimitPerIndex"],
                          job["template"]["spec"]["restartPolicy"]), (None, 2, "Never"))
        for name in ("11-scheduler-deployment.yaml", "21-server-statefulset.yaml", "30-worker-job.yaml"):
            self.assertEqual(kb.pod_spec(m[name])["terminationGracePeriodSeconds"], 60, name)
        server = kb.pod_spec(m["21-server-statefulset.yaml"])
        self.assertEqual(server["restartPolicy"], "Always")
        self.assertEqual(server["volumes"], [{"name": "out", "emptyDir": {}}])
        self.assertEqual(server["containers"][0]["volumeMounts"],
                         [{"name": "out", "mountPath": k8s_backend.OUT_DIR}])
        self.assertEqual(flags_of(m["21-server-statefulset.yaml"]),
                         ["--heartbeat_ms=200", "--checkpoint_dir=/r2sp/out/checkpoints",
                          "--checkpoint_every=1s"])
        scheduler = flags_of(m["11-scheduler-deployment.yaml"])
        self.assertIn("--server_replace_s=60", scheduler)
        self.assertNotIn("--absorb_orphaned_shards", scheduler)  # replaced workers take them

    def test_without_restarts_a_failed_worker_index_fails_alone(self):
        m = manifests(os.path.join(self.dir, "run"), "0")
        job = m["30-worker-job.yaml"]["spec"]
        self.assertEqual({k: job.get(k) for k in ("backoffLimit", "backoffLimitPerIndex",
                                                  "completionMode", "maxFailedIndexes")},
                         {"backoffLimit": None, "backoffLimitPerIndex": 0,
                          "completionMode": "Indexed", "maxFailedIndexes": None})
        scheduler = flags_of(m["11-scheduler-deployment.yaml"])
        self.assertNotIn("--server_replace_s=60", scheduler)
        self.assertIn("--absorb_orphaned_shards", scheduler)  # the survivors take the data

    def test_older_clusters_get_backoff_limit_in_all(self):
        m = manifests(os.path.join(self.dir, "run"), "worker:2",
                      "[k8s]\nretries_per_index = false\n")
        job = m["30-worker-job.yaml"]["spec"]
        self.assertEqual((job["backoffLimit"], job.get("backoffLimitPerIndex")), (2, None))


class RecoveryKubectlTest(kb.KubectlOfflineTest):
    """kubectl's typed decoding keeps every field k8s_recovery adds."""

    def test_every_manifest_survives_kubectls_decoding(self):
        with tempfile.TemporaryDirectory(prefix="k8s_faults_kubectl.") as d:
            for name, manifest in manifests(os.path.join(d, "run"), "worker:1,server:1").items():
                self.assertEqual(self.problems(manifest), [], name)

    def test_the_checkpoint_claim_and_url_survive_kubectls_decoding(self):
        with tempfile.TemporaryDirectory(prefix="k8s_faults_kubectl.") as d:
            m = manifests(os.path.join(d, "run"), "0", '[k8s]\ncheckpoint_volume = "c"\n',
                          'checkpoint_url = "file:///shared/c"\n')
            self.assertEqual(self.problems(m["21-server-statefulset.yaml"]), [])
            self.assertEqual(self.problems(m["30-worker-job.yaml"]), [])

    def test_the_check_can_fail(self):
        with tempfile.TemporaryDirectory(prefix="k8s_faults_kubectl.") as d:
            m = manifests(os.path.join(d, "run"), "worker:1,server:1")["21-server-statefulset.yaml"]
        kb.pod_spec(m)["terminationGracePeriodSecond"] = 60
        self.assertEqual(self.problems(m), ["spec.template.spec.terminationGracePeriodSecond"])


@unittest.skipIf(netcluster.can_run(), netcluster.can_run() or "")
class PodsReplacedInNamespacesTest(unittest.TestCase):
    PODS = {  # netcluster host -> (manifest, pod name, completion index)
        "scheduler": ("11-scheduler-deployment.yaml", "k8s-test-scheduler-5f7c9-x2x4q", None),
        "server0": ("21-server-statefulset.yaml", "k8s-test-server-0", None),
        "server1": ("21-server-statefulset.yaml", "k8s-test-server-1", None),
        "worker0": ("30-worker-job.yaml", "k8s-test-worker-0-hj2kd", "0"),
        "worker1": ("30-worker-job.yaml", "k8s-test-worker-1-9qz8w", "1"),
    }

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_faults_pods.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.bundle = kb.bundle_dir()
        self.cluster = netcluster.Cluster(list(self.PODS), {})
        self.addCleanup(self.cluster.down)
        self.cluster.up()
        a = self.cluster.addresses
        names = [f"{a['scheduler']} k8s-test-scheduler"] + [
            f"{a[f'server{k}']} k8s-test-server-{k}.k8s-test-server" for k in range(2)]
        for host, (_, pod, _) in self.PODS.items():
            etc = os.path.join("/etc/netns", self.cluster.ns(host))
            os.makedirs(etc)
            self.addCleanup(shutil.rmtree, etc, True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write("\n".join(["127.0.0.1 localhost", f"{a[host]} {pod}"] + names) + "\n")
        self.m = manifests(os.path.join(self.dir, "run"), "worker:2,server:1")
        self.procs = {}  # container name -> Popen
        self.addCleanup(self.stop_all)

    def start(self, host, container, out, pod=None):
        """The container `container` of `host`'s pod (its out volume `out`), as Kubernetes would
        start it: the manifest's command and environment."""
        file, pod_name, index = self.PODS[host]
        spec = kb.pod_spec(self.m[file])
        c = spec["containers"][0]
        env = kb.container_env(c, {"status.podIP": self.cluster.addresses[host],
                                   "metadata.name": pod or pod_name})
        env["R2SP_OUT"] = out
        # The flags name the pod's out volume (the servers' checkpoints): here `out`.
        env["R2SP_FLAGS"] = env.get("R2SP_FLAGS", "").replace(k8s_backend.OUT_DIR, out)
        if index is not None:
            env["JOB_COMPLETION_INDEX"] = index
        with open(os.path.join(self.dir, container + ".log"), "wb") as log:
            self.procs[container] = subprocess.Popen(
                self.cluster.exec_prefix(host) + kb.pod_argv(c, self.bundle),
                env={"PATH": os.environ["PATH"], "HOME": "/root", **env}, stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def stop_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def log(self, container):
        with open(os.path.join(self.dir, container + ".log"), errors="replace") as f:
            return f.read()

    def wait_for(self, container, pattern, timeout=60):
        deadline = time.time() + timeout
        while not re.search(pattern, self.log(container)):
            if time.time() > deadline or self.procs[container].poll() is not None:
                self.fail(f"no '{pattern}' in {container}'s log:\n" + self.log(container)[-3000:]
                          + "\n--- the scheduler's:\n" + self.log("scheduler")[-3000:])
            time.sleep(0.1)

    def kill(self, container, sig):
        """SIGKILL: the container's every process, as when it is killed; SIGTERM: its PID 1
        (the entrypoint), as the kubelet stops a pod."""
        if sig == signal.SIGKILL:
            os.killpg(self.procs[container].pid, sig)
        else:
            os.kill(self.procs[container].pid, sig)
        return self.procs[container].wait(timeout=60)

    def out(self, name):
        return os.path.join(self.dir, "out", name)

    def test_killed_and_stopped_pods_are_replaced_and_the_job_completes(self):
        for host in self.PODS:
            self.start(host, host, self.out(host))
        self.wait_for("worker1", r"iteration [5-9]0/")
        self.assertEqual(self.kill("worker1", signal.SIGKILL), -signal.SIGKILL)
        self.start("worker1", "worker1.r1", self.out("worker1.r1"), pod="k8s-test-worker-1-7bq2c")
        self.wait_for("worker1.r1", "joined the running job")

        checkpoints = os.path.join(self.out("server1"), "checkpoints")
        deadline = time.time() + 60
        while not any(n.startswith("ckpt-") for _, dirs, files in os.walk(checkpoints)
                      for n in dirs + files):
            self.assertLess(time.time(), deadline, self.log("server1")[-2000:])
            time.sleep(0.1)
        self.kill("server1", signal.SIGKILL)
        self.start("server1", "server1.r1", self.out("server1"))  # the same pod, its volume kept
        self.wait_for("server1.r1", r"restored \d+ partitions")

        self.assertEqual(self.kill("worker0", signal.SIGTERM), 143)
        self.assertRegex(self.log("scheduler"), r"worker \d+ at \S+ left the job \(signal 15\)")
        self.assertIn("left the job (signal 15)", self.log("worker0"))
        self.start("worker0", "worker0.r1", self.out("worker0.r1"), pod="k8s-test-worker-0-q8v5m")

        codes = {name: proc.wait(timeout=120) for name, proc in self.procs.items()
                 if name not in ("worker0", "worker1", "server1")}
        logs = "\n".join(f"--- {n}\n{self.log(n)[-2000:]}" for n in codes)
        self.assertEqual(codes, dict.fromkeys(codes, 0), logs)
        results = os.path.join(self.dir, "results")
        os.makedirs(results)
        k8s_backend.extract_results(os.path.join(self.dir, "scheduler.log"), results)
        with open(os.path.join(results, "stats.json")) as f:
            stats = json.load(f)
        self.assertEqual(sorted((w["state"], w["left"]) for w in stats["workers"]),
                         [("dead", False), ("dead", True), ("finished", False), ("finished", False)],
                         logs)
        self.assertFalse(os.path.exists(k8s_backend.OUT_DIR))  # nothing outside the pods' dirs

    def test_without_restarts_a_killed_worker_is_recorded_and_the_job_completes(self):
        self.m = manifests(os.path.join(self.dir, "run"), "0")
        for host in self.PODS:
            self.start(host, host, self.out(host))
        self.wait_for("worker1", r"iteration [5-9]0/")
        self.assertEqual(self.kill("worker1", signal.SIGKILL), -signal.SIGKILL)
        # backoffLimitPerIndex 0: no pod replaces it; the others run on.
        codes = {name: proc.wait(timeout=120) for name, proc in self.procs.items()
                 if name != "worker1"}
        logs = "\n".join(f"--- {n}\n{self.log(n)[-2000:]}" for n in codes)
        self.assertEqual(codes, dict.fromkeys(codes, 0), logs)
        results = os.path.join(self.dir, "results")
        os.makedirs(results)
        k8s_backend.extract_results(os.path.join(self.dir, "scheduler.log"), results)
        with open(os.path.join(results, "stats.json")) as f:
            stats = json.load(f)
        self.assertEqual(sorted(w["state"] for w in stats["workers"]), ["dead", "finished"], logs)
        # What kubectl then shows: index 1 failed, the scheduler's exit status as it was.
        scheduler = {"kind": "Pod", "metadata": {
            "name": self.PODS["scheduler"][1], "labels": {"app.kubernetes.io/component": "scheduler"}},
            "status": {"containerStatuses": [{"state": {"terminated": {"exitCode": codes["scheduler"]}}}]}}
        job = {"kind": "Job", "status": {"failedIndexes": "1", "conditions": [
            {"type": "Failed", "status": "True", "reason": "FailedIndexes"}]}}
        self.assertEqual(k8s_outcome.judge([scheduler, job]).state, "complete")

    def test_a_rescheduled_server_restores_from_the_checkpoint_url(self):
        url = os.path.join(self.dir, "ckpt")
        self.m = manifests(os.path.join(self.dir, "run"), "server:1",
                           '[k8s]\ncheckpoint_volume = "ckpt"\n', f'checkpoint_url = "file://{url}"\n')
        for host in self.PODS:
            self.start(host, host, self.out(host))
        # The rank pod server-1 holds follows the servers' racing registrations: its checkpoints
        # are that rank's (checkpoint_url/JOB-RUN/server<rank>).
        self.wait_for("server1", r"server \d+ holds \d+ partitions")
        rank = re.search(r"server (\d+) holds", self.log("server1")).group(1)
        there = os.path.join(url, JOB + "-run", "server" + rank)
        deadline = time.time() + 60
        # A whole checkpoint only: one still being copied sits under .tmp-ckpt-*, MANIFEST and all.
        while not any(os.path.basename(d).startswith("ckpt-") and "MANIFEST" in files
                      for d, _, files in os.walk(there)):
            self.assertLess(time.time(), deadline, self.log("server1")[-2000:])
            time.sleep(0.1)
        self.kill("server1", signal.SIGKILL)
        # Rescheduled: a new pod of the same name, its out volume new and empty.
        self.start("server1", "server1.r1", self.out("server1.r1"))
        self.wait_for("server1.r1", r"restored \d+ partitions")
        codes = {name: proc.wait(timeout=120) for name, proc in self.procs.items()
                 if name != "server1"}
        logs = "\n".join(f"--- {n}\n{self.log(n)[-2000:]}" for n in codes)
        self.assertEqual(codes, dict.fromkeys(codes, 0), logs)
        self.assertIn(f"--checkpoint_url=file://{url}/{JOB}-run server", self.log("server1.r1"))


if __name__ == "__main__":
    junit_main.main()
