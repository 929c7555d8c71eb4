"""tools/pylib/deploy/ec2_supervision.py: how the launcher reads an EC2 job's processes, through
the real AWS CLI against fake_ec2.FakeEc2 (instances whose user-data only sleeps) and a file://
results store: an exit record sets a process's status (0 or a death's); HOST.reclaimed counts
the host's other processes dead with 143, an instance gone without a marker with 137, and both
are terminated; HOST.failed fails the job; the replacements one look asks for share one new
instance per host entry (b.r1, then b.r2), and a replacement instance that cannot start counts
its processes dead. Skipped without the AWS CLI."""

import base64
import os
import shutil
import tempfile
import unittest
from unittest import mock

import junit_main
from ec2_backend_test import aws_cli, cluster_text, fake_bundle
from fake_ec2 import FakeEc2
from pylib.cluster import cluster_file
from pylib.cluster import results
from pylib.deploy import ec2_backend
from pylib.deploy import ec2_plan
from pylib.deploy import ec2_supervision
from pylib.job.errors import JobError


@unittest.skipIf(aws_cli() is None, "needs the AWS CLI (Debian package awscli)")
class Ec2ProcessesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ec2_supervision_test.")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)
        with open(os.path.join(self.dir, "aws_config"), "w") as f:
            f.write("[default]\n")
        patch = mock.patch.dict(os.environ, {
            "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKEFAKE", "AWS_SECRET_ACCESS_KEY": "fake/secret",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.path.join(self.dir, "aws_config"),
            "AWS_SHARED_CREDENTIALS_FILE": os.path.join(self.dir, "none"),
            "PATH": os.path.dirname(aws_cli()) + os.pathsep + os.environ["PATH"]})
        patch.start()
        self.addCleanup(patch.stop)
        self.fake = FakeEc2(self.dir)
        self.addCleanup(self.fake.close)
        cluster = cluster_file.parse(cluster_text(
            [("a", "scheduler = true\nservers = 1"), ("b", "servers = 1\nworkers = 2")],
            f"file://{self.dir}/results"))
        self.plan = ec2_plan.Plan(cluster, ec2_plan.options_of(cluster),
                                  fake_bundle(os.path.join(self.dir, "r2sp-0.0.0-cpu.tar.gz")),
                                  "run1", {}, 60, self.fake.url)
        self.results = os.path.join(self.dir, "results", "ec2-test", "run1")
        os.makedirs(self.results)
        self.started = ec2_backend.Started()
        for host in ("a", "b"):
            self.started.instances[host] = self.boot(host)
        self.launched = []  # (key, host, replacing) of each replacement instance asked for
        self.processes = ec2_supervision.Ec2Processes(
            None, self.plan, ec2_backend.Aws(), results.open_store("file://" + self.results),
            self.started, self.launch)

    def boot(self, name):
        """An instance of this run whose user-data only sleeps; its id."""
        with self.fake.lock:
            self.fake.on_RunInstances({
                "UserData": base64.b64encode(b"sleep 60").decode(),
                "TagSpecification.1.Tag.1.Key": "r2sp-job", "TagSpecification.1.Tag.1.Value": "ec2-test",
                "TagSpecification.1.Tag.2.Key": "r2sp-run", "TagSpecification.1.Tag.2.Value": "run1",
                "TagSpecification.1.Tag.3.Key": "Name", "TagSpecification.1.Tag.3.Value": name})
            return f"i-fake{len(self.fake.instances):04d}"

    def launch(self, key, host, replacing):
        self.launched.append((key, host.name, dict(replacing)))
        if key == "b.r2":
            raise JobError("run-instances for b.r2 failed (254): capacity")
        return self.boot(key)

    def leave(self, *names):
        for name in names:
            with open(os.path.join(self.results, name), "w") as f:
                f.write("server1 exited with status 143;\n")

    def statuses(self):
        self.processes._looked = 0  # a look now
        return {name: proc.poll() for name, proc in self.processes.procs()}

    def test_exit_records_reclaims_losses_and_replacements(self):
        self.assertEqual(self.statuses(), {"scheduler": None, "server0": None, "server1": None,
                                           "worker0": None, "worker1": None})
        self.leave("worker0.exit-0", "worker1.exit-1")
        self.assertEqual(self.statuses(), {"scheduler": None, "server0": None, "server1": None,
                                           "worker0": 0, "worker1": 1})
        self.processes.restart("worker1", "worker1.r1")
        self.leave("b.reclaimed")
        got = self.statuses()  # b.r1 started first, then b's server counted dead
        self.assertEqual(self.launched, [("b.r1", "b", {"worker1": "worker1.r1"})])
        self.assertEqual(got, {"scheduler": None, "server0": None, "server1": 143,
                               "worker0": 0, "worker1": 1, "worker1.r1": None})
        self.assertEqual(self.terminated(), [self.started.instances["b"]])
        self.processes.restart("server1", "server1.r1")
        self.fake.reclaim(self.started.instances["b.r1"])  # gone without a marker
        got = self.statuses()
        self.assertEqual(self.launched[1:], [("b.r2", "b", {"server1": "server1.r1"})])
        self.assertEqual((got["worker1.r1"], got["server1.r1"]), (137, 137))  # b.r2 never started
        self.assertEqual(self.processes.gone, {"b", "b.r1"})
        self.assertFalse(self.processes.finished())
        self.assertEqual(self.processes.stop_all(), [("scheduler", None), ("server0", None)])
        self.assertTrue(self.processes.finished())

    def test_a_host_that_could_not_start_fails_the_job(self):
        with open(os.path.join(self.results, "a.failed"), "w") as f:
            f.write("cannot fetch the bundle from s3://b/x.tar.gz\n")
        with self.assertRaisesRegex(JobError, "^a failed: cannot fetch the bundle from "
                                              r"s3://b/x.tar.gz$"):
            self.statuses()

    def terminated(self):
        return [v for r in self.fake.requests_of("TerminateInstances")
                for k, v in r.items() if k.startswith("InstanceId.")]


if __name__ == "__main__":
    junit_main.main()
