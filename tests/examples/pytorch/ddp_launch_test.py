"""Tests of examples/pytorch/r2sp_examples/ddp_launch.py and ddp_launch.py: each process's
torchrun environment, exit statuses, a failing process stopping the others."""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import example_paths

example_paths.use_torch_python()  # only for the same Python as the other tests; no torch needed
from r2sp_examples import ddp_launch  # noqa: E402

import junit_main  # noqa: E402

RECORD_ENV = ("import json, os, sys; print(json.dumps({k: os.environ[k] for k in "
              "('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
              "'MASTER_PORT')}))")


class DdpLaunchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def outputs(self, n):
        return [os.path.join(self.tmp.name, f"rank{r}.out") for r in range(n)]

    def test_rank_env_adds_torchruns_variables(self):
        env = ddp_launch.rank_env({"PATH": "/bin"}, 2, 3, 4567)
        self.assertEqual(env, {"PATH": "/bin", "RANK": "2", "WORLD_SIZE": "3", "LOCAL_RANK": "2",
                               "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
                               "MASTER_PORT": "4567"})

    def test_every_rank_gets_its_environment(self):
        paths = self.outputs(3)
        status = ddp_launch.run([sys.executable, "-c", RECORD_ENV], 3, port=29411,
                                stdout_paths=paths)
        self.assertEqual(status, 0)
        for rank, path in enumerate(paths):
            with open(path) as f:
                self.assertEqual(json.loads(f.read()), {
                    "RANK": str(rank), "WORLD_SIZE": "3", "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29411"})

    def test_a_failing_rank_stops_the_others_and_gives_its_status(self):
        script = ("import os, sys, time\n"
                  "if os.environ['RANK'] == '1': sys.exit(7)\n"
                  "time.sleep(60)\n")
        t0 = time.monotonic()
        status = ddp_launch.run([sys.executable, "-c", script], 3, stdout_paths=self.outputs(3))
        self.assertEqual(status, 7)
        self.assertLess(time.monotonic() - t0, 30)

    def test_timeout_stops_everything(self):
        status = ddp_launch.run([sys.executable, "-c", "import time; time.sleep(60)"], 2,
                                stdout_paths=self.outputs(2), timeout=0.5)
        self.assertEqual(status, 124)

    def test_bad_count(self):
        with self.assertRaises(ValueError) as e:
            ddp_launch.run([sys.executable, "-c", "pass"], 0)
        self.assertEqual(str(e.exception), "--nproc must be at least 1")

    def test_the_script_runs_a_command_per_rank(self):
        script = os.path.join(self.tmp.name, "record.py")
        with open(script, "w") as f:
            f.write(RECORD_ENV.replace("print(", "print(sys.argv[1:], "))
        out = subprocess.run([sys.executable, os.path.join(example_paths.EXAMPLES, "ddp_launch.py"),
                              "--nproc=2", "--port=29412", "--", script, "--x=1"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = sorted(out.stdout.splitlines())
        self.assertEqual([l.split(" ", 1)[0] for l in lines], ["['--x=1']"] * 2)
        self.assertEqual(sorted(json.loads(l.split(" ", 1)[1])["RANK"] for l in lines), ["0", "1"])


if __name__ == "__main__":
    junit_main.main()
