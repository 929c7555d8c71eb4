"""tools/deploy/python_worker, which starts every Python worker (tools/launch --worker_cmd, run_role
--worker_cmd): the environment it gives the command (its pure functions, and the process it
becomes), and each bad argument refused with its message and status 2; a command that cannot
run, status 127; on a host older than the bundle's programs (or R2SP_CARRIED_GLIBC=always), the
command's program run through the bundle's carried loader (a stand-in that prints its argv)."""

import importlib.machinery
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PYTHON_WORKER = os.path.join(ROOT, "tools", "deploy", "python_worker")
_loader = importlib.machinery.SourceFileLoader("python_worker", PYTHON_WORKER)
python_worker = importlib.util.module_from_spec(importlib.util.spec_from_loader("python_worker", _loader))
_loader.exec_module(python_worker)
# Prints its argv, working directory and the variables python_worker sets, as JSON.
SHOW = ("import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), "
        "'env': {k: v for k, v in os.environ.items() if k.startswith('R2SP_') or k in "
        "('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', "
        "'PYTHONPATH')}}))")
RANKS = ["--rank=2", "--world_size=4", "--local_rank=0"]


class EnvironmentTest(unittest.TestCase):
    def test_every_variable(self):
        flags = ["--scheduler=tcp://10.0.0.1:9000", "--data_dir", "/d", "--note=a b"]
        env = python_worker.environment({"PATH": "/bin", "PYTHONPATH": "/site"}, flags, 2, 4, 0,
                                        "/b/python", "/b/_core.so")
        self.assertEqual(env, {
            "PATH": "/bin", "R2SP_SCHEDULER": "tcp://10.0.0.1:9000",
            "R2SP_WORKER_FLAGS": "--scheduler=tcp://10.0.0.1:9000 --data_dir /d '--note=a b'",
            "R2SP_DATA_DIR": "/d", "RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0",
            "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "9000", "PYTHONPATH": "/b/python:/site",
            "R2SP_CORE": "/b/_core.so"})

    def test_the_last_flag_wins_and_ipv6_hosts_lose_their_brackets(self):
        env = python_worker.environment({}, ["--scheduler=tcp://a:1", "--scheduler=tcp://[::1]:2",
                                             "--data_dir=/x", "--data_dir=/y"], 0, 1, 0)
        self.assertEqual((env["R2SP_SCHEDULER"], env["MASTER_ADDR"], env["MASTER_PORT"],
                          env["R2SP_DATA_DIR"]), ("tcp://[::1]:2", "::1", "2", "/y"))
        self.assertNotIn("PYTHONPATH", env)
        self.assertNotIn("R2SP_CORE", env)

    def test_bad_scheduler_flags(self):
        for flags, message in (([], "the worker flags give no --scheduler=tcp://HOST:PORT"),
                               (["--scheduler=h:1"], "the scheduler endpoint 'h:1' is not "
                                                     "tcp://HOST:PORT"),
                               (["--scheduler=tcp://h"], "the scheduler endpoint 'tcp://h' is "
                                                         "not tcp://HOST:PORT")):
            with self.subTest(flags=flags), self.assertRaises(ValueError) as e:
                python_worker.environment({}, flags, 0, 1, 0)
            self.assertEqual(str(e.exception), message)


class ProcessTest(unittest.TestCase):
    def run_it(self, *argv, cwd=None):
        return subprocess.run([PYTHON_WORKER, *argv], capture_output=True, text=True, timeout=30,
                              cwd=cwd, env={"PATH": os.environ["PATH"]})

    def test_it_becomes_the_command(self):
        with tempfile.TemporaryDirectory() as directory:
            r = self.run_it("--command=" + shlex.join([sys.executable, "-c", SHOW, "x y"]),
                            *RANKS, "--local_world_size=3", "--pythonpath=/p", "--core=/c.so",
                            "--cwd=" + directory, "--",
                            "--scheduler=tcp://h:5", "--batch_size=8")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads(r.stdout), {
                "argv": ["x y"], "cwd": os.path.realpath(directory),
                "env": {"R2SP_SCHEDULER": "tcp://h:5",
                        "R2SP_WORKER_FLAGS": "--scheduler=tcp://h:5 --batch_size=8", "RANK": "2",
                        "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "3",
                        "MASTER_ADDR": "h",
                        "MASTER_PORT": "5", "PYTHONPATH": "/p", "R2SP_CORE": "/c.so"}})

    def test_bad_arguments(self):
        for argv, message in (
                (["--command=x", *RANKS], "python_worker: error: the worker flags must follow '--'"),
                (["--command=x 'y", *RANKS, "--", "--scheduler=tcp://h:1"],
                 "python_worker: error: cannot split the worker command \"x 'y\": No closing "
                 "quotation"),
                (["--command= ", *RANKS, "--", "--scheduler=tcp://h:1"],
                 "python_worker: error: the worker command is empty"),
                (["--command=x", *RANKS, "--cwd=/no/such/dir", "--", "--scheduler=tcp://h:1"],
                 "python_worker: error: cannot run in /no/such/dir: No such file or directory"),
                (["--command=x", *RANKS, "--"],
                 "python_worker: error: the worker flags give no --scheduler=tcp://HOST:PORT")):
            with self.subTest(argv=argv):
                r = self.run_it(*argv)
                self.assertEqual((r.returncode, r.stdout), (2, ""))
                self.assertEqual(r.stderr.splitlines()[-1], message)

    def test_a_command_that_cannot_run(self):
        r = self.run_it("--command=/no/such/python t.py", *RANKS, "--", "--scheduler=tcp://h:1")
        self.assertEqual((r.returncode, r.stderr), (127, "python_worker: error: cannot run "
                                                         "'/no/such/python': No such file or "
                                                         "directory\n"))


class CarriedGlibcTest(unittest.TestCase):
    """A bundle whose MANIFEST.json says its programs need glibc 2.36 and that carries a C
    library, lib/glibc/, whose loader is a script printing its arguments."""

    def setUp(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.bundle = tmp.name
        self.glibc = os.path.join(self.bundle, "lib", "glibc")
        os.makedirs(self.glibc)
        self.manifest({"glibc_native": "2.36", "glibc_carried": "2.36"})
        loader = os.path.join(self.glibc, python_worker.LOADER)
        with open(loader, "w") as f:
            f.write('#!/bin/sh\necho "carried $*"\n')
        os.chmod(loader, 0o755)

    def manifest(self, fields):
        with open(os.path.join(self.bundle, "MANIFEST.json"), "w") as f:
            json.dump(fields, f)

    def test_older(self):
        for host, need, expected in (("2.31", "2.36", True), ("2.35", "2.36", True),
                                     ("2.36", "2.36", False), ("2.40", "2.36", False),
                                     ("3.1", "2.36", False), ("", "2.36", True),
                                     ("2.31", "", False)):
            with self.subTest(host=host, need=need):
                self.assertEqual(python_worker.older(host, need), expected)

    def test_when_the_carried_library_is_used(self):
        for choice, host, expected in (("auto", "2.31", self.glibc), ("auto", "2.36", None),
                                       ("always", "2.40", self.glibc), ("never", "2.17", None)):
            with self.subTest(choice=choice, host=host):
                self.assertEqual(python_worker.carried_glibc(self.bundle, choice, host), expected)
        with self.assertRaises(ValueError) as e:
            python_worker.carried_glibc(self.bundle, "on", "2.31")
        self.assertEqual(str(e.exception),
                         "R2SP_CARRIED_GLIBC must be auto, always or never, not 'on'")
        self.manifest({"glibc_native": "2.36", "glibc_carried": ""})  # carries none
        self.assertIsNone(python_worker.carried_glibc(self.bundle, "always", "2.31"))
        os.remove(os.path.join(self.bundle, "MANIFEST.json"))  # not a bundle
        self.assertIsNone(python_worker.carried_glibc(self.bundle, "always", "2.31"))

    def test_through_the_loader(self):
        python = os.path.realpath(sys.executable)
        self.assertEqual(python_worker.through_loader(
            [sys.executable, "t.py"], self.glibc, {"LD_LIBRARY_PATH": "/cuda"}),
            [os.path.join(self.glibc, python_worker.LOADER), "--library-path",
             self.glibc + ":/cuda:/lib64:/usr/lib64", "--argv0", sys.executable, python, "t.py"])
        self.assertEqual(python_worker.through_loader(["nosuch", "x"], self.glibc, {"PATH": "/"}),
                         ["nosuch", "x"])
        script = os.path.join(self.glibc, python_worker.LOADER)
        with self.assertRaises(ValueError) as e:
            python_worker.through_loader([script, "t.py"], self.glibc, {})
        self.assertEqual(str(e.exception), f"{script} is not an ELF program: on this host (glibc "
                         f"{python_worker.host_glibc()}) the worker command must start the Python "
                         "interpreter itself (e.g. python3 train.py), which runs through the "
                         "bundle's C library")

    def test_the_process(self):
        command = shlex.join([sys.executable, "-c", "pass"])
        for choice, expected in (("always", f"carried --library-path {self.glibc}:/lib64:/usr/lib64 "
                                            "--argv0 "
                                            f"{sys.executable} {os.path.realpath(sys.executable)} "
                                            "-c pass\n"), ("never", "")):
            with self.subTest(choice=choice):
                r = subprocess.run([PYTHON_WORKER, "--command=" + command, *RANKS,
                                    "--bundle=" + self.bundle, "--", "--scheduler=tcp://h:1"],
                                   capture_output=True, text=True, timeout=30,
                                   env={"PATH": os.environ["PATH"], "R2SP_CARRIED_GLIBC": choice})
                self.assertEqual((r.returncode, r.stdout, r.stderr), (0, expected, ""))


if __name__ == "__main__":
    junit_main.main()
