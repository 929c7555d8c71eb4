"""tools/pylib/analysis/client_bench.py: tools/bench/pytorch_client's options, the median and
spread, push + pull per step from fabricated metrics files (the C++ worker's line format, which
Python workers write too), the scripts' result lines and the reports."""

import contextlib
import io
import json
import os
import tempfile
import unittest

import junit_main
from pylib.analysis import client_bench
from pylib.analysis.client_bench import Spread
from pylib.analysis.run_files import worker_metrics


def metrics_line(worker, clock, push, pull, t):
    """One iteration line exactly as worker/run_log.cc writes it."""
    return ('{"worker": %d, "clock": %d, "epoch": 0, "batch": 64, "compute_s": 0.050000, '
            '"wait_s": 0.000100, "push_s": %.6f, "pull_s": %.6f, "push_bytes": 13130280, '
            '"pull_bytes": 13130280, "loss": 2.302585, "gap_s": 0.000000, '
            '"early_partitions": 0, "pull_overlapped": false, "t": %.6f}\n'
            % (worker, clock, push, pull, t))


class OptionsTest(unittest.TestCase):
    def test_defaults(self):
        a = client_bench.parse_args([])
        self.assertEqual((a.measure, a.modes, a.processes, a.repeats, a.batch_size, a.steps,
                          a.skip, a.overhead_mode, a.push_codec, a.python),
                         (["overhead", "throughput"], ["asp", "r2sp", "bsp"], [2, 4], 3, 64, 60,
                          5, "asp", "fp32", "/usr/bin/python3"))
        self.assertEqual((a.baseline, a.baseline_bin_dir), ("", ""))

    def test_lists_are_split(self):
        a = client_bench.parse_args(["--measure=throughput", "--modes=r2sp, asp",
                                     "--processes=4", "--repeats=5"])
        self.assertEqual((a.measure, a.modes, a.processes, a.repeats),
                         (["throughput"], ["r2sp", "asp"], [4], 5))

    def test_variants_of_a_mode(self):
        a = client_bench.parse_args(["--modes=asp,asp@after", "--variant=after=--nooverlap_pulls",
                                     "--variant=fp16=--push_codec=fp16 --overlap"])
        self.assertEqual((a.modes, a.variants),
                         (["asp", "asp@after"], {"after": "--nooverlap_pulls",
                                                 "fp16": "--push_codec=fp16 --overlap"}))
        self.assertEqual(client_bench.split_mode("r2sp@fp16"), ("r2sp", "fp16"))
        b = client_bench.parse_args(["--modes=r2sp,r2sp@fc",
                                     "--scheduler_variant=fc=--r2sp_order=first_come"])
        self.assertEqual((b.variants, b.scheduler_variants),
                         ({}, {"fc": "--r2sp_order=first_come"}))
        self.assertEqual(client_bench.split_mode("bsp"), ("bsp", ""))

    def test_bad_options_are_refused(self):
        cases = [(["--repeats=2"], "--repeats must be at least 3 (a median of at least 3 runs)"),
                 (["--measure=latency"], "--measure: latency is not one of overhead, throughput, "
                                         "baseline"),
                 (["--measure=,"], "--measure: nothing is not one of overhead, throughput, "
                                   "baseline"),
                 (["--measure=overhead,baseline"], "--measure=baseline needs --baseline=DIR "
                                                   "(another checkout, built)"),
                 (["--modes=asp,hogwild"], "--modes must be a list of bsp, ssp, asp, r2sp, "
                                           "each optionally @VARIANT of a --variant or "
                                           "--scheduler_variant; not hogwild"),
                 (["--modes=asp@x"], "--modes must be a list of bsp, ssp, asp, r2sp, each "
                                     "optionally @VARIANT of a --variant or --scheduler_variant; "
                                     "not asp@x"),
                 (["--scheduler_variant=fc"], "--scheduler_variant=fc: write NAME=FLAGS, NAME a "
                                              "word, e.g. --scheduler_variant=pulls_after="
                                              "--nooverlap_pulls"),
                 (["--variant=--overlap"], "--variant=--overlap: write NAME=FLAGS, NAME a word, "
                                           "e.g. --variant=pulls_after=--nooverlap_pulls"),
                 (["--processes=2,x"], "--processes must be a list of counts >= 1, e.g. 2,4"),
                 (["--processes=0"], "--processes must be a list of counts >= 1, e.g. 2,4"),
                 (["--steps=5", "--skip=5"], "--skip must be in [0, --steps)"),
                 (["--threads=0"], "--batch_size, --steps, --overhead_workers, --threads and "
                                   "--servers must be at least 1")]
        for argv, message in cases:
            with self.subTest(argv=argv):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                    client_bench.parse_args(argv)
                self.assertEqual(e.exception.code, 2)
                self.assertTrue(err.getvalue().endswith(f"error: {message}\n"), err.getvalue())


class SpreadTest(unittest.TestCase):
    def test_odd_and_even_counts(self):
        self.assertEqual(Spread.of([3.0, 1.0, 2.0]), Spread(2.0, 1.0, 3.0, [3.0, 1.0, 2.0]))
        self.assertEqual(Spread.of([4.0, 1.0, 2.0, 10.0]).median, 3.0)
        self.assertEqual(Spread.of([0.0123, 0.0101, 0.0150]).text(1e3, 2), "12.30 (10.10-15.00)")

    def test_nothing_to_summarise(self):
        with self.assertRaises(ValueError) as e:
            Spread.of([])
        self.assertEqual(str(e.exception), "no runs to summarise")

    def test_interleaving_rotates(self):
        self.assertEqual([client_bench.interleaved(["a", "b", "c"], r) for r in range(4)],
                         [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]])


class GpuConfigurationTest(unittest.TestCase):
    def test_codecs_alone(self):
        self.assertEqual(client_bench.gpu_configuration("fp32"),
                         client_bench.GpuConfiguration("fp32", "", "", 1))
        self.assertEqual(client_bench.gpu_configuration("fp16"),
                         client_bench.GpuConfiguration(
                             "fp16", " --push_codec=fp16 --pull_codec=fp16", "", 1))

    def test_io_threads_reach_both_ends_and_servers_count(self):
        io = " --io_threads=4 --connections_per_peer=4"
        self.assertEqual(client_bench.gpu_configuration("fp32+io4"),
                         client_bench.GpuConfiguration("fp32_io4", io, io, 1))
        self.assertEqual(client_bench.gpu_configuration("fp32+s4"),
                         client_bench.GpuConfiguration("fp32_s4", "", "", 4))
        self.assertEqual(client_bench.gpu_configuration("fp16+s2+io4"),
                         client_bench.GpuConfiguration(
                             "fp16_s2_io4", " --push_codec=fp16 --pull_codec=fp16" + io, io, 2))

    def test_early_pulls_reach_the_worker(self):
        io = " --io_threads=4 --connections_per_peer=4"
        self.assertEqual(client_bench.gpu_configuration("fp32+ep"),
                         client_bench.GpuConfiguration("fp32_ep", " --early_pulls", "", 1))
        self.assertEqual(client_bench.gpu_configuration("fp32+io4+ep"),
                         client_bench.GpuConfiguration("fp32_io4_ep", io + " --early_pulls",
                                                       io, 1))
        self.assertEqual(client_bench.gpu_configuration("fp32+ep2"),
                         client_bench.GpuConfiguration(
                             "fp32_ep2", " --early_pulls --early_pulls_in_flight=2", "", 1))

    def test_bad_names_are_refused(self):
        with self.assertRaises(ValueError) as e:
            client_bench.gpu_configuration("bf16")
        self.assertEqual(str(e.exception), "bf16: a configuration starts with fp32 or fp16")
        rule = ("after the codec come +ioN (I/O threads and connections), +sN (servers) and "
                "+ep or +epN (early pulls, N in flight), each at most once, N in [1, 64]")
        for name in ("fp32+io", "fp32+s0", "fp32+io65", "fp32+s2+s4", "fp32+x4", "fp32+",
                     "fp32+s-1", "fp32+io4+io2", "fp32+ep+ep", "fp32+ep+ep2", "fp32+ep0"):
            with self.assertRaises(ValueError) as e:
                client_bench.gpu_configuration(name)
            self.assertEqual(str(e.exception), f"{name}: {rule}")


class MetricsTest(unittest.TestCase):
    def test_push_plus_pull_per_step_from_metrics_files(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "metrics_worker0.jsonl"), "w") as f:
                for i, (push, pull) in enumerate([(0.5, 0.5), (0.010, 0.002), (0.011, 0.004),
                                                  (0.009, 0.002)]):
                    f.write(metrics_line(0, i, push, pull, 100 + i))
                f.write('{"worker": 0, "event": "eval", "epoch": 0, "step": 4, '
                        '"test_accuracy": 0.5, "test_loss": 1.0, "train_loss": 1.0, '
                        '"elapsed_s": 1.0, "t": 105.0}\n')
            with open(os.path.join(d, "metrics_worker1.jsonl"), "w") as f:
                for i, (push, pull) in enumerate([(0.4, 0.4), (0.020, 0.010), (0.021, 0.010)]):
                    f.write(metrics_line(1, i, push, pull, 100 + i))
                f.write('{"worker": 1, "clock": 3, "epo')  # torn by a kill
            by_worker = worker_metrics(d)
            self.assertAlmostEqual(client_bench.comm_seconds_per_step(by_worker[0], 1), 0.012)
            self.assertAlmostEqual(client_bench.comm_seconds_per_step(by_worker[1], 1), 0.0305)
            self.assertAlmostEqual(client_bench.run_comm_seconds(by_worker, 1), 0.02125)
            # Both workers' rows as two runs of one worker: the medians over 5 steps.
            split = client_bench.phase_medians_ms([by_worker[0], by_worker[1]], 1)
            self.assertEqual(sorted(split), ["compute", "pull", "push", "wait"])
            self.assertAlmostEqual(split["compute"], 50.0)
            self.assertAlmostEqual(split["wait"], 0.1)
            self.assertAlmostEqual(split["push"], 11.0)
            self.assertAlmostEqual(split["pull"], 4.0)
            self.assertEqual(client_bench.split_text({"compute": 50.0, "wait": 0.1, "push": 11.04,
                                                      "pull": 4.0}),
                             "  worker 0 per step, median ms: compute 50.0, wait 0.1, push 11.0, "
                             "pull 4.0")
            with self.assertRaises(ValueError) as e:
                client_bench.phase_medians_ms([by_worker[1]], 3)
            self.assertEqual(str(e.exception), "no iterations after the first 3")
            with self.assertRaises(ValueError) as e:
                client_bench.comm_seconds_per_step(by_worker[1], 3)
            self.assertEqual(str(e.exception), "no iterations after the first 3")
        with self.assertRaises(ValueError) as e:
            client_bench.run_comm_seconds({}, 0)
        self.assertEqual(str(e.exception), "no worker metrics")


class GpuJobTest(unittest.TestCase):
    def test_the_launch_command_of_a_gpu_benchmarks_job(self):
        c = client_bench.gpu_configuration("fp32+io2+s2+ep2")
        self.assertEqual(
            client_bench.gpu_job_command("tools/launch", "BINS", "RUN", c,
                                         ["python3", "train.py", "--device=cuda"],
                                         "--batch_size=64 --max_steps=100", workers=4,
                                         sync="r2sp", timeout_s=600),
            ["tools/launch", "--bin_dir=BINS", "--quiet", "--run_dir=RUN", "--sync=r2sp",
             "--servers=2", "--workers=4",
             "--server_flags=--lr=0.01 --momentum=0.9 --io_threads=2 --connections_per_peer=2",
             "--worker_flags=--overlap --batch_size=64 --max_steps=100 --io_threads=2 "
             "--connections_per_peer=2 --early_pulls --early_pulls_in_flight=2",
             "--worker_cmd=python3 train.py --device=cuda", "--timeout=600"])

    def test_worker0s_rates_come_from_its_log(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "worker0.log"), "w") as f:
                f.write('worker 0: done\n{"samples_per_s": 900.0, '
                        '"steady_samples_per_s": 950.0}\n')
            self.assertEqual(client_bench.worker0_rates(d), {"steady": 950.0, "whole": 900.0})


class RoundsAgainstAloneTest(unittest.TestCase):
    def test_rounds_interleave_and_each_configuration_is_compared_with_the_script_alone(self):
        configurations = [client_bench.gpu_configuration(n) for n in ("fp32", "fp16+ep")]
        calls, alone_rates = [], iter([1000.0, 900.0, 950.0])
        with tempfile.TemporaryDirectory() as d:
            def run_alone():
                calls.append("alone")
                rate = next(alone_rates)
                return {"steady": rate, "whole": rate - 100}

            def run_job(c, i):
                calls.append(f"{c.key} {i}")
                run_dir = os.path.join(d, f"{c.key}_{i}")
                os.makedirs(run_dir)
                rate = 700.0 + 50 * i + (100 if c.key == "fp32" else 0)
                with open(os.path.join(run_dir, "worker0.log"), "w") as f:
                    f.write(json.dumps({"samples_per_s": rate - 200,
                                        "steady_samples_per_s": rate}) + "\n")
                with open(os.path.join(run_dir, "metrics_worker0.jsonl"), "w") as f:
                    for step in range(6):
                        f.write(metrics_line(0, step, 0.010 + i / 1000, 0.002, 100 + step))
                return run_dir

            r = client_bench.rounds_against_alone(3, configurations, run_alone, run_job)
        self.assertEqual(calls, ["alone", "fp32 0", "fp16_ep 0", "alone", "fp32 1", "fp16_ep 1",
                                 "alone", "fp32 2", "fp16_ep 2"])
        self.assertEqual(sorted(r), ["fp16_ep", "fp32"])
        fp32 = r["fp32"]
        self.assertEqual(fp32["codec"], "fp32")
        self.assertEqual(fp32["r2sp"]["runs"], [800.0, 850.0, 900.0])
        self.assertEqual(fp32["single"]["runs"], [1000.0, 900.0, 950.0])
        self.assertEqual(fp32["ratio"], 850.0 / 950.0)
        self.assertEqual(r["fp16_ep"]["ratio"], 750.0 / 950.0)
        self.assertEqual(r["fp16_ep"]["whole_run_ratio"], 550.0 / 850.0)
        self.assertAlmostEqual(fp32["split_ms"]["push"], 11.0)  # the rounds' 10, 11 and 12 ms
        self.assertAlmostEqual(fp32["split_ms"]["pull"], 2.0)


class ResultLinesTest(unittest.TestCase):
    LOG = ("W1126 worker 0 joined\n"
           "epoch 1: test accuracy 0.8000, test loss 0.5, train loss 0.6 (60 steps)\n"
           "{not json\n"
           '{"other": 1}\n'
           '{"samples_per_s": 812.5, "test_accuracy": 0.8, "seconds": 4.7, "rank": 0}\n')

    def test_the_last_result_line(self):
        self.assertEqual(client_bench.result_line(self.LOG),
                         {"samples_per_s": 812.5, "test_accuracy": 0.8, "seconds": 4.7, "rank": 0})
        with self.assertRaises(ValueError) as e:
            client_bench.result_line("Traceback ...\n")
        self.assertEqual(str(e.exception), "no result line (a JSON object with samples_per_s)")

    def test_a_jobs_samples_per_s_is_its_samples_over_the_span_it_trained(self):
        lines = [{"samples_per_s": 600.0, "samples": 3000, "started": 100.0, "ended": 105.0},
                 {"samples_per_s": 500.0, "samples": 3000, "started": 101.0, "ended": 107.0}]
        self.assertEqual(client_bench.job_samples_per_s(lines), 6000 / 7.0)
        cases = [([], "no processes' results"),
                 ([{"samples": 1, "started": 1.0}], "a result line has no started/ended times"),
                 ([{"samples": 1, "started": 1.0, "ended": 1.0}],
                  "the processes trained for no time")]
        for bad, message in cases:
            with self.subTest(message=message), self.assertRaises(ValueError) as e:
                client_bench.job_samples_per_s(bad)
            self.assertEqual(str(e.exception), message)


class RatesTest(unittest.TestCase):
    def test_steady_and_whole_run_rates_of_a_result_line(self):
        self.assertEqual(client_bench.rates({"samples_per_s": 5170.0,
                                             "steady_samples_per_s": 7517.5}),
                         {"steady": 7517.5, "whole": 5170.0})
        for line in ({"samples_per_s": 10.0}, {"samples_per_s": 10.0,
                                                "steady_samples_per_s": None}):
            with self.subTest(line=line), self.assertRaises(ValueError) as e:
                client_bench.rates(line)
            self.assertEqual(str(e.exception), "the result line has no steady rate (too few steps)")

    def test_ours_against_alone_steady_and_whole(self):
        ours = [{"steady": 700.0, "whole": 500.0}, {"steady": 800.0, "whole": 520.0},
                {"steady": 750.0, "whole": 510.0}]
        alone = [{"steady": 1000.0, "whole": 900.0}, {"steady": 900.0, "whole": 1000.0},
                 {"steady": 950.0, "whole": 800.0}]
        r = client_bench.compared_rates(ours, alone)
        self.assertEqual(r["r2sp"], {"median": 750.0, "low": 700.0, "high": 800.0,
                                     "runs": [700.0, 800.0, 750.0]})
        self.assertEqual(r["single"]["median"], 950.0)
        self.assertEqual(r["ratio"], 750.0 / 950.0)
        self.assertEqual((r["r2sp_whole_run"]["median"], r["single_whole_run"]["median"]),
                         (510.0, 900.0))
        self.assertEqual(r["whole_run_ratio"], 510.0 / 900.0)


class ReportTest(unittest.TestCase):
    def test_overhead(self):
        lines, data, result = client_bench.overhead_report(
            {"cpp": [0.010, 0.012, 0.011], "python": [0.011, 0.012, 0.0132]})
        self.assertEqual(lines, ["push+pull per step (ms): median (min-max) over repeats",
                                 "  C++ workers     11.00 (10.00-12.00)",
                                 "  Python workers  12.00 (11.00-13.20)",
                                 "  Python / C++    1.100 (1.000-1.200)   (check: <= 1.10)"])
        self.assertEqual(result, ["client_comm_overhead_ratio=1.100"])
        self.assertEqual(data["cpp_seconds"], {"median": 0.011, "low": 0.010, "high": 0.012,
                                               "runs": [0.010, 0.012, 0.011]})
        json.dumps(data)  # result.json takes it as it is

    def test_throughput(self):
        runs = {("ddp", 2): [100.0, 110.0, 90.0], ("asp", 2): [120.0, 110.0, 99.0]}
        lines, data, result = client_bench.throughput_report(runs, ["asp"], [2])
        self.assertEqual(lines, [
            "samples/s: median (min-max) over repeats; R2SP mode / DDP per repeat",
            "  2 processes  DDP (gloo)  100.0 (90.0-110.0)",
            "  2 processes  R2SP asp    110.0 (99.0-120.0)   / DDP 1.100 (1.000-1.200)"])
        self.assertEqual(result, ["asp_2_over_ddp=1.100"])
        self.assertEqual(sorted(data), ["asp_2", "asp_2_over_ddp", "ddp_2"])

    def test_a_variants_result_key(self):
        runs = {("ddp", 2): [100.0, 100.0, 100.0], ("asp@after", 2): [90.0, 95.0, 80.0]}
        _, _, result = client_bench.throughput_report(runs, ["asp@after"], [2])
        self.assertEqual(result, ["asp_after_2_over_ddp=0.900"])


if __name__ == "__main__":
    junit_main.main()
