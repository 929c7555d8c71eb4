"""tools/pylib/deploy/staging.py, the data step of the remote backends, and the ssh backend's use
of it against real sshd servers (network namespaces, as ssh_backend_test): a job stages
Fashion-MNIST from a file:// source into each host's cache once, verified, and its workers
train on the staged copy; a second job reuses every file (same inodes); a corrupted cached file
is fetched again; a wrong sha256 in the manifest fails the launch before any process starts,
naming the host and the URL. The real-sshd tests need root; skipped otherwise."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from pylib.cluster import cluster_file
from pylib.deploy import ssh_backend, staging
import junit_main
import ssh_backend_test
from ssh_backend_test import SSH_PORT, SshHosts, cannot_run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
# Under Bazel the import above resolves to the source tree: the hosts' bundle comes from this
# test's runfiles instead.
ssh_backend_test.ROOT = ROOT
ssh_backend_test.BIN_DIR = BIN_DIR

HOSTS = ("launcher", "node0", "node1")
FASHION_MNIST = "/usr/share/datasets/fashion-mnist"
TRAIN = "train-images-idx3-ubyte.gz"


def parse(directory, data, hosts='[[host]]\nname = "h0"\nscheduler = true\nservers = 1\n'
                                  'workers = 1\n[[host]]\nname = "h1"\nworkers = 1\n'
                                  'data_cache = "/d"\n'):
    with open(os.path.join(directory, "set.sha256"), "w") as f:
        f.write(f"{'a' * 64}  x.gz\n")
    return cluster_file.parse(f'[job]\nmode = "bsp"\nworkdir = "~/w"\n{hosts}[data]\n{data}',
                              os.path.join(directory, "c.toml"))


class StagingCommandsTest(unittest.TestCase):
    """The commands, exactly (no root needed)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.cluster = parse(self._tmp.name, 'name = "set"\nsource = "s3://b/p"\n')
        self.digest = self.cluster.data.dir_name

    def test_only_hosts_with_workers_stage(self):
        self.assertEqual([h.name for h in staging.hosts(self.cluster)], ["h0", "h1"])
        solo = parse(self._tmp.name, 'name = "set"\nsource = "s3://b/p"\n',
                     '[[host]]\nname = "s"\nscheduler = true\nservers = 1\n'
                     '[[host]]\nname = "w"\nworkers = 2\n')
        self.assertEqual([h.name for h in staging.hosts(solo)], ["w"])
        self.assertEqual(staging.hosts(cluster_file.parse(
            '[job]\nmode = "bsp"\n[[host]]\nname = "a"\nscheduler = true\nservers = 1\n'
            'workers = 1\n')), [])  # no [data]

    def test_stage_args_and_remote_command(self):
        h0, h1 = self.cluster.hosts
        self.assertEqual(staging.stage_args(self.cluster.data, h1, "/w/r2sp-1-cpu/", "m"), [
            "/w/r2sp-1-cpu/share/r2sp/deploy/stage_data", "--source=s3://b/p", "--manifest=m",
            f"--target=/d/{self.digest}", "--host=h1"])
        self.assertEqual(staging.remote_command(self.cluster.data, h0, "~/w/r2sp-1-cpu"), (
            'exec "$HOME"/w/r2sp-1-cpu/share/r2sp/deploy/stage_data --source=s3://b/p '
            f'--manifest=- --target="$HOME"/r2sp-data/{self.digest} --host=h0'))
        bundled = parse(self._tmp.name, 'name = "set"\nsource = "bundle"\npath = "d"\n')
        self.assertEqual(staging.stage_args(bundled.data, bundled.hosts[0], "~/w/b", "-")[1],
                         "--source=file://~/w/b/worker_files/set")

    def test_home_path_and_failure(self):
        self.assertEqual(staging.home_path("~/r2sp-data/x"), "$HOME/r2sp-data/x")
        self.assertEqual(staging.home_path("~"), "$HOME")
        self.assertEqual(staging.home_path("/d/~x"), "/d/~x")
        self.assertEqual(staging.failure(self.cluster.hosts[1], self.cluster.data, "bad\n"),
                         "staging the data set set on h1 failed, so no process was started: bad")

    def test_workers_get_the_staged_directory_unless_their_flags_name_one(self):
        plan = ssh_backend.Plan.__new__(ssh_backend.Plan)
        plan.cluster, plan.name, plan.job_dir, plan.keys = self.cluster, "r2sp-1-cpu", "j-r", None
        plan.extra_flags = {}
        h0, h1 = self.cluster.hosts
        command = plan.start(h1, h1.processes[0])[-1]
        self.assertIn(f"R2SP_DATA=/d/{self.digest} && exec", command)
        self.assertIn('--data_dir="$R2SP_DATA"', command)
        scheduler = plan.start(h0, h0.processes[0])[-1]
        self.assertNotIn("data_dir", scheduler)
        plan.extra_flags = {"worker": ["--data_dir=/mine"]}
        command = plan.start(h1, h1.processes[0])[-1]
        self.assertEqual(command.count("--data_dir"), 1)
        self.assertIn("--data_dir=/mine", command)


@unittest.skipIf(cannot_run() or not os.path.isdir(FASHION_MNIST),
                 cannot_run() or f"needs {FASHION_MNIST} (Debian package dataset-fashion-mnist)")
class SshStagingTest(SshHosts):
    """SshHosts' hosts and bundle, and a shared file system holding the data set."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The shared file system the data set comes from (a copy: the test corrupts nothing of
        # Debian's).
        cls.source = os.path.join(cls.dir, "shared", "fashion-mnist")
        shutil.copytree(FASHION_MNIST, cls.source)
        with open(os.path.join(cls.dir, "fashion-mnist.sha256"), "w") as f:
            f.write(subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"),
                                    "--write_data_manifest=" + cls.source], check=True,
                                   capture_output=True, text=True).stdout)

    def cluster_file(self, worker, manifest="fashion-mnist.sha256", source=None, hosts="hosts",
                     cache="cache"):
        """node0: the scheduler, a server and a worker; node1: a worker; each its own cache."""
        a = self.cluster.addresses
        path = os.path.join(self.dir, "cluster.toml")
        with open(path, "w") as f:
            f.write(f"""[job]
name = "staging"
mode = "bsp"
[flags]
worker = "{worker}"
[ssh]
user = "root"
port = {SSH_PORT}
identity = "{self.dir}/id_ed25519"
options = ["StrictHostKeyChecking=yes", "UserKnownHostsFile={self.dir}/known_hosts"]
[data]
name = "fashion-mnist"
source = {source or f'"file://{self.source}"'}
manifest = "{manifest}"
[[host]]
name = "{a['node0']}"
workdir = "{self.dir}/{hosts}/node0"
data_cache = "{self.dir}/{cache}/node0"
scheduler = true
servers = 1
workers = 1
[[host]]
name = "{a['node1']}"
workdir = "{self.dir}/{hosts}/node1"
data_cache = "{self.dir}/{cache}/node1"
workers = 1
""")
        return path

    def launch(self, path, run):
        return subprocess.run(self.cluster.exec_prefix("launcher") + [
            sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + path,
            "--backend=ssh", "--bundle=" + self.bundle, "--run_dir=" + os.path.join(self.dir, run),
            "--timeout=90"], capture_output=True, text=True, timeout=150)

    def staged(self, host, data, cache="cache"):
        return os.path.join(self.dir, cache, host, data.dir_name)

    def inodes(self, data):
        return {(h, n): os.stat(os.path.join(self.staged(h, data), n)).st_ino
                for h in HOSTS[1:] for n in os.listdir(self.source)}

    def test_staged_once_trained_on_reused_and_repaired(self):
        # Fashion-MNIST's files read as --data=mnist (the same idx file names), which has no
        # default directory: a worker that trains can only have read the --data_dir it was given.
        path = self.cluster_file("--model=mlp --data=mnist --max_steps=5 --batch_size=32")
        data = cluster_file.load(path).data
        r = self.launch(path, "run1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        a = self.cluster.addresses
        for host in HOSTS[1:]:
            self.assertIn(f"launch: stage_data: {a[host]}: {self.staged(host, data)}: 4 files "
                          "verified (reused 0, fetched 4)", r.stdout)
            self.assertEqual(subprocess.run(["sha256sum", "-c", "--quiet", data.manifest_path],
                                            cwd=self.staged(host, data)).returncode, 0)
        # Ranks follow the order of registration, not of the launch: either log may hold rank 0.
        logs = []
        for worker in ("worker0", "worker1"):
            with open(os.path.join(self.dir, "run1", worker + ".log")) as f:
                logs.append(f.read())
        self.assertEqual(sorted(re.findall(r"worker (\d): 5 steps, 160 samples", "".join(logs))),
                         ["0", "1"], logs)
        with open(os.path.join(self.dir, "run1", "summary.json")) as f:
            self.assertGreater(json.load(f)["final_test_accuracy"], 0.1)
        before = self.inodes(data)
        path = self.cluster_file("--model=synthetic --iterations=2")  # the same data set
        r = self.launch(path, "run2")  # a second job: nothing copied
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for host in HOSTS[1:]:
            self.assertIn(f"{a[host]}: {self.staged(host, data)}: 4 files verified (reused 4, "
                          "fetched 0)", r.stdout)
        self.assertEqual(self.inodes(data), before)
        with open(os.path.join(self.staged("node1", data), TRAIN), "r+b") as f:
            f.seek(1000)
            f.write(b"corrupt")
        r = self.launch(path, "run3")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f"{a['node1']}: {self.staged('node1', data)}: 4 files verified (reused 3, "
                      "fetched 1)", r.stdout)
        self.assertIn(f"{a['node0']}: {self.staged('node0', data)}: 4 files verified (reused 4, "
                      "fetched 0)", r.stdout)

    def test_a_data_set_shipped_in_the_bundle(self):
        path = self.cluster_file("--model=synthetic --iterations=2", hosts="bundled",
                                 source=f'"bundle"\npath = "{self.source}"', cache="cache_b")
        data = cluster_file.load(path).data
        a = self.cluster.addresses
        for run, copied, counts in (("run_b1", 2, "reused 0, fetched 4"),
                                    ("run_b2", 0, "reused 4, fetched 0")):
            r = self.launch(path, run)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"(copied to {copied}", r.stdout)  # the same bundle the second time
            for host in HOSTS[1:]:
                self.assertIn(f"launch: stage_data: {a[host]}: {self.staged(host, data, 'cache_b')}: "
                              f"4 files verified ({counts})", r.stdout)
        bundle = os.path.join(self.dir, "bundled", "node1",
                              os.path.basename(self.bundle).removesuffix(".tar.gz"))
        self.assertEqual(subprocess.run(["sha256sum", "-c", "--quiet", data.manifest_path],
                                        cwd=os.path.join(bundle, "worker_files", "fashion-mnist")
                                        ).returncode, 0)

    def test_a_wrong_sha256_fails_the_launch_before_any_process_starts(self):
        with open(os.path.join(self.dir, "fashion-mnist.sha256")) as f:
            lines = f.read().splitlines()
        bad = [("0" * 64 + line[64:]) if line.endswith(TRAIN) else line for line in lines]
        with open(os.path.join(self.dir, "wrong.sha256"), "w") as f:
            f.write("\n".join(bad) + "\n")
        path = self.cluster_file("--model=synthetic --iterations=2", manifest="wrong.sha256")
        r = self.launch(path, "run_wrong")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, (
            r"launch: error: staging the data set fashion-mnist on (\S+) failed, so no process "
            r"was started: stage_data: \1: error: file://" + self.source + "/" + TRAIN +
            r": sha256 [0-9a-f]{64} differs from the manifest's " + "0" * 64))
        # Both hosts fail; the first error is the one raised.
        self.assertIn(re.search(r"on (\S+) failed", r.stderr).group(1),
                      [self.cluster.addresses[h] for h in HOSTS[1:]])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "run_wrong", "scheduler.log")))


if __name__ == "__main__":
    junit_main.main()
