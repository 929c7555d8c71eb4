"""tools/launch --backend=ec2 (ec2_backend, ec2_plan, ec2_user_data, result_store) without AWS.

- The plan: port ranges, required keys, quoting of the user-data's variables, --dry_run printing
  every aws command and each host's user-data; with --auth=curve, each host's key files (public
  keys, its roles' secret keys) uploaded beside the results and deleted at the end, the
  user-data naming where they are and holding none.
- The user-data as fresh hosts would run it: in netcluster namespaces (needs root), each host
  fetches the bundle from a file:// URL, unpacks it, starts its roles, joins the job and leaves
  its results and a done marker in a file:// results URL; a host whose worker fails leaves
  `failed`; with --auth=curve each fetches its keys (0700 directory, 0600 files) first; a host
  whose worker has a worker_cmd runs it as a Python worker from the bundle's worker_files/ with
  exactly the binary's flags (python_bundle.py), and the job completes. With a [data] table the
  hosts with workers fetch the data set from s3:// through the real AWS CLI against a local S3
  stand-in (a read-only HTTP server of a directory, path-style: all `aws s3 cp` downloads need)
  and verify it before starting; a wrong sha256 leaves a failed marker naming the host and the
  URL, and no process started. Without root: a Python
  worker's run_role arguments, and the words bash makes of its user-data line.
- The aws command lines through the real AWS CLI (v2 at /usr/bin/aws, Debian's awscli, else any
  `aws` on PATH; skipped without one) against fake_ec2.FakeEc2, a local EC2 Query API endpoint
  that records the requests and runs each instance's decoded user-data as a local process. S3 is
  not exercised: the bundle and results URLs are file:// URLs. Checks what the CLI sent (image,
  type, key, subnet, spot options, tags, the ingress rule naming only the group itself, the
  user-data) and that every instance is terminated and the group deleted after a finished job,
  a failed one and Ctrl-C."""

import base64
import dataclasses
import hashlib
import io
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import types
import unittest

import junit_main
from pylib.emulation import netcluster
from fake_ec2 import FakeEc2
import python_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from pylib.cluster import cluster_file
from pylib.deploy import ec2_backend
from pylib.deploy import ec2_plan
from pylib.deploy import ec2_user_data

BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles root under Bazel
WORKER_FLAGS = "--model=synthetic --model_mb=1 --layers=4 --iterations={iterations} --compute_ms=20 --log_every=1"


def aws_cli():
    """The AWS CLI to test with: Debian's (what CI installs), else the one on PATH."""
    for path in ("/usr/bin/aws", shutil.which("aws")):
        if path and subprocess.run([path, "--version"], capture_output=True).returncode == 0:
            return path
    return None


def cannot_package():
    if not all(os.path.exists(os.path.join(BIN_DIR, r, r)) for r in ("scheduler", "server", "worker")):
        return f"needs the built binaries in {BIN_DIR}"
    if shutil.which("patchelf") is None:
        return "needs patchelf (tools/package)"
    return None


def package(out_dir):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"), "--bin_dir=" + BIN_DIR,
                        "--out=" + out_dir], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()[1]


def cluster_text(hosts, results_url, bundle_url="", ports=(9000, 9100, 9200), iterations=5, spot=True):
    """A cluster file for `hosts` ([(name, extra TOML lines)])."""
    text = f"""[job]
name = "ec2-test"
mode = "bsp"
[ports]
scheduler = {ports[0]}
server = {ports[1]}
worker = {ports[2]}
[flags]
worker = "{WORKER_FLAGS.format(iterations=iterations)}"
[ec2]
region = "us-east-1"
ami = "ami-0123456789abcdef0"
instance_type = "g5.xlarge"
subnet = "subnet-0123abcd"
key_name = "r2sp-key"
instance_profile = "r2sp-results"
spot = {str(spot).lower()}
root_volume_gb = 120
results_url = "{results_url}"
"""
    if bundle_url:
        text += f'bundle_url = "{bundle_url}"\n'
    return text + "".join(f'[[host]]\nname = "{name}"\n{extra}\n' for name, extra in hosts)


def fake_bundle(path):
    """A tarball that is a release bundle as far as the plan looks (its MANIFEST.json)."""
    with tarfile.open(path, "w:gz") as t:
        info = tarfile.TarInfo("r2sp-0.0.0-cpu/MANIFEST.json")
        data = b'{"version": "0.0.0"}\n'
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return path


class PlanTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ec2_plan_test.")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        self.hosts = [("a", "scheduler = true\nservers = 1"), ("b", "servers = 2\nworkers = 1"),
                      ("c", "workers = 3")]
        self.path = os.path.join(self.dir, "cluster.toml")
        with open(self.path, "w") as f:
            f.write(cluster_text(self.hosts, "s3://bucket/results"))
        self.bundle = fake_bundle(os.path.join(self.dir, "r2sp-0.0.0-cpu.tar.gz"))

    def test_port_ranges_cover_every_process_and_merge(self):
        cluster = cluster_file.load(self.path)
        self.assertEqual(ec2_plan.job_port_ranges(cluster), [(9000, 9000), (9100, 9101), (9200, 9202)])

    def test_missing_keys_are_named(self):
        with open(self.path, "w") as f:
            f.write(cluster_text(self.hosts, "s3://b/r").replace('ami = "ami-0123456789abcdef0"\n', "")
                    .replace('subnet = "subnet-0123abcd"\n', ""))
        with self.assertRaisesRegex(Exception, "needs ami, subnet"):
            ec2_plan.options_of(cluster_file.load(self.path))

    def plan(self, extra_ec2="", results="s3://bucket/results"):
        with open(self.path, "w") as f:
            f.write(cluster_text(self.hosts, results).replace("[ec2]\n", "[ec2]\n" + extra_ec2))
        cluster = cluster_file.load(self.path)
        return ec2_plan.Plan(cluster, ec2_plan.options_of(cluster), self.bundle, "run9",
                             {"scheduler": [], "server": [], "worker": []}, 60)

    def test_placement_group_made_for_the_run_and_deleted_after_it(self):
        plan = self.plan('placement = "cluster"\n')
        self.assertEqual(plan.placement_group, "r2sp-ec2-test-run9")
        create = plan.create_placement_group()
        self.assertEqual(create[:7], ["aws", "ec2", "create-placement-group", "--group-name",
                                      "r2sp-ec2-test-run9", "--strategy", "cluster"])
        argv = plan.run_instance(plan.cluster.hosts[0], "sg-1", "/u.sh", "/dev/sda1")
        self.assertEqual(json.loads(argv[argv.index("--placement") + 1]),
                         {"GroupName": "r2sp-ec2-test-run9"})
        lines = plan.describe()
        self.assertLess(lines.index("create-placement-group"), lines.index("run-instances"))
        self.assertLess(lines.index("terminate-instances"), lines.index("delete-placement-group"))
        plain = self.plan()
        self.assertNotIn("--placement", plain.run_instance(plain.cluster.hosts[0], "sg-1",
                                                           "/u.sh", "/dev/sda1"))
        with self.assertRaisesRegex(Exception, "placement must be one of cluster, spread"):
            self.plan('placement = "tight"\n')

    def test_the_bundle_uploaded_for_the_run_is_deleted_after_it_and_the_users_kept(self):
        plan = self.plan()
        self.assertEqual(plan.delete_bundle(), plan.aws(
            "s3", "rm", "--only-show-errors",
            "s3://bucket/results/ec2-test/run9/r2sp-0.0.0-cpu.tar.gz"))
        self.assertIn("aws s3 rm --only-show-errors s3://bucket/results/ec2-test/run9/", plan.describe())
        self.assertEqual(self.plan(results="file:///r").delete_bundle(),
                         ["rm", "-f", "/r/ec2-test/run9/r2sp-0.0.0-cpu.tar.gz"])
        for url in ("s3://shared/bundles/", "https://example.invalid/r2sp.tar.gz"):
            self.assertIsNone(self.plan(f'bundle_url = "{url}"\n').delete_bundle(), url)

    def test_python_workers_run_their_command(self):
        cluster = cluster_file.parse(cluster_text(
            [("a", "scheduler = true\nservers = 1\nworkers = 1"),
             ("c", 'workers = 2\nworker_cmd = "python3 t.py --x=\'a b\'"')],
            "s3://bucket/results"))
        processes = ec2_user_data.host_processes(cluster, cluster.hosts[1], "10.0.0.9",
                                                 {"worker": ["--seed=3"]}, keys=True)
        flags = ["--bind=tcp://0.0.0.0:9201", "--advertise_host=@R2SP_ADVERTISE@", "--auth=curve",
                 "--keys_dir=@R2SP_KEYS@", "--scheduler=tcp://10.0.0.9:9000",
                 "--metrics=@R2SP_OUT@/metrics_worker2.jsonl",
                 "--timeline=@R2SP_OUT@/timeline_worker2.json", "--model_dir=@R2SP_OUT@/model"] + \
            shlex.split(WORKER_FLAGS.format(iterations=5)) + ["--seed=3"]
        self.assertEqual(processes[1], ("worker2", [
            "--worker_cmd=python3 t.py --x='a b'", "--rank=2", "--world_size=3", "--local_rank=1",
            "worker"] + flags))
        self.assertEqual([args[0] for _, args in ec2_user_data.host_processes(
            cluster, cluster.hosts[0], "10.0.0.9", {})], ["scheduler", "server", "worker"])
        # The user-data's start line gives run_role these words, the script's variables expanded.
        settings = ec2_user_data.Settings("ec2-test", "run9", "s3://b/x.tar.gz", "r2sp-0-cpu",
                                          "abc", "s3://bucket/results", 60)
        start = [l for l in ec2_user_data.render(settings, "c", processes).splitlines()
                 if l.startswith("  start worker2 ")][0]
        words = subprocess.run(["bash", "-c", "out=/o advertise=10.1.1.1 keys=/k; printf '%s\\n' "
                                + start.split(" ", 4)[4]], capture_output=True, text=True,
                               check=True).stdout.splitlines()
        self.assertEqual(words, ["--worker_cmd=python3 t.py --x='a b'", "--rank=2",
                                 "--world_size=3", "--local_rank=1", "worker"] + [
            f.replace("@R2SP_OUT@", "/o").replace("@R2SP_ADVERTISE@", "10.1.1.1")
             .replace("@R2SP_KEYS@", "/k") for f in flags])

    def test_the_data_settings_and_a_manifest_too_big_for_the_user_data(self):
        settings = ec2_user_data.Settings("ec2-test", "run9", "s3://b/x.tar.gz", "r2sp-0-cpu",
                                          "abc", "s3://bucket/results", 60, data_name="set",
                                          data_source="s3://b/set", data_target="~/c/set-1",
                                          data_manifest="a" * 64 + "  x.gz\n")
        text = ec2_user_data.render(settings, "c", [("worker0", ["worker", "--data_dir=@R2SP_DATA@"])])
        for line in ("data_name=set", "data_source=s3://b/set", "data_target='~/c/set-1'",
                     f"data_manifest='{'a' * 64}  x.gz\n'",
                     '  start worker0 worker --data_dir="$data_dir"'):
            self.assertIn(line + "\n", text)
        big = dataclasses.replace(settings, data_manifest=("a" * 64 + "  x.gz\n") * 300)
        with self.assertRaisesRegex(ValueError, r"the user-data of c is \d+ bytes; EC2 takes at "
                                                r"most 16384 \(fewer or shorter flags; or a "
                                                r"\[data\] manifest of fewer files\)"):
            ec2_user_data.render(big, "c", [])

    def test_a_replacement_instance_runs_only_the_lost_processes_under_new_names(self):
        with open(self.path, "w") as f:
            f.write(cluster_text(self.hosts, "s3://bucket/results").replace(
                "[job]\n", '[job]\ncheckpoint_url = "s3://bucket/ckpt"\n'))
        cluster = cluster_file.load(self.path)
        plan = ec2_plan.Plan(cluster, ec2_plan.options_of(cluster), self.bundle, "run9",
                             {"server": ["--checkpoint_dir=@R2SP_OUT@/checkpoints"]}, 60,
                             checkpoint_url="s3://bucket/ckpt/ec2-test-run9")
        b = cluster.hosts[1]
        text = plan.user_data(b, "10.0.0.9", "b.r1", {"server2": "server2.r1", "worker0": "worker0.r1"},
                              spot=False)
        self.assertIn("\nhost=b.r1\n", text)
        self.assertIn("\ncheckpoint_url=s3://bucket/ckpt/ec2-test-run9\nspot=false\n", text)
        starts = [l for l in text.splitlines() if l.startswith("  start ")]
        self.assertEqual([l.split()[1] for l in starts], ["server2.r1", "worker0.r1"])
        self.assertTrue(starts[0].startswith("  start server2.r1 --checkpoint_url=s3://bucket/ckpt/"
                                             "ec2-test-run9 server --bind=tcp://0.0.0.0:9101 "),
                        starts[0])
        self.assertIn('--checkpoint_dir="$out"/checkpoints', starts[0])
        self.assertIn('--metrics="$out"/metrics_worker0.r1.jsonl', starts[1])
        self.assertNotIn("--checkpoint_url", starts[1])
        self.assertIn("\nspot=true\n", plan.user_data(b, "10.0.0.9"))  # the file's
        argv = plan.run_instance(b, "sg-1", "/u.sh", "/dev/sda1", "b.r1", spot=False)
        self.assertNotIn("--instance-market-options", argv)
        self.assertIn('"Value": "ec2-test-b.r1"', argv[argv.index("--tag-specifications") + 1])
        self.assertIn("--instance-market-options", plan.run_instance(b, "sg-1", "/u.sh", "/dev/sda1"))

    def test_on_demand_fallback_and_the_server_restarts_that_need_a_checkpoint_url(self):
        self.assertFalse(self.plan().options.on_demand_fallback)
        self.assertTrue(self.plan("on_demand_fallback = true\n").options.on_demand_fallback)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + self.path,
                            "--backend=ec2", "--bundle=" + self.bundle, "--dry_run",
                            "--max_restarts=server:1", "--checkpoint_every=100steps"],
                           capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr.strip().splitlines()[-1]), (1, (
            "launch: error: --max_restarts=server:N on EC2 needs the cluster file's "
            "checkpoint_url ([job]): a server's replacement runs on a new instance and restores "
            "its shard from there")))

    def test_a_resumed_runs_attempts_have_results_of_their_own(self):
        run = lambda **kw: types.SimpleNamespace(run_dir="/runs/r7/", **kw)
        self.assertEqual([ec2_backend.run_id(run()), ec2_backend.run_id(run(attempt=1)),
                          ec2_backend.run_id(run(attempt=3)),
                          ec2_backend.run_id(types.SimpleNamespace(run_dir=""))],
                         ["r7", "r7", "r7-a3", "TIMESTAMP"])

    def test_stand_ins_become_variables_and_the_rest_is_quoted(self):
        word = ec2_user_data.shell_word(f"--x=$(rm -rf /)'{ec2_user_data.OUT}/m")
        out = subprocess.run(["bash", "-c", f'out=/r; printf %s {word}'], capture_output=True, text=True)
        self.assertEqual(out.stdout, "--x=$(rm -rf /)'/r/m")

    def test_dry_run_prints_every_command_and_the_user_data(self):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + self.path,
                            "--backend=ec2", "--bundle=" + self.bundle, "--run_dir=" + self.dir + "/run7",
                            "--dry_run"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        for command in ("describe-subnets", "create-security-group", "authorize-security-group-ingress",
                        "aws s3 cp", "run-instances", "wait instance-running", "terminate-instances",
                        "wait instance-terminated", "delete-security-group"):
            self.assertIn(command, r.stdout)
        self.assertEqual(r.stdout.count("aws ec2 run-instances"), 3)
        self.assertIn("--scheduler=tcp://SCHEDULER_IP:9000", r.stdout)  # hosts b and c
        self.assertIn("--scheduler=tcp://\"$advertise\":9000", r.stdout)  # host a
        self.assertEqual(r.stdout.count("# ----- USER_DATA_"), 3)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "run7")))  # a dry run touches nothing
        self.assertNotIn("--keys_dir", r.stdout)
        self.assertEqual(r.stdout.count("keys_url=''\n"), 3)

    def test_curve_uploads_each_hosts_keys_and_the_user_data_names_them_only(self):
        keys = os.path.join(self.dir, "keys")
        os.makedirs(keys, mode=0o700)
        for name in ("scheduler", "server", "worker"):
            for suffix in ("pub", "key"):
                with open(os.path.join(keys, f"{name}.{suffix}"), "w") as f:
                    f.write(f"KEY-{name}-{suffix}\n")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + self.path,
                            "--backend=ec2", "--bundle=" + self.bundle, "--run_dir=" + self.dir + "/run8",
                            "--auth=curve", "--keys_dir=" + keys, "--dry_run"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("KEY-", r.stdout)
        url = "s3://bucket/results/ec2-test/run8.keys"
        uploads = {}
        for line in r.stdout.splitlines():
            argv = shlex.split(line) if line.startswith("aws s3 cp") else []
            if argv and argv[5].startswith(url):
                host, name = argv[5][len(url) + 1:].split("/")
                self.assertEqual(argv[4], os.path.join(keys, name))
                uploads.setdefault(host, []).append(name)
        public = ["scheduler.pub", "server.pub", "worker.pub"]
        self.assertEqual(uploads, {"a": public + ["scheduler.key", "server.key"],
                                   "b": public + ["server.key", "worker.key"], "c": public + ["worker.key"]})
        self.assertIn(f"aws s3 rm --recursive --only-show-errors {url}/", r.stdout)
        self.assertIn(f"keys_url={url}/c\nkey_files='scheduler.pub server.pub worker.pub worker.key'",
                      r.stdout)
        self.assertEqual(r.stdout.count('--auth=curve --keys_dir="$keys"'), 8)  # every process


def cannot_run_namespaces():
    return netcluster.can_run() or cannot_package()


@unittest.skipIf(cannot_run_namespaces(), cannot_run_namespaces() or "")
class UserDataTest(unittest.TestCase):
    """Each host's user-data run in its own namespace, as a fresh instance would run it."""
    HOSTS = ("node0", "node1", "node2")

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ec2_user_data_test.")
        cls.bundle = package(cls.dir)
        cls.cluster = netcluster.Cluster(cls.HOSTS, {})
        cls.cluster.up()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.down()
        shutil.rmtree(cls.dir, ignore_errors=True)  # the bundles and hosts' files: about 1 GB

    def tearDown(self):
        # Whatever a test leaves in the hosts' namespaces (and the ports it holds) must not
        # reach the next one.
        for host in self.HOSTS:
            netcluster.kill_processes(self.cluster.ns(host))

    def plan(self, run_id, worker_flags="", keys=None, node2="", bundle=None, data=""):
        path = os.path.join(self.dir, f"{run_id}.toml")
        node1 = "servers = 1\nworkers = 1" + (f"\nworker_flags = {json.dumps(worker_flags)}" if worker_flags else "")
        bundle = bundle or self.bundle
        with open(path, "w") as f:
            f.write(cluster_text([("node0", "scheduler = true\nservers = 1"), ("node1", node1),
                                  ("node2", "workers = 1" + node2)], f"file://{self.dir}/results",
                                 bundle_url=f"file://{bundle}") + data)
        cluster = cluster_file.load(path)
        return ec2_plan.Plan(cluster, ec2_plan.options_of(cluster), bundle, run_id,
                             {"scheduler": ["--register_timeout_s=60"]}, timeout=120, keys=keys)

    def boot(self, plan, host_name, env=None):
        """Runs `host_name`'s user-data in its namespace, as root on a fresh machine."""
        host = next(h for h in plan.cluster.hosts if h.name == host_name)
        script = os.path.join(self.dir, f"{plan.run_id}_{host_name}.sh")
        with open(script, "w") as f:
            f.write(plan.user_data(host, self.cluster.addresses["node0"]))
        env = dict(os.environ, R2SP_PREFIX=os.path.join(self.dir, plan.run_id, host_name),
                   R2SP_NO_SHUTDOWN="1", R2SP_ADVERTISE_HOST=self.cluster.addresses[host_name],
                   **(env or {}))
        return subprocess.Popen(self.cluster.exec_prefix(host_name) + ["bash", script], env=env)

    def test_hosts_install_the_bundle_join_the_job_and_report_done(self):
        plan = self.plan("ok")
        booted = [self.boot(plan, h) for h in self.HOSTS]
        for process in booted:
            self.assertEqual(process.wait(timeout=120), 0)
        results = os.path.join(self.dir, "results", "ec2-test", "ok")
        for host in self.HOSTS:
            self.assertTrue(os.path.exists(os.path.join(results, host + ".done")), host)
            self.assertTrue(os.path.exists(os.path.join(results, host, f"user_data_{host}.log")))
        with open(os.path.join(results, "node0", "stats.json")) as f:
            stats = json.load(f)
        self.assertEqual(len(stats["workers"]), 2)
        self.assertTrue(all(w["iterations"] == 5 for w in stats["workers"]), stats)
        self.assertTrue(os.path.exists(os.path.join(results, "node1", "metrics_worker0.jsonl")))
        self.assertTrue(os.path.exists(os.path.join(results, "node2", "metrics_worker1.jsonl")))
        with open(os.path.join(results, "node1.done")) as f:
            self.assertEqual(sorted(f.read().strip().rstrip(";").split("; ")),
                             ["server1 exited with status 0", "worker0 exited with status 0"])

    def test_curve_hosts_fetch_their_keys_and_complete_the_job(self):
        keys = os.path.join(self.dir, "curve_keys")
        r = subprocess.run([os.path.join(BIN_DIR, "common", "auth", "keygen"), keys],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = self.plan("curve", keys=keys)
        for host in plan.ordered_hosts():
            for argv in plan.upload_keys(host):
                subprocess.run(argv, check=True)
        booted = [self.boot(plan, h) for h in self.HOSTS]
        for process in booted:
            self.assertEqual(process.wait(timeout=120), 0)
        results = os.path.join(self.dir, "results", "ec2-test", "curve")
        for host in self.HOSTS:
            self.assertTrue(os.path.exists(os.path.join(results, host + ".done")), host)
        with open(os.path.join(results, "node0", "stats.json")) as f:
            self.assertTrue(all(w["iterations"] == 5 for w in json.load(f)["workers"]))
        public = ["scheduler.pub", "server.pub", "worker.pub"]
        held = {"node0": public + ["scheduler.key", "server.key"],
                "node1": public + ["server.key", "worker.key"], "node2": public + ["worker.key"]}
        for host in self.HOSTS:
            there = os.path.join(self.dir, "curve", host, "keys-ec2-test-curve")
            self.assertEqual(stat.S_IMODE(os.stat(there).st_mode), 0o700)
            self.assertEqual(sorted(os.listdir(there)), sorted(held[host]), host)
            for name in os.listdir(there):
                self.assertEqual(stat.S_IMODE(os.stat(os.path.join(there, name)).st_mode), 0o600)
            self.assertFalse(os.path.exists(os.path.join(results, host, "keys-ec2-test-curve")))
        subprocess.run(plan.delete_keys(), check=True)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "results", "ec2-test", "curve.keys")))

    def test_a_python_worker_runs_from_the_bundle_with_the_binarys_flags(self):
        records = os.path.join(self.dir, "records")
        os.makedirs(records)
        bundle = python_bundle.make(os.path.join(self.dir, "python"), BIN_DIR)
        command = python_bundle.COMMAND.format(records=records)
        plan = self.plan("python", node2=f'\nworker_cmd = "{command}"', bundle=bundle)
        booted = [self.boot(plan, h) for h in self.HOSTS]
        for process in booted:
            self.assertEqual(process.wait(timeout=120), 0)
        results = os.path.join(self.dir, "results", "ec2-test", "python")
        for host in self.HOSTS:
            self.assertTrue(os.path.exists(os.path.join(results, host + ".done")), host)
        with open(os.path.join(results, "node0", "stats.json")) as f:
            self.assertTrue(all(w["iterations"] == 5 for w in json.load(f)["workers"]))
        prefix, node0 = os.path.join(self.dir, "python", "node2"), self.cluster.addresses["node0"]
        node2 = plan.cluster.hosts[2]
        (_, args), = ec2_user_data.host_processes(plan.cluster, node2, node0, plan.extra_flags)
        flags = [a.replace(ec2_user_data.OUT, os.path.join(prefix, "runs", "ec2-test-python"))
                 .replace(ec2_user_data.ADVERTISE, self.cluster.addresses["node2"])
                 for a in args[args.index("worker") + 1:]]
        with open(os.path.join(records, "1.json")) as f:
            self.assertEqual(json.load(f), python_bundle.expected(
                os.path.join(prefix, plan.bundle_name), node0, 9000, 1, 2, 0, flags,
                os.environ.get("PYTHONPATH")))

    def s3_stand_in(self, files):
        """Serves `files` ({key: bytes}) as s3://bucket/KEY from node0's namespace; the
        environment that points the AWS CLI at it."""
        root = tempfile.mkdtemp(dir=self.dir, prefix="s3.")
        for key, data in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, "bucket", key)), exist_ok=True)
            with open(os.path.join(root, "bucket", key), "wb") as f:
                f.write(data)
        server = subprocess.Popen(self.cluster.exec_prefix("node0") + [
            sys.executable, "-m", "http.server", "--bind", "0.0.0.0", "9900", "--directory", root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(server.wait)
        self.addCleanup(server.kill)
        deadline = time.time() + 20
        while subprocess.run(self.cluster.exec_prefix("node1") + [
                "bash", "-c", f"exec 3<>/dev/tcp/{self.cluster.addresses['node0']}/9900"],
                capture_output=True).returncode != 0:
            self.assertLess(time.time(), deadline, "the S3 stand-in never listened")
            time.sleep(0.2)
        return {"AWS_ENDPOINT_URL": f"http://{self.cluster.addresses['node0']}:9900",
                "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1"}

    def data_plan(self, run_id, files, manifest_files=None):
        """A plan whose [data] set is `files` at s3://bucket/sets, each host its own cache."""
        manifest = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n"
                           for n, d in (manifest_files or files).items())
        with open(os.path.join(self.dir, f"{run_id}.sha256"), "w") as f:
            f.write(manifest)
        cache = os.path.join(self.dir, f"cache_{run_id}")
        return self.plan(run_id, node2=f'\ndata_cache = "{cache}/node2"', data=(
            f'[data]\nname = "set"\nsource = "s3://bucket/sets"\nmanifest = "{run_id}.sha256"\n'
            f'cache = "{cache}/node1"\n')), cache

    def test_hosts_stage_the_data_from_s3_and_verify_it_first(self):
        files = {"x.bin": b"x" * 1000, "d/y.bin": b"y"}
        env = self.s3_stand_in({"sets/" + n: d for n, d in files.items()})
        plan, cache = self.data_plan("data", files)
        booted = [self.boot(plan, h, env) for h in self.HOSTS]
        for process in booted:
            self.assertEqual(process.wait(timeout=120), 0)
        results = os.path.join(self.dir, "results", "ec2-test", "data")
        staged = os.path.join("{cache}", "{host}", plan.cluster.data.dir_name)
        for host in ("node1", "node2"):
            self.assertTrue(os.path.exists(os.path.join(results, host + ".done")), host)
            with open(os.path.join(results, host, "stage_data.log")) as f:
                self.assertEqual(f.read(), f"stage_data: {host}: "
                                           f"{staged.format(cache=cache, host=host)}: 2 files "
                                           "verified (reused 0, fetched 2)\n")
            for name, data in files.items():
                with open(os.path.join(staged.format(cache=cache, host=host), name), "rb") as f:
                    self.assertEqual(f.read(), data)
        self.assertFalse(os.path.exists(os.path.join(results, "node0", "stage_data.log")))

    def test_a_wrong_sha256_fails_the_host_before_it_starts_anything(self):
        files = {"x.bin": b"x" * 1000}
        env = self.s3_stand_in({"sets/x.bin": files["x.bin"]})
        plan, _ = self.data_plan("data_bad", files, {"x.bin": b"other"})
        self.assertEqual(self.boot(plan, "node1", env).wait(timeout=60), 0)
        results = os.path.join(self.dir, "results", "ec2-test", "data_bad")
        with open(os.path.join(results, "node1.failed")) as f:
            self.assertEqual(f.read(), (
                f"stage_data: node1: error: s3://bucket/sets/x.bin: sha256 "
                f"{hashlib.sha256(files['x.bin']).hexdigest()} differs from the manifest's "
                f"{hashlib.sha256(b'other').hexdigest()} (a wrong manifest or a changed source: "
                "write it again with tools/launch --write_data_manifest)\n"))
        self.assertFalse(os.path.exists(os.path.join(results, "node1", "worker0.log")))
        self.assertFalse(os.path.exists(os.path.join(results, "node1", "server1.log")))

    def test_a_failing_worker_is_said_at_once_and_the_host_goes_on(self):
        """The launcher records the death (NAME.exit-STATUS); the host's server runs on."""
        plan = self.plan("bad", worker_flags="--no_such_flag")
        boot = self.boot(plan, "node1")
        results = os.path.join(self.dir, "results", "ec2-test", "bad")
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(results, "worker0.exit-1")):
            self.assertLess(time.time(), deadline, "no exit record for worker0")
            self.assertIsNone(boot.poll())
            time.sleep(0.2)
        time.sleep(1)
        self.assertIsNone(boot.poll())  # server1 still runs
        self.assertEqual(sorted(os.listdir(results)), ["worker0.exit-1"])
        boot.kill()
        boot.wait()


def cannot_run_cli():
    if aws_cli() is None:
        return "needs the AWS CLI (Debian package awscli)"
    return cannot_package()


@unittest.skipIf(cannot_run_cli(), cannot_run_cli() or "")
class AwsCliTest(unittest.TestCase):
    """tools/launch --backend=ec2 through the real AWS CLI against FakeEc2. Both hosts' processes
    run on this machine's loopback, so they get ports of their own: host a the scheduler and a
    server, host b two workers."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ec2_cli_test.")
        cls.bundle = package(cls.dir)
        cls.bin = os.path.join(cls.dir, "bin")
        os.makedirs(cls.bin)
        os.symlink(aws_cli(), os.path.join(cls.bin, "aws"))
        with open(os.path.join(cls.dir, "aws_config"), "w") as f:
            f.write("[default]\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)  # the bundle and the runs: about 0.9 GB

    def setUp(self):
        self.fake = FakeEc2(tempfile.mkdtemp(dir=self.dir))
        self.base = 20000 + os.getpid() % 20000

    def tearDown(self):
        self.fake.close()

    def launch_argv(self, run_id, iterations=5, worker_flags="", flags=(), extra_ec2=""):
        path = os.path.join(self.dir, run_id + ".toml")
        b = "workers = 2" + (f"\nworker_flags = {json.dumps(worker_flags)}" if worker_flags else "")
        with open(path, "w") as f:
            f.write(cluster_text([("a", "scheduler = true\nservers = 1"), ("b", b)],
                                 f"file://{self.dir}/results", iterations=iterations,
                                 ports=(self.base, self.base + 100, self.base + 200))
                    .replace("[ec2]\n", "[ec2]\n" + extra_ec2))
        return [sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + path,
                "--backend=ec2", "--bundle=" + self.bundle, "--run_dir=" + os.path.join(self.dir, run_id),
                "--timeout=120", "--bin_dir=" + BIN_DIR, *flags]

    def env(self):
        return dict(os.environ, PATH=self.bin + ":" + os.environ["PATH"], R2SP_AWS_ENDPOINT_URL=self.fake.url,
                    AWS_ACCESS_KEY_ID="AKIAFAKEFAKEFAKEFAKE", AWS_SECRET_ACCESS_KEY="fake/secret",
                    AWS_EC2_METADATA_DISABLED="true", AWS_CONFIG_FILE=os.path.join(self.dir, "aws_config"),
                    AWS_SHARED_CREDENTIALS_FILE=os.path.join(self.dir, "no_credentials"))

    def launch(self, run_id, **kwargs):  # launch_argv's options
        return subprocess.run(self.launch_argv(run_id, **kwargs), env=self.env(), capture_output=True,
                              text=True, timeout=180)

    def assert_cleaned_up(self):
        actions = self.fake.actions()
        self.assertIn("TerminateInstances", actions)
        terminated = {v for r in self.fake.requests_of("TerminateInstances")
                      for k, v in r.items() if k.startswith("InstanceId.")}
        self.assertEqual(terminated, set(self.fake.instances))
        self.assertEqual(self.fake.requests_of("DeleteSecurityGroup")[-1]["GroupId"], "sg-fake1")
        self.assertGreater(actions.index("DeleteSecurityGroup"), actions.index("TerminateInstances"))
        self.assertTrue(all(i["process"].poll() is not None for i in self.fake.instances.values()))

    def test_job_runs_and_the_cli_sends_what_the_cluster_file_says(self):
        r = self.launch("run1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.dir, "run1", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["servers"], summary["workers"], summary["iterations"]), (1, 2, 5))
        for name in ("stats.json", "scheduler.log", "worker1.log", "metrics_worker0.jsonl", "timeline.json"):
            self.assertTrue(os.path.exists(os.path.join(self.dir, "run1", name)), name)

        group = self.fake.requests_of("CreateSecurityGroup")[0]
        self.assertEqual((group["GroupName"], group["VpcId"]), ("r2sp-ec2-test-run1", "vpc-fake1"))
        rule = self.fake.requests_of("AuthorizeSecurityGroupIngress")[0]
        self.assertEqual(rule["GroupId"], "sg-fake1")
        sources = {k: v for k, v in rule.items() if k.startswith("IpPermissions.")}
        ports = [(int(sources[f"IpPermissions.{n}.FromPort"]), int(sources[f"IpPermissions.{n}.ToPort"]))
                 for n in (1, 2, 3)]
        self.assertEqual(ports, [(self.base, self.base), (self.base + 100, self.base + 100),
                                 (self.base + 200, self.base + 201)])
        for n in (1, 2, 3):  # the group itself is the only source
            self.assertEqual(sources[f"IpPermissions.{n}.Groups.1.GroupId"], "sg-fake1")
            self.assertEqual(sources[f"IpPermissions.{n}.IpProtocol"], "tcp")
        self.assertFalse([k for k in sources if "IpRanges" in k or "Ipv6" in k or "PrefixList" in k])
        self.assertNotIn("IpPermissions.4.FromPort", sources)

        launched = self.fake.requests_of("RunInstances")
        self.assertEqual(len(launched), 2)
        for request in launched:
            expected = {"ImageId": "ami-0123456789abcdef0", "InstanceType": "g5.xlarge",
                        "KeyName": "r2sp-key", "SubnetId": "subnet-0123abcd", "SecurityGroupId.1": "sg-fake1",
                        "MinCount": "1", "MaxCount": "1", "InstanceInitiatedShutdownBehavior": "terminate",
                        "IamInstanceProfile.Name": "r2sp-results",
                        "InstanceMarketOptions.MarketType": "spot",
                        "InstanceMarketOptions.SpotOptions.SpotInstanceType": "one-time",
                        "BlockDeviceMapping.1.DeviceName": "/dev/sda1",
                        "BlockDeviceMapping.1.Ebs.VolumeSize": "120",
                        "TagSpecification.1.ResourceType": "instance"}
            self.assertEqual({k: request.get(k) for k in expected}, expected)
        tags = [i["tags"] for i in self.fake.instances.values()]
        self.assertEqual(tags, [{"r2sp-job": "ec2-test", "r2sp-run": "run1", "Name": "ec2-test-a"},
                                {"r2sp-job": "ec2-test", "r2sp-run": "run1", "Name": "ec2-test-b"}])
        with open(os.path.join(self.dir, "run1", "ec2", "user_data_b.sh")) as f:
            user_data = f.read()
        self.assertEqual(base64.b64decode(launched[1]["UserData"]).decode(), user_data)
        self.assertIn(f"--scheduler=tcp://127.0.0.1:{self.base}", user_data)  # a's address
        self.assert_cleaned_up()

    def test_placement_group_and_the_runs_bundle_go_with_the_run(self):
        r = self.launch("run5", extra_ec2='placement = "cluster"\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual([(g["GroupName"], g["Strategy"])
                          for g in self.fake.requests_of("CreatePlacementGroup")],
                         [("r2sp-ec2-test-run5", "cluster")])
        for request in self.fake.requests_of("RunInstances"):
            self.assertEqual(request["Placement.GroupName"], "r2sp-ec2-test-run5")
        actions = self.fake.actions()
        self.assertLess(actions.index("CreatePlacementGroup"), actions.index("RunInstances"))
        self.assertEqual([g["GroupName"] for g in self.fake.requests_of("DeletePlacementGroup")],
                         ["r2sp-ec2-test-run5"])
        self.assertGreater(actions.index("DeletePlacementGroup"), actions.index("TerminateInstances"))
        # The bundle uploaded beside the run's results is gone; the results were collected.
        self.assertFalse(os.path.exists(os.path.join(self.dir, "results", "ec2-test", "run5",
                                                     os.path.basename(self.bundle))))
        self.assertTrue(os.path.exists(os.path.join(self.dir, "run5", "summary.json")))
        self.assert_cleaned_up()

    def test_curve_job_completes_and_its_keys_are_deleted(self):
        r = self.launch("run4", flags=["--auth=curve"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.dir, "run4", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["auth"], summary["iterations"]), ("curve", 5))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "results", "ec2-test", "run4.keys")))
        keys = {}
        for name in os.listdir(os.path.join(self.dir, "run4", "keys")):
            with open(os.path.join(self.dir, "run4", "keys", name)) as f:
                keys[name] = f.read().strip()
        for request in self.fake.requests_of("RunInstances"):
            user_data = base64.b64decode(request["UserData"]).decode()
            self.assertIn("key_files=", user_data)
            for name, key in keys.items():
                self.assertNotIn(key, user_data, name)
        self.assert_cleaned_up()

    def test_a_failed_job_terminates_everything(self):
        """Both workers die at once (recorded, the job goes on without them), so the scheduler
        fails when they never register."""
        r = self.launch("run2", worker_flags="--no_such_flag",
                        flags=["--scheduler_flags=--register_timeout_s=5"])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        for worker in ("worker0", "worker1"):
            self.assertIn(f"launch: {worker} died (status 1); no restarts left", r.stdout)
        self.assertRegex(r.stderr, r"the scheduler exited with status \d+: the job did not "
                                   r"complete")
        self.assert_cleaned_up()

    def test_ctrl_c_terminates_everything(self):
        proc = subprocess.Popen(self.launch_argv("run3", iterations=100000), env=self.env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not self.worker_is_training():
                time.sleep(0.2)
            self.assertLess(time.time(), deadline, "the workers never started")
            proc.send_signal(signal.SIGINT)
            self.assertEqual(proc.wait(timeout=120), 130, proc.stderr.read())
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assert_cleaned_up()

    def worker_is_training(self):
        for instance_id in list(self.fake.instances):
            for root, _, names in os.walk(os.path.join(self.fake.work_dir, "instances", instance_id)):
                for name in names:
                    if name.startswith("worker") and name.endswith(".log"):
                        with open(os.path.join(root, name)) as f:
                            if "iteration" in f.read():
                                return True
        return False


if __name__ == "__main__":
    junit_main.main()
