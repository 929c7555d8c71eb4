"""k8s_checkpoints: the cluster file's checkpoint_url in the manifests tools/launch --backend=k8s
applies (the server pods' R2SP_CHECKPOINT_URL, a file:// URL's claim mounted at its path), the
entrypoint's run_role command for it, and the combinations refused with what to do."""

import os
import shutil
import subprocess
import tempfile
import unittest

import junit_main
from pylib.cluster import cluster_file
from pylib.deploy import driver, k8s_backend
from pylib.job import options
from pylib.job.errors import JobError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ENTRYPOINT = os.path.join(ROOT, "tools", "deploy", "k8s_entrypoint")
HOSTS = '[[host]]\nname = "a"\nscheduler = true\nservers = 2\nworkers = 2\n'


def manifests(url, k8s="", run_dir="/runs/r", resume=False):
    text = '[job]\nname = "j"\nmode = "asp"\n'
    text += f'checkpoint_url = "{url}"\n' if url else ""
    c = cluster_file.parse(text + HOSTS + k8s)
    args = options.parse_args(["--cluster=x", "--backend=k8s", "--run_dir=" + run_dir,
                               "--max_restarts=server:1", "--checkpoint_every=10s"], "")
    args.sync, args.servers, args.workers = c.mode, c.num_servers, c.num_workers
    args.resume = run_dir if resume else ""  # what job.resume.prepare gives a resumed run
    return k8s_backend.K8sBackend(driver.Run(args, c, "/d/r2sp-1.0-cpu.tar.gz", None)).manifests


def server(m):
    spec = m["21-server-statefulset.yaml"]["spec"]["template"]["spec"]
    return spec, spec["containers"][0]


def env(container):
    return {e["name"]: e.get("value") for e in container["env"]}


class ManifestTest(unittest.TestCase):
    def test_s3_servers_copy_to_the_runs_url(self):
        m = manifests("s3://bucket/ckpt/")
        spec, container = server(m)
        self.assertEqual(env(container)["R2SP_CHECKPOINT_URL"], "s3://bucket/ckpt/j-r")
        self.assertEqual(spec["volumes"], [{"name": "out", "emptyDir": {}}])  # nothing mounted
        self.assertIn("--checkpoint_dir=/r2sp/out/checkpoints", env(container)["R2SP_FLAGS"])
        for name in ("11-scheduler-deployment.yaml", "30-worker-job.yaml"):
            c = m[name]["spec"]["template"]["spec"]["containers"][0]
            self.assertNotIn("R2SP_CHECKPOINT_URL", env(c), name)

    def test_file_url_mounts_the_claim_at_its_path_in_every_server_pod(self):
        spec, container = server(manifests("file:///shared/ckpt", '[k8s]\ncheckpoint_volume = "ckpt-rwx"\n'))
        self.assertEqual(env(container)["R2SP_CHECKPOINT_URL"], "file:///shared/ckpt/j-r")
        self.assertEqual(spec["volumes"], [
            {"name": "out", "emptyDir": {}},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt-rwx"}}])
        self.assertEqual(container["volumeMounts"], [
            {"name": "out", "mountPath": "/r2sp/out"},
            {"name": "checkpoints", "mountPath": "/shared/ckpt"}])

    def test_without_a_url_nothing_changes(self):
        spec, container = server(manifests(None))
        self.assertNotIn("R2SP_CHECKPOINT_URL", env(container))
        self.assertEqual(spec["volumes"], [{"name": "out", "emptyDir": {}}])

    def test_refused_with_what_to_do(self):
        cases = [
            ("file:///shared/ckpt", "", r"^checkpoint_url file:///shared/ckpt is a path in each "
             r"server pod's own file system, which goes with the pod: name a ReadWriteMany "
             r"PersistentVolumeClaim to mount there, \[k8s\] checkpoint_volume = \"CLAIM\", or "
             r"use s3://$"),
            ("s3://b/c", '[k8s]\ncheckpoint_volume = "x"\n', r"^\[k8s\] checkpoint_volume is the "
             r"claim a file:///PATH checkpoint_url lives on, but checkpoint_url is s3://b/c: give "
             r"checkpoint_url = \"file:///PATH\" \(\[job\]\), or remove checkpoint_volume$"),
            (None, '[k8s]\ncheckpoint_volume = "x"\n', r"checkpoint_url is not given"),
            ("file:///r2sp/out/c", '[k8s]\ncheckpoint_volume = "x"\n', r"^checkpoint_url "
             r"file:///r2sp/out/c: the claim cannot be mounted at /r2sp/out/c \(the pods use "
             r"/r2sp, /opt/r2sp, /etc/r2sp\): name another path$"),
            ("file:///", '[k8s]\ncheckpoint_volume = "x"\n', r"cannot be mounted at /"),
        ]
        for url, k8s, message in cases:
            with self.assertRaisesRegex(JobError, message, msg=url):
                manifests(url, k8s)

    def test_a_resumed_run_restores_every_server_from_the_same_url(self):
        self.assertTrue(k8s_backend.K8sBackend.resumable)  # launch.json saved
        _, container = server(manifests("s3://b/c", resume=True))
        self.assertEqual((env(container)["R2SP_CHECKPOINT_URL"], env(container)["R2SP_FLAGS"]),
                         ("s3://b/c/j-r", "--checkpoint_dir=/r2sp/out/checkpoints "
                                          "--checkpoint_every=10s --resume"))


class EntrypointTest(unittest.TestCase):
    """The entrypoint's run_role command for a server pod given R2SP_CHECKPOINT_URL, run on a
    stand-in run_role that prints its arguments."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_checkpoints_test.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        shutil.copy(ENTRYPOINT, self.dir)
        with open(os.path.join(self.dir, "run_role"), "w") as f:
            f.write('#!/bin/sh\necho "run_role $*"\n')
        os.chmod(os.path.join(self.dir, "run_role"), 0o755)

    def run_pod(self, role, **env):
        r = subprocess.run([os.path.join(self.dir, "k8s_entrypoint"), role],
                           env={"PATH": os.environ["PATH"], "R2SP_OUT": self.dir,
                                "POD_NAME": "j-server-1", "POD_IP": "10.0.0.5",
                                "R2SP_FLAGS": "--checkpoint_dir=/r2sp/out/checkpoints", **env},
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout.strip()

    def test_the_server_gets_checkpoint_url_before_its_role(self):
        self.assertEqual(self.run_pod("server", R2SP_CHECKPOINT_URL="s3://b/c/j-r"),
                         "run_role --checkpoint_url=s3://b/c/j-r server "
                         "--advertise_host=10.0.0.5 --checkpoint_dir=/r2sp/out/checkpoints")
        self.assertEqual(self.run_pod("server"), "run_role server --advertise_host=10.0.0.5 "
                                                 "--checkpoint_dir=/r2sp/out/checkpoints")


if __name__ == "__main__":
    junit_main.main()
