"""tools/launch --backend=slurm against a real Slurm: munged, slurmctld and two slurmd (two
nodes, both on this machine) started by tests/tools/slurm_fixture.sh. A job completes as one
batch job with a step per process and leaves the same run directory as a local one; a failing
scheduler fails the job and stops every step; a killed worker's step is recorded and the job
completes, and with --max_restarts=1 its replacement is a new step on the node that joins the
running job; Ctrl-C cancels it; nothing is left running. The
script's rendering (the #SBATCH lines, one step per process, the scheduler found through
SLURM_JOB_NODELIST, --auth=curve's keys directory on the shared storage) is checked without
Slurm, and so is a Python worker's step line (worker_cmd: run_role --worker_cmd, its ranks).
With Slurm: a job with --auth=curve completes and its keys leave the shared storage, and a job
whose workers are Python workers (--worker_cmd) runs them from the bundle's worker_files/ with
exactly the binary's flags (python_bundle.py) and completes. With a [data] table the script
stages the data set once per node with workers before any step (checked without Slurm too), a
second job reuses it, and a wrong sha256 fails the job before any process starts, naming the
host. The Slurm part needs root and Debian's slurm-wlm and munge (skipped otherwise)."""

import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

from pylib.cluster import cluster_file, role_commands
import junit_main
from pylib.deploy import slurm_backend, slurm_steps
import python_bundle
from pylib.job import errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURE = os.path.join(ROOT, "tests", "tools", "slurm_fixture.sh")
CLUSTER = """[job]
name = "slurm-test"
mode = "bsp"
workdir = "{workdir}"

[ports]
scheduler = {ports[0]}
server = {ports[1]}
worker = {ports[2]}

[flags]
worker = "--model=synthetic --model_mb=1 --layers=4 --iterations={iterations} --compute_ms=20"

[slurm]
time = "00:10:00"
sbatch_options = ["--exclusive"]

[[host]]
name = "a"
{address}scheduler = true
servers = 1

[[host]]
name = "b"
{address}workers = 2
{worker_flags}"""


def free_run(count):
    """The first of `count` consecutive ports that were all free a moment ago."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue


def free_ports():
    """The scheduler's port, the server's, and the first of the two workers', all different (a
    port freed a moment ago may be handed out again)."""
    while True:
        ports = [free_run(1), free_run(1), free_run(2)]
        if len({ports[0], ports[1], ports[2], ports[2] + 1}) == 4:
            return ports


def cluster_text(workdir, iterations=5, worker_flags="", address=True):
    return CLUSTER.format(workdir=workdir, ports=free_ports(), iterations=iterations,
                          address='address = "127.0.0.1"\n' if address else "",
                          worker_flags=f'worker_flags = "{worker_flags}"\n' if worker_flags else "")


# How long a job's steps may take to start through srun and slurmd and reach a worker's 20th
# iteration (under a second once running; the start waits for the nodes the last job held).
STEPS_START_S = 150


class BatchScriptTest(unittest.TestCase):
    def script(self, **kwargs):
        cluster = cluster_file.parse(cluster_text("/shared/r2sp", **kwargs))
        return slurm_backend.batch_script(cluster, "/shared/r2sp/r2sp-1-cpu", "/shared/r2sp/runs/x")

    def steps(self, auth=False, **kwargs):
        """{name: (node, command)} of the steps."""
        cluster = cluster_file.parse(cluster_text("/shared/r2sp", **kwargs))
        return slurm_backend.step_commands(cluster, "/shared/r2sp/r2sp-1-cpu", "/shared/r2sp/runs/x",
                                           {"worker": ["--seed=7"]}, auth)

    def test_curve_points_every_step_at_the_shared_keys(self):
        steps = self.steps(auth=True)
        self.assertEqual(len(steps), 4)
        for _, command in steps.values():
            self.assertIn('--auth=curve --keys_dir="$R2SP_OUT"/keys', command)
        self.assertNotIn("--auth", str(self.steps()))

    def test_the_script_publishes_the_nodes_and_holds_the_allocation_for_the_steps(self):
        lines = self.script().splitlines()
        self.assertEqual(lines[-2:], [
            'printf "%s\\n" "${nodes[@]}" > "$R2SP_OUT/nodes.tmp" && mv "$R2SP_OUT/nodes.tmp" '
            '"$R2SP_OUT/nodes"', 'while [ ! -e "$R2SP_OUT/release" ]; do sleep 1; done'])
        self.assertFalse([l for l in lines if l.lstrip().startswith("srun")])  # no [data] table
        self.assertEqual(slurm_steps.step_argv("42", 1, "exec x"), [
            "srun", "--jobid=42", "--nodes=1", "--ntasks=1", "--relative=1", "--overlap",
            "--input=none", "bash", "-c", "exec x"])

    def test_keys_are_copied_for_the_steps_and_removed_after(self):
        d = tempfile.mkdtemp(prefix="slurm_keys_test.")
        keys, out = os.path.join(d, "run", "keys"), os.path.join(d, "shared", "runs", "x")
        os.makedirs(keys, mode=0o700)
        os.makedirs(out)
        for name in ("scheduler", "server", "worker"):
            for suffix, mode in (("pub", 0o644), ("key", 0o600)):
                with open(os.path.join(keys, f"{name}.{suffix}"), "w") as f:
                    f.write(f"{name}.{suffix}\n")
                os.chmod(os.path.join(keys, f"{name}.{suffix}"), mode)
        installed = slurm_backend.install_keys(keys, out)
        self.assertEqual(installed, os.path.join(out, "keys"))
        self.assertEqual(stat.S_IMODE(os.stat(installed).st_mode), 0o700)
        self.assertEqual(len(os.listdir(installed)), 6)
        for name in os.listdir(installed):
            self.assertEqual(stat.S_IMODE(os.stat(os.path.join(installed, name)).st_mode), 0o600)
        # The results copied into RUN_DIR are the steps' files, never the keys directory.
        with open(os.path.join(out, "worker0.log"), "w") as f:
            f.write("iteration 1\n")
        results = os.path.join(d, "results")
        os.makedirs(results)
        slurm_backend.copy_results(out, results)
        self.assertEqual(os.listdir(results), ["worker0.log"])
        slurm_backend.remove_keys(keys, installed)
        self.assertFalse(os.path.exists(installed))
        self.assertEqual(len(os.listdir(keys)), 6)  # the launcher's own stay
        # A run directory on the shared storage: the keys are already where the steps look.
        self.assertEqual(slurm_backend.install_keys(keys, os.path.dirname(keys)), keys)
        slurm_backend.remove_keys(keys, keys)
        self.assertEqual(len(os.listdir(keys)), 6)

    def test_one_node_per_host_and_the_table_options(self):
        text = self.script()
        for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2", "#SBATCH --time=00:10:00",
                     "#SBATCH --exclusive", "#SBATCH --job-name=slurm-test",
                     "#SBATCH --signal=TERM@120"):
            self.assertIn(line, text)

    def test_the_steps_signal_before_the_end_is_the_tables(self):
        def script(table_line):
            text = cluster_text("/shared/r2sp").replace('[slurm]\n', '[slurm]\n' + table_line)
            return slurm_backend.batch_script(cluster_file.parse(text), "/shared/r2sp/b",
                                              "/shared/r2sp/runs/x")
        self.assertIn("#SBATCH --signal=TERM@300\n", script("signal_seconds = 300\n"))
        with self.assertRaisesRegex(cluster_file.ClusterFileError,
                                    "signal_seconds must be an integer >= 1, not integer 0"):
            script("signal_seconds = 0\n")

    def test_one_step_per_process_scheduler_first(self):
        steps = self.steps()
        self.assertEqual([(name, node) for name, (node, _) in steps.items()],
                         [("scheduler", 0), ("server0", 0), ("worker0", 1), ("worker1", 1)])
        self.assertTrue(steps["worker0"][1].endswith(' --seed=7'), steps["worker0"])

    def test_python_workers_run_their_command_through_run_role(self):
        text = CLUSTER.format(workdir="/shared/r2sp", ports=(9000, 9100, 9200), iterations=5,
                              address="", worker_flags='worker_flags = "--host=b"\n').replace(
            'workers = 2', 'workers = 2\nworker_cmd = "python3 train.py --lr=0.1"')
        steps = slurm_backend.step_commands(cluster_file.parse(text), "/shared/r2sp/r2sp-1-cpu",
                                            "/shared/r2sp/runs/x", {"worker": ["--seed=7"]}, False)
        self.assertEqual(steps["worker1"], (1, 
            "mapfile -t nodes < /shared/r2sp/runs/x/nodes && R2SP_OUT=/shared/r2sp/runs/x && exec "
            "/shared/r2sp/r2sp-1-cpu/share/r2sp/deploy/run_role "
            "'--worker_cmd=python3 train.py --lr=0.1' --rank=1 --world_size=2 "
            '--local_rank=1 worker --bind=tcp://0.0.0.0:9201 --advertise_host="${nodes[1]}" '
            '--scheduler=tcp://"${nodes[0]}":9000 --metrics="$R2SP_OUT"/metrics_worker1.jsonl '
            '--timeline="$R2SP_OUT"/timeline_worker1.json --model_dir="$R2SP_OUT"/model '
            "--model=synthetic --model_mb=1 --layers=4 --iterations=5 --compute_ms=20 --host=b "
            "--seed=7"))
        self.assertEqual([shlex.split(command)[10] for _, command in steps.values()][:3],
                         ["scheduler", "server", "--worker_cmd=python3 train.py --lr=0.1"])

    def test_without_addresses_the_nodes_come_from_slurm(self):
        self.assertIn('scontrol show hostnames "$SLURM_JOB_NODELIST"', self.script(address=False))
        worker = self.steps(address=False)["worker0"][1]
        self.assertIn('--scheduler=tcp://"${nodes[0]}":', worker)
        self.assertIn('--advertise_host="${nodes[1]}"', worker)

    def test_shell_word_keeps_only_the_node_references_live(self):
        self.assertEqual(slurm_backend.shell_word('a"$b`c'), """'a"$b`c'""")
        self.assertEqual(slurm_backend.shell_word("--x=${nodes[3]}/$R2SP_OUT"),
                         '--x="${nodes[3]}"/"$R2SP_OUT"')
        self.assertEqual(slurm_backend.shell_word("it's $R2SP_OUT"), "'it'\"'\"'s '\"$R2SP_OUT\"")


DATA = """
[data]
name = "set"
source = "file://{source}"
cache = "{cache}"
[[host]]
name = "a"
address = "127.0.0.1"
scheduler = true
workers = 1
data_cache = "{directory}/a"
[[host]]
name = "b"
address = "127.0.0.1"
servers = 1
workers = 1
worker_flags = "--bind=tcp://0.0.0.0:{ports[3]}"
"""  # b's worker binds a port of its own: both nodes are this machine
SET = {"x.bin": b"x" * 100, "d/y.bin": b"y"}


def data_cluster(directory, manifest, ports, cache="~/cache"):
    """A job of two nodes with a worker each and a [data] table (SET in DIRECTORY/source)."""
    with open(os.path.join(directory, "set.sha256"), "w") as f:
        f.write(manifest)
    text = CLUSTER.split("[[host]]")[0].format(workdir=os.path.join(directory, "shared"),
                                               ports=ports, iterations=3)
    path = os.path.join(directory, "data.toml")
    with open(path, "w") as f:
        f.write(text + DATA.format(source=os.path.join(directory, "source"), cache=cache,
                                   directory=directory, ports=ports))
    return path


def make_set(directory):
    """SET under DIRECTORY/source; its manifest."""
    for name, data in SET.items():
        os.makedirs(os.path.dirname(os.path.join(directory, "source", name)), exist_ok=True)
        with open(os.path.join(directory, "source", name), "wb") as f:
            f.write(data)
    return "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in SET.items())


class DataStagingScriptTest(unittest.TestCase):
    def test_one_staging_step_per_node_with_workers_before_the_steps(self):
        with tempfile.TemporaryDirectory() as d:
            cluster = cluster_file.load(data_cluster(d, make_set(d), (9000, 9100, 9200, 9300)))
            script = slurm_backend.batch_script(cluster, "/s/r2sp-1-cpu", "/s/runs/x")
            steps = slurm_backend.step_commands(cluster, "/s/r2sp-1-cpu", "/s/runs/x", {})
        digest = cluster.data.dir_name
        lines = script.splitlines()
        stages = [l for l in lines if l.startswith("stage ")]
        self.assertEqual(stages, [
            f"stage a 0 /s/r2sp-1-cpu/share/r2sp/deploy/stage_data --source=file://{d}/source "
            f'--manifest="$R2SP_OUT"/data.sha256 --target={d}/a/{digest} '
            """'--host=a ('"${nodes[0]}"')'""",
            f"stage b 1 /s/r2sp-1-cpu/share/r2sp/deploy/stage_data --source=file://{d}/source "
            f'--manifest="$R2SP_OUT"/data.sha256 --target="$HOME"/cache/{digest} '
            """'--host=b ('"${nodes[1]}"')'"""])
        # The nodes are published for the steps only once the staging succeeded.
        self.assertEqual(lines[-5], '[ -e "$R2SP_OUT/staging.failed" ] && exit 1')
        self.assertIn(f"--data_dir={d}/a/{digest} --model=synthetic", steps["worker0"][1])
        self.assertIn(f'--data_dir="$HOME"/cache/{digest} --model=synthetic', steps["worker1"][1])


class InstallBundleTest(unittest.TestCase):
    """install_bundle: unpacks through archive.safe_extract, and again only when the bundle there
    is not the same one intact."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="install_bundle_test.")
        self.addCleanup(shutil.rmtree, self.dir)
        self.workdir = os.path.join(self.dir, "work")

    def tarball(self, files):
        """r2sp-1-cpu.tar.gz holding `files` ({path: bytes}) and a manifest of those under the
        bundle's directory."""
        import hashlib
        import io
        import tarfile
        inside = {n: d for n, d in files.items() if n.startswith("r2sp-1-cpu/")}
        manifest = json.dumps({"version": "1", "files": {
            n[len("r2sp-1-cpu/"):]: hashlib.sha256(d).hexdigest() for n, d in inside.items()}}).encode()
        path = os.path.join(self.dir, "r2sp-1-cpu.tar.gz")
        with tarfile.open(path, "w:gz") as t:
            for name, data in [("r2sp-1-cpu/MANIFEST.json", manifest)] + list(files.items()):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return path

    def test_unpacked_once_and_again_when_damaged(self):
        tarball = self.tarball({"r2sp-1-cpu/bin/worker": b"w"})
        target = slurm_backend.install_bundle(tarball, self.workdir)
        self.assertEqual(target, os.path.join(self.workdir, "r2sp-1-cpu"))
        worker = os.path.join(target, "bin", "worker")
        first = os.stat(worker).st_ino
        slurm_backend.install_bundle(tarball, self.workdir)
        self.assertEqual(os.stat(worker).st_ino, first)  # intact: left alone
        with open(worker, "wb") as f:
            f.write(b"damaged")
        slurm_backend.install_bundle(tarball, self.workdir)
        with open(worker, "rb") as f:
            self.assertEqual(f.read(), b"w")

    def test_a_crafted_bundle_writes_nothing_outside(self):
        tarball = self.tarball({"r2sp-1-cpu/bin/worker": b"w", "r2sp-1-cpu/../../escape": b"x"})
        with self.assertRaises(errors.JobError) as e:
            slurm_backend.install_bundle(tarball, self.workdir)
        self.assertEqual(str(e.exception), f"{tarball}: not unpacked: 'r2sp-1-cpu/../../escape': "
                                           "a path with '..'")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "escape")))
        self.assertFalse(os.path.exists(os.path.join(self.workdir, "r2sp-1-cpu")))


def cannot_run():
    if os.geteuid() != 0:
        return "needs root (slurmd, munged)"
    missing = [c for c in ("munged", "mungekey", "slurmctld", "slurmd", "sbatch") if not shutil.which(c)]
    return f"needs {', '.join(missing)} (Debian packages slurm-wlm and munge)" if missing else None


@unittest.skipIf(cannot_run(), cannot_run() or "")
class SlurmBackendTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="r2sp-slurm.", dir="/tmp")  # short: unix socket paths
        os.chmod(cls.dir, 0o755)  # munged wants its socket directory's parents searchable by all
        cls.slurm = os.path.join(cls.dir, "slurm")
        # Ports of their own: another Slurm (or a second run of this test) may be up.
        ctld = free_run(3)
        env = dict(os.environ, SLURM_FIXTURE_NODES="2", SLURM_FIXTURE_CTLD_PORT=str(ctld),
                   SLURM_FIXTURE_SLURMD_PORT=str(ctld + 1))
        up = subprocess.run([FIXTURE, "up", cls.slurm], env=env, capture_output=True, text=True)
        assert up.returncode == 0, up.stderr
        cls.env = dict(os.environ, SLURM_CONF=os.path.join(cls.slurm, "slurm.conf"))
        out = subprocess.run([os.path.join(ROOT, "tools", "package"),
                              "--bin_dir=" + os.environ.get("R2SP_BIN_DIR", ROOT), "--out=" + cls.dir],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        cls.bundle = out.stdout.split()[1]

    @classmethod
    def tearDownClass(cls):
        subprocess.run([FIXTURE, "down", cls.slurm], capture_output=True)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def launch_argv(self, run, flags=(), **kwargs):
        path = os.path.join(self.dir, run + ".toml")
        with open(path, "w") as f:
            f.write(cluster_text(os.path.join(self.dir, "shared"), **kwargs))
        return [sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + path,
                "--backend=slurm", "--bundle=" + self.bundle, "--run_dir=" + os.path.join(self.dir, run),
                "--timeout=120", "--bin_dir=" + os.environ.get("R2SP_BIN_DIR", ROOT), *flags]

    def leftovers(self, seconds=15):
        """Slurm jobs still queued or running, and processes running from the test's bundle."""
        deadline = time.time() + seconds
        while True:
            jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True,
                                  text=True).stdout.split()
            procs = []
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        if os.path.join(self.dir, "shared").encode() in f.read():
                            procs.append(pid)
                except OSError:
                    pass
            if (not jobs and not procs) or time.time() > deadline:
                return jobs + procs
            time.sleep(0.3)

    def worker_started(self, run, worker=0, iteration=10):
        """Whether worker `worker` of the run `run` has logged iteration `iteration` (a multiple
        of 10: it logs every 10th; its step's output streams into RUN_DIR/workerN.log)."""
        log = os.path.join(self.dir, run, f"worker{worker}.log")
        return os.path.exists(log) and f"iteration {iteration}/" in open(log).read()

    def worker_pid(self, run, worker):
        """The worker process (not its step's srun) of the run `run`."""
        metrics = os.path.join(self.dir, "shared", "runs", f"slurm-test-{run}",
                               f"metrics_worker{worker}.jsonl")
        pids = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                if self.cmdline(pid).startswith(b"/") and metrics.encode() in self.cmdline(pid)
                and os.path.basename(self.cmdline(pid).split(b"\0")[0]) == b"worker"]
        self.assertEqual(len(pids), 1, pids)
        return int(pids[0])

    def kill_worker(self, run, worker):
        """SIGKILL to the worker process (not its step's srun) of the run `run`."""
        os.kill(self.worker_pid(run, worker), signal.SIGKILL)

    @staticmethod
    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    def kill_a_worker(self, run, flags=()):
        """Runs a job of 300 bsp iterations, kills worker1's process at its iteration 20; the
        launcher's result and the summary."""
        proc = subprocess.Popen(self.launch_argv(run, flags, iterations=300), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.time() + STEPS_START_S
            while time.time() < deadline and not self.worker_started(run, 1, 20):
                time.sleep(0.1)
            self.assertLess(time.time(), deadline, "worker1 never reached iteration 20")
            self.kill_worker(run, 1)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 0, out)
        with open(os.path.join(self.dir, run, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(summary["completed"], summary)
        self.assertEqual(self.leftovers(), [])
        return [(e["process"], e["event"], e["status"]) for e in summary["events"]], summary

    def test_a_killed_workers_step_is_recorded_and_the_job_completes(self):
        events, summary = self.kill_a_worker("killed")
        self.assertEqual(events, [("worker1", "died", 137)])
        self.assertEqual(summary["deaths"], {"worker": 1, "server": 0})

    def test_a_workers_step_signalled_by_slurm_leaves_cleanly(self):
        """scancel --signal=TERM of worker1's step, as Slurm's --signal or a preemption sends it:
        the worker leaves (LEAVE), its step exits 143, and the job completes."""
        run = "preempted"
        proc = subprocess.Popen(self.launch_argv(run, iterations=300), env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.time() + STEPS_START_S
            while time.time() < deadline and not self.worker_started(run, 1, 20):
                time.sleep(0.1)
            self.assertLess(time.time(), deadline, "worker1 never reached iteration 20")
            step = self.step_of(self.worker_pid(run, 1))
            # The fixture's scancel delivers the signal and still exits 225 ("Kill job error on
            # job step id 1: Invalid job id specified": its two slurmd share this machine), so
            # what counts is what the step did with it, below.
            subprocess.run(["scancel", "--signal=TERM", step], env=self.env, capture_output=True)
            out, _ = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(proc.returncode, 0, out)
        with open(os.path.join(self.dir, run, "summary.json")) as f:
            summary = json.load(f)
        self.assertTrue(summary["completed"], summary)
        self.assertEqual([(e["process"], e["event"], e["status"]) for e in summary["events"]],
                         [("worker1", "died", 143)])
        with open(os.path.join(self.dir, run, "scheduler.log")) as f:
            log = f.read()
        self.assertRegex(log, r"worker \d+ at \S+ left the job \(signal 15\)")
        self.assertNotIn("declared dead", log)
        with open(os.path.join(self.dir, run, "stats.json")) as f:
            self.assertEqual(sorted((w["state"], w["left"]) for w in json.load(f)["workers"]),
                             [("dead", True), ("finished", False)])
        self.assertEqual(self.leftovers(), [])

    def step_of(self, pid):
        """JOB.STEP of the step the process `pid` runs in (Slurm's variables in its environment)."""
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        return f"{env[b'SLURM_JOB_ID'].decode()}.{env[b'SLURM_STEP_ID'].decode()}"

    def test_a_killed_workers_replacement_is_a_new_step_that_joins(self):
        events, summary = self.kill_a_worker("replaced", ["--max_restarts=1"])
        self.assertEqual(events, [("worker1", "died", 137), ("worker1.r1", "restarted", 137)])
        self.assertEqual(summary["restarts"], {"worker": 1, "server": 0})
        with open(os.path.join(self.dir, "replaced", "worker1.r1.log")) as f:
            self.assertIn("joined the running job", f.read())

    def test_job_completes(self):
        r = subprocess.run(self.launch_argv("ok"), env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        run_dir = os.path.join(self.dir, "ok")
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["mode"], summary["servers"], summary["workers"], summary["iterations"]),
                         ("bsp", 1, 2, 5))
        for name in ("scheduler.log", "server0.log", "worker1.log", "stats.json", "metrics_worker0.jsonl",
                     "job.sbatch", "job.steps"):
            self.assertTrue(os.path.exists(os.path.join(run_dir, name)), name)
        self.assertEqual(self.leftovers(), [])

    def data_job(self, run, manifest):
        ports = free_ports() + [free_run(1)]
        path = data_cluster(self.dir, manifest, ports, cache=os.path.join(self.dir, "cache", "b"))
        return path, subprocess.run(
            [sys.executable, os.path.join(ROOT, "tools", "launch"), "--cluster=" + path,
             "--backend=slurm", "--bundle=" + self.bundle, "--run_dir=" + os.path.join(self.dir, run),
             "--timeout=120"], env=self.env, capture_output=True, text=True, timeout=180)

    def test_data_staged_once_per_node_then_reused_and_a_wrong_sha256_fails_first(self):
        manifest = make_set(self.dir)
        path, r = self.data_job("data1", manifest)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        digest = cluster_file.load(path).data.dir_name
        for run, counts in (("data1", "reused 0, fetched 2"), ("data2", "reused 2, fetched 0")):
            if run == "data2":
                path, r = self.data_job(run, manifest)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            for host, node, cache in (("a", 1, "a"), ("b", 2, "cache/b")):
                with open(os.path.join(self.dir, run, f"stage_{host}.log")) as f:
                    self.assertRegex(f.read(), (
                        rf"^stage_data: {host} \(\S+-{node}\): {self.dir}/{cache}/{digest}: 2 "
                        rf"files verified \({counts}\)\n$"))
        bad = manifest.replace(hashlib.sha256(SET["x.bin"]).hexdigest(), "0" * 64)
        path, r = self.data_job("data_bad", bad)
        self.assertEqual(r.returncode, 1)
        self.assertRegex(r.stderr, (
            r"launch: error: staging the data set set on [ab] failed, so no process was "
            rf"started: stage_data: [ab] \(\S+\): error: file://{self.dir}/source/x.bin: sha256 "
            f"{hashlib.sha256(SET['x.bin']).hexdigest()} differs from the manifest's {'0' * 64}"))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "data_bad", "scheduler.log")))
        self.assertEqual(self.leftovers(), [])

    def test_python_workers_run_from_the_bundle_with_the_binarys_flags(self):
        records = os.path.join(self.dir, "records")
        os.makedirs(records)
        bundle = python_bundle.make(self.dir, os.environ.get("R2SP_BIN_DIR", ROOT))
        argv = self.launch_argv("python", flags=[
            "--worker_cmd=" + python_bundle.COMMAND.format(records=records)])
        argv[argv.index("--bundle=" + self.bundle)] = "--bundle=" + bundle
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(self.dir, "python", "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"], summary["iterations"]),
                         (True, 2, 5))
        cluster = cluster_file.load(os.path.join(self.dir, "python.toml"))
        b = cluster.hosts[1]
        shared = os.path.join(self.dir, "shared")
        unpacked = os.path.join(shared, os.path.basename(bundle).removesuffix(".tar.gz"))
        for rank in (0, 1):  # srun passes the submitter's environment on, PYTHONPATH too
            args = role_commands.run_role_args(cluster, b, b.processes[rank],
                                               os.path.join(shared, "runs", "slurm-test-python"))
            with open(os.path.join(records, f"{rank}.json")) as f:
                self.assertEqual(json.load(f), python_bundle.expected(
                    unpacked, "127.0.0.1", cluster.ports["scheduler"], rank, 2, rank,
                    args[args.index("worker") + 1:], self.env.get("PYTHONPATH")), rank)
        self.assertEqual(self.leftovers(), [])

    def test_curve_job_completes_and_its_keys_leave_the_shared_storage(self):
        r = subprocess.run(self.launch_argv("curve", flags=["--auth=curve"]), env=self.env,
                           capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        run_dir = os.path.join(self.dir, "curve")
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["auth"], summary["iterations"]), ("curve", 5))
        with open(os.path.join(run_dir, "job.steps")) as f:
            steps = f.read().splitlines()
        self.assertEqual(len(steps), 4)
        for step in steps:
            self.assertIn('--keys_dir="$R2SP_OUT"/keys', step)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "shared", "runs", "slurm-test-curve", "keys")))
        self.assertEqual(self.leftovers(), [])

    def test_failing_scheduler_fails_the_job_and_stops_every_step(self):
        r = subprocess.run(self.launch_argv("fail", ["--scheduler_flags=--no_such_flag"]),
                           env=self.env, capture_output=True, text=True, timeout=180)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("launch: error: the scheduler exited with status 1: the job did not "
                      f"complete; see {self.dir}/fail/scheduler.log", r.stderr)
        self.assertEqual(self.leftovers(), [])

    def test_ctrl_c_cancels_the_job(self):
        proc = subprocess.Popen(self.launch_argv("cancel", iterations=100000), env=self.env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 60
            while time.time() < deadline and not self.worker_started("cancel"):
                time.sleep(0.3)
            self.assertLess(time.time(), deadline, "the workers never started")
            proc.send_signal(signal.SIGINT)
            self.assertEqual(proc.wait(timeout=60), 130)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.assertEqual(self.leftovers(), [])


if __name__ == "__main__":
    junit_main.main()
