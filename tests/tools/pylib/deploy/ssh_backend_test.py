"""tools/launch --backend=ssh against real sshd servers: a netcluster (network namespaces, one
per host, on a bridge) where every host runs its own sshd on a non-default port with a host key
made here, and the launcher runs in a namespace of its own. The bundle comes from tools/package
on the built binaries. Checks that a job completes with the same run directory as a local one,
that a second run does not copy the bundle again, that an unknown host key stops the launch
before anything starts, and that a failing scheduler, Ctrl-C and a killed launcher all leave
nothing running on any host (a dead worker or server: ssh_faults_test); with --auth=curve, that a job completes, that each host holds the
public keys and only its own roles' secret keys (0700 directory, 0600 files) while the job runs,
and none once it has ended or was stopped. A Python worker (worker_cmd) runs from the bundle's
worker_files/ with the environment of docs/DEPLOY.md, its flags exactly the binary's: the script
records them and becomes the bundle's worker binary with them, and the job completes. Needs root
(namespaces); skipped otherwise.

Without root: the keys' copy and removal (ssh_backend.send_keys, remove_keys) through a stand-in
ssh that runs the remote command here, and the start commands' --keys_dir."""

import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

from pylib.cluster import cluster_file, role_commands
import junit_main
from pylib.emulation import netcluster
from pylib.deploy import ssh_backend
import python_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
HOSTS = ("launcher", "node0", "node1", "node2")
with open(os.path.join(ROOT, "VERSION")) as f:
    VERSION = f.read().strip()
SSH_PORT = 2222
SSHD_CONFIG = """Port {port}
ListenAddress {address}
HostKey {dir}/host_key_{host}
PidFile {dir}/sshd_{host}.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
"""


def cannot_run():
    why = netcluster.can_run()
    if why:
        return why
    if not os.path.exists("/usr/sbin/sshd"):
        return "needs sshd (Debian package openssh-server; tools/install_deps installs it)"
    return None


def keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


PUBLIC = ["scheduler.pub", "server.pub", "worker.pub"]
# What each host of SshBackendTest.cluster_file (and KeysOverStandInSshTest) runs, so holds.
HOST_KEYS = {"node0": PUBLIC + ["scheduler.key", "server.key"],
             "node1": PUBLIC + ["server.key", "worker.key"],
             "node2": PUBLIC + ["worker.key"]}


class KeysOverStandInSshTest(unittest.TestCase):
    """send_keys and remove_keys with an `ssh` that runs the remote command on this machine."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        bin_dir = os.path.join(self.dir, "bin")
        os.makedirs(bin_dir)
        with open(os.path.join(bin_dir, "ssh"), "w") as f:
            f.write('#!/bin/bash\nexec bash -c "${@: -1}"\n')  # the remote command, here
        os.chmod(os.path.join(bin_dir, "ssh"), 0o755)
        saved = os.environ["PATH"]
        os.environ["PATH"] = bin_dir + os.pathsep + saved
        self.addCleanup(os.environ.__setitem__, "PATH", saved)
        self.keys = os.path.join(self.dir, "keys")
        os.makedirs(self.keys, mode=0o700)
        for name in PUBLIC + ["scheduler.key", "server.key", "worker.key"]:
            with open(os.path.join(self.keys, name), "w") as f:
                f.write(f"key of {name}\n")
            os.chmod(os.path.join(self.keys, name), 0o644 if name in PUBLIC else 0o600)
        bundle = os.path.join(self.dir, "r2sp-0.0.0-cpu.tar.gz")
        with tarfile.open(bundle, "w:gz") as t:
            info = tarfile.TarInfo("r2sp-0.0.0-cpu/MANIFEST.json")
            info.size = 3
            t.addfile(info, io.BytesIO(b"{}\n"))
        hosts = "".join(f'[[host]]\nname = "{h}"\nworkdir = "{self.dir}/{h}"\n{extra}\n'
                        for h, extra in (("node0", "scheduler = true\nservers = 1"),
                                         ("node1", "servers = 1\nworkers = 1"),
                                         ("node2", "workers = 1")))
        cluster = cluster_file.parse('[job]\nname = "j"\nmode = "bsp"\n' + hosts)
        self.plan = ssh_backend.Plan(cluster, bundle, "j-run", {}, self.keys)

    def tearDown(self):
        self._tmp.cleanup()

    def test_each_host_gets_only_its_roles_keys_and_loses_them_at_the_end(self):
        for host in self.plan.cluster.hosts:
            ssh_backend.send_keys(self.plan, host)
            there = os.path.join(self.dir, host.name, "keys", "j-run")
            self.assertEqual(mode(there), 0o700)
            self.assertEqual(mode(os.path.dirname(there)), 0o700)
            self.assertEqual(sorted(os.listdir(there)), sorted(HOST_KEYS[host.name]), host.name)
            for name in os.listdir(there):
                self.assertEqual(mode(os.path.join(there, name)), 0o600, name)
                with open(os.path.join(there, name)) as f:
                    self.assertEqual(f.read(), f"key of {name}\n")
            ssh_backend.send_keys(self.plan, host)  # again: the same, no leftovers
            self.assertEqual(sorted(os.listdir(there)), sorted(HOST_KEYS[host.name]))
        for host in self.plan.cluster.hosts:
            ssh_backend.remove_keys(self.plan, host)
            self.assertFalse(os.path.exists(os.path.join(self.dir, host.name, "keys", "j-run")))

    def test_every_process_is_told_where_its_hosts_keys_are(self):
        for _, host, process in role_commands.scheduler_first(self.plan.cluster):
            command = self.plan.start(host, process)[-1]
            self.assertIn(f"R2SP_KEYS={self.dir}/{host.name}/keys/j-run && ", command)
            self.assertIn('--auth=curve --keys_dir="$R2SP_KEYS"', command)
            self.assertNotIn("key of", command)

    def test_the_bundle_check_wants_the_same_manifest_and_every_file_intact(self):
        manifest = json.dumps({"version": "1", "files": {"bin/worker": "a" * 64, "lib/x.so": "b" * 64}})
        marker = "--- r2sp sha256 ---\n"
        sums = f"{'a' * 64}  ./bin/worker\n{'b' * 64}  ./lib/x.so\n{'c' * 64}  ./env.sh\n"
        self.assertTrue(ssh_backend.installed_intact(manifest + "\n" + marker + sums, manifest))
        self.assertFalse(ssh_backend.installed_intact("", manifest))  # nothing there
        self.assertFalse(ssh_backend.installed_intact(manifest + "\n", manifest))  # no sums
        self.assertFalse(ssh_backend.installed_intact(
            manifest + "\n" + marker + sums.replace("a" * 64, "d" * 64), manifest))
        self.assertFalse(ssh_backend.installed_intact(
            manifest + "\n" + marker + f"{'a' * 64}  ./bin/worker\n", manifest))  # one missing
        other = json.dumps({"version": "2", "files": {"bin/worker": "a" * 64, "lib/x.so": "b" * 64}})
        self.assertFalse(ssh_backend.installed_intact(other + "\n" + marker + sums, manifest))

    def test_no_keys_no_key_commands(self):
        plan = ssh_backend.Plan(self.plan.cluster, self.plan.tarball, "j-run", {})
        host = plan.cluster.hosts[0]
        self.assertIsNone(plan.send_keys(host))
        self.assertIsNone(plan.remove_keys(host))
        self.assertNotIn("--auth", plan.start(host, host.processes[0])[-1])
        self.assertNotIn("keys", plan.describe())


@unittest.skipIf(cannot_run(), cannot_run() or "")
class PythonWorkerPlanTest(unittest.TestCase):
    """The ssh command of a Python worker, exactly (no root needed)."""

    def test_the_start_command(self):
        with tempfile.TemporaryDirectory() as directory:
            tarball = os.path.join(directory, "r2sp-0.0.0-cpu.tar.gz")
            with tarfile.open(tarball, "w:gz") as t:
                info = tarfile.TarInfo("r2sp-0.0.0-cpu/MANIFEST.json")
                info.size = 2
                t.addfile(info, io.BytesIO(b"{}"))
            cluster = cluster_file.parse('[job]\nmode = "bsp"\nworkdir = "~/w"\n'
                                         '[[host]]\nname = "h0"\nscheduler = true\nservers = 1\n'
                                         '[[host]]\nname = "h1"\nworkers = 1\n'
                                         'worker_cmd = "python3 train.py --lr=0.1"\n')
            plan = ssh_backend.Plan(cluster, tarball, "r2sp-run", {"worker": ["--seed=1"]}, keys="/k")
            h1 = cluster.hosts[1]
            self.assertEqual(plan.start(h1, h1.processes[0]), [
                "ssh", "-p", "22", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o",
                "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "h1",
                'mkdir -p "$HOME"/w/runs/r2sp-run && R2SP_OUT="$HOME"/w/runs/r2sp-run && '
                'R2SP_KEYS="$HOME"/w/keys/r2sp-run && exec "$HOME"/w/r2sp-0.0.0-cpu/share/r2sp/'
                "deploy/run_role --watch_stdin '--worker_cmd=python3 train.py --lr=0.1' --rank=0 "
                "--world_size=1 --local_rank=0 worker --bind=tcp://0.0.0.0:9200 "
                '--advertise_host=h1 --auth=curve --keys_dir="$R2SP_KEYS" '
                '--scheduler=tcp://h0:9000 --metrics="$R2SP_OUT"/metrics_worker0.jsonl '
                '--timeline="$R2SP_OUT"/timeline_worker0.json --model_dir="$R2SP_OUT"/model '
                "--seed=1"])


class SshHosts(unittest.TestCase):
    """The hosts (sshd in network namespaces), the bundle, and helpers to write a cluster file
    and launch it; ssh_faults_test and staging_test share them."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ssh_backend_test.")
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
        cls.cluster = netcluster.Cluster(HOSTS, {})
        cls.cluster.up()
        keygen(os.path.join(cls.dir, "id_ed25519"))
        os.rename(os.path.join(cls.dir, "id_ed25519.pub"), os.path.join(cls.dir, "authorized_keys"))
        known = []
        for host in HOSTS[1:]:
            keygen(os.path.join(cls.dir, f"host_key_{host}"))
            address = cls.cluster.addresses[host]
            with open(os.path.join(cls.dir, f"host_key_{host}.pub")) as f:
                known.append(f"[{address}]:{SSH_PORT} {f.read().strip()}")
            config = os.path.join(cls.dir, f"sshd_{host}.conf")
            with open(config, "w") as f:
                f.write(SSHD_CONFIG.format(port=SSH_PORT, address=address, dir=cls.dir, host=host))
            subprocess.run(cls.cluster.exec_prefix(host) + ["/usr/sbin/sshd", "-f", config], check=True)
        with open(os.path.join(cls.dir, "known_hosts"), "w") as f:
            f.write("\n".join(known) + "\n")
        out = subprocess.run([os.path.join(ROOT, "tools", "package"), "--bin_dir=" + BIN_DIR,
                              "--out=" + cls.dir], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        cls.bundle = out.stdout.split()[1]

    @classmethod
    def tearDownClass(cls):
        cls.cluster.down()
        shutil.rmtree(cls.dir, ignore_errors=True)  # bundles unpacked per host: 100s of MB

    def tearDown(self):
        # One failing test must not leave processes (and their ports) to the next one.
        for host in HOSTS:
            netcluster.kill_processes(self.cluster.ns(host), keep=("sshd",))

    def leftover_pids(self, host):
        """{pid: command name} of the processes other than sshd in `host`'s namespace."""
        left = {}
        for pid in netcluster.namespace_pids(self.cluster.ns(host)):
            try:
                with open(f"/proc/{pid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue
            if name != "sshd":
                left[pid] = name
        return left

    def cluster_file(self, worker_flags="", known_hosts="known_hosts", iterations=5, workdirs="hosts",
                     node2="", mode="bsp", flags=None, job=""):
        """A 3-host job: node0 runs the scheduler and a server, node1 a server and a worker,
        node2 a worker; each host unpacks into its own directory under DIR/WORKDIRS (the hosts
        share this machine's files). `flags`: the file's [flags] lines (default: the synthetic
        model's worker flags, ITERATIONS iterations); `job`: more [job] lines."""
        a = self.cluster.addresses
        hosts = "".join(f"""
[[host]]
name = "{a[h]}"
workdir = "{self.dir}/{workdirs}/{h}"
{extra}
""" for h, extra in (("node0", "scheduler = true\nservers = 1"),
                     ("node1", "servers = 1\nworkers = 1" + (
                         f"\nworker_flags = {json.dumps(worker_flags)}" if worker_flags else "")),
                     ("node2", "workers = 1" + node2)))
        if flags is None:
            flags = (f'worker = "--model=synthetic --model_mb=1 --layers=4 --iterations={iterations} '
                     '--compute_ms=20 --log_every=1"')
        text = f"""[job]
name = "ssh-test"
mode = "{mode}"
{job}

[flags]
{flags}

[ssh]
user = "root"
port = {SSH_PORT}
identity = "{self.dir}/id_ed25519"
options = ["StrictHostKeyChecking=yes", "UserKnownHostsFile={self.dir}/{known_hosts}"]
{hosts}"""
        path = os.path.join(self.dir, "cluster.toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def launch(self, cluster, run_dir, timeout=120, flags=(), bundle=None):
        return subprocess.run(self.launch_argv(cluster, run_dir, flags, bundle), capture_output=True,
                              text=True, timeout=timeout)

    def launch_argv(self, cluster, run_dir, flags=(), bundle=None):
        return self.cluster.exec_prefix("launcher") + [
            sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + cluster,
            "--backend=ssh", "--bundle=" + (bundle or self.bundle), "--run_dir=" + run_dir,
            "--timeout=90", "--bin_dir=" + BIN_DIR, *flags]

    def leftovers(self, seconds=15):
        """Processes other than sshd still in the hosts' namespaces after up to `seconds`."""
        deadline = time.time() + seconds
        while True:
            left = [f"{host}:{name}({pid})" for host in HOSTS
                    for pid, name in self.leftover_pids(host).items()]
            if not left or time.time() > deadline:
                return left
            time.sleep(0.2)


class SshBackendTest(SshHosts):
    def test_job_completes_and_a_second_run_reuses_the_bundle(self):
        cluster = self.cluster_file(workdirs="fresh")  # hosts that have no bundle yet
        run_dir = os.path.join(self.dir, "run1")
        r = self.launch(cluster, run_dir)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("copied to 3", r.stdout)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["mode"], summary["servers"], summary["workers"]), ("bsp", 2, 2))
        self.assertEqual(summary["iterations"], 5)
        self.assertGreater(summary["bytes_pushed"], 0)
        for name in ("scheduler", "server0", "server1", "worker0", "worker1"):
            self.assertTrue(os.path.getsize(os.path.join(run_dir, name + ".log")) > 0, name)
        for name in ("stats.json", "metrics_worker0.jsonl", "metrics_worker1.jsonl", "timeline.json"):
            self.assertTrue(os.path.exists(os.path.join(run_dir, name)), name)
        self.assertEqual(self.leftovers(), [])
        r = self.launch(cluster, os.path.join(self.dir, "run2"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("copied to 0", r.stdout)

    def test_a_python_worker_runs_from_the_bundle_with_the_binarys_flags(self):
        records = os.path.join(self.dir, "records")
        os.makedirs(records)
        path = self.cluster_file(workdirs="python", node2=(
            f'\nworker_cmd = "{python_bundle.COMMAND.format(records=records)}"'))
        run_dir = os.path.join(self.dir, "run_python")
        r = self.launch(path, run_dir, bundle=python_bundle.make(self.dir, BIN_DIR))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"], summary["iterations"]),
                         (True, 2, 5))
        self.assertEqual(os.listdir(records), ["1.json"])
        with open(os.path.join(records, "1.json")) as f:
            got = json.load(f)
        cluster = cluster_file.load(path)
        node2 = cluster.hosts[2]
        bundle = os.path.join(self.dir, "python", "node2", f"r2sp-{VERSION}-cpu")
        out = os.path.join(self.dir, "python", "node2", "runs", "ssh-test-run_python")
        args = role_commands.run_role_args(cluster, node2, node2.processes[0], out)
        self.assertEqual(got, python_bundle.expected(bundle, self.cluster.addresses["node0"], 9000,
                                                     1, 2, 0, args[args.index("worker") + 1:]))
        self.assertTrue(os.path.exists(os.path.join(run_dir, "metrics_worker1.jsonl")))
        self.assertEqual(self.leftovers(), [])

    def test_unknown_host_key_stops_the_launch_before_anything_starts(self):
        with open(os.path.join(self.dir, "empty_known_hosts"), "w"):
            pass
        r = self.launch(self.cluster_file(known_hosts="empty_known_hosts"), os.path.join(self.dir, "run3"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("Host key verification failed", r.stderr)
        self.assertEqual(self.leftovers(), [])

    def test_failing_scheduler_stops_every_host(self):
        # The scheduler decides the job's outcome (a dead worker is recorded: ssh_faults_test).
        run_dir = os.path.join(self.dir, "run4")
        r = self.launch(self.cluster_file(), run_dir, flags=["--scheduler_flags=--no_such_flag"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("launch: error: the scheduler exited with status 1: the job did not "
                      f"complete; see {run_dir}/scheduler.log", r.stderr)
        self.assertEqual(self.leftovers(), [])

    def interrupt_running_job(self, signum, flags=(), while_running=None, name=None):
        """Starts a long job, waits for the workers' first steps, calls while_running(run_dir)
        if given, sends `signum` to the launcher; returns its exit status."""
        run_dir = os.path.join(self.dir, name or f"run_signal{signum}")
        proc = subprocess.Popen(self.launch_argv(self.cluster_file(iterations=100000), run_dir, flags),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            log = os.path.join(run_dir, "worker1.log")
            while time.time() < deadline and not (os.path.exists(log) and "iteration" in open(log).read()):
                time.sleep(0.2)
            self.assertLess(time.time(), deadline, "the workers never started")
            if while_running:
                while_running(run_dir)
            proc.send_signal(signum)
            return proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def test_ctrl_c_stops_every_host(self):
        self.assertEqual(self.interrupt_running_job(signal.SIGINT), 130)
        self.assertEqual(self.leftovers(), [])

    def test_killed_launcher_leaves_nothing_running(self):
        self.assertEqual(self.interrupt_running_job(signal.SIGKILL), -signal.SIGKILL)
        self.assertEqual(self.leftovers(), [])

    def host_keys(self, run_dir):
        """The keys directory on each host (they share this machine's files) for `run_dir`."""
        return {h: os.path.join(self.dir, "hosts", h, "keys", "ssh-test-" + os.path.basename(run_dir))
                for h in HOSTS[1:]}

    def test_curve_job_completes_and_leaves_no_keys(self):
        run_dir = os.path.join(self.dir, "run_curve")
        r = self.launch(self.cluster_file(), run_dir, flags=["--auth=curve"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["auth"], summary["iterations"]), ("curve", 5))
        self.assertEqual(mode(os.path.join(run_dir, "keys")), 0o700)
        keys = {}
        for name in os.listdir(os.path.join(run_dir, "keys")):
            with open(os.path.join(run_dir, "keys", name)) as f:
                keys[name] = f.read().strip()
        for name in os.listdir(run_dir):  # nothing fetched or written holds a key
            path = os.path.join(run_dir, name)
            if os.path.isfile(path):
                with open(path, errors="replace") as f:
                    text = f.read()
                for key_file, key in keys.items():
                    self.assertNotIn(key, text, f"{key_file} in {name}")
        for host, there in self.host_keys(run_dir).items():
            self.assertFalse(os.path.exists(there), host)
        self.assertEqual(self.leftovers(), [])

    def test_curve_hosts_hold_only_their_roles_keys_until_ctrl_c(self):
        seen = {}

        def look(run_dir):
            for host, there in self.host_keys(run_dir).items():
                seen[host] = (mode(there), sorted(os.listdir(there)),
                              {mode(os.path.join(there, n)) for n in os.listdir(there)})

        self.assertEqual(self.interrupt_running_job(signal.SIGINT, ["--auth=curve"], look,
                                                    name="run_curve_signal"), 130)
        self.assertEqual(seen, {h: (0o700, sorted(HOST_KEYS[h]), {0o600}) for h in HOSTS[1:]})
        for host, there in self.host_keys(os.path.join(self.dir, "run_curve_signal")).items():
            self.assertFalse(os.path.exists(there), host)
        self.assertEqual(self.leftovers(), [])


if __name__ == "__main__":
    junit_main.main()
