"""tools/pylib/job/options.py: tools/launch's options, their defaults, and every refusal with its
message (argparse's usage error, exit status 2)."""

import argparse
import contextlib
import io
import os
import unittest

import junit_main
from pylib.job import options


class ParseArgsTest(unittest.TestCase):
    def parse(self, argv):
        with contextlib.redirect_stderr(io.StringIO()):
            return options.parse_args(argv, "")

    def refused(self, argv):
        """The usage error's message for `argv` (after 'error: ')."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            options.parse_args(argv, "")
        self.assertEqual(e.exception.code, 2)
        return err.getvalue().split("error: ", 1)[1].strip()

    def test_defaults(self):
        args = self.parse([])
        self.assertEqual((args.servers, args.workers, args.sync, args.timeout), (2, 3, "asp", 3600))
        self.assertEqual((args.worker_flags_for, args.backend, args.max_restarts, args.auth),
                         ([], "local", "0", "none"))

    def test_impossible_values_are_usage_errors(self):
        for argv, message in (
                (["--workers=0"], "--servers and --workers must be at least 1"),
                (["--servers=0"], "--servers and --workers must be at least 1"),
                (["--timeout=0"], "--timeout must be positive"),
                (["--sync=fast"], "argument --sync: invalid choice: 'fast'"),
                (["--max_restarts=-1"], "bad --max_restarts '-1' (use N, or worker:N,server:M)"),
                (["--max_restarts=worker:x"], "bad --max_restarts 'worker:x'"),
                (["--max_restarts=server:1"], "--max_restarts=server:N: a replacement server "
                                              "restores its shard from the checkpoints, so it "
                                              "needs --checkpoint_every"),
                (["--backend=ssh"], "--backend=ssh needs --cluster")):
            with self.subTest(argv=argv):
                self.assertTrue(self.refused(argv).startswith(message), self.refused(argv))

    def test_a_ddp_job_refuses_what_it_cannot_honour(self):
        self.assertEqual(self.parse(["--ddp_cmd=python3 t.py"]).ddp_cmd, "python3 t.py")
        self.assertEqual(self.refused(["--ddp_cmd=python3 t.py", "--worker_cmd=python3 t.py",
                                       "--checkpoint_every=30s"]),
                         "--ddp_cmd runs a DDP job (no scheduler, servers or checkpoints): "
                         "leave out --worker_cmd, --checkpoint_every")
        self.assertEqual(self.refused(["--ddp_cmd=python3 't.py"]),
                         "--ddp_cmd: cannot split \"python3 't.py\" into words: No closing "
                         "quotation")

    def test_a_server_restart_with_a_checkpoint_dir_needs_no_checkpoint_every(self):
        args = self.parse(["--max_restarts=server:1", "--server_flags=--checkpoint_dir=/c"])
        self.assertEqual(args.max_restarts, "server:1")

    def test_the_ssh_and_slurm_backends_replace_processes_too(self):
        for backend in ("ssh", "slurm"):
            args = self.parse(["--cluster=c.toml", "--backend=" + backend,
                               "--max_restarts=worker:1,server:2", "--checkpoint_every=30s"])
            self.assertEqual((args.max_restarts, args.checkpoint_every), ("worker:1,server:2", "30s"))

    def test_checkpoint_every(self):
        for good in ("", "30s", "0.5s", "200steps"):
            self.assertEqual(self.parse(["--checkpoint_every=" + good]).checkpoint_every, good)
        for bad in ("30", "s", "steps", "0s", "0steps", "-5s", "1.5steps", "30 s", "30m", "1e3s"):
            with self.subTest(bad=bad):
                self.assertEqual(self.refused(["--checkpoint_every=" + bad]),
                                 f"bad --checkpoint_every '{bad}' (use e.g. 30s or 200steps)")

    def test_auth(self):
        self.assertEqual((self.parse([]).auth, self.parse([]).keys_dir), ("none", ""))
        args = self.parse(["--auth=curve", "--keys_dir=some/keys"])
        self.assertEqual((args.auth, args.keys_dir), ("curve", os.path.abspath("some/keys")))
        self.assertIsNone(self.parse(["--cluster=c.toml"]).auth)  # the file's, unless given
        self.assertIn("argument --auth: invalid choice: 'plain'", self.refused(["--auth=plain"]))
        for argv in (["--keys_dir=/k"], ["--auth=none", "--keys_dir=/k"]):
            with self.subTest(argv=argv):
                self.assertEqual(self.refused(argv), "--keys_dir needs --auth=curve")

    def test_resume_takes_only_timeout_quiet_and_max_restarts(self):
        args = self.parse(["--resume=/r", "--timeout=5", "--max_restarts=worker:1"])
        self.assertEqual((args.resume, args.timeout, args.max_restarts), ("/r", 5, "worker:1"))
        self.assertIsNone(args.quiet)  # not given: the saved option stands
        # Any other option is an error, even at its default value.
        for argv, named in ((["--servers=2"], "--servers"),
                            (["--worker_flags_for=1:--a"], "--worker_flags_for"),
                            (["--dry_run"], "--dry_run"), (["--sync=asp"], "--sync"),
                            (["--auth=curve"], "--auth")):
            with self.subTest(argv=argv):
                self.assertEqual(self.refused(["--resume=/r"] + argv),
                                 "--resume runs the options saved in RUN_DIR/launch.json: only "
                                 "--timeout, --quiet and --max_restarts may be given with it, "
                                 "not " + named)

    def test_an_added_parser_keeps_its_own_options(self):
        p = argparse.ArgumentParser()
        p.add_argument("--server_link", default="")
        with contextlib.redirect_stderr(io.StringIO()):
            args = options.parse_args(["--server_link=1gbit", "--workers=5"], "", parser=p)
        self.assertEqual((args.server_link, args.workers), ("1gbit", 5))


class GivenOptionsTest(unittest.TestCase):
    def test_given_even_at_their_default(self):
        p = argparse.ArgumentParser()
        options.add_job_options(p)
        self.assertEqual(options.given_options(p, ["--servers=2", "--quiet"],
                                               ["servers", "workers", "quiet"]),
                         {"servers", "quiet"})


if __name__ == "__main__":
    junit_main.main()
