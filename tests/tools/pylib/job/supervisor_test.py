"""tools/pylib/job/supervisor.py: --max_restarts, process names and roles, a replacement's
arguments, and the Supervisor itself on a scripted job: fake processes that exit at given times
on a fake clock (no process is started, no time passes), so every death, replacement, stop and
verdict is checked exactly, event times included."""

import argparse
import contextlib
import io
import unittest
from unittest import mock

import junit_main
from pylib.job import deadline, supervisor
from pylib.job.errors import JobError


class ParseMaxRestartsTest(unittest.TestCase):
    def test_a_bare_count_is_for_workers(self):
        self.assertEqual(supervisor.parse_max_restarts("0"), {"worker": 0, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts("3"), {"worker": 3, "server": 0})

    def test_per_role(self):
        self.assertEqual(supervisor.parse_max_restarts("worker:2,server:0"), {"worker": 2, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts(" worker : 5 "), {"worker": 5, "server": 0})
        self.assertEqual(supervisor.parse_max_restarts("server:0"), {"worker": 0, "server": 0})

    def test_bad_forms(self):
        for text in ("", "-1", "1.5", "x", "worker", "worker:", "worker:-1", "gpu:1",
                     "scheduler:1", "worker:1;server:0", "worker:1,"):
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, "bad --max_restarts"):
                supervisor.parse_max_restarts(text)

    def test_servers_are_replaced_too(self):
        self.assertEqual(supervisor.parse_max_restarts("worker:1,server:2"),
                         {"worker": 1, "server": 2})
        self.assertIn("server", supervisor.ROLES_REPLACED)


class NamesTest(unittest.TestCase):
    def test_slot_and_role(self):
        for name, slot, role in (("scheduler", "scheduler", "scheduler"),
                                 ("server12", "server12", "server"),
                                 ("worker1", "worker1", "worker"),
                                 ("worker1.r2", "worker1", "worker")):
            with self.subTest(name=name):
                self.assertEqual((supervisor.slot(name), supervisor.role(name)), (slot, role))

    def test_a_replacement_writes_metrics_and_timeline_of_its_own(self):
        argv = ["/b/worker/worker", "--scheduler=tcp://h:1", "--metrics=/r/metrics_worker1.jsonl",
                "--timeline=/r/timeline_worker1.json", "--threads=2"]
        self.assertEqual(supervisor.replacement_argv(argv, "/r", "worker1.r2"),
                         ["/b/worker/worker", "--scheduler=tcp://h:1",
                          "--metrics=/r/metrics_worker1.r2.jsonl",
                          "--timeline=/r/timeline_worker1.r2.json", "--threads=2"])



class Clock:
    """time.time and time.sleep for the supervisor: sleeping advances the clock."""

    def __init__(self, now=1000.0):
        self.now = now

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now = round(self.now + seconds, 6)


class Proc:
    """A process that exits with `status` once the clock reaches `exits_at` (None: never, until
    it is stopped with status -15)."""

    def __init__(self, clock, exits_at=None, status=0):
        self.clock, self.exits_at, self.status = clock, exits_at, status
        self.returncode = None

    def poll(self):
        if self.returncode is None and self.exits_at is not None and self.clock.now >= self.exits_at:
            self.returncode = self.status
        return self.returncode


class ScriptedJob:
    """The processes.Job interface Supervisor uses, over Procs; `replacements`: {name: (exits
    after how many seconds, status)} of the replacements it will be asked to start."""

    def __init__(self, clock, procs, sync="asp", timeout=3600, replacements=None):
        self.clock = clock
        self.args = argparse.Namespace(sync=sync, timeout=timeout, run_dir="/r")
        self._procs = list(procs.items())
        self.replacements = replacements or {}
        self.started = []  # (name, argv, echo)

    def procs(self):
        return list(self._procs)

    def command(self, name):
        return ["/b/" + name, f"--metrics=/r/metrics_{name}.jsonl"], name.startswith("worker")

    def start(self, name, argv, echo):
        self.started.append((name, argv, echo))
        after, status = self.replacements[name]
        self._procs.append((name, Proc(self.clock, self.clock.now + after, status)))

    def finished(self):
        return all(p.poll() is not None for _, p in self._procs)

    def stop_all(self):
        running = [(n, p) for n, p in self._procs if p.poll() is None]
        for _, p in running:
            p.returncode = -15
        return [(n, p.returncode) for n, p in running]


class SupervisorTest(unittest.TestCase):
    def setUp(self):
        self.clock = Clock()
        for module in (supervisor, deadline):
            patcher = mock.patch.object(module, "time", self.clock)
            patcher.start()
            self.addCleanup(patcher.stop)
        self.cpu = mock.Mock()

    def procs(self, **exits):
        """{name: Proc} from name=(exits after seconds, status) or None (runs until stopped)."""
        return {n: Proc(self.clock, None if e is None else self.clock.now + e[0],
                        0 if e is None else e[1]) for n, e in exits.items()}

    def supervise(self, job, restarts="0", restart=None):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            outcome = supervisor.Supervisor(job, self.clock.now, supervisor.parse_max_restarts(restarts),
                                            self.cpu, restart=restart).run()
        return outcome, out.getvalue()

    def events(self, outcome):
        return [(e.t, e.process, e.event, e.status) for e in outcome.events]

    def test_a_clean_job(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(1.0, 0), server0=(1.2, 0), worker0=(0.5, 0)))
        outcome, out = self.supervise(job)
        self.assertEqual((outcome.completed, outcome.scheduler_status, outcome.events, out),
                         (True, 0, [], ""))
        self.assertEqual((outcome.deaths, outcome.restarts),
                         ({"worker": 0, "server": 0}, {"worker": 0, "server": 0}))
        self.assertEqual(self.clock.now, 1001.2)  # up to the server's exit, in 0.1 s ticks
        self.assertEqual(self.cpu.sample.call_count, 12)

    def test_a_dead_worker_is_replaced_while_restarts_last(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(2.0, 0), worker0=(0.3, 1), worker1=(1.0, 0)),
                          replacements={"worker0.r1": (0.4, 137), "worker0.r2": (0.1, 0)})
        outcome, out = self.supervise(job, restarts="1")
        self.assertEqual(self.events(outcome), [(0.3, "worker0", "died", 1),
                                                (0.3, "worker0.r1", "restarted", 1),
                                                (0.7, "worker0.r1", "died", 137)])
        self.assertEqual(job.started, [("worker0.r1", ["/b/worker0", "--metrics=/r/metrics_worker0.r1.jsonl"],
                                        True)])
        self.assertEqual((outcome.deaths, outcome.restarts),
                         ({"worker": 2, "server": 0}, {"worker": 1, "server": 0}))
        self.assertEqual(out, "launch: worker0 died (status 1); starting replacement worker0.r1\n"
                              "launch: worker0.r1 died (status 137); no restarts left "
                              "(--max_restarts=worker:1)\n")
        self.assertTrue(outcome.completed)

    def test_a_backends_restart_hook_starts_the_replacement(self):
        # The ssh backend's: a new ssh to the dead process's host (deploy/ssh_backend.py).
        job = ScriptedJob(self.clock, self.procs(scheduler=(1.0, 0), server1=(0.2, 255)),
                          replacements={"server1.r1": (0.3, 0)})
        asked = []

        def restart(dead, new):
            asked.append((dead, new))
            job.start(new, ["ssh", "h", "server"], False)

        outcome, _ = self.supervise(job, restarts="server:1", restart=restart)
        self.assertEqual(asked, [("server1", "server1.r1")])
        self.assertEqual(job.started, [("server1.r1", ["ssh", "h", "server"], False)])
        self.assertEqual(self.events(outcome), [(0.2, "server1", "died", 255),
                                                (0.2, "server1.r1", "restarted", 255)])

    def test_a_bsp_server_is_not_replaced_live(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(1.0, 1), server0=(0.2, -9)), sync="bsp")
        outcome, out = self.supervise(job, restarts="worker:1,server:1")
        self.assertEqual(out, "launch: server0 died (status -9); a bsp job's servers share its "
                              "clocks: the job resumes from the checkpoints\n")
        self.assertEqual(job.started, [])
        self.assertEqual((outcome.completed, outcome.scheduler_status), (False, 1))
        self.assertEqual(outcome.deaths, {"worker": 0, "server": 1})

    def test_deaths_after_the_scheduler_are_recorded_not_replaced(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(0.5, 0), worker0=(0.8, 2)))
        outcome, out = self.supervise(job, restarts="3")
        self.assertEqual(self.events(outcome), [(0.8, "worker0", "died", 2)])
        self.assertEqual(out, "launch: worker0 died (status 2); after the scheduler exited\n")
        self.assertEqual(job.started, [])

    def test_processes_left_after_the_grace_period_are_stopped(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(1.0, 0), server0=None))
        with mock.patch.object(supervisor, "GRACE_SECONDS", 2.0):
            outcome, _ = self.supervise(job)
        self.assertEqual(self.events(outcome), [(3.0, "server0", "stopped", -15)])
        self.assertTrue(outcome.completed)

    def test_a_failed_scheduler_stops_the_others_at_once(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=(0.4, 3), worker0=None))
        outcome, _ = self.supervise(job)
        self.assertEqual((outcome.completed, outcome.scheduler_status), (False, 3))
        self.assertEqual(self.events(outcome), [(0.4, "worker0", "stopped", -15)])

    def test_the_timeout_is_a_job_error(self):
        job = ScriptedJob(self.clock, self.procs(scheduler=None, worker0=None), timeout=1.5)
        with self.assertRaisesRegex(JobError, r"^the job ran past --timeout=1.5s$"):
            self.supervise(job)
        self.assertEqual(self.clock.now, 1001.6)


if __name__ == "__main__":
    junit_main.main()
