"""tools/pylib/role_commands.py: remote paths as a POSIX shell reads them, where a host keeps the
bundle and the run, and run_role's arguments for every role: what the scheduler alone gets,
how the others find it, address and interface hosts, GPUs, and the order of the flags (the
cluster file's, then the host's, then the launcher's); with --auth=curve every process's
--keys_dir, and the roles whose secret keys a host needs."""

import argparse
import subprocess
import unittest

from pylib.cluster import cluster_file
import junit_main
from pylib.cluster import role_commands

CLUSTER = """
[job]
name = "j"
mode = "ssp"
workdir = "/w/"
[ports]
scheduler = 7000
[flags]
scheduler = "--r2sp_order=auto"
server = "--lr=0.1"
worker = "--model=cnn --threads=2"

[[host]]
name = "a"
address = "10.0.0.1"
scheduler = true
servers = 1
workers = 1
gpus = [3]
worker_flags = "--batch=64 --note='x y'"

[[host]]
name = "b"
interface = "eth1"
servers = 1
workers = 2
"""
OUT = "/runs/out"


class PathsTest(unittest.TestCase):
    def expand(self, path):
        """What a POSIX shell makes of remote_path(path), with HOME=/home/h."""
        return subprocess.run(["/bin/sh", "-c", "printf %s " + role_commands.remote_path(path)],
                              env={"HOME": "/home/h"}, capture_output=True, text=True,
                              check=True).stdout

    def test_remote_path(self):
        self.assertEqual(role_commands.remote_path("~"), '"$HOME"')
        self.assertEqual(role_commands.remote_path("~/x y"), '"$HOME"/\'x y\'')
        self.assertEqual(role_commands.remote_path("/abs path"), "'/abs path'")
        for path, expanded in (("~", "/home/h"), ("~/x y", "/home/h/x y"),
                               ("/abs path", "/abs path"), ("/a/$HOME;b", "/a/$HOME;b"),
                               ("~other/x", "~other/x")):
            with self.subTest(path=path):
                self.assertEqual(self.expand(path), expanded)

    def test_bundle_and_run_dirs(self):
        cluster = cluster_file.parse(CLUSTER)
        a = cluster.hosts[0]
        self.assertEqual(role_commands.bundle_dir(a, "r2sp-1-cpu"), "/w/r2sp-1-cpu")
        self.assertEqual(role_commands.run_dir(a, "j-1"), "/w/runs/j-1")
        self.assertEqual(role_commands.keys_dir(a, "j-1"), "/w/keys/j-1")  # not in the run dir

    def test_roles_of_a_host(self):
        a, b = cluster_file.parse(CLUSTER).hosts
        self.assertEqual(role_commands.roles_of(a), ["scheduler", "server", "worker"])
        self.assertEqual(role_commands.roles_of(b), ["server", "worker"])


class RunRoleArgsTest(unittest.TestCase):
    def setUp(self):
        self.cluster = cluster_file.parse(CLUSTER)
        self.a, self.b = self.cluster.hosts

    def args(self, host, name, extra=None):
        process = next(p for p in host.processes if p.name == name)
        return role_commands.run_role_args(self.cluster, host, process, OUT, extra)

    def test_scheduler(self):
        self.assertEqual(self.args(self.a, "scheduler", {"scheduler": ["--x=1"],
                                                         "worker": ["--y"]}), [
            "scheduler", "--bind=tcp://0.0.0.0:7000", "--advertise_host=10.0.0.1",
            "--num_servers=2", "--num_workers=3", "--sync=ssp", f"--stats_json={OUT}/stats.json",
            "--r2sp_order=auto", "--x=1"])

    def test_server_on_an_interface_host(self):
        self.assertEqual(self.args(self.b, "server1", {"server": ["--lr=0.2"]}), [
            "--advertise_interface=eth1", "server", "--bind=tcp://0.0.0.0:9100",
            "--scheduler=tcp://10.0.0.1:7000", "--lr=0.1", "--lr=0.2"])

    def test_worker_with_a_gpu_and_host_flags(self):
        self.assertEqual(self.args(self.a, "worker0", {"worker": ["--threads=8"]}), [
            "worker", "--bind=tcp://0.0.0.0:9200", "--advertise_host=10.0.0.1",
            "--scheduler=tcp://10.0.0.1:7000", f"--metrics={OUT}/metrics_worker0.jsonl",
            f"--timeline={OUT}/timeline_worker0.json", f"--model_dir={OUT}/model", "--gpu=3",
            "--model=cnn", "--threads=2",
            "--batch=64", "--note=x y", "--threads=8"])

    def test_workers_get_the_staged_data_dir_unless_their_flags_give_one(self):
        def args(host, name, extra=None):
            process = next(p for p in host.processes if p.name == name)
            return role_commands.run_role_args(self.cluster, host, process, OUT, extra,
                                               data_dir="/cache/set-1")
        self.assertEqual(args(self.b, "worker2")[-3:],
                         ["--data_dir=/cache/set-1", "--model=cnn", "--threads=2"])
        self.assertNotIn("--data_dir=/cache/set-1", args(self.a, "scheduler"))
        self.assertNotIn("--data_dir=/cache/set-1", args(self.b, "server1"))
        for extra in ({"worker": ["--data_dir=/mine"]}, {"worker": ["--data_dir", "/mine"]}):
            got = args(self.b, "worker2", extra)
            self.assertEqual([a for a in got if a.startswith("--data_dir")], [extra["worker"][0]])

    def test_second_worker_of_a_host(self):
        self.assertEqual(self.args(self.b, "worker2"), [
            "--advertise_interface=eth1", "worker", "--bind=tcp://0.0.0.0:9201",
            "--scheduler=tcp://10.0.0.1:7000", f"--metrics={OUT}/metrics_worker2.jsonl",
            f"--timeline={OUT}/timeline_worker2.json", f"--model_dir={OUT}/model", "--model=cnn",
            "--threads=2"])

    def test_python_workers_get_their_command_and_ranks_before_the_role(self):
        cluster = cluster_file.parse(CLUSTER.replace('name = "b"',
                                                     'name = "b"\nworker_cmd = "python3 t.py"'))
        self.assertFalse(role_commands.python_workers(self.cluster))
        self.assertTrue(role_commands.python_workers(cluster))
        b = cluster.hosts[1]
        for name, local in (("worker1", 0), ("worker2", 1)):
            process = next(p for p in b.processes if p.name == name)
            with self.subTest(process=name):
                self.assertEqual(role_commands.run_role_args(cluster, b, process, OUT)[:6], [
                    "--advertise_interface=eth1", "--worker_cmd=python3 t.py",
                    f"--rank={name[-1]}", "--world_size=3", f"--local_rank={local}", "worker"])
        server = next(p for p in b.processes if p.role == "server")
        self.assertEqual(role_commands.run_role_args(cluster, b, server, OUT)[:2],
                         ["--advertise_interface=eth1", "server"])
        a = cluster.hosts[0]
        self.assertEqual(role_commands.run_role_args(cluster, a, a.processes[2], OUT)[0], "worker")

    def test_only_the_scheduler_gets_the_job_shape(self):
        for host in (self.a, self.b):
            for p in host.processes:
                args = role_commands.run_role_args(self.cluster, host, p, OUT)
                shape = [a for a in args if a.split("=")[0] in
                         ("--num_servers", "--num_workers", "--sync", "--stats_json")]
                with self.subTest(process=p.name):
                    self.assertEqual(bool(shape), p.role == "scheduler")
                    self.assertEqual("--scheduler=tcp://10.0.0.1:7000" in args,
                                     p.role != "scheduler")
                    self.assertIn(f"--bind=tcp://0.0.0.0:{p.port}", args)

    def test_keys(self):
        for host in (self.a, self.b):
            for p in host.processes:
                args = role_commands.run_role_args(self.cluster, host, p, OUT, keys="$K")
                with self.subTest(process=p.name):
                    at = args.index("--auth=curve")
                    self.assertEqual(args[at + 1], "--keys_dir=$K")
                    self.assertLess(at, args.index(f"--bind=tcp://0.0.0.0:{p.port}") + 3)
                self.assertFalse([a for a in role_commands.run_role_args(self.cluster, host, p, OUT)
                                  if a.startswith(("--auth", "--keys_dir"))])

    def test_extra_flags_from_the_launch_options(self):
        options = argparse.Namespace(scheduler_flags="--a", server_flags="",
                                     worker_flags="--b 'c d'")
        self.assertEqual(role_commands.extra_flags_from(options),
                         {"scheduler": ["--a"], "server": [], "worker": ["--b", "c d"]})


if __name__ == "__main__":
    junit_main.main()
