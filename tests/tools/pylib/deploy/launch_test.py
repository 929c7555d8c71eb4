"""tools/launch --cluster=FILE (tools/pylib/cluster_launch.py): the local backend runs the file's
job on stand-in binaries (its mode and counts, its flags before the command line's, its GPUs as
--gpu=N); --dry_run prints the commands of either backend and runs nothing (the ssh one with a
bundle from tools/package, and no ssh or scp ever started); and the errors: a malformed file at
its line, --backend=ssh without a file, a bundle that is not one, no bundle at all. With
auth = "curve" in the file (or --auth=curve) the local job's processes get the keys a stand-in
keygen made, and the ssh dry run sends each host only its roles' secret keys, by path. Python
workers: the file's worker_cmd and the launcher's --worker_cmd_for run locally through
python_worker, and over ssh through run_role --worker_cmd, from a bundle that must carry the
r2sp package."""

import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()

# One stand-in for all three roles: it writes its arguments to $ARGV_DIR/NAME.json.
FAKE = r'''#!PYTHON
import json, os, sys, time
role = os.path.basename(sys.argv[0])
flags = dict(a[2:].partition("=")[::2] for a in sys.argv[1:] if a.startswith("--"))
name = {"scheduler": "scheduler", "server": f"server-{os.getpid()}"}.get(role)
if role == "scheduler":
    with open(flags["endpoint_file"], "w") as f:
        f.write("tcp://127.0.0.1:1\n")
    time.sleep(0.5)  # the launcher must see it running once it has written its endpoint
elif role == "worker":
    name = "worker" + flags["metrics"].rsplit("worker", 1)[1].split(".")[0]
with open(os.path.join(os.environ["ARGV_DIR"], name + ".json"), "w") as f:
    json.dump(sys.argv[1:], f)
'''
# A Python worker's stand-in: writes RANK, LOCAL_RANK and its arguments to
# $ARGV_DIR/python_workerRANK.json.
RECORDER = r'''
import json, os, sys
with open(os.path.join(os.environ["ARGV_DIR"], f"python_worker{os.environ['RANK']}.json"), "w") as f:
    json.dump([os.environ["RANK"], os.environ["LOCAL_RANK"], os.environ["WORLD_SIZE"]] + sys.argv[1:], f)
'''
# A stand-in keygen: DIR/ROLE.pub and DIR/ROLE.key holding "KEY-ROLE-SUFFIX" (easy to look for).
FAKE_KEYGEN = r'''#!PYTHON
import os, sys
os.makedirs(sys.argv[1], mode=0o700, exist_ok=True)
for role in ("scheduler", "server", "worker"):
    for suffix, mode in (("pub", 0o644), ("key", 0o600)):
        path = os.path.join(sys.argv[1], f"{role}.{suffix}")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
            f.write(f"KEY-{role}-{suffix}\n")
'''
# Host a: the scheduler, a server and workers 0-1 on GPUs 1 and 0; host b: a server, worker2.
CLUSTER = """[job]
mode = "bsp"
[ssh]
user = "u"
[flags]
scheduler = "--from_file=1"
server = "--lr=0.1"
worker = "--threads=2"
[[host]]
name = "node-a.invalid"
scheduler = true
servers = 1
workers = 2
gpus = [1, 0]
worker_flags = "--host_flag=a --batch=4"
[[host]]
name = "node-b.invalid"
servers = 1
workers = 1
"""


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.bin_dir, self.argv_dir, self.fake_path = (
            os.path.join(self.dir, d) for d in ("bin", "argv", "path"))
        for role in ("scheduler", "server", "worker"):
            self.write(os.path.join(self.bin_dir, role, role),
                       FAKE.replace("PYTHON", sys.executable))
        self.write(os.path.join(self.bin_dir, "common", "auth", "keygen"),
                   FAKE_KEYGEN.replace("PYTHON", sys.executable))
        os.makedirs(self.argv_dir)
        for tool in ("ssh", "scp"):  # each records that it ran, and fails
            self.write(os.path.join(self.fake_path, tool),
                       f"#!/bin/sh\necho {tool} >> {self.dir}/ran\nexit 255\n")
        self.cluster = os.path.join(self.dir, "cluster.toml")
        self.write(self.cluster, CLUSTER)
        self.run_dir = os.path.join(self.dir, "run")

    def tearDown(self):
        self._tmp.cleanup()

    def write(self, path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)

    def launch(self, *flags, cluster=None):
        """tools/launch --cluster=CLUSTER (default: this test's file; "": none) FLAGS."""
        cluster = self.cluster if cluster is None else cluster
        env = dict(os.environ, ARGV_DIR=self.argv_dir,
                   PATH=self.fake_path + os.pathsep + os.environ.get("PATH", ""))
        return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"),
                               "--bin_dir=" + self.bin_dir, "--run_dir=" + self.run_dir,
                               "--quiet", *(["--cluster=" + cluster] if cluster else []), *flags],
                              capture_output=True, text=True, env=env, timeout=120)

    def ssh_dry_run(self, bundle=""):
        return self.launch("--backend=ssh", "--dry_run",
                           *(["--bundle=" + bundle] if bundle else []))

    def argv(self, name):
        with open(os.path.join(self.argv_dir, name + ".json")) as f:
            return json.load(f)

    def assert_ran_nothing(self):
        self.assertEqual(os.listdir(self.argv_dir), [])
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))

    def assert_error(self, r, message):
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertTrue(r.stderr.startswith("launch: error: " + message), r.stderr)


class LocalBackendTest(LaunchTest):
    def test_the_files_job_with_its_flags_first(self):
        r = self.launch("--servers=5", "--workers=7", "--sync=asp",
                        "--scheduler_flags=--from_file=2", "--server_flags=--lr=0.2",
                        "--worker_flags=--threads=8", "--worker_flags_for=2:--rank_flag")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["mode"], summary["servers"], summary["workers"]), ("bsp", 2, 3))
        scheduler = self.argv("scheduler")
        self.assertLess(scheduler.index("--from_file=1"), scheduler.index("--from_file=2"))
        self.assertLessEqual({"--num_servers=2", "--num_workers=3", "--sync=bsp"}, set(scheduler))
        servers = [n[:-5] for n in os.listdir(self.argv_dir) if n.startswith("server-")]
        self.assertEqual(len(servers), 2)
        for server in map(self.argv, servers):
            self.assertLess(server.index("--lr=0.1"), server.index("--lr=0.2"))
        workers = [self.argv(f"worker{i}") for i in range(3)]
        for w in workers:
            self.assertLess(w.index("--threads=2"), w.index("--threads=8"))
        self.assertEqual([[a for a in w if a.startswith("--gpu")] for w in workers],
                         [["--gpu=1"], ["--gpu=0"], []])
        self.assertEqual([("--host_flag=a" in w, "--rank_flag" in w) for w in workers],
                         [(True, False), (True, False), (False, True)])

    # Bug: the local backend passes a host's worker_flags (and its GPUs) as --worker_flags_for,
    # which launcher puts after --worker_flags, so the file's host flags override the command
    # line's; the ssh backend (role_commands.run_role_args) puts them before.
    def test_host_worker_flags_come_before_the_command_lines(self):
        r = self.launch("--worker_flags=--batch=8")
        self.assertEqual(r.returncode, 0, r.stderr)
        worker = self.argv("worker0")
        self.assertLess(worker.index("--batch=4"), worker.index("--batch=8"))

    def test_dry_run_prints_the_commands_and_starts_nothing(self):
        r = self.launch("--dry_run")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        lines = [shlex.split(l.split(" > ")[0]) for l in r.stdout.splitlines() if l[0] != "#"]
        self.assertEqual([l[0] for l in lines], [os.path.join(self.bin_dir, role, role) for role in
                                                 ["scheduler"] + ["server"] * 2 + ["worker"] * 3])
        self.assertLessEqual({"--num_servers=2", "--num_workers=3", "--sync=bsp"}, set(lines[0]))
        self.assertIn("--gpu=1", lines[3])
        self.assert_ran_nothing()
        self.assertFalse(os.path.exists(self.run_dir))


class PythonWorkersTest(LaunchTest):
    def setUp(self):
        super().setUp()
        self.recorder = os.path.join(self.dir, "recorder.py")
        self.write(self.recorder, RECORDER)

    def test_the_files_worker_cmd_and_the_command_lines(self):
        self.write(self.cluster, CLUSTER.replace(
            'name = "node-b.invalid"', f'name = "node-b.invalid"\nworker_cmd = "{sys.executable} '
            f'{self.recorder} --from=file"'))
        r = self.launch(f"--worker_cmd_for=0:{sys.executable} {self.recorder} --from=line")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.argv("python_worker0"), ["0", "0", "3", "--from=line"])
        self.assertEqual(self.argv("python_worker2"), ["2", "2", "3", "--from=file"])
        self.assertTrue(os.path.exists(os.path.join(self.argv_dir, "worker1.json")))
        self.assertFalse(os.path.exists(os.path.join(self.argv_dir, "worker0.json")))
        self.assertFalse(os.path.exists(os.path.join(self.argv_dir, "worker2.json")))

    def test_ranks_are_checked_against_the_files_workers(self):
        self.assert_error(self.launch("--worker_cmd_for=3:python3 t.py"),
                          "--worker_cmd_for=3:python3 t.py: rank '3' is not a worker (0..2)")
        self.assert_ran_nothing()

    def package(self, *flags):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"), "--out=" +
                              os.path.join(self.dir, "dist"), "--bin_dir=" + self.bin_dir, *flags],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout.split()[1]

    def test_ssh_runs_them_through_run_role_from_a_bundle_with_the_package(self):
        bundle = self.package()
        r = self.launch("--backend=ssh", "--dry_run", "--bundle=" + bundle,
                        "--worker_cmd_for=1,2:python3 train.py")
        self.assert_error(r, f"{bundle} has no Python package (python/r2sp/_core.so), which the "
                             "Python workers (worker_cmd) need: build //worker/python:_core.so, "
                             "then make the bundle again with tools/package")
        package = os.path.join(self.dir, "src", "r2sp")
        self.write(os.path.join(package, "__init__.py"), "")
        self.write(os.path.join(self.bin_dir, "worker", "python", "_core.so"), "stand-in")
        bundle = self.package("--package_dir=" + package, "--worker_files=" + self.recorder)
        r = self.launch("--backend=ssh", "--dry_run", "--bundle=" + bundle,
                        "--worker_cmd_for=1,2:python3 train.py")
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        starts = [shlex.split(shlex.split(l.split(" < (held open)")[0])[-1].split(
            "run_role --watch_stdin ")[1]) for l in r.stdout.splitlines() if "run_role" in l]
        workers = [s for s in starts if "worker" in s[:5]]
        self.assertEqual(workers[0][0], "worker")
        self.assertEqual(workers[1][:5], ["--worker_cmd=python3 train.py", "--rank=1",
                                          "--world_size=3", "--local_rank=1", "worker"])
        self.assertEqual(workers[2][:5], ["--worker_cmd=python3 train.py", "--rank=2",
                                          "--world_size=3", "--local_rank=0", "worker"])
        self.assert_ran_nothing()


class AuthTest(LaunchTest):
    def test_the_files_auth_gives_every_process_the_keys(self):
        self.write(self.cluster, CLUSTER.replace('mode = "bsp"', 'mode = "bsp"\nauth = "curve"'))
        r = self.launch()
        self.assertEqual(r.returncode, 0, r.stderr)
        keys = os.path.join(self.run_dir, "keys")
        names = [n[:-5] for n in os.listdir(self.argv_dir)]
        self.assertEqual(len(names), 1 + 2 + 3)
        for name in names:
            argv = self.argv(name)
            self.assertIn("--auth=curve", argv, name)
            self.assertIn("--keys_dir=" + keys, argv, name)
        with open(os.path.join(self.run_dir, "summary.json")) as f:
            self.assertEqual(json.load(f)["auth"], "curve")
        # The command line's --auth wins over the file's.
        r = self.launch("--auth=none")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse([a for a in self.argv("scheduler") if a.startswith("--auth")])

    def test_keys_dir_needs_curve(self):
        self.assert_error(self.launch("--keys_dir=" + self.dir), "--keys_dir needs --auth=curve")
        self.assert_ran_nothing()


class WriteDataManifestTest(unittest.TestCase):
    def test_prints_the_manifest_or_says_why_not(self):
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "set", "sub"))
            for name, body in (("a.gz", b"a"), ("sub/b.gz", b"")):
                with open(os.path.join(d, "set", name), "wb") as f:
                    f.write(body)
            launch = [sys.executable, os.path.join(ROOT, "tools", "launch")]
            r = subprocess.run(launch + ["--write_data_manifest=" + os.path.join(d, "set")],
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            self.assertEqual(r.stdout, (
                "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb  a.gz\n"
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  sub/b.gz\n"))
            r = subprocess.run(launch + ["--write_data_manifest=" + os.path.join(d, "none")],
                               capture_output=True, text=True)
            self.assertEqual((r.returncode, r.stdout, r.stderr), (1, "", (
                f"launch: error: --write_data_manifest: {d}/none is not a directory\n")))


class SshDryRunTest(LaunchTest):
    def setUp(self):
        super().setUp()
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "package"), "--out=" +
                              os.path.join(self.dir, "dist"), "--bin_dir=" + self.bin_dir],
                             capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.bundle = out.stdout.split()[1]

    def test_prints_every_step_and_runs_nothing(self):
        r = self.ssh_dry_run(self.bundle)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        lines = r.stdout.splitlines()
        name = f"r2sp-{VERSION}-cpu"
        for host in ("node-a.invalid", "node-b.invalid"):
            at = lines.index(f"# host {host}: ship the bundle unless it is there")
            check, copy, unpack = (shlex.split(l) for l in lines[at + 1:at + 4])
            self.assertEqual([check[0], check[-4], check[-2:]],
                             ["ssh", "u@" + host, ["#", "check"]])
            self.assertIn(f"/{name} 2>/dev/null && cat MANIFEST.json && ", check[-3])
            self.assertIn("sha256sum", check[-3])
            self.assertEqual(copy[0], "scp")
            self.assertEqual(copy[-4:],
                             [self.bundle, f"u@{host}:~/r2sp/{name}.tar.gz", "#", "copy"])
            self.assertIn(f"tar xzf {name}.tar.gz", unpack[-3])
            fetch = [l for l in lines if l.endswith("| tar xf - -C RUN_DIR") and host in l]
            self.assertEqual(len(fetch), 1)
        starts = [shlex.split(l.split(" < (held open)")[0]) for l in lines if "run_role" in l]
        self.assertEqual([s[-1].split("run_role --watch_stdin ")[1].split()[0] for s in starts],
                         ["scheduler", "server", "worker", "worker", "server", "worker"])
        self.assertEqual([s[-2] for s in starts],
                         ["u@node-a.invalid"] * 4 + ["u@node-b.invalid"] * 2)
        self.assertIn("--gpu=1", starts[2][-1])
        self.assertIn("--scheduler=tcp://node-a.invalid:9000", starts[5][-1])
        self.assert_ran_nothing()

    def test_curve_sends_each_host_its_roles_keys_by_path(self):
        mine = os.path.join(self.dir, "mine")
        subprocess.run([os.path.join(self.bin_dir, "common", "auth", "keygen"), mine], check=True)
        for flags, source in ((["--auth=curve"], os.path.join(self.run_dir, "keys")),
                              (["--auth=curve", "--keys_dir=" + mine], mine)):
            with self.subTest(flags=flags):
                r = self.launch("--backend=ssh", "--dry_run", "--bundle=" + self.bundle, *flags)
                self.assertEqual((r.returncode, r.stderr), (0, ""))
                self.assertNotIn("KEY-", r.stdout)  # no key's contents, ever
                sent = {}
                for line in r.stdout.splitlines():
                    if line.endswith("   # keys"):
                        tar, ssh = (shlex.split(part) for part in line[:-len("   # keys")].split(" | "))
                        self.assertEqual(tar[:5], ["tar", "cf", "-", "-C", source])
                        self.assertEqual(ssh[0], "ssh")
                        self.assertIn("umask 077", ssh[-1])
                        self.assertIn("chmod 600", ssh[-1])
                        sent[ssh[-2]] = tar[5:]
                pubs = ["scheduler.pub", "server.pub", "worker.pub"]
                self.assertEqual(sent, {
                    "u@node-a.invalid": pubs + ["scheduler.key", "server.key", "worker.key"],
                    "u@node-b.invalid": pubs + ["server.key", "worker.key"]})
                starts = [l for l in r.stdout.splitlines() if "run_role" in l]
                self.assertEqual(len(starts), 6)
                for line in starts:
                    self.assertIn('R2SP_KEYS="$HOME"/r2sp/keys/r2sp-run && ', line)
                    self.assertIn('--auth=curve --keys_dir="$R2SP_KEYS"', line)
                removals = [l for l in r.stdout.splitlines() if l.endswith("# remove the keys")]
                self.assertEqual(len(removals), 2)
                self.assertIn('rm -rf "$HOME"/r2sp/keys/r2sp-run', removals[0])
        self.assert_ran_nothing()

    # Bug: ssh_backend.run prepares the run directory before it looks at --dry_run, so a dry
    # run creates it and deletes a previous run's stats.json and scheduler.endpoint there.
    def test_dry_run_leaves_the_run_directory_alone(self):
        self.write(os.path.join(self.run_dir, "stats.json"), "{}")
        self.ssh_dry_run(self.bundle)
        self.assertTrue(os.path.exists(os.path.join(self.run_dir, "stats.json")))

    def test_a_bundle_that_is_not_one(self):
        empty = os.path.join(self.dir, "empty.tar.gz")
        with tarfile.open(empty, "w:gz") as t:
            t.add(self.bin_dir, arcname="r2sp-x")
        for bundle, message in ((self.cluster, f"{self.cluster}: not a release bundle"),
                                (empty, f"{empty} has no MANIFEST.json")):
            with self.subTest(bundle=bundle):
                self.assert_error(self.ssh_dry_run(bundle), message)
        self.assert_ran_nothing()


class ErrorsTest(LaunchTest):
    def test_a_malformed_file_is_refused_at_its_line(self):
        self.write(self.cluster, CLUSTER.replace('mode = "bsp"', 'mode = "fast"'))
        self.assert_error(self.launch(), f"{self.cluster}:2: job: mode must be one of")
        self.assert_error(self.launch(cluster=self.cluster + ".missing"),
                          "cannot read the cluster file")
        self.assert_ran_nothing()

    def test_ssh_needs_a_cluster_file(self):
        r = self.launch("--backend=ssh", cluster="")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--backend=ssh needs --cluster", r.stderr)

    @unittest.skipIf(os.path.exists(os.path.join(ROOT, "dist", f"r2sp-{VERSION}-cuda.tar.gz")),
                     "a bundle is in dist/")
    def test_no_bundle_names_tools_package(self):
        # GPUs in the file: the cuda variant is the one looked for.
        self.assert_error(self.ssh_dry_run(),
                          f"no release bundle at {ROOT}/dist/r2sp-{VERSION}-cuda.tar.gz: make it "
                          "with tools/package --variant=cuda")
        self.assert_ran_nothing()


if __name__ == "__main__":
    junit_main.main()
