"""tools/pylib/job/launcher.py: per-worker flags and run_job on stand-in binaries
(small Python programs in place of the scheduler, server, worker and keygen): the summary, the
logs, deaths recorded and dead workers replaced while the scheduler lives, the scheduler's status
as the job's outcome, the servers' checkpoint flags, --resume, --auth=curve (the job's keys made
into RUN_DIR/keys with their modes, or taken from --keys_dir, passed to every process, kept by
--resume, and never written to launch.json, summary.json or a log), and that every failure is a
JobError (or the exception passed on) with every process stopped."""

import contextlib
import io
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import junit_main
from pylib.job import launcher
from pylib.job import errors, local_commands, options
from pylib.job import resume
from pylib.job import supervisor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# One stand-in for all three roles (its name says which). Flags it understands besides the
# real ones it is given: --die (scheduler: exit 1 before writing its endpoint), --sleep=S (run on
# for S seconds: by default the scheduler 0.3, so that it outlives the others, a server 0.2, a
# worker 0.1), --exit=N (exit with status N), --fail_times=N (worker: exit 1 unless it is the
# N-th replacement or later, by its metrics file's .rK). A server prints its arguments. With
# --auth=curve each checks its keys as the binaries do: exit 2 unless --keys_dir holds the three
# public keys and its role's secret key, closed to group and others.
FAKE = r'''#!PYTHON
import json, os, re, sys, time
from pylib.job import errors, options
role = os.path.basename(sys.argv[0])
flags = dict(a[2:].partition("=")[::2] for a in sys.argv[1:] if a.startswith("--"))
if flags.get("auth", "none") != "none":
    keys = flags.get("keys_dir", "")
    for name in ("scheduler.pub", "server.pub", "worker.pub", role + ".key"):
        path = os.path.join(keys, name)
        if not os.path.isfile(path) or (name.endswith(".key") and os.stat(path).st_mode & 0o077):
            print(f"bad key file {path}", file=sys.stderr)
            sys.exit(2)
if role == "scheduler":
    if "die" in flags:
        sys.exit(1)
    with open(flags["endpoint_file"], "w") as f:
        f.write("tcp://127.0.0.1:1\n")
    time.sleep(float(flags.get("sleep", 0.3)))
    n = int(flags["num_workers"])
    with open(flags["stats_json"], "w") as f:
        json.dump({"workers": [{"model": "mlp", "epochs": 1, "samples": 100, "iterations": 2,
                                "test_accuracy": 0.5 if i == 0 else -1} for i in range(n)],
                   "servers": []}, f)
elif role == "server":
    print(json.dumps(sys.argv[1:]), flush=True)
    time.sleep(float(flags.get("sleep", 0.2)))
else:
    rank = int(flags["metrics"].rsplit("worker", 1)[1].split(".")[0])
    print(f"worker {rank}: step 1", flush=True)
    print(f"worker {rank}: a warning", file=sys.stderr, flush=True)
    with open(flags["metrics"], "w") as f:
        for i in range(2):
            f.write(json.dumps({"worker": rank, "batch": 50, "compute_s": 0.01, "wait_s": 0.0,
                                "push_s": 0.0, "pull_s": 0.0, "gap_s": 0.0, "t": i}) + "\n")
    with open(flags["timeline"], "w") as f:
        json.dump([{"name": "push", "tid": rank, "ts": 0, "dur": 1}], f)
    time.sleep(float(flags.get("sleep", 0.1)))
    replacement = re.search(r"\.r(\d+)\.jsonl$", flags["metrics"])
    if int(replacement.group(1) if replacement else 0) < int(flags.get("fail_times", 0)):
        sys.exit(1)
sys.exit(int(flags.get("exit", 0)))
'''
# Long enough for the launcher to see a process that fails at once die (and start a replacement)
# while the scheduler runs, on a busy machine too.
SCHEDULER_WAITS = "--sleep=2"
# A stand-in keygen: `keygen DIR [--force]` writes random 40-character keys with the real one's
# modes (DIR 0700, secret keys 0600) and refuses to replace keys without --force.
FAKE_KEYGEN = r'''#!PYTHON
import os, random, string, sys
directory = sys.argv[1]
if os.path.exists(os.path.join(directory, "scheduler.pub")) and "--force" not in sys.argv:
    sys.exit("keygen: error: keys exist; pass --force")
os.makedirs(directory, mode=0o700, exist_ok=True)
for role in ("scheduler", "server", "worker"):
    for suffix, mode in ((".pub", 0o644), (".key", 0o600)):
        path = os.path.join(directory, role + suffix)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode), "w") as f:
            f.write("".join(random.choice(string.ascii_letters) for _ in range(40)) + "\n")
        os.chmod(path, mode)
print("wrote the keys to " + directory)
'''


def write_fake_keygen(bin_dir):
    """Puts FAKE_KEYGEN where the launcher looks for keygen under `bin_dir`."""
    path = os.path.join(bin_dir, "common", "auth", "keygen")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(FAKE_KEYGEN.replace("PYTHON", sys.executable))
    os.chmod(path, 0o755)


def key_texts(directory):
    """{file name: text} of the key files in `directory`."""
    texts = {}
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            texts[name] = f.read().strip()
    return texts


class Args:
    """tools/launch's options with their defaults."""

    def __init__(self, **kwargs):
        self.__dict__.update(vars(options.parse_args([], "")))
        self.__dict__.update(kwargs)


class PerWorkerFlagsTest(unittest.TestCase):
    def test_ranks_and_repeats(self):
        got = local_commands.per_worker_flags(["3:--compute_slowdown=2", "0:--a --b='x y'", "3:--c"])
        self.assertEqual(got, {3: ["--compute_slowdown=2", "--c"], 0: ["--a", "--b=x y"]})

    def test_none(self):
        self.assertEqual(local_commands.per_worker_flags([]), {})


class FakeBinariesTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        self.bin_dir = os.path.join(self.dir, "bin")
        for role in launcher.ROLES:
            os.makedirs(os.path.join(self.bin_dir, role))
            path = os.path.join(self.bin_dir, role, role)
            with open(path, "w") as f:
                f.write(FAKE.replace("PYTHON", sys.executable))
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        write_fake_keygen(self.bin_dir)
        self.run_dir = os.path.join(self.dir, "run")
        self.pids = {}

    def tearDown(self):
        self._tmp.cleanup()


class JobTest(FakeBinariesTest):
    """Runs jobs of the stand-ins in-process."""

    def run_job(self, during=None, **options):
        """A job of 1 server and 2 workers unless `options` say otherwise."""
        args = Args(**{"bin_dir": self.bin_dir, "run_dir": self.run_dir, "servers": 1,
                       "workers": 2, "quiet": True, **options})
        return self.run_args(args, during)

    def run_args(self, args, during=None):
        """run_job(args); what it printed is left in self.out."""
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                return launcher.run_job(args, during=during,
                                        on_start=lambda name, pid: self.pids.update({name: pid}))
        finally:
            self.out = out.getvalue()

    def read(self, name):
        with open(os.path.join(self.run_dir, name)) as f:
            return f.read()

    def summary(self):
        return json.loads(self.read("summary.json"))

    def events(self, summary):
        """(process, event, status) of each event, in order; checks their times."""
        times = [e["t"] for e in summary["events"]]
        self.assertEqual(times, sorted(times))
        self.assertTrue(all(t == round(t, 3) and t > 0 for t in times), times)
        return [(e["process"], e["event"], e["status"]) for e in summary["events"]]

    def assert_all_stopped(self):
        self.assertTrue(self.pids)
        for name, pid in self.pids.items():
            self.assertFalse(os.path.exists(f"/proc/{pid}"), name)


class RunJobTest(JobTest):
    def test_a_job_that_finishes(self):
        summary = self.run_job(worker_flags_for=["1:--sleep=0.2"])
        self.assertEqual(json.loads(self.read("summary.json")), summary)
        self.assertEqual((summary["mode"], summary["workers"], summary["servers"]), ("asp", 2, 1))
        self.assertEqual(summary["final_test_accuracy"], 0.5)
        self.assertEqual(summary["iterations"], 2)
        self.assertEqual(summary["mean_iteration_seconds"], 0.01)
        self.assertEqual(set(summary["cpu_cores"]) - {"scheduler", "server0", "worker0", "worker1"},
                         set())
        self.assertEqual(len(json.loads(self.read("timeline.json"))["traceEvents"]), 2)
        self.assertEqual((summary["completed"], summary["scheduler_status"], summary["events"]),
                         (True, 0, []))
        self.assertEqual((summary["restarts"], summary["deaths"]),
                         ({"worker": 0, "server": 0}, {"worker": 0, "server": 0}))
        self.assertEqual((summary["resumed"], summary["attempt"]), (False, 1))
        # A worker's log has its output and its errors.
        self.assertIn("worker 1: step 1", self.read("worker1.log"))
        self.assertIn("worker 1: a warning", self.read("worker1.log"))
        self.assertEqual(sorted(self.pids), ["scheduler", "server0", "worker0", "worker1"])
        # The options it ran with, for --resume.
        self.assertEqual(json.loads(self.read("launch.json"))["worker_flags_for"], ["1:--sleep=0.2"])

    def test_a_missing_binary_starts_nothing(self):
        os.remove(os.path.join(self.bin_dir, "worker", "worker"))
        with self.assertRaisesRegex(errors.JobError, "worker/worker not found; build first"):
            self.run_job()
        self.assertEqual(self.pids, {})

    def test_a_scheduler_that_exits_early(self):
        with self.assertRaisesRegex(errors.JobError, r"the scheduler exited \(1\); see .*scheduler.log"):
            self.run_job(scheduler_flags="--die")
        self.assertEqual(list(self.pids), ["scheduler"])

    def test_a_dead_worker_is_recorded_and_the_scheduler_completes_the_job(self):
        summary = self.run_job(worker_flags_for=["1:--exit=1 --sleep=0"],
                               scheduler_flags=SCHEDULER_WAITS)
        self.assertTrue(summary["completed"])
        self.assertEqual(self.events(summary), [("worker1", "died", 1)])
        self.assertEqual(summary["deaths"], {"worker": 1, "server": 0})
        self.assertEqual(summary["restarts"], {"worker": 0, "server": 0})
        self.assertIn("launch: worker1 died (status 1); no restarts left (--max_restarts=worker:0)",
                      self.out)
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "worker1.r1.log")))

    def test_a_dead_server_is_recorded_and_the_scheduler_decides(self):
        summary = self.run_job(server_flags="--exit=3", max_restarts="4",
                               scheduler_flags=SCHEDULER_WAITS)
        self.assertTrue(summary["completed"])  # the stand-in scheduler says so
        self.assertEqual(self.events(summary), [("server0", "died", 3)])
        self.assertEqual(summary["deaths"], {"worker": 0, "server": 1})
        # max_restarts="4" replaces workers only.
        self.assertIn("launch: server0 died (status 3); no restarts left (--max_restarts=server:0)",
                      self.out)

    def test_a_dead_server_of_a_bsp_job_is_not_replaced_live(self):
        summary = self.run_job(sync="bsp", server_flags="--exit=3", max_restarts="server:2",
                               scheduler_flags=SCHEDULER_WAITS)
        self.assertEqual(self.events(summary), [("server0", "died", 3)])
        self.assertEqual(summary["restarts"], {"worker": 0, "server": 0})
        self.assertIn("a bsp job's servers share its clocks: the job resumes from the checkpoints",
                      self.out)

    def test_a_dead_server_of_an_easgd_job_is_not_replaced_live(self):
        summary = self.run_job(sync="easgd", server_flags="--exit=3", max_restarts="server:2",
                               scheduler_flags=SCHEDULER_WAITS)
        self.assertEqual(self.events(summary), [("server0", "died", 3)])
        self.assertEqual(summary["restarts"], {"worker": 0, "server": 0})
        self.assertIn("an easgd job's servers share its clocks: the job resumes from the "
                      "checkpoints", self.out)

    def test_a_dead_worker_is_replaced(self):
        summary = self.run_job(max_restarts="1", scheduler_flags=SCHEDULER_WAITS,
                               worker_flags_for=["1:--fail_times=1 --sleep=0"])
        self.assertTrue(summary["completed"])
        self.assertEqual(self.events(summary), [("worker1", "died", 1), ("worker1.r1", "restarted", 1)])
        self.assertEqual(summary["restarts"], {"worker": 1, "server": 0})
        self.assertIn("launch: worker1 died (status 1); starting replacement worker1.r1", self.out)
        self.assertEqual(sorted(self.pids), ["scheduler", "server0", "worker0", "worker1", "worker1.r1"])
        # Its own log, metrics and timeline; the dead one's stay, and both are in the summary's.
        self.assertIn("worker 1: step 1", self.read("worker1.r1.log"))
        for name in ("metrics_worker1.jsonl", "metrics_worker1.r1.jsonl", "timeline_worker1.json",
                     "timeline_worker1.r1.json"):
            self.assertTrue(os.path.exists(os.path.join(self.run_dir, name)), name)
        self.assertEqual(len(json.loads(self.read("timeline.json"))["traceEvents"]), 3)

    def test_restarts_run_out(self):
        summary = self.run_job(max_restarts="worker:1,server:0", scheduler_flags=SCHEDULER_WAITS,
                               worker_flags_for=["1:--fail_times=9 --sleep=0"])
        self.assertTrue(summary["completed"])
        self.assertEqual(self.events(summary), [("worker1", "died", 1), ("worker1.r1", "restarted", 1),
                                                ("worker1.r1", "died", 1)])
        self.assertEqual(summary["deaths"], {"worker": 2, "server": 0})
        self.assertEqual(summary["restarts"], {"worker": 1, "server": 0})
        self.assertNotIn("worker1.r2", self.pids)
        self.assertIn("launch: worker1.r1 died (status 1); no restarts left", self.out)

    def test_a_scheduler_that_fails_the_job(self):
        with self.assertRaisesRegex(errors.JobError, r"the scheduler exited with status 2: the job "
                                                       r"did not complete; see .*/scheduler.log"):
            self.run_job(scheduler_flags="--exit=2", server_flags="--sleep=30",
                         worker_flags="--sleep=30")
        self.assert_all_stopped()
        summary = self.summary()
        self.assertEqual((summary["completed"], summary["scheduler_status"]), (False, 2))
        self.assertEqual(sorted(self.events(summary)), [(name, "stopped", -signal.SIGTERM)
                                                        for name in ("server0", "worker0", "worker1")])

    def test_processes_left_after_the_scheduler_are_stopped(self):
        with mock.patch.object(supervisor, "GRACE_SECONDS", 0.5):
            summary = self.run_job(worker_flags_for=["1:--sleep=30"])
        self.assert_all_stopped()
        self.assertTrue(summary["completed"])
        self.assertEqual(self.events(summary), [("worker1", "stopped", -signal.SIGTERM)])

    def test_servers_checkpoint_into_the_run_directory(self):
        self.run_job(checkpoint_every="30s")
        argv = json.loads(self.read("server0.log").splitlines()[0])
        self.assertIn(f"--checkpoint_dir={self.run_dir}/checkpoints", argv)
        self.assertIn("--checkpoint_every=30s", argv)
        self.assertNotIn("--resume", argv)

    def test_survivors_absorb_dead_workers_data_unless_workers_are_replaced(self):
        lines = launcher.describe_local(Args(run_dir="/r"))
        scheduler = [line for line in lines.splitlines() if "/scheduler/scheduler " in line][0]
        self.assertIn("--absorb_orphaned_shards --epoch_plans=/r/epoch_plans.pb", scheduler)
        for restarts in ("1", "worker:2,server:1"):
            lines = launcher.describe_local(Args(run_dir="/r", max_restarts=restarts))
            self.assertNotIn("--absorb_orphaned_shards", lines)
        # Servers replaced, workers not: their data is absorbed.
        self.assertIn("--absorb_orphaned_shards",
                      launcher.describe_local(Args(run_dir="/r", max_restarts="server:1")))

    def test_a_resumed_job_with_epoch_plans_keeps_them_whatever_its_restarts(self):
        os.makedirs(self.run_dir)
        resumed = Args(run_dir=self.run_dir, max_restarts="1", resume=self.run_dir)
        self.assertNotIn("--absorb_orphaned_shards", launcher.describe_local(resumed))
        with open(os.path.join(self.run_dir, "epoch_plans.pb"), "w") as f:
            f.write("plans")
        self.assertIn("--absorb_orphaned_shards", launcher.describe_local(resumed))

    def test_a_fresh_job_takes_up_no_earlier_runs_epoch_plans(self):
        os.makedirs(self.run_dir)
        plans = os.path.join(self.run_dir, "epoch_plans.pb")
        with open(plans, "w") as f:
            f.write("stale")
        self.run_job()
        self.assertFalse(os.path.exists(plans))

    def test_the_server_flags_checkpoint_dir_wins(self):
        lines = launcher.describe_local(Args(run_dir="/r", server_flags="--checkpoint_dir /c"))
        self.assertNotIn("--checkpoint_dir=/r/checkpoints", lines)
        self.assertIn("--checkpoint_dir /c", lines)
        self.assertNotIn("--checkpoint_every", lines)  # none set: the servers' default

    def test_a_dry_run_shows_the_checkpoint_flags(self):
        lines = launcher.describe_local(Args(run_dir="/r", servers=2, checkpoint_every="200steps"))
        servers = [line for line in lines.splitlines() if "/server/server " in line]
        self.assertEqual(len(servers), 2)
        for line in servers:
            self.assertIn("--checkpoint_dir=/r/checkpoints --checkpoint_every=200steps", line)

    def test_a_job_past_its_timeout_is_stopped(self):
        with self.assertRaisesRegex(errors.JobError, r"the job ran past --timeout=1s"):
            self.run_job(scheduler_flags="--sleep=30", worker_flags="--sleep=30", timeout=1.0)
        self.assert_all_stopped()
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "summary.json")))

    def test_an_interruption_stops_every_process_and_is_passed_on(self):
        def during():
            if len(self.pids) == 4:
                raise errors.Interrupted(2)

        with self.assertRaises(errors.Interrupted) as e:
            self.run_job(worker_flags="--sleep=30", during=during)
        self.assertEqual(e.exception.signum, 2)
        self.assert_all_stopped()

    def test_a_previous_runs_endpoint_is_not_reused(self):
        os.makedirs(self.run_dir)
        with open(os.path.join(self.run_dir, "scheduler.endpoint"), "w") as f:
            f.write("tcp://stale:1\n")
        with self.assertRaises(errors.JobError):
            self.run_job(scheduler_flags="--die")
        self.assertFalse(os.path.exists(os.path.join(self.run_dir, "scheduler.endpoint")))


class AuthTest(JobTest):
    """--auth=curve: the job's keys, where they come from, and where they never go."""

    def keys(self):
        return os.path.join(self.run_dir, "keys")

    def mode(self, path):
        return stat.S_IMODE(os.stat(path).st_mode)

    def assert_no_key_in(self, texts, names):
        """None of the key `texts` ({file: text}) appears in the run directory's files `names`."""
        for name in names:
            content = self.read(name)
            for key_file, key in texts.items():
                self.assertNotIn(key, content, f"{key_file}'s key is in {name}")

    def test_keys_made_into_the_run_directory_and_given_to_every_process(self):
        summary = self.run_job(auth="curve")  # every stand-in checks its keys, or exits 2
        self.assertTrue(summary["completed"])
        self.assertEqual(self.events(summary), [])
        self.assertEqual(summary["auth"], "curve")
        self.assertEqual(self.mode(self.keys()), 0o700)
        self.assertEqual(sorted(os.listdir(self.keys())),
                         sorted(f"{r}.{k}" for r in launcher.ROLES for k in ("key", "pub")))
        for role in launcher.ROLES:
            self.assertEqual(self.mode(os.path.join(self.keys(), role + ".key")), 0o600)
        argv = json.loads(self.read("server0.log").splitlines()[0])
        self.assertIn("--auth=curve", argv)
        self.assertIn("--keys_dir=" + self.keys(), argv)
        self.assertIn("auth=curve, keys in " + self.keys(), self.out)
        logs = [n for n in os.listdir(self.run_dir) if n.endswith((".log", ".json", ".jsonl"))]
        self.assertIn("launch.json", logs)
        self.assertIn("summary.json", logs)
        self.assert_no_key_in(key_texts(self.keys()), logs)
        self.assertEqual(json.loads(self.read("launch.json"))["auth"], "curve")

    def test_without_auth_no_keys(self):
        summary = self.run_job()
        self.assertEqual(summary["auth"], "none")
        self.assertFalse(os.path.exists(self.keys()))
        argv = json.loads(self.read("server0.log").splitlines()[0])
        self.assertFalse([a for a in argv if a.startswith(("--auth", "--keys_dir"))])

    def test_a_new_job_in_the_same_run_directory_gets_new_keys(self):
        self.run_job(auth="curve")
        first = key_texts(self.keys())
        self.run_job(auth="curve")
        second = key_texts(self.keys())
        self.assertEqual(sorted(first), sorted(second))
        self.assertFalse(set(first.values()) & set(second.values()))

    def test_keys_dir_is_used_as_it_is(self):
        mine = os.path.join(self.dir, "mine")
        subprocess.run([os.path.join(self.bin_dir, "common", "auth", "keygen"), mine], check=True,
                       capture_output=True)
        before = key_texts(mine)
        self.assertTrue(self.run_job(auth="curve", keys_dir=mine)["completed"])
        self.assertFalse(os.path.exists(self.keys()))
        self.assertEqual(key_texts(mine), before)
        argv = json.loads(self.read("server0.log").splitlines()[0])
        self.assertIn("--keys_dir=" + mine, argv)

    def test_a_secret_key_others_may_read_starts_nothing(self):
        mine = os.path.join(self.dir, "mine")
        subprocess.run([os.path.join(self.bin_dir, "common", "auth", "keygen"), mine], check=True,
                       capture_output=True)
        os.chmod(os.path.join(mine, "worker.key"), 0o640)
        with self.assertRaisesRegex(errors.JobError,
                                    r"secret key file .*/mine/worker.key has mode 0640: group and "
                                    r"others must have no access \(chmod 600 "):
            self.run_job(auth="curve", keys_dir=mine)
        self.assertEqual(self.pids, {})
        os.remove(os.path.join(mine, "server.pub"))
        with self.assertRaisesRegex(errors.JobError, r"mine/server.pub: No such file"):
            self.run_job(auth="curve", keys_dir=mine)

    def test_no_keygen_starts_nothing(self):
        os.remove(os.path.join(self.bin_dir, "common", "auth", "keygen"))
        with self.assertRaisesRegex(errors.JobError,
                                    r"common/auth/keygen not found: --auth=curve makes the job's "
                                    r"keys with it; build it \(bazel build -c opt //common/auth:keygen\)"):
            self.run_job(auth="curve")
        self.assertEqual(self.pids, {})

    def test_a_dry_run_names_the_keys_and_makes_none(self):
        lines = launcher.describe_local(Args(run_dir=self.run_dir, bin_dir=self.bin_dir, auth="curve"))
        self.assertIn(f"# --auth=curve: the job's keys, made first by {self.bin_dir}/common/auth/keygen "
                      f"{self.keys()}", lines)
        commands = [line for line in lines.splitlines() if not line.startswith("#")]
        self.assertEqual(len(commands), 1 + 2 + 3)
        for line in commands:
            self.assertIn(f"--auth=curve --keys_dir={self.keys()}", line)
        self.assertFalse(os.path.exists(self.run_dir))


class ResumeTest(JobTest):
    """run_job on the options resume.prepare makes of tools/launch --resume=RUN_DIR."""

    def resume(self, *argv):
        with contextlib.redirect_stdout(io.StringIO()):
            args = resume.prepare(options.parse_args(["--resume=" + self.run_dir, *argv], ""))
        return self.run_args(args)

    def first_attempt(self, shards=(0, 1)):
        self.run_job(servers=2, worker_flags="--threads=3")
        for r in shards:  # what the servers would have written
            os.makedirs(os.path.join(self.run_dir, "checkpoints", f"server{r}", "ckpt-1"))

    def test_the_same_job_again_with_the_servers_resuming(self):
        self.first_attempt()
        summary = self.resume("--max_restarts=2")
        self.assertEqual((summary["resumed"], summary["attempt"], summary["servers"]), (True, 2, 2))
        for name in ("server0", "server1"):
            argv = json.loads(self.read(name + ".log").splitlines()[0])
            self.assertIn("--resume", argv)
            self.assertIn(f"--checkpoint_dir={self.run_dir}/checkpoints", argv)
        self.assertIn("--threads=3", self.read("launch.json"))
        self.assertEqual(json.loads(self.read("launch.json"))["max_restarts"], "2")
        # The first attempt's files moved; the checkpoints stay.
        archived = sorted(os.listdir(os.path.join(self.run_dir, "attempt-1")))
        for name in ("scheduler.log", "server1.log", "worker0.log", "metrics_worker0.jsonl",
                     "timeline.json", "summary.json", "stats.json"):
            self.assertIn(name, archived)
        self.assertNotIn("launch.json", archived)
        self.assertEqual(sorted(os.listdir(os.path.join(self.run_dir, "checkpoints"))),
                         ["server0", "server1"])
        with open(os.path.join(self.run_dir, "attempt-1", "summary.json")) as f:
            self.assertFalse(json.load(f)["resumed"])
        # Once more: attempt 3, the second one's files in attempt-2.
        self.assertEqual(self.resume()["attempt"], 3)
        self.assertEqual(json.loads(self.read("launch.json"))["max_restarts"], "2")  # saved
        with open(os.path.join(self.run_dir, "attempt-2", "summary.json")) as f:
            self.assertEqual(json.load(f)["attempt"], 2)
        self.assertNotIn("attempt-1", os.listdir(os.path.join(self.run_dir, "attempt-2")))

    def test_a_resumed_job_keeps_its_keys(self):
        self.run_job(servers=2, auth="curve")
        for r in (0, 1):
            os.makedirs(os.path.join(self.run_dir, "checkpoints", f"server{r}", "ckpt-1"))
        keys = key_texts(os.path.join(self.run_dir, "keys"))
        summary = self.resume()
        self.assertEqual((summary["resumed"], summary["auth"]), (True, "curve"))
        self.assertEqual(key_texts(os.path.join(self.run_dir, "keys")), keys)
        self.assertNotIn("keys", os.listdir(os.path.join(self.run_dir, "attempt-1")))
        argv = json.loads(self.read("server1.log").splitlines()[0])
        self.assertIn(f"--keys_dir={self.run_dir}/keys", argv)

    def test_no_launch_json(self):
        os.makedirs(self.run_dir)
        with self.assertRaisesRegex(errors.JobError,
                                    "run has no launch.json: was it started by tools/launch?"):
            self.resume()
        with open(os.path.join(self.run_dir, "launch.json"), "w") as f:
            f.write("{torn")
        with self.assertRaisesRegex(errors.JobError, "launch.json cannot be read .*tools/launch"):
            self.resume()

    def test_no_server_with_checkpoints_moves_nothing(self):
        # (One server without any may hold no partitions: its server binary decides.)
        self.first_attempt(shards=[])
        before = sorted(os.listdir(self.run_dir))
        with self.assertRaisesRegex(errors.JobError,
                                    r"cannot resume .*: no checkpoints of any server in .*checkpoints"):
            self.resume()
        self.assertEqual(sorted(os.listdir(self.run_dir)), before)


class LaunchScriptTest(FakeBinariesTest):
    """tools/launch: messages and exit statuses."""

    def launch(self, *flags):
        return subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "launch"),
                                 "--bin_dir=" + self.bin_dir, "--run_dir=" + self.run_dir,
                                 "--servers=1", "--workers=2", "--quiet", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))  # lines as printed

    def test_success(self):
        out, err = self.launch().communicate(timeout=60)
        self.assertIn("launch: summary {", out)
        self.assertEqual(err, "")

    def test_a_dead_worker_leaves_a_completed_job(self):
        proc = self.launch("--worker_flags_for=0:--exit=3")
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("launch: worker0 died (status 3)", out)

    def test_a_failure_is_reported_with_status_1(self):
        proc = self.launch("--scheduler_flags=--exit=4")
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("launch: error: the scheduler exited with status 4: the job did not "
                      f"complete; see {self.run_dir}/scheduler.log", err)
        self.assertIn('"completed": false', out)

    def test_resume(self):
        self.assertEqual(self.launch().wait(timeout=60), 0)
        os.makedirs(os.path.join(self.run_dir, "checkpoints", "server0"))
        resumed = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"),
                                  "--resume=" + self.run_dir, "--timeout=100"],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(resumed.returncode, 0, resumed.stderr)
        self.assertIn(f"launch: resuming {self.run_dir} (attempt 2)", resumed.stdout)
        self.assertNotIn("worker 0: step 1", resumed.stdout)  # the saved --quiet stands
        refused = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "launch"),
                                  "--resume=" + self.run_dir, "--workers=3"],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(refused.returncode, 2)
        self.assertIn("only --timeout, --quiet and --max_restarts may be given with it, not "
                      "--workers", refused.stderr)

    def test_a_missing_binary_is_reported_with_status_1(self):
        os.remove(os.path.join(self.bin_dir, "server", "server"))
        proc = self.launch()
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("launch: error: ", err)
        self.assertIn("server/server not found", err)

    def test_a_signal_stops_the_job_with_status_130(self):
        for signum in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=signum):
                proc = self.launch("--worker_flags=--sleep=30")
                for line in proc.stdout:  # every process has started
                    if line.startswith("launch: 1 servers"):
                        break
                proc.send_signal(signum)
                _, err = proc.communicate(timeout=60)
                self.assertEqual(proc.returncode, 130)
                self.assertIn(f"launch: signal {int(signum)}: stopping every process", err)
                self.assertEqual(self.running(), [])

    def running(self):
        """Command lines of the processes still running from the stand-in binaries."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
            except OSError:
                continue
            if self.bin_dir in cmdline:
                found.append(cmdline)
        return found


if __name__ == "__main__":
    junit_main.main()
