"""tools/pylib/simulation/cli.py: link rates, flags into scenarios, and clear errors."""

import io
import json
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from pylib.simulation import cli
import junit_main


class ParseRateTest(unittest.TestCase):
    def test_rates(self):
        self.assertEqual(cli.parse_rate("419mbit"), 419e6)
        self.assertEqual(cli.parse_rate("10gbit"), 10e9)
        self.assertEqual(cli.parse_rate("25Gbit"), 25e9)
        self.assertEqual(cli.parse_rate("1e9"), 1e9)
        self.assertIsNone(cli.parse_rate("unlimited"))
        with self.assertRaisesRegex(ValueError, "write e.g. 419mbit"):
            cli.parse_rate("fast")


class RunTest(unittest.TestCase):
    def test_table_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "out.json")
            args = cli.parser().parse_args(
                ["--modes=bsp,r2sp", "--workers=2", "--model_mb=1", "--compute_ms=100",
                 "--server_link=80mbit", "--iterations=5", f"--json={path}"])
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(cli.run(args), 0)
            lines = out.getvalue().splitlines()
            self.assertEqual([l.split()[0] for l in lines[1:3]], ["bsp", "r2sp"])
            self.assertEqual(len(lines), 5)   # and each job's two workers
            self.assertTrue(lines[3].startswith("bsp per worker (it/s, samples/s, batch): 0: "))
            with open(path) as f:
                runs = json.load(f)
            self.assertEqual([r["result"]["mode"] for r in runs], ["bsp", "r2sp"])
            self.assertEqual(runs[0]["scenario"]["server_link_bps"], 80e6)

    def test_bad_flags(self):
        for argv, message in ((["--modes=bsp,gossip"], "mode 'gossip'"),
                              (["--r2sp_slot=pull"], "push or push_pull"),
                              (["--slowdown=1,2", "--workers=3"], "one slowdown per worker"),
                              (["--hetero_batching"], "needs a per-sample compute time")):
            with self.assertRaisesRegex(ValueError, message):
                cli.scenarios(cli.parser().parse_args(argv))


if __name__ == "__main__":
    junit_main.main()
