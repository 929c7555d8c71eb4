"""tools/launch --backend=ec2 through a spot reclaim, against aws_stand_in.AwsStandIn (the real
AWS CLI against fake_ec2.FakeEc2, each instance's user-data a local process, with a metadata
stand-in, fake_imds.FakeImds, and an S3 stand-in, tests/tools/deploy/fake_aws, a directory as
the bucket, for the checkpoint_url): the mlp on Fashion-MNIST (r2sp), host a the scheduler and
both workers, host b both servers, both hosts spot (every fake instance is 127.0.0.1, and the
[ports] numbering restarts on each host: no two hosts may run the same role).
Host b is marked for interruption while the workers train and then taken (terminated), as AWS
does: its servers checkpoint on SIGTERM and those checkpoints reach the S3 stand-in, the
launcher records both servers dead (status 143), starts the replacement instance b.r1 (on
demand: the stand-in has no spot capacity left, and on_demand_fallback allows it) running only
server0.r1 and server1.r1, which restore from the checkpoint_url and join the running job, and
the job completes with an accuracy. A job stopped with Ctrl-C once both servers' checkpoints are
in the S3 stand-in, its instances terminated, resumes with tools/launch --resume on new
instances (attempt 2, tagged RUN-a2), every server taking its shard from the S3 copies.
Needs the AWS CLI, the built binaries, patchelf and Fashion-MNIST; skipped otherwise."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import junit_main
import ec2_backend_test
from aws_stand_in import AwsStandIn, cannot_run
from ec2_backend_test import package
from pylib.job.fault_runs import steps_done

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles root under Bazel
# Under Bazel the import above may resolve to the source tree: the bundle and tools/launch come
# from this test's runfiles instead.
ec2_backend_test.ROOT, ec2_backend_test.BIN_DIR = ROOT, BIN_DIR
MNIST = "/usr/share/datasets/fashion-mnist"
NODE = "--heartbeat_ms=500"


def why_not():
    return cannot_run() or (None if os.path.isdir(MNIST) else "Fashion-MNIST is not installed")


def cluster_text(base, results_url):
    return f"""[job]
name = "ec2-test"
mode = "r2sp"
checkpoint_url = "s3://bucket/ckpt"
[ports]
scheduler = {base}
server = {base + 100}
worker = {base + 200}
[flags]
scheduler = "--heartbeat_timeout_ms=3000 --partition_bytes=262144"
server = "{NODE}"
worker = "--model=mlp --data=fashion-mnist --data_dir={MNIST} --batch_size=64 --threads=1 --log_every=25 {NODE}"
[ec2]
region = "us-east-1"
ami = "ami-0123456789abcdef0"
subnet = "subnet-0123abcd"
results_url = "{results_url}"
spot = true
on_demand_fallback = true
[[host]]
name = "a"
scheduler = true
workers = 2
[[host]]
name = "b"
servers = 2
"""


@unittest.skipIf(why_not(), why_not() or "")
class Ec2SpotReclaimTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.top = tempfile.mkdtemp(prefix="ec2_faults_test.")
        cls.bundle = package(cls.top)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.top, ignore_errors=True)  # the bundle and the hosts: about 1 GB

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.top)
        self.aws = AwsStandIn(self.dir)
        self.addCleanup(self.aws.close)
        self.s3, self.imds, self.fake = self.aws.s3, self.aws.imds, self.aws.ec2
        self.fake.spot_capacity = 2  # a and b; b's replacement finds none

    def launch(self, run_id, flags=("--max_restarts=server:2", "--worker_flags=--max_steps=600")):
        base = 20000 + os.getpid() % 20000
        path = os.path.join(self.dir, run_id + ".toml")
        with open(path, "w") as f:
            f.write(cluster_text(base, f"file://{self.dir}/results"))
        argv = [sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + path,
                "--backend=ec2", "--bundle=" + self.bundle, "--bin_dir=" + BIN_DIR,
                "--run_dir=" + os.path.join(self.dir, run_id), "--timeout=170", "--quiet",
                "--checkpoint_every=100steps", *flags]
        return subprocess.Popen(argv, env=self.launch_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def launch_env(self):
        return self.aws.launch_env()

    def instance_of(self, name):
        return self.aws.instance_of(name)

    def wait_until(self, proc, what, check, seconds=120):
        deadline = time.time() + seconds
        while not check():
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                self.fail(f"never {what}: {proc.communicate()[0]}")
            time.sleep(0.2)

    def test_a_reclaimed_spot_host_is_replaced_and_the_job_completes(self):
        proc = self.launch("spot")
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        run_a = lambda: os.path.join(self.fake.work_dir, "instances", self.instance_of("ec2-test-a"),
                                     "runs", "ec2-test-spot")
        self.wait_until(proc, "reached step 200",
                        lambda: len(self.fake.instances) == 2 and steps_done(run_a(), 1) >= 200)
        b = self.instance_of("ec2-test-b")
        self.imds.interrupt(b)
        marker = os.path.join(self.dir, "results", "ec2-test", "spot", "b.reclaimed")
        self.wait_until(proc, "reported b reclaimed", lambda: os.path.exists(marker), 60)
        self.fake.reclaim(b)  # AWS takes it (the launcher may have terminated it already)
        out, _ = proc.communicate(timeout=200)
        self.assertEqual(proc.returncode, 0, out)
        with open(os.path.join(self.dir, "spot", "summary.json")) as f:
            s = json.load(f)
        events = [(e["process"], e["event"], e["status"]) for e in s["events"]]
        self.assertEqual(sorted(e for e in events if e[0].startswith("server")), [
            ("server0", "died", 143), ("server0.r1", "restarted", 143),
            ("server1", "died", 143), ("server1.r1", "restarted", 143)], out)
        self.assertEqual((s["deaths"], s["restarts"]), ({"worker": 0, "server": 2},
                                                        {"worker": 0, "server": 2}),
                         (events, out[-3000:]))
        self.assertGreaterEqual(s["final_test_accuracy"], 0.75, s)
        # The servers' SIGTERM checkpoints reached the S3 stand-in; the replacements restored.
        there = os.path.join(self.s3, "bucket", "ckpt", "ec2-test-spot")
        self.assertEqual(sorted(os.listdir(there)), ["server0", "server1"])
        for server in ("server0", "server1"):
            names = os.listdir(os.path.join(there, server))
            self.assertTrue(names and all(n.startswith("ckpt-") for n in names), names)
            with open(os.path.join(self.dir, "spot", server + ".r1.log")) as f:
                self.assertIn("resumed from", f.read())
        self.assertGreaterEqual(self.imds.notices_read(b), 1)
        # b.r1: no spot capacity left, so on demand; only the lost processes, under new names.
        launched = self.fake.requests_of("RunInstances")
        self.assertEqual([r.get("InstanceMarketOptions.MarketType") for r in launched],
                         ["spot", "spot", "spot", None])
        replacement = self.fake.instances[self.instance_of("ec2-test-b.r1")]
        self.assertFalse(replacement["spot"])
        starts = [l.split()[1] for l in replacement["user_data"].splitlines()
                  if l.startswith("  start ")]
        self.assertEqual(starts, ["server0.r1", "server1.r1"])
        self.assertIn(f"launch: b ({b}) was reclaimed (spot): server0, server1 counted dead", out)

    def test_a_stopped_job_resumes_from_its_s3_checkpoint_url(self):
        proc = self.launch("resumed", ["--worker_flags=--max_steps=1000"])
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        there = os.path.join(self.s3, "bucket", "ckpt", "ec2-test-resumed")
        whole = lambda server: [n for n in os.listdir(os.path.join(there, server))
                                if os.path.exists(os.path.join(there, server, n, "MANIFEST"))]
        self.wait_until(proc, "copied both servers' checkpoints to S3", lambda: all(
            os.path.isdir(os.path.join(there, s)) and whole(s) for s in ("server0", "server1")))
        # Well before the end (step 1000, some 15 s on): the resumed run has steps to train.
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 130, out)
        self.assertEqual({i["state"] for i in self.fake.instances.values()}, {"terminated"})
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"),
                            "--resume=" + os.path.join(self.dir, "resumed"), "--quiet",
                            "--timeout=170"], env=self.launch_env(), capture_output=True,
                           text=True, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.dir, "resumed", "summary.json")) as f:
            s = json.load(f)
        self.assertEqual((s["completed"], s["resumed"], s["attempt"]), (True, True, 2), s)
        self.assertGreaterEqual(s["final_test_accuracy"], 0.75, s)
        for server in ("server0", "server1"):
            with open(os.path.join(self.dir, "resumed", server + ".log")) as f:
                self.assertIn("resumed from", f.read())
        runs = [i["tags"]["r2sp-run"] for i in self.fake.instances.values()]
        self.assertEqual(runs, ["resumed", "resumed", "resumed-a2", "resumed-a2"])


if __name__ == "__main__":
    junit_main.main()
