"""tools/pylib/deploy/k8s_data.py: the [data] set in the rendered Kubernetes job. The worker pods
get the stage-data init container (the image's stage_data, the manifest from the job's
ConfigMap, the pod's name as its host), the data volume (emptyDir, or [k8s] data_volume's claim)
mounted read-only in the worker, and --data_dir in R2SP_FLAGS unless the flags give one; kubectl
decodes the Job and builds the same ConfigMap offline; and the init container's command, run as
the pod would (its mounts as directories here), stages and verifies the files the worker's
--data_dir then names, and fails on a wrong sha256 naming the pod and the URL."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from pylib.cluster import cluster_file
from pylib.deploy import k8s_backend, k8s_data, k8s_yaml
import junit_main
from k8s_backend_test import CHECK_IMAGE, JOB, WORKER_FLAGS, env_of, kubectl, not_kept, pod_spec

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FILES = {"x.bin": b"x" * 300, "d/y.bin": b"y"}
POD = "k8s-test-worker-1-9qz8w"


def write_set(directory, files=FILES):
    """FILES under DIRECTORY/source and their manifest DIRECTORY/set.sha256."""
    for name, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(directory, "source", name)), exist_ok=True)
        with open(os.path.join(directory, "source", name), "wb") as f:
            f.write(data)
    with open(os.path.join(directory, "set.sha256"), "w") as f:
        f.write("".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in FILES.items()))


def data_cluster(directory, worker_flags=WORKER_FLAGS, extra=""):
    write_set(directory)
    return cluster_file.parse(f"""[job]
name = "{JOB}"
mode = "bsp"
[flags]
worker = "{worker_flags}"
{extra}
[data]
name = "set"
source = "file://{directory}/source"
[[host]]
name = "a"
scheduler = true
servers = 1
workers = 2
""", os.path.join(directory, "c.toml"))


class K8sDataTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.dir = self._tmp.name
        self.cluster = data_cluster(self.dir)
        self.data_dir = f"/r2sp/data/{self.cluster.data.dir_name}"
        self.m = k8s_backend.render(self.cluster, JOB, "r2sp:1-cpu", "ml")

    def test_the_worker_pods_stage_first_and_read_the_staged_copy(self):
        spec = pod_spec(self.m["30-worker-job.yaml"])
        self.assertEqual(spec["initContainers"], [{
            "name": "stage-data", "image": "r2sp:1-cpu", "imagePullPolicy": "IfNotPresent",
            "command": ["/opt/r2sp/share/r2sp/deploy/stage_data"],
            "args": [f"--source=file://{self.dir}/source",
                     "--manifest=/etc/r2sp/data/manifest.sha256", "--target=" + self.data_dir,
                     "--host=$(POD_NAME)"],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "volumeMounts": [{"name": "data", "mountPath": "/r2sp/data"},
                             {"name": "data-manifest", "mountPath": "/etc/r2sp/data",
                              "readOnly": True}]}])
        self.assertEqual(spec["volumes"], [
            {"name": "data", "emptyDir": {}},
            {"name": "data-manifest", "configMap": {"name": "k8s-test-data-manifest"}}])
        worker = spec["containers"][0]
        self.assertEqual(worker["volumeMounts"], [{"name": "data", "mountPath": "/r2sp/data",
                                                   "readOnly": True}])
        self.assertEqual(env_of(worker)["R2SP_FLAGS"], f"--data_dir={self.data_dir} " + WORKER_FLAGS)
        config = self.m["05-data-manifest-configmap.yaml"]
        self.assertEqual((config["kind"], config["metadata"]["name"], config["metadata"]["namespace"],
                          config["data"]), ("ConfigMap", "k8s-test-data-manifest", "ml",
                                            {"manifest.sha256": self.cluster.data.manifest_text}))
        for file in ("11-scheduler-deployment.yaml", "21-server-statefulset.yaml"):
            self.assertNotIn("initContainers", pod_spec(self.m[file]))
            self.assertNotIn("--data_dir", json.dumps(self.m[file]))

    def test_a_claim_keeps_the_cache_and_own_flags_win(self):
        spec = pod_spec(k8s_backend.render(self.cluster, JOB, "img", None,
                                           data_volume="r2sp-data")["30-worker-job.yaml"])
        self.assertEqual(spec["volumes"][0],
                         {"name": "data", "persistentVolumeClaim": {"claimName": "r2sp-data"}})
        own = data_cluster(self.dir, worker_flags="--data_dir=/mine --model=mlp")
        worker = pod_spec(k8s_backend.render(own, JOB, "img", None)["30-worker-job.yaml"])
        self.assertEqual(env_of(worker["containers"][0])["R2SP_FLAGS"], "--data_dir=/mine --model=mlp")
        self.assertEqual(cluster_file.parse(
            '[job]\nmode = "bsp"\n[k8s]\ndata_volume = "c"\n[[host]]\nname = "a"\n'
            'scheduler = true\nservers = 1\nworkers = 1\n').backend_options["k8s"],
            {"data_volume": "c"})

    def test_a_bundle_source_reads_the_images_worker_files(self):
        with open(os.path.join(self.dir, "b.toml"), "w") as f:
            f.write('[job]\nmode = "bsp"\n[data]\nname = "set"\nsource = "bundle"\npath = "d"\n[[host]]\n'
                    'name = "a"\nscheduler = true\nservers = 1\nworkers = 1\n')
        spec = pod_spec(k8s_backend.render(cluster_file.load(os.path.join(self.dir, "b.toml")),
                                           JOB, "img", None)["30-worker-job.yaml"])
        self.assertEqual(spec["initContainers"][0]["args"][0],
                         "--source=file:///opt/r2sp/worker_files/set")

    def run_init_container(self, manifests):
        """The init container's command as the pod would run it: the mounts are directories
        here, the image's stage_data this tree's; (its result, the worker's --data_dir here)."""
        pod = os.path.join(self.dir, "pod")
        # The longer first: /r2sp/data is in /etc/r2sp/data.
        mounts = {"/etc/r2sp/data": os.path.join(pod, "cm"), "/r2sp/data": os.path.join(pod, "data")}
        shutil.rmtree(pod, ignore_errors=True)
        os.makedirs(mounts["/etc/r2sp/data"])
        for name, text in manifests["05-data-manifest-configmap.yaml"]["data"].items():
            with open(os.path.join(mounts["/etc/r2sp/data"], name), "w") as f:
                f.write(text)
        init = pod_spec(manifests["30-worker-job.yaml"])["initContainers"][0]

        def here(word):
            for mount, directory in mounts.items():
                word = word.replace(mount, directory)
            return word.replace("$(POD_NAME)", POD)

        program = init["command"][0].replace("/opt/r2sp/share/r2sp/deploy",
                                             os.path.join(ROOT, "tools", "deploy"))
        r = subprocess.run([sys.executable, program] + [here(a) for a in init["args"]],
                           capture_output=True, text=True, timeout=60)
        worker = pod_spec(manifests["30-worker-job.yaml"])["containers"][0]
        flag = env_of(worker)["R2SP_FLAGS"].split()[0]
        return r, here(flag.removeprefix("--data_dir="))

    def test_the_init_container_stages_what_the_worker_reads(self):
        r, data_dir = self.run_init_container(self.m)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(r.stdout, f"stage_data: {POD}: {data_dir}: 2 files verified (reused 0, "
                                   "fetched 2)\n")
        for name, data in FILES.items():
            with open(os.path.join(data_dir, name), "rb") as f:
                self.assertEqual(f.read(), data)

    def test_a_wrong_sha256_fails_the_init_container(self):
        with open(os.path.join(self.dir, "source", "x.bin"), "wb") as f:
            f.write(b"changed")
        r, _ = self.run_init_container(self.m)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, (
            f"stage_data: {POD}: error: file://{self.dir}/source/x.bin: sha256 "
            f"{hashlib.sha256(b'changed').hexdigest()} differs from the manifest's "
            f"{hashlib.sha256(FILES['x.bin']).hexdigest()} (a wrong manifest or a changed "
            "source: write it again with tools/launch --write_data_manifest)\n"))


@unittest.skipIf(kubectl() is None, "needs kubectl")
class K8sDataKubectlTest(unittest.TestCase):
    """kubectl's offline decoding keeps the init container and the volumes; its own ConfigMap of
    the manifest file is the one rendered."""

    def kubectl(self, *args):
        return subprocess.run([kubectl(), *args], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "KUBECONFIG": os.path.join(self.dir, "kubeconfig")})

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.dir = self._tmp.name
        open(os.path.join(self.dir, "kubeconfig"), "w").close()
        self.cluster = data_cluster(self.dir)

    def test_the_job_and_the_configmap(self):
        m = k8s_backend.render(self.cluster, JOB, "r2sp:1-cpu", "ml", data_volume="claim")
        path = os.path.join(self.dir, "job.yaml")
        with open(path, "w") as f:
            f.write(k8s_yaml.dump(m["30-worker-job.yaml"]))
        r = self.kubectl("set", "image", "--local", "-f", path, f"*={CHECK_IMAGE}", "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = json.loads(r.stdout)["spec"]["template"]["spec"]
        want = pod_spec(m["30-worker-job.yaml"])
        for container in want["initContainers"] + want["containers"]:
            container["image"] = CHECK_IMAGE
        self.assertEqual(not_kept(want["initContainers"], got["initContainers"]), [])
        self.assertEqual(not_kept(want["volumes"], got["volumes"]), [])
        self.assertEqual(not_kept(want["containers"][0]["volumeMounts"],
                                  got["containers"][0]["volumeMounts"]), [])
        manifest = os.path.join(self.dir, "manifest.sha256")
        with open(manifest, "w") as f:
            f.write(self.cluster.data.manifest_text)
        r = self.kubectl("create", "configmap", "k8s-test-data-manifest", "--namespace=ml",
                         f"--from-file=manifest.sha256={manifest}", "--dry-run=client", "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        config = m["05-data-manifest-configmap.yaml"]
        self.assertEqual(json.loads(r.stdout)["data"], config["data"])
        self.assertEqual(json.loads(r.stdout)["metadata"]["name"], config["metadata"]["name"])


if __name__ == "__main__":
    junit_main.main()
