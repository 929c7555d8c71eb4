"""tools/pylib/emulation/netcluster_options.py: every tools/launch option is either accepted
(parsed as tools/launch parses it) or refused with its reason (argparse's usage error, exit
status 2), and the emulated cluster's own options are checked."""

import argparse
import contextlib
import io
import unittest

import junit_main
from pylib.emulation import netcluster_options
from pylib.job import options

# One command line per accepted launch option, and the value it must parse to.
ACCEPTED_SAMPLES = {
    "servers": (["--servers=3", "--workers=3"], 3),
    "workers": (["--workers=5"], 5),
    "sync": (["--sync=r2sp"], "r2sp"),
    "run_dir": (["--run_dir=/tmp/r"], "/tmp/r"),
    "bin_dir": (["--bin_dir=/opt/bin"], "/opt/bin"),
    "timeout": (["--timeout=60"], 60.0),
    "scheduler_flags": (["--scheduler_flags=--staleness=2"], "--staleness=2"),
    "server_flags": (["--server_flags=--lr=0.1"], "--lr=0.1"),
    "worker_flags": (["--worker_flags=--epochs=2"], "--epochs=2"),
    "quiet": (["--quiet"], True),
    "worker_flags_for": (["--worker_flags_for=1:--compute_slowdown=2"],
                         ["1:--compute_slowdown=2"]),
    "worker_cmd": (["--worker_cmd=/usr/bin/python3 train.py"], "/usr/bin/python3 train.py"),
    "worker_cmd_for": (["--worker_cmd_for=1:/usr/bin/python3 train.py"],
                       ["1:/usr/bin/python3 train.py"]),
    "ddp_cmd": (["--ddp_cmd=/usr/bin/python3 t.py --backend=ddp"],
                "/usr/bin/python3 t.py --backend=ddp"),
    "auth": (["--auth=curve"], "curve"),
    "keys_dir": (["--auth=curve", "--keys_dir=/keys"], "/keys"),
    "max_restarts": (["--max_restarts=2"], "2"),
    "checkpoint_every": (["--checkpoint_every=30s"], "30s"),
}

# One command line per refused launch option.
REFUSED_SAMPLES = {
    "cluster": ["--cluster=examples/cluster/two_hosts.toml"],
    "backend": ["--backend=ssh"],
    "bundle": ["--bundle=dist/r2sp.tar.gz"],
    "dry_run": ["--dry_run"],
    "resume": ["--resume=runs/x"],
    "workers_per_process": ["--workers_per_process=4"],
    "write_data_manifest": ["--write_data_manifest=/data/fashion-mnist"],
}


def launch_option_names():
    """The dests of every tools/launch option."""
    p = argparse.ArgumentParser()
    for add in (options.add_job_options, options.add_cluster_options, options.add_auth_options,
                options.add_recovery_options):
        add(p)
    return {a.dest for a in p._actions if a.dest != "help"}


class NetclusterOptionsTest(unittest.TestCase):
    def parse(self, argv):
        return netcluster_options.parse_args(argv, "")

    def refused(self, argv):
        """The usage error's message for `argv` (after 'netcluster: error: ')."""
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            self.parse(argv)
        self.assertEqual(e.exception.code, 2)
        return err.getvalue().split("netcluster: error: ", 1)[1].strip()

    def test_every_launch_option_is_accepted_or_refused(self):
        accepted, refused = set(netcluster_options.ACCEPTED), set(netcluster_options.REFUSED)
        self.assertEqual(accepted & refused, set())
        self.assertEqual(accepted | refused, launch_option_names())
        self.assertEqual(sorted(refused), ["backend", "bundle", "cluster", "dry_run", "resume",
                                          "workers_per_process", "write_data_manifest"])

    def test_each_accepted_option_parses_as_tools_launch_parses_it(self):
        self.assertEqual(set(ACCEPTED_SAMPLES), set(netcluster_options.ACCEPTED))
        for name, (argv, value) in ACCEPTED_SAMPLES.items():
            with self.subTest(option=name):
                self.assertEqual(getattr(self.parse(argv), name), value)

    def test_each_refused_option_is_an_error_naming_it_and_why(self):
        self.assertEqual(set(REFUSED_SAMPLES), set(netcluster_options.REFUSED))
        for name, argv in REFUSED_SAMPLES.items():
            with self.subTest(option=name):
                self.assertEqual(self.refused(argv + ["--workers=2"]),
                                 f"--{name} is not taken here: {netcluster_options.REFUSED[name]}")

    def test_a_refused_option_at_its_default_is_no_error(self):
        args = self.parse(["--backend=local"])
        self.assertEqual((args.backend, args.cluster, args.dry_run), ("local", "", False))

    def test_refusal_comes_before_the_launch_checks(self):
        # tools/launch would say "--backend=ssh needs --cluster", sending the user to --cluster.
        self.assertEqual(self.refused(["--backend=ssh"]),
                         "--backend is not taken here: " + netcluster_options.REFUSED["backend"])

    def test_help_gives_each_refusal_reason(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), self.assertRaises(SystemExit):
            self.parse(["--help"])
        text = " ".join(out.getvalue().split())
        for why in netcluster_options.REFUSED.values():
            self.assertIn("refused here: " + why, text)

    def test_own_options(self):
        args = self.parse(["--servers=1", "--workers=2", "--server_link=100mbit",
                           "--worker_link=1gbit", "--delay_ms=0.5", "--cpu_quota=1:0.5",
                           "--self_check"])
        self.assertEqual((args.server_link, args.worker_link, args.delay_ms, args.self_check),
                         ("100mbit", "1gbit", 0.5, True))
        self.assertEqual(args.quotas, {"worker1": 0.5})

    def test_bad_own_options_are_usage_errors(self):
        self.assertEqual(self.refused(["--server_link=fast"]),
                         "bad rate 'fast' (use e.g. 50mbit, 1gbit)")
        for value, shown in (("0.5", "0.5"), ("0", "0"), ("-2", "-2"), ("nan", "nan"),
                             ("inf", "inf")):
            with self.subTest(value=value):
                self.assertEqual(self.refused([f"--time_dilation={value}"]),
                                 f"--time_dilation must be a number of at least 1 (got {shown})")

    def test_time_dilation(self):
        self.assertEqual(self.parse([]).time_dilation, 1.0)
        self.assertEqual(self.parse(["--time_dilation=5"]).time_dilation, 5.0)


if __name__ == "__main__":
    junit_main.main()
