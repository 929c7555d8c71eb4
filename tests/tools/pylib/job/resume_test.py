"""tools/pylib/resume.py: --checkpoint_every forms, the servers' checkpoint flags, launch.json,
archiving an attempt and the checks before a resume. launcher_test resumes whole jobs."""

import argparse
import contextlib
import io
import json
import os
import tempfile
import unittest

import junit_main
from pylib.job import resume
from pylib.job.errors import JobError
from pylib.job import options as launch_options


def options(**kwargs):
    """tools/launch's options with their defaults."""
    return argparse.Namespace(**{**vars(launch_options.parse_args([], "")), **kwargs})


class CheckpointEveryTest(unittest.TestCase):
    def test_good_forms(self):
        for text in ("", "30s", "0.5s", "1steps", "200steps"):
            resume.check_checkpoint_every(text)

    def test_bad_forms(self):
        for text in ("30", "s", "0s", "0.0s", "-1s", "1.5steps", "0steps", " 30s", "30sec",
                     "30 steps", "1e3s"):
            with self.subTest(text=text), self.assertRaisesRegex(ValueError, "bad --checkpoint_every"):
                resume.check_checkpoint_every(text)


class ServerFlagsTest(unittest.TestCase):
    def test_flag_value_in_every_gflags_form(self):
        self.assertEqual(resume.flag_value(["--lr=1", "--checkpoint_dir=/a"], "checkpoint_dir"), "/a")
        self.assertEqual(resume.flag_value(["-checkpoint_dir=/b"], "checkpoint_dir"), "/b")
        self.assertEqual(resume.flag_value(["--checkpoint_dir", "/c", "--x"], "checkpoint_dir"), "/c")
        self.assertEqual(resume.flag_value(["--checkpoint_dir=/a", "--checkpoint_dir=/d"],
                                           "checkpoint_dir"), "/d")  # gflags keeps the last
        self.assertIsNone(resume.flag_value(["--checkpoint_dirs=/a", "checkpoint_dir=/a"],
                                            "checkpoint_dir"))

    def test_defaults(self):
        self.assertEqual(resume.server_flags(options(run_dir="/r")), ["--checkpoint_dir=/r/checkpoints"])
        self.assertEqual(resume.checkpoint_dir(options(run_dir="/r")), "/r/checkpoints")

    def test_every_and_resume(self):
        self.assertEqual(resume.server_flags(options(run_dir="/r", checkpoint_every="30s",
                                                     resume="/r")),
                         ["--checkpoint_dir=/r/checkpoints", "--checkpoint_every=30s", "--resume"])

    def test_the_users_checkpoint_dir(self):
        args = options(run_dir="/r", server_flags="--lr=0.1 --checkpoint_dir=/c")
        self.assertEqual(resume.server_flags(args), [])
        self.assertEqual(resume.checkpoint_dir(args), "/c")


class RunDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def make(self, *names):
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith("/"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(name)

    def test_options_saved_and_loaded(self):
        args = options(run_dir=self.dir, servers=4, worker_flags_for=["1:--a"])
        resume.save_options(args)
        self.assertEqual(resume.load_options(self.dir), json.loads(json.dumps(vars(args))))

    def test_no_or_bad_launch_json(self):
        with self.assertRaisesRegex(JobError, "has no launch.json: was it started by tools/launch"):
            resume.load_options(self.dir)
        for text in ("{", "[1, 2]"):
            self.make("launch.json")
            with open(os.path.join(self.dir, "launch.json"), "w") as f:
                f.write(text)
            with self.subTest(text=text), self.assertRaisesRegex(JobError, "tools/launch"):
                resume.load_options(self.dir)

    def test_archive_keeps_options_checkpoints_keys_plans_and_attempts(self):
        self.make("launch.json", "checkpoints/server0/", "attempt-1/summary.json", "summary.json",
                  "worker0.log", "timeline.json", "attempt-x.log", "extra/", "keys/worker.key",
                  "epoch_plans.pb")
        self.assertEqual(resume.archive_attempt(self.dir, resume.kept_names(
            self.dir, os.path.join(self.dir, "checkpoints"))), 2)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["attempt-1", "attempt-2", "checkpoints", "epoch_plans.pb", "keys",
                          "launch.json"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "attempt-2"))),
                         ["attempt-x.log", "extra", "summary.json", "timeline.json", "worker0.log"])

    def test_checkpoints_elsewhere_in_the_run_directory_stay(self):
        self.make("ckpt/server0/", "server0/", "server0.log")
        self.assertIn("ckpt", resume.kept_names(self.dir, os.path.join(self.dir, "ckpt", "x")))
        self.assertNotIn("ckpt", resume.kept_names(self.dir, "/elsewhere"))
        # Shards right in the run directory: their directories stay, the logs go.
        kept = resume.kept_names(self.dir, self.dir)
        self.assertIn("server0", kept)
        self.assertNotIn("server0.log", kept)

    def test_missing_shards(self):
        self.make("c/server0/", "c/server2/", "c/server1")  # a file is no checkpoint directory
        self.assertEqual(resume.missing_shards(os.path.join(self.dir, "c"), 4), [1, 3])
        self.assertEqual(resume.missing_shards(os.path.join(self.dir, "none"), 2), [0, 1])

    def test_prepare(self):
        saved = options(run_dir="/moved/away", servers=1, timeout=50.0, quiet=True, attempt=5)
        with open(os.path.join(self.dir, "launch.json"), "w") as f:
            json.dump(vars(saved), f)
        self.make("checkpoints/server0/", "scheduler.log")
        given = launch_options.parse_args([f"--resume={self.dir}/", "--max_restarts=3"], "")
        with contextlib.redirect_stdout(io.StringIO()) as out:
            args = resume.prepare(given)
        self.assertEqual((args.run_dir, args.resume, args.attempt), (self.dir, self.dir, 2))
        self.assertEqual((args.servers, args.timeout, args.quiet, args.max_restarts),
                         (1, 50.0, True, "3"))
        self.assertIn(f"launch: resuming {self.dir} (attempt 2)", out.getvalue())
        self.assertEqual(os.listdir(os.path.join(self.dir, "attempt-1")), ["scheduler.log"])

    def fake_job(self, failures):
        """A run_job stand-in: saves its options, then fails `failures` times as a bsp job
        whose server died would (summary.json with the death), then completes; the attempts
        it was given."""
        attempts = []

        def run_job(args):
            attempts.append(args)
            resume.save_options(args)
            self.make("checkpoints/server0/")
            if len(attempts) > failures:
                return {"completed": True}
            with open(os.path.join(self.dir, "summary.json"), "w") as f:
                json.dump({"completed": False, "deaths": {"worker": 0, "server": 1}}, f)
            raise JobError("the scheduler exited with status 1")
        return run_job, attempts

    def test_a_bsp_job_that_lost_a_server_is_resumed_while_restarts_last(self):
        run_job, attempts = self.fake_job(failures=2)
        args = options(run_dir=self.dir, sync="bsp", max_restarts="worker:3,server:2")
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(resume.run_resuming(run_job, args), {"completed": True})
        self.assertEqual([a.attempt for a in attempts[1:]], [2, 3])
        self.assertEqual([a.resume for a in attempts[1:]], [self.dir, self.dir])
        self.assertEqual(attempts[2].max_restarts, "worker:3,server:0")
        self.assertIn("resuming it from the servers' checkpoints (0 such restarts left)",
                      out.getvalue())
        # Out of restarts, asynchronous modes (they replace servers live), or a job that failed
        # for another reason: the error stands.
        def timed_out(args):
            raise JobError("the job ran past --timeout")
        for sync, restarts, job in (("bsp", "server:1", self.fake_job(failures=2)[0]),
                                    ("asp", "server:5", self.fake_job(failures=2)[0]),
                                    ("bsp", "server:5", timed_out)):
            summary = os.path.join(self.dir, "summary.json")
            if os.path.exists(summary):
                os.remove(summary)
            with self.subTest(sync=sync, restarts=restarts), \
                    contextlib.redirect_stdout(io.StringIO()), self.assertRaises(JobError):
                resume.run_resuming(job, options(run_dir=self.dir, sync=sync,
                                                 max_restarts=restarts))

    def test_another_tools_run_is_not_resumed(self):
        resume.save_options(argparse.Namespace(**vars(options(run_dir=self.dir)),
                                               server_link="100mbit"))
        with self.assertRaisesRegex(JobError, r"tools/launch does not take \(server_link\)"):
            resume.prepare(launch_options.parse_args([f"--resume={self.dir}"], ""))


if __name__ == "__main__":
    junit_main.main()
