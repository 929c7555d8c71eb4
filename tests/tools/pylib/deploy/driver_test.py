"""tools/pylib/deploy/driver.py: the run skeleton every remote backend shares.
- A dry run of every backend (ssh, slurm, k8s, ec2; with --auth=curve too) prints its plan and
  writes nothing: the run directory does not exist afterwards, no keys are made.
- On a scripted backend: the hooks' order; the clock starting at launch; --timeout; cleanup and
  collection on every exit path (success, a JobError from any hook, Ctrl-C's Interrupted); a
  cleanup's problems failing a job that had succeeded, and only said after one that failed."""

import contextlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import unittest
from unittest import mock

import junit_main
from pylib.cluster import cluster_file
from pylib.deploy import driver, ec2_backend, k8s_backend, slurm_backend, ssh_backend
from pylib.job import deadline, options
from pylib.job.errors import Interrupted, JobError

CLUSTER = """[job]
name = "drv"
mode = "bsp"
[ssh]
user = "u"
[ec2]
region = "us-east-1"
ami = "ami-0123456789abcdef0"
instance_type = "g5.xlarge"
subnet = "subnet-0123abcd"
key_name = "r2sp-key"
instance_profile = "r2sp-results"
results_url = "s3://bucket/results"
[[host]]
name = "node-a"
workdir = "{workdir}"
scheduler = true
servers = 1
workers = 1
[[host]]
name = "node-b"
workdir = "{workdir}"
workers = 1
"""


class DryRunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="driver_test.")
        self.addCleanup(shutil.rmtree, self.dir)
        self.bundle = os.path.join(self.dir, "r2sp-0.0.0-cpu.tar.gz")
        manifest = json.dumps({"version": "0.0.0", "files": {}}).encode()
        with tarfile.open(self.bundle, "w:gz") as t:
            info = tarfile.TarInfo("r2sp-0.0.0-cpu/MANIFEST.json")
            info.size = len(manifest)
            t.addfile(info, io.BytesIO(manifest))
        self.workdir = os.path.join(self.dir, "work")
        self.cluster = cluster_file.parse(CLUSTER.format(workdir=self.workdir))
        self.run_dir = os.path.join(self.dir, "run")

    def dry_run(self, backend, *extra):
        args = options.parse_args(["--cluster=c", "--backend=" + backend, "--dry_run",
                                   "--run_dir=" + self.run_dir,
                                   "--bin_dir=" + os.path.join(self.dir, "bin"), *extra], "")
        args.sync, args.servers, args.workers = "bsp", 1, 2
        args.auth = args.auth or "none"
        out = io.StringIO()
        module = {"ssh": ssh_backend, "slurm": slurm_backend, "k8s": k8s_backend,
                  "ec2": ec2_backend}[backend]
        with contextlib.redirect_stdout(out):
            self.assertIsNone(module.run(args, self.cluster, self.bundle))
        return out.getvalue()

    def assert_wrote_nothing(self):
        self.assertEqual(sorted(os.listdir(self.dir)), ["r2sp-0.0.0-cpu.tar.gz"])

    def test_every_backend_writes_nothing(self):
        firsts = {"ssh": f"# bundle {self.bundle} (r2sp-0.0.0-cpu); run directory on each host: "
                         "WORKDIR/runs/drv-run",
                  "slurm": f"# unpack {self.bundle} into {self.workdir} (unless the same bundle "
                           "is there)",
                  "k8s": f"# --- {self.run_dir}/k8s/10-scheduler-service.yaml",
                  "ec2": f"# job drv, run run: bundle {self.bundle} (r2sp-0.0.0-cpu) at "
                         "s3://bucket/results/drv/run/r2sp-0.0.0-cpu.tar.gz; results in "
                         "s3://bucket/results/drv/run/"}
        for backend, first in firsts.items():
            for auth in ([], ["--auth=curve"]):
                with self.subTest(backend=backend, auth=auth):
                    text = self.dry_run(backend, *auth)
                    self.assert_wrote_nothing()
                    if auth and backend == "k8s":
                        first = f"# --- {self.run_dir}/k8s/01-scheduler-keys-secret.yaml"
                    self.assertEqual(text.splitlines()[0], first)

    def test_the_dry_runs_name_where_the_keys_would_be(self):
        keys = os.path.join(self.run_dir, "keys")
        made_by = f"# --auth=curve: the job's keys, made first by {self.dir}/bin/common/auth/keygen {keys}"
        self.assertIn(made_by, self.dry_run("slurm", "--auth=curve"))
        self.assertIn(f"each host gets the public keys and its roles' secret keys from {keys}",
                      self.dry_run("ssh", "--auth=curve"))
        self.assertIn(f"<not shown: base64 of {keys}/worker.key>", self.dry_run("k8s", "--auth=curve"))
        self.assert_wrote_nothing()


class Scripted(driver.Backend):
    """Records the hooks called; `fail`: {hook: exception} raised by that hook; the job
    completes at its `polls`-th poll; clean_up returns `problems`."""

    calls, fail, polls, problems = None, {}, 2, []
    poll_seconds = 0.0

    def _hook(self, name):
        Scripted.calls.append(name)
        if name in Scripted.fail:
            raise Scripted.fail[name]

    def describe(self):
        return "described"

    def prepare(self):
        self._hook("prepare")

    def launch(self):
        self._hook("launch")

    def poll(self):
        self._hook("poll")
        return Scripted.calls.count("poll") >= Scripted.polls

    def finish(self):
        self._hook("finish")

    def stop(self):
        self._hook("stop")

    def clean_up(self):
        Scripted.calls.append("clean_up")
        return list(Scripted.problems)

    def collect(self):
        self._hook("collect")


class HooksTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="driver_test.")
        self.addCleanup(shutil.rmtree, self.dir)
        Scripted.calls, Scripted.fail, Scripted.polls, Scripted.problems = [], {}, 2, []
        self.cluster = cluster_file.parse(CLUSTER.format(workdir=self.dir))
        summary = mock.patch.object(driver.launcher, "finish_job",
                                    side_effect=lambda args, wall, cpu, stats, outcome: {"wall": wall})
        summary.start()
        self.addCleanup(summary.stop)

    def run_job(self, *extra):
        args = options.parse_args(["--cluster=c", "--backend=ssh",
                                   "--run_dir=" + os.path.join(self.dir, "run"), *extra], "")
        args.auth = "none"
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            try:
                return driver.run(args, self.cluster, None, Scripted), err.getvalue()
            finally:
                self.err = err.getvalue()

    def test_a_job_that_completes(self):
        summary, err = self.run_job()
        self.assertEqual(Scripted.calls, ["prepare", "launch", "poll", "poll", "finish",
                                          "clean_up", "collect"])
        self.assertEqual((list(summary), err), (["wall"], ""))
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "run")))

    def test_every_failing_hook_still_stops_cleans_up_and_collects(self):
        for hook, after in (("prepare", []), ("launch", ["prepare"]),
                            ("poll", ["prepare", "launch"]),
                            ("finish", ["prepare", "launch", "poll", "poll"])):
            for error in (JobError(f"{hook} broke"), Interrupted(2)):
                with self.subTest(hook=hook, error=error):
                    Scripted.calls, Scripted.fail = [], {hook: error}
                    with self.assertRaises(type(error)) as raised:
                        self.run_job()
                    self.assertIs(raised.exception, error)
                    self.assertEqual(Scripted.calls, after + [hook, "stop", "clean_up", "collect"])

    def test_the_timeout_counts_from_launch(self):
        Scripted.polls = 10 ** 9
        clock = iter(range(1000, 10 ** 6, 10))  # every look at the clock: 10 s later
        with mock.patch.object(deadline.time, "time", side_effect=lambda: next(clock)), \
                mock.patch.object(driver.time, "time", side_effect=lambda: next(clock)), \
                self.assertRaisesRegex(JobError, r"^the job ran past --timeout=25s$"):
            self.run_job("--timeout=25")
        self.assertEqual(Scripted.calls, ["prepare", "launch", "poll", "poll", "poll", "stop",
                                          "clean_up", "collect"])

    def test_cleanup_problems_fail_a_job_that_succeeded(self):
        Scripted.problems = ["delete sg-1 yourself", "delete the bucket yourself"]
        with self.assertRaisesRegex(JobError, r"^cleaning up failed: delete sg-1 yourself; "
                                              r"delete the bucket yourself$"):
            self.run_job()
        self.assertEqual(Scripted.calls[-2:], ["clean_up", "collect"])

    def test_cleanup_problems_after_a_failure_are_said_and_the_failure_wins(self):
        Scripted.problems = ["delete sg-1 yourself"]
        Scripted.fail = {"launch": JobError("no capacity")}
        with self.assertRaisesRegex(JobError, r"^no capacity$"):
            self.run_job()
        self.assertEqual(self.err, "launch: cleaning up failed: delete sg-1 yourself\n")

    def test_a_crafted_bundle_is_refused_before_anything_is_written(self):
        bundle = os.path.join(self.dir, "r2sp-0.0.0-cpu.tar.gz")
        with tarfile.open(bundle, "w:gz") as t:
            info = tarfile.TarInfo("r2sp-0.0.0-cpu/bin")
            info.type, info.linkname = tarfile.SYMTYPE, "/usr/bin"
            t.addfile(info)
        args = options.parse_args(["--cluster=c", "--backend=ssh",
                                   "--run_dir=" + os.path.join(self.dir, "run")], "")
        args.auth = "none"
        with self.assertRaises(JobError) as e:
            driver.run(args, self.cluster, bundle, Scripted)
        self.assertEqual(str(e.exception), f"{bundle}: not shipped: 'r2sp-0.0.0-cpu/bin': a link "
                                           "to the absolute path '/usr/bin'")
        self.assertEqual((Scripted.calls, os.listdir(self.dir)), ([], ["r2sp-0.0.0-cpu.tar.gz"]))

    def test_a_failing_stop_still_cleans_up_and_collects(self):
        Scripted.fail = {"launch": JobError("no capacity"), "stop": OSError("stuck")}
        with self.assertRaisesRegex(OSError, r"^stuck$"):
            self.run_job()
        self.assertEqual(Scripted.calls, ["prepare", "launch", "stop", "clean_up", "collect"])


if __name__ == "__main__":
    junit_main.main()
