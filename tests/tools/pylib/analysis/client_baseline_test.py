"""tools/pylib/analysis/client_baseline.py: the two builds' sides and their exact worker
commands, the checks of a build's binaries and of what its workers import (on stand-in
packages), the script's step-times files, the per-run figures and the report, and the
interleaved runs on a stand-in for the job."""

import contextlib
import json
import os
import sys
import tempfile
import unittest
from unittest import mock

import junit_main
from pylib.analysis import client_baseline, client_bench, client_runs
from pylib.analysis.client_baseline import Build, StepSplit
from pylib.job.errors import JobError

ROOT = client_runs.ROOT
SCRIPT = os.path.join(ROOT, "examples", "pytorch", "fashion_mnist_cnn.py")


def options(*argv):
    return client_bench.parse_args(["--bin_dir=/b", "--measure=baseline", "--baseline=/base"]
                                   + list(argv))


def write_lines(path, rows, torn=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
        f.write(torn)


def steps(*pairs):
    """Step rows of (compute_s, interval_s) pairs, numbered from 0."""
    return [{"step": k, "compute_s": c, "interval_s": i} for k, (c, i) in enumerate(pairs)]


class OptionsTest(unittest.TestCase):
    def test_the_baseline_needs_a_checkout_and_its_bin_dir_defaults_to_its_bazel_bin(self):
        a = options("--baseline=rel/base")
        self.assertEqual((a.measure, a.baseline, a.baseline_bin_dir),
                         (["baseline"], os.path.abspath("rel/base"), ""))
        current, baseline = client_baseline.builds(a)
        self.assertEqual(current, Build("current", ROOT, "/b"))
        self.assertEqual(baseline, Build("baseline", os.path.abspath("rel/base"),
                                         os.path.abspath("rel/base/bazel-bin")))
        self.assertEqual(client_baseline.builds(options("--baseline_bin_dir=/bins"))[1].bin_dir,
                         "/bins")
        self.assertEqual((baseline.package_dir, baseline.core),
                         (os.path.abspath("rel/base/worker/python"),
                          os.path.abspath("rel/base/bazel-bin/worker/python/_core.so")))


class CommandsTest(unittest.TestCase):
    def test_each_side_runs_the_script_under_its_own_package(self):
        a = options()
        base = Build("baseline", "/base", "/base/bazel-bin")
        self.assertEqual(client_baseline.package_environment(base, {}),
                         ["PYTHONPATH=/base/worker/python",
                          "R2SP_CORE=/base/bazel-bin/worker/python/_core.so"])
        self.assertEqual(client_baseline.package_environment(base, {"PYTHONPATH": "/x:/y"})[0],
                         "PYTHONPATH=/base/worker/python:/x:/y")
        self.assertEqual(client_baseline.worker_command(a, base, "/out/run", {}), [
            "env", "PYTHONPATH=/base/worker/python",
            "R2SP_CORE=/base/bazel-bin/worker/python/_core.so", "/usr/bin/python3", SCRIPT,
            "--threads=1", "--lr=0.01", "--step_times=/out/run/step_times_{rank}.jsonl"])
        current = client_baseline.builds(a)[0]
        self.assertEqual(client_baseline.worker_command(a, current, "/r", {})[:3], [
            "env", f"PYTHONPATH={ROOT}/worker/python", "R2SP_CORE=/b/worker/python/_core.so"])

    def test_the_job_is_the_overhead_jobs_with_the_sides_binaries_and_command(self):
        a = options("--steps=30")
        base = Build("baseline", "/base", "/base/bazel-bin")
        script = client_baseline.worker_command(a, base, "/r", {})
        cmd = client_runs.launch_command(a, "asp", 2, "/r", True, script, base.bin_dir)
        plain = client_runs.launch_command(a, "asp", 2, "/r", python=True)
        self.assertEqual(cmd[:-2], plain[:-2])
        self.assertEqual(cmd[-2:], ["--bin_dir=/base/bazel-bin", "--worker_cmd=env "
                                    "PYTHONPATH=/base/worker/python "
                                    "R2SP_CORE=/base/bazel-bin/worker/python/_core.so "
                                    f"/usr/bin/python3 {SCRIPT} --threads=1 --lr=0.01 "
                                    "'--step_times=/r/step_times_{rank}.jsonl'"])
        self.assertEqual(plain[-2:], ["--bin_dir=/b",
                                      f"--worker_cmd=/usr/bin/python3 {SCRIPT} --threads=1 "
                                      "--lr=0.01"])


class BuildChecksTest(unittest.TestCase):
    def tree(self, d, config, binaries=client_baseline.BINARIES):
        """An output tree d/out/bazel-out/CONFIG/bin with `binaries`, and d/bazel-bin to it."""
        bin_dir = os.path.join(d, "out", "bazel-out", config, "bin")
        for b in binaries:
            os.makedirs(os.path.dirname(os.path.join(bin_dir, b)), exist_ok=True)
            open(os.path.join(bin_dir, b), "w").close()
        os.symlink(bin_dir, os.path.join(d, "bazel-bin"))
        return os.path.join(d, "bazel-bin")

    def test_an_opt_build_with_every_binary_passes(self):
        with tempfile.TemporaryDirectory() as d:
            bin_dir = self.tree(d, "k8-opt")
            self.assertEqual(client_baseline.bazel_config(bin_dir), "k8-opt")
            client_baseline.check_build(Build("baseline", d, bin_dir))
        self.assertIsNone(client_baseline.bazel_config("/usr/bin"))

    def test_a_missing_binary_or_another_configuration_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            bin_dir = self.tree(d, "k8-opt", client_baseline.BINARIES[:2])
            with self.assertRaises(JobError) as e:
                client_baseline.check_build(Build("baseline", d, bin_dir))
            self.assertEqual(str(e.exception),
                             f"baseline build: no worker/worker, worker/python/_core.so in "
                             f"{bin_dir}; build them in {d} with bazel build -c opt //scheduler "
                             "//server //worker //worker/python:_core.so")
        with tempfile.TemporaryDirectory() as d:
            bin_dir = self.tree(d, "k8-fastbuild")
            with self.assertRaises(JobError) as e:
                client_baseline.check_build(Build("current", d, bin_dir))
            self.assertEqual(str(e.exception),
                             f"current build: {bin_dir} is bazel-out/k8-fastbuild, not an opt "
                             "build; build with -c opt (or name the opt bin directory)")

    def test_the_workers_import_is_checked_where_it_comes_from(self):
        # A stand-in r2sp package that registers an r2sp._core from R2SP_CORE, as the real
        # one loads it.
        package = ("import os, sys, types\n"
                   "_core = types.ModuleType('r2sp._core')\n"
                   "_core.__file__ = os.environ['R2SP_CORE']\n"
                   "sys.modules['r2sp._core'] = _core\n")
        with tempfile.TemporaryDirectory() as d:
            checkout = os.path.join(d, "base")
            write_lines(os.path.join(checkout, "worker", "python", "r2sp", "__init__.py"), [],
                        package)
            build = Build("baseline", checkout, os.path.join(d, "bins"))
            a = options()
            a.python = sys.executable
            self.assertEqual(client_baseline.check_import(a, build, {}), (
                os.path.join(checkout, "worker", "python", "r2sp", "__init__.py"),
                os.path.join(d, "bins", "worker", "python", "_core.so")))
            # A PYTHONPATH of the caller's comes after the build's package.
            other = os.path.join(d, "other")
            write_lines(os.path.join(other, "r2sp", "__init__.py"), [], package)
            self.assertEqual(client_baseline.check_import(a, build, {"PYTHONPATH": other})[0],
                             os.path.join(checkout, "worker", "python", "r2sp", "__init__.py"))
            # A checkout without the package: the import fails, and says how.
            with self.assertRaises(JobError) as e:
                client_baseline.check_import(a, Build("baseline", other, "/bins"), {})
            self.assertEqual(str(e.exception),
                             f"baseline build: {sys.executable} cannot import r2sp from "
                             f"{other}/worker/python: ModuleNotFoundError: No module named "
                             "'r2sp'")
            # An extension from elsewhere than the build's bin_dir.
            write_lines(os.path.join(checkout, "worker", "python", "r2sp", "__init__.py"), [],
                        package.replace("os.environ['R2SP_CORE']", "'/elsewhere/_core.so'"))
            with self.assertRaises(JobError) as e:
                client_baseline.check_import(a, build, {})
            self.assertEqual(str(e.exception),
                             f"baseline build: r2sp came from {checkout}/worker/python/r2sp/"
                             f"__init__.py with /elsewhere/_core.so, not from {checkout}/worker/"
                             f"python with {d}/bins/worker/python/_core.so")

    def test_a_checkouts_commit(self):
        with tempfile.TemporaryDirectory() as d:
            self.assertEqual(client_baseline.checkout_commit(d), "unknown")


class StepTimesTest(unittest.TestCase):
    def test_each_workers_rows_in_step_order(self):
        with tempfile.TemporaryDirectory() as d:
            write_lines(os.path.join(d, "step_times_0.jsonl"),
                        [steps((0.05, 0.06))[0], {"step": 1, "compute_s": 0.04},
                         {"step": 2, "compute_s": 0.05, "interval_s": 0.07}, [1, 2]],
                        '{"step": 3, "compu')  # torn by a kill
            write_lines(os.path.join(d, "step_times_1.jsonl"),
                        list(reversed(steps((0.1, 0.2), (0.1, 0.3)))))
            write_lines(os.path.join(d, "step_times_x.jsonl"), steps((1, 1)))
            write_lines(os.path.join(d, "metrics_worker0.jsonl"), steps((1, 1)))
            self.assertEqual(client_baseline.step_times(d), {
                0: [{"step": 0, "compute_s": 0.05, "interval_s": 0.06},
                    {"step": 2, "compute_s": 0.05, "interval_s": 0.07}],
                1: steps((0.1, 0.2), (0.1, 0.3))})
            self.assertEqual(client_baseline.step_times(os.path.join(d, "none")), {})


class FiguresTest(unittest.TestCase):
    def test_a_workers_median_outside_and_inside_compute_after_the_skip(self):
        rows = steps((0.5, 2.0), (0.050, 0.060), (0.040, 0.054), (0.060, 0.080))
        split = client_baseline.worker_step_split(rows, 1)
        self.assertAlmostEqual(split.outside_s, 0.014)  # of 0.010, 0.014, 0.020
        self.assertAlmostEqual(split.compute_s, 0.050)
        with self.assertRaises(ValueError) as e:
            client_baseline.worker_step_split(rows, 4)
        self.assertEqual(str(e.exception), "no steps after the first 4")

    def test_a_runs_figures_are_the_median_over_its_workers(self):
        by_rank = {0: steps((0.05, 0.06), (0.05, 0.06)), 1: steps((0.07, 0.10), (0.07, 0.10))}
        split = client_baseline.run_step_split(by_rank, 0)
        self.assertAlmostEqual(split.outside_s, 0.02)  # workers' 0.01 and 0.03
        self.assertAlmostEqual(split.compute_s, 0.06)
        with self.assertRaises(ValueError) as e:
            client_baseline.run_step_split({}, 0)
        self.assertEqual(str(e.exception), "no step times")

    def test_run_figures_need_every_workers_step_times_and_metrics(self):
        with tempfile.TemporaryDirectory() as d:
            write_lines(os.path.join(d, "step_times_0.jsonl"), steps((0.05, 0.06), (0.05, 0.07)))
            with self.assertRaises(JobError) as e:
                client_baseline.run_figures(d, 2, 0)
            self.assertEqual(str(e.exception), f"{d}: step times of 1 workers, 2 workers")
            with self.assertRaises(JobError) as e:
                client_baseline.run_figures(d, 1, 0)
            self.assertEqual(str(e.exception), f"{d}: no worker metrics")
            write_lines(os.path.join(d, "metrics_worker0.jsonl"),
                        [{"worker": 0, "clock": k, "push_s": 0.002, "pull_s": 0.001, "t": k}
                         for k in range(2)])
            figures = client_baseline.run_figures(d, 1, 0)
        self.assertEqual(sorted(figures), ["comm_s", "compute_s", "outside_s"])
        self.assertAlmostEqual(figures["outside_s"], 0.015)
        self.assertAlmostEqual(figures["compute_s"], 0.05)
        self.assertAlmostEqual(figures["comm_s"], 0.003)

    def test_the_report(self):
        def run(outside, compute=0.05, comm=0.01):
            return {"outside_s": outside, "compute_s": compute, "comm_s": comm}

        runs = {"current": [run(0.010), run(0.012, 0.06), run(0.009)],
                "baseline": [run(0.020), run(0.012, 0.04, 0.02), run(0.010)]}
        lines, data, result = client_baseline.baseline_report(runs, {"current": {"commit": "a"}})
        self.assertEqual(lines, [
            "per step outside the script's compute (interval - forward and backward), ms: "
            "median (min-max) over repeats",
            "  current build       10.00 (9.00-12.00)",
            "  baseline build      12.00 (10.00-20.00)",
            "  current / baseline  0.900 (0.500-1.000)",
            "  beside it, ms:      the script's compute    push+pull (workers' metrics)",
            "    current           50.00 (50.00-60.00)     10.00 (10.00-10.00)",
            "    baseline          50.00 (40.00-50.00)     10.00 (10.00-20.00)"])
        self.assertEqual(result, ["client_outside_compute_ratio=0.900"])
        self.assertEqual([round(r, 9) for r in data["current_over_baseline"]["runs"]],
                         [0.5, 1.0, 0.9])
        self.assertEqual(data["baseline_outside_s"], {"median": 0.012, "low": 0.010,
                                                      "high": 0.020,
                                                      "runs": [0.020, 0.012, 0.010]})
        self.assertEqual(sorted(data), [
            "baseline_comm_s", "baseline_compute_s", "baseline_outside_s", "builds",
            "current_comm_s", "current_compute_s", "current_outside_s", "current_over_baseline"])
        self.assertEqual(data["builds"], {"current": {"commit": "a"}})
        json.dumps(data)  # result.json takes it as it is


class MeasureTest(unittest.TestCase):
    def test_the_sides_alternate_and_each_run_reads_its_own_directory(self):
        # The job a stand-in that writes the files its workers would, the baseline's steps 5 ms
        # longer outside compute.
        launched = []

        def run_launch(args, mode, workers, run_dir, python, script, bin_dir):
            launched.append((os.path.basename(run_dir), mode, workers, bin_dir, script[1]))
            extra = 0.005 if bin_dir == "/base/bazel-bin" else 0.0
            for rank in range(workers):
                write_lines(os.path.join(run_dir, f"step_times_{rank}.jsonl"),
                            steps(*[(0.05, 0.06 + extra)] * 3))
                write_lines(os.path.join(run_dir, f"metrics_worker{rank}.jsonl"),
                            [{"worker": rank, "clock": k, "push_s": 0.002, "pull_s": 0.001,
                              "t": k} for k in range(3)])

        with tempfile.TemporaryDirectory() as d, contextlib.ExitStack() as stack:
            for name in ("check_build", "check_import"):
                stack.enter_context(mock.patch.object(
                    client_baseline, name, side_effect=lambda *a, **k: ("p", "c")))
            stack.enter_context(mock.patch.object(client_runs, "run_launch", run_launch))
            heard = []
            runs, described = client_baseline.measure_baseline(
                options("--skip=1", "--overhead_workers=3"), d, heard.append)
        self.assertEqual([(run, mode, workers, bin_dir) for run, mode, workers, bin_dir, _ in
                          launched],
                         [("baseline_current_0", "asp", 3, "/b"),
                          ("baseline_baseline_0", "asp", 3, "/base/bazel-bin"),
                          ("baseline_baseline_1", "asp", 3, "/base/bazel-bin"),
                          ("baseline_current_1", "asp", 3, "/b"),
                          ("baseline_current_2", "asp", 3, "/b"),
                          ("baseline_baseline_2", "asp", 3, "/base/bazel-bin")])
        self.assertEqual([env for *_, env in launched[:2]],
                         [f"PYTHONPATH={ROOT}/worker/python" + (
                             os.pathsep + os.environ["PYTHONPATH"]
                             if os.environ.get("PYTHONPATH") else ""),
                          "PYTHONPATH=/base/worker/python" + (
                              os.pathsep + os.environ["PYTHONPATH"]
                              if os.environ.get("PYTHONPATH") else "")])
        self.assertEqual(len(heard), 6)
        self.assertTrue(heard[1].startswith("repeat 0 baseline baseline    15.00 ms outside "
                                            "compute/step (compute 50.00, push+pull 3.00)"),
                        heard[1])
        self.assertEqual([round(r["outside_s"], 6) for r in runs["baseline"]], [0.015] * 3)
        self.assertEqual([round(r["outside_s"], 6) for r in runs["current"]], [0.01] * 3)
        self.assertEqual(described["baseline"]["bin_dir"], "/base/bazel-bin")
        self.assertEqual((described["current"]["package"], described["current"]["core"]),
                         ("p", "c"))


if __name__ == "__main__":
    junit_main.main()
