"""tools/pylib/deploy/recovery.py: the recovery flags of a supervised remote job (as the local
launcher's) and where a replacement runs."""

import os
import tempfile
import unittest
from unittest import mock

import junit_main
from pylib.cluster import cluster_file, role_commands
from pylib.deploy import recovery
from pylib.job import options
from pylib.job.errors import JobError

# The `aws s3` stand-in (a directory as the bucket).
FAKE_AWS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "deploy", "fake_aws")
HOSTS = ('[[host]]\nname = "a"\nscheduler = true\nservers = 1\n'
         '[[host]]\nname = "b"\nservers = 1\nworkers = 2\nworker_cmd = "python3 t.py"\n')


def parse(mode="asp", flags=""):
    return cluster_file.parse(f'[job]\nmode = "{mode}"\n{flags}' + HOSTS)


def args(*argv):
    return options.parse_args(["--cluster=c", "--backend=ssh", *argv], "")


class RoleFlagsTest(unittest.TestCase):
    def test_without_restarts_the_survivors_take_over_and_servers_checkpoint_on_their_host(self):
        self.assertEqual(recovery.role_flags(args(), parse(), "$OUT", "j-r"), {
            "scheduler": ["--job_id=r2sp-j-r", "--absorb_orphaned_shards",
                          "--epoch_plans=$OUT/epoch_plans.pb"],
            "server": ["--checkpoint_dir=$OUT/checkpoints"], "worker": []})

    def test_replaced_workers_and_servers(self):
        got = recovery.role_flags(args("--max_restarts=worker:1,server:2",
                                       "--checkpoint_every=100steps"), parse(), "/o", "j-r")
        self.assertEqual(got, {"scheduler": ["--job_id=r2sp-j-r", "--server_replace_s=60"],
                               "server": ["--checkpoint_dir=/o/checkpoints",
                                          "--checkpoint_every=100steps"], "worker": []})

    def test_a_bsp_job_never_waits_for_a_lost_servers_replacement(self):
        got = recovery.role_flags(args("--max_restarts=server:1", "--checkpoint_every=5s"),
                                  parse("bsp"), "/o", "j-r")
        self.assertEqual(got["scheduler"], ["--job_id=r2sp-j-r", "--absorb_orphaned_shards",
                                            "--epoch_plans=/o/epoch_plans.pb"])

    def test_a_checkpoint_dir_in_the_file_or_the_launchers_flags_stands(self):
        in_file = parse(flags='[flags]\nserver = "--checkpoint_dir=/shared/c"\n')
        self.assertEqual(recovery.role_flags(args(), in_file, "/o", "j-r")["server"], [])
        given = args("--server_flags=--lr=1 --checkpoint_dir /mine")
        self.assertEqual(recovery.role_flags(given, parse(), "/o", "j-r")["server"], [])

    def test_a_resumed_runs_servers_resume(self):
        resumed = args()
        resumed.resume = "/runs/r"
        self.assertEqual(recovery.role_flags(resumed, parse(), "/o", "j-r")["server"],
                         ["--checkpoint_dir=/o/checkpoints", "--resume"])

    def test_with_recovery_puts_the_launchers_flags_last(self):
        self.assertEqual(recovery.with_recovery({"server": ["--a"], "worker": ["--w"]},
                                                {"server": ["--c"], "scheduler": ["--s"]}),
                         {"scheduler": ["--s"], "server": ["--c", "--a"], "worker": ["--w"]})


class CheckpointUrlTest(unittest.TestCase):
    def test_each_run_has_its_own_and_only_servers_get_it(self):
        cluster = cluster_file.parse('[job]\nmode = "asp"\ncheckpoint_url = "file:///nfs/c/"\n' + HOSTS)
        url = recovery.checkpoint_url(cluster, "j-run1")
        self.assertEqual(url, "file:///nfs/c/j-run1")
        self.assertIsNone(recovery.checkpoint_url(parse(), "j-run1"))
        a, b = cluster.hosts
        self.assertEqual(role_commands.run_role_args(cluster, a, a.processes[1], "/o",
                                                     checkpoint_url=url)[:2],
                         ["--checkpoint_url=file:///nfs/c/j-run1", "server"])
        self.assertNotIn("--checkpoint_url=file:///nfs/c/j-run1", role_commands.run_role_args(
            cluster, b, b.processes[1], "/o", checkpoint_url=url))  # a worker

    def test_a_remote_run_resumes_from_its_checkpoint_url(self):
        with tempfile.TemporaryDirectory() as d:
            cluster = cluster_file.parse(f'[job]\nmode = "asp"\ncheckpoint_url = "file://{d}"\n'
                                         + HOSTS)
            resumed = args("--run_dir=/runs/r")
            with self.assertRaisesRegex(JobError, rf"^cannot resume /runs/r: no server's "
                                                  rf"checkpoints at file://{d}/j-r$"):
                recovery.check_resume(cluster, resumed, "j-r")
            os.makedirs(os.path.join(d, "j-r", "server1"))
            recovery.check_resume(cluster, resumed, "j-r")
        with self.assertRaisesRegex(JobError, r"^cannot resume /runs/r on --backend=ssh: a "
                                              r"remote job resumes from its checkpoint_url, and "
                                              r"the cluster file gives none$"):
            recovery.check_resume(parse(), resumed, "j-r")

    def test_a_run_resumes_from_an_s3_checkpoint_url(self):
        """Listed through the aws CLI (tests/tools/deploy/fake_aws, a directory as the bucket)."""
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "bin"))
            os.symlink(FAKE_AWS, os.path.join(d, "bin", "aws"))
            cluster = cluster_file.parse('[job]\nmode = "asp"\ncheckpoint_url = "s3://b/c"\n' + HOSTS)
            resumed = args("--run_dir=/runs/r")
            with mock.patch.dict(os.environ, PATH=os.path.join(d, "bin") + os.pathsep +
                                 os.environ["PATH"], S3_ROOT=d):
                with self.assertRaisesRegex(JobError, r"^cannot resume /runs/r: no server's "
                                                      r"checkpoints at s3://b/c/j-r$"):
                    recovery.check_resume(cluster, resumed, "j-r")
                os.makedirs(os.path.join(d, "b", "c", "j-r", "server1", "ckpt-00000001"))
                with open(os.path.join(d, "b", "c", "j-r", "server1", "ckpt-00000001",
                                       "MANIFEST"), "w") as f:
                    f.write("step: 1\n")
                recovery.check_resume(cluster, resumed, "j-r")
                with open(os.path.join(d, "calls")) as f:
                    self.assertEqual(f.read().splitlines(), ["s3 ls s3://b/c/j-r/"] * 2)

    def test_only_the_backends_that_copy_checkpoints_take_a_url(self):
        cluster = cluster_file.parse('[job]\nmode = "asp"\ncheckpoint_url = "file:///c"\n' + HOSTS)
        for backend in ("local", "ssh", "slurm", "ec2", "k8s"):
            recovery.check_backend(cluster, backend)
        with self.assertRaisesRegex(JobError, r"^the cluster file's checkpoint_url is for the ssh, "
                                              r"slurm, ec2 and k8s backends, not nomad: remove it, "
                                              r"or run the job with one of those$"):
            recovery.check_backend(cluster, "nomad")
        recovery.check_backend(parse(), "nomad")  # no URL

    def test_k8s_resumes_from_a_claim_not_mounted_here(self):
        cluster = cluster_file.parse('[job]\nmode = "asp"\ncheckpoint_url = '
                                     '"file:///nonexistent/r2sp-claim"\n' + HOSTS)
        recovery.check_resume(cluster, args("--run_dir=/runs/r", "--backend=k8s"), "j-r")
        with self.assertRaisesRegex(JobError, r"^cannot resume /runs/r: no server's checkpoints "
                                              r"at file:///nonexistent/r2sp-claim/j-r$"):
            recovery.check_resume(cluster, args("--run_dir=/runs/r"), "j-r")  # ssh

    def test_a_servers_replacement_goes_to_the_next_host_with_servers_on_a_port_of_its_own(self):
        cluster = cluster_file.parse('[job]\nmode = "asp"\n' + HOSTS +
                                     '[[host]]\nname = "c"\nworkers = 1\n'
                                     '[[host]]\nname = "d"\nservers = 2\n')
        moved = {}
        _, _, dead = recovery.placement(cluster, "server1.r1")  # server1 runs on b (index 1)
        got = [recovery.elsewhere(cluster, 1, dead, moved) for _ in range(2)]
        self.assertEqual([(i, h.name, p.name, p.port) for i, h, p in got],
                         [(3, "d", "server1.r1", 9102), (3, "d", "server1.r1", 9103)])
        self.assertEqual(moved, {3: 2})
        index, host, process = recovery.elsewhere(cluster, 3, dead, moved)  # d: wraps to a
        self.assertEqual((index, host.name, process.port), (0, "a", 9101))
        alone = cluster_file.parse('[job]\nmode = "asp"\n[[host]]\nname = "a"\nscheduler = true\n'
                                   'servers = 1\n[[host]]\nname = "b"\nworkers = 1\n')
        _, _, only = recovery.placement(alone, "server0.r1")  # the only host with servers
        self.assertEqual(recovery.elsewhere(alone, 0, only, {}), (0, alone.hosts[0], only))


class PlacementTest(unittest.TestCase):
    def test_a_replacement_runs_on_its_hosts_as_its_process_under_its_own_name(self):
        cluster = parse()
        index, host, process = recovery.placement(cluster, "worker1.r2")
        self.assertEqual((index, host.name, process.name, process.role, process.port),
                         (1, "b", "worker1.r2", "worker", cluster.hosts[1].processes[2].port))
        # A Python worker keeps its rank and local rank; its files are its own.
        got = role_commands.run_role_args(cluster, host, process, "/o")
        self.assertEqual(got[:5], ["--worker_cmd=python3 t.py", "--rank=1", "--world_size=2",
                                   "--local_rank=1", "worker"])
        self.assertIn("--metrics=/o/metrics_worker1.r2.jsonl", got)
        self.assertEqual(recovery.placement(cluster, "server0")[1].name, "a")

    def test_an_unknown_process(self):
        with self.assertRaisesRegex(KeyError, "no process worker7 in the cluster file"):
            recovery.placement(parse(), "worker7.r1")


if __name__ == "__main__":
    junit_main.main()
