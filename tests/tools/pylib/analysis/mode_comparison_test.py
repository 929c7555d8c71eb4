"""tools/pylib/mode_comparison.py: overlapping pushes, steady and job throughput, time to a
target accuracy from evaluation records, a run's figures, ratios to bsp and their medians over
rounds, the table, the RESULT line; and tools/compare_modes
end to end on fabricated run directories (the jobs themselves are not run)."""

import contextlib
import importlib.util
import io
import json
import os
import runpy
import shutil
import sys
import tempfile
import types
import unittest
from unittest import mock

from pylib.analysis import configurations as cfg
import junit_main
from pylib.analysis import mode_comparison as mc
from pylib.analysis import mode_jobs
from pylib.analysis import mode_plots

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def push(tid, start_us, dur_us):
    return {"name": "push", "ph": "X", "tid": tid, "ts": start_us, "dur": dur_us}


def rows(worker, times, batch):
    return [{"worker": worker, "t": t, "batch": batch, "wait_s": 0.001, "push_bytes": 1000}
            for t in times]


class OverlappingPushesTest(unittest.TestCase):
    def test_no_pushes(self):
        self.assertEqual(mc.overlapping_pushes([]), (0, 0))

    def test_one_at_a_time_do_not_overlap(self):
        events = [push(0, 0, 10), push(1, 10, 10), push(0, 25, 5)]
        self.assertEqual(mc.overlapping_pushes(events), (0, 3))

    def test_a_push_starting_during_another_workers_push_overlaps(self):
        events = [push(0, 0, 10), push(1, 5, 10)]
        self.assertEqual(mc.overlapping_pushes(events), (1, 2))

    def test_every_push_inside_a_long_one_counts(self):
        events = [push(0, 0, 100), push(1, 10, 5), push(2, 50, 5), push(1, 120, 5)]
        self.assertEqual(mc.overlapping_pushes(events), (2, 4))

    def test_the_same_workers_pushes_do_not_count(self):
        events = [push(0, 0, 10), push(0, 5, 10)]
        self.assertEqual(mc.overlapping_pushes(events), (0, 2))

    def test_the_later_ending_push_holds_the_link(self):
        # Worker 1 overlaps worker 0 and outlasts it; worker 0's next push overlaps worker 1.
        events = [push(0, 0, 10), push(1, 5, 20), push(0, 15, 5)]
        self.assertEqual(mc.overlapping_pushes(events), (2, 3))

    def test_other_events_are_ignored(self):
        events = [push(0, 0, 10), {"name": "wait", "tid": 1, "ts": 5, "dur": 10}]
        self.assertEqual(mc.overlapping_pushes(events), (0, 1))

    def test_input_order_does_not_matter(self):
        events = [push(1, 5, 10), push(0, 0, 10)]
        self.assertEqual(mc.overlapping_pushes(events), (1, 2))


class ThroughputTest(unittest.TestCase):
    def test_iterations_by_worker_sorted_by_time(self):
        metrics = rows(1, [2.0, 1.0], 8) + rows(0, [3.0], 4)
        self.assertEqual(mc.iterations_by_worker(metrics), {0: [(3.0, 4)], 1: [(1.0, 8), (2.0, 8)]})

    def test_steady_rate_leaves_out_the_first_iterations_and_sums_workers(self):
        # Worker 0: one iteration a second after start-up; worker 1: two a second.
        metrics = rows(0, [0, 5, 6, 7, 8], 10) + rows(1, [0, 9, 9.5, 10, 10.5, 11], 10)
        self.assertAlmostEqual(mc.steady_iterations_per_second(metrics), 1.0 + 2.0)

    def test_steady_rate_needs_iterations_after_the_skipped_ones(self):
        metrics = rows(0, [0, 1, 2, 3], 10) + rows(1, [0, 1, 2], 10)
        self.assertIsNone(mc.steady_iterations_per_second(metrics))
        self.assertIsNone(mc.steady_iterations_per_second([]))

    def test_job_rate_spans_the_whole_job(self):
        # Worker 0 stops at t=4; worker 1 trains alone until t=9.
        metrics = rows(0, [0, 1, 2, 3, 4], 10) + rows(1, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 5)
        self.assertAlmostEqual(mc.job_samples_per_second(metrics), (2 * 10 + 7 * 5) / (9 - 2))

    def test_job_rate_needs_iterations_and_a_span(self):
        self.assertIsNone(mc.job_samples_per_second(rows(0, [0, 1, 2], 10)))
        self.assertIsNone(mc.job_samples_per_second(rows(0, [0, 1, 2, 2], 10)))
        self.assertIsNone(mc.job_samples_per_second([]))

    def test_link_rate_between_samples(self):
        links = [{"t": 0.0, "host": "server0", "rx_bytes": 0, "tx_bytes": 0},
                 {"t": 0.0, "host": "server1", "rx_bytes": 0, "tx_bytes": 0},
                 {"t": 0.5, "host": "server0", "rx_bytes": 1000, "tx_bytes": 0},
                 {"t": 1.0, "host": "server0", "rx_bytes": 1500, "tx_bytes": 0}]
        self.assertEqual(mc.link_rate(links), [(0.5, 2000.0), (1.0, 1000.0)])
        self.assertEqual(mc.link_rate(links, "server1"), [])


class TimeToAccuracyTest(unittest.TestCase):
    EVALS = [{"elapsed_s": 30.0, "test_accuracy": 0.80}, {"elapsed_s": 60.0, "test_accuracy": 0.86},
             {"elapsed_s": 90.0, "test_accuracy": 0.88}]

    def test_first_evaluation_at_or_above_the_target(self):
        self.assertEqual(mc.time_to_accuracy(self.EVALS, 0.85), 60.0)
        self.assertEqual(mc.time_to_accuracy(self.EVALS, 0.86), 60.0)
        self.assertEqual(mc.time_to_accuracy(self.EVALS, 0.5), 30.0)

    def test_not_reached(self):
        self.assertIsNone(mc.time_to_accuracy(self.EVALS, 0.9))
        self.assertIsNone(mc.time_to_accuracy([], 0.5))

    def test_earliest_of_any_order(self):
        self.assertEqual(mc.time_to_accuracy(list(reversed(self.EVALS)), 0.85), 60.0)


class ConfiguredLinkTest(unittest.TestCase):
    def test_server_link_in_bytes_per_second(self):
        net = "--cpu_quota=0:0.5 --server_link=200mbit --delay_ms=1"
        self.assertEqual(mc.configured_link_bytes_per_second(net), 200e6 / 8)

    def test_a_dilated_link_is_shaped_to_its_rate_over_the_dilation(self):
        net = "--colocate --worker_link=419mbit --time_dilation=5"
        self.assertEqual(mc.configured_link_bytes_per_second(net), 83.8e6 / 8)

    def test_unset(self):
        self.assertIsNone(mc.configured_link_bytes_per_second(""))
        self.assertIsNone(mc.configured_link_bytes_per_second("--worker_link=1gbit"))

    def test_bad_rate(self):
        with self.assertRaises(ValueError):
            mc.configured_link_bytes_per_second("--server_link=fast")

    def test_colocated_servers_and_ddp_watch_worker_0s_link(self):
        net = "--server_link=100mbit --worker_link=1gbit"
        self.assertEqual(mc.configured_link_bytes_per_second(net, ddp=True), 1e9 / 8)
        self.assertEqual(mc.configured_link_bytes_per_second("--colocate --worker_link=419mbit"),
                         419e6 / 8)
        self.assertEqual((mc.watched_host("ddp+fp16"), mc.watched_host("r2sp")),
                         ("worker0", "server0"))


def run_data(times_by_worker, batch=10, summary=None, events=(), evals=(), links=()):
    metrics = [row for w, times in times_by_worker.items() for row in rows(w, times, batch)]
    base = {"wall_seconds": 10.0, "iterations": 5, "final_test_accuracy": 0.9,
            "cpu_cores": {"scheduler": 0.1, "server0": 0.25, "server1": 0.25, "worker0": 0.5,
                          "worker1": 0.75},
            "machine_busy_cores": 1.5}
    return mc.RunData(dict(base, **(summary or {})), list(events), metrics, list(evals), list(links))


class RunFiguresTest(unittest.TestCase):
    def test_figures(self):
        run = run_data({0: [0, 1, 2, 3, 4], 1: [0, 1, 2, 3, 4]},
                       events=[push(0, 0, 10), push(1, 5, 10)],
                       evals=[{"elapsed_s": 3.5, "test_accuracy": 0.6}],
                       links=[{"t": 0.0, "host": "server0", "rx_bytes": 0, "tx_bytes": 100},
                              {"t": 1.0, "host": "server0", "rx_bytes": 500, "tx_bytes": 350}])
        f = mc.run_figures(run, workers=2, target_accuracy=0.5, configured=1000.0)
        self.assertAlmostEqual(f["iterations_per_s"], 2.0)
        self.assertAlmostEqual(f["samples_per_s"], 20.0)
        self.assertAlmostEqual(f["job_samples_per_s"], 2 * 2 * 10 / 2)
        self.assertEqual(f["time_to_target_s"], 3.5)
        self.assertEqual(f["final_accuracy"], 0.9)
        self.assertAlmostEqual(f["wait_ms"], 1.0)
        self.assertAlmostEqual(f["link_utilisation"], 0.5)
        self.assertAlmostEqual(f["link_out_utilisation"], 0.25)  # pulls: out of the server
        self.assertAlmostEqual(f["server_cores"], 0.5)
        self.assertAlmostEqual(f["worker_cores"], 1.25)
        self.assertEqual(f["machine_busy_cores"], 1.5)
        self.assertEqual((f["overlapping_pushes"], f["pushes"]), (1, 2))
        self.assertEqual(f["throughput"], f["samples_per_s"])

    def test_a_ddp_run_reads_worker_0s_link(self):
        run = run_data({0: [0, 1, 2, 3, 4]},
                       links=[{"t": 0.0, "host": "worker0", "rx_bytes": 0, "tx_bytes": 0},
                              {"t": 1.0, "host": "worker0", "rx_bytes": 800, "tx_bytes": 400}])
        f = mc.run_figures(run, workers=1, target_accuracy=0.5, configured=1000.0,
                           host="worker0")
        self.assertEqual((f["link_utilisation"], f["link_out_utilisation"]), (0.8, 0.4))
        self.assertIsNone(mc.run_figures(run, workers=1, target_accuracy=0.5,
                                         configured=1000.0)["link_utilisation"])

    def test_target_not_reached_and_no_link(self):
        run = run_data({0: [0, 1, 2, 3, 4]}, evals=[{"elapsed_s": 3.5, "test_accuracy": 0.4}])
        f = mc.run_figures(run, workers=1, target_accuracy=0.5, configured=None)
        self.assertIsNone(f["time_to_target_s"])
        self.assertIsNone(f["link_utilisation"])
        self.assertIsNone(f["link_out_utilisation"])

    def test_too_few_iterations_fall_back_to_the_summary(self):
        run = run_data({0: [0, 1]}, summary={"iterations": 2, "wall_seconds": 4.0})
        f = mc.run_figures(run, workers=2, target_accuracy=0.5, configured=None)
        self.assertAlmostEqual(f["iterations_per_s"], 2 * 2 / 4.0)
        self.assertIsNone(f["job_samples_per_s"])

    def test_synthetic_workload_compares_iterations(self):
        run = run_data({0: [0, 1, 2, 3, 4]}, batch=0)
        f = mc.run_figures(run, workers=1, target_accuracy=0.5, configured=None)
        self.assertIsNone(f["samples_per_s"])
        self.assertIsNone(f["job_samples_per_s"])
        self.assertAlmostEqual(f["throughput"], f["iterations_per_s"])

    def test_without_metrics(self):
        run = mc.RunData({"wall_seconds": 2.0, "iterations": 4}, [], [], [], [])
        f = mc.run_figures(run, workers=1, target_accuracy=0.5, configured=None)
        self.assertEqual(f["iterations_per_s"], 2.0)
        self.assertIsNone(f["wait_ms"])
        self.assertIsNone(f["server_cores"])
        self.assertIsNone(f["final_accuracy"])


def figures(throughput, job=None, overlaps=0, pushes=60, **more):
    f = {key: None for _, key, _, _ in mc.COLUMNS}
    f.update(throughput=throughput, samples_per_s=throughput, job_samples_per_s=job,
             overlapping_pushes=overlaps, pushes=pushes)
    f.update(more)
    return f


class RatiosTest(unittest.TestCase):
    RUNS = [{"bsp": figures(100, 50), "r2sp": figures(150, 40)},
            {"bsp": figures(200, 50), "r2sp": figures(200, None)},
            {"bsp": figures(100, 0), "r2sp": figures(120, 60)}]

    def test_per_round_ratios(self):
        self.assertEqual(mc.vs_bsp(self.RUNS, "r2sp", "throughput"), [1.5, 1.0, 1.2])
        self.assertEqual(mc.vs_bsp(self.RUNS, "bsp", "throughput"), [1.0, 1.0, 1.0])

    def test_missing_or_zero_figures_give_no_ratio(self):
        self.assertEqual(mc.vs_bsp(self.RUNS, "r2sp", "job_samples_per_s"), [0.8, None, None])

    def test_result_line_carries_medians_of_the_ratios(self):
        self.assertEqual(mc.result_line(["bsp", "r2sp"], self.RUNS),
                         "RESULT r2sp_vs_bsp_throughput=1.20 r2sp_vs_bsp_job_throughput=0.80")

    def test_median_of_ratios_is_not_ratio_of_medians(self):
        runs = [{"bsp": figures(100), "x": figures(300)}, {"bsp": figures(300), "x": figures(100)},
                {"bsp": figures(200), "x": figures(220)}]
        self.assertEqual(mc.result_line(["bsp", "x"], runs), "RESULT x_vs_bsp_throughput=1.10")

    def test_result_line_without_bsp(self):
        self.assertEqual(mc.result_line(["r2sp"], self.RUNS), "RESULT")

    def test_result_keys_spell_codecs_with_underscores_and_compare_to_plain_bsp(self):
        runs = [{"bsp": figures(100), "bsp+fp16": figures(120), "r2sp+topk:0.01": figures(150),
                 "r2sp+csc:0.05,fp16,chunk=4096": figures(300)}]
        self.assertEqual(mc.result_line(list(runs[0]), runs),
                         "RESULT bsp+fp16_vs_bsp_throughput=1.20 "
                         "r2sp+topk_0.01_vs_bsp_throughput=1.50 "
                         "r2sp+csc_0.05_fp16_chunk_4096_vs_bsp_throughput=3.00")

    def test_a_codec_of_bsp_is_no_baseline(self):
        runs = [{"bsp+fp16": figures(100), "r2sp": figures(150)}]
        self.assertEqual(mc.result_line(["bsp+fp16", "r2sp"], runs), "RESULT")


class CellTest(unittest.TestCase):
    def test_single_run(self):
        self.assertEqual(mc.cell([12.34], "{:.1f}", repeated=False), "12.3")

    def test_repeated_runs_give_median_and_range(self):
        self.assertEqual(mc.cell([3.0, 1.0, 2.0], "{:.1f}", repeated=True), "2.0 (1.0-3.0)")

    def test_runs_without_the_figure_are_counted(self):
        self.assertEqual(mc.cell([None, 4.0, 2.0], "{:.1f}", True, "not reached"),
                         "3.0 (2.0-4.0), 1 not reached")

    def test_no_run_has_it(self):
        self.assertEqual(mc.cell([None], "{:.1f}", False, "not reached"), "not reached")
        self.assertEqual(mc.cell([], "{:.1f}", True), "n/a")

    def test_percent(self):
        self.assertEqual(mc.cell([0.5], "{:.0%}", False), "50%")


class TableTest(unittest.TestCase):
    def test_one_round(self):
        runs = [{"bsp": figures(100, 50, overlaps=13), "r2sp": figures(150, 60, overlaps=0)}]
        lines = mc.table(0.85, ["bsp", "r2sp"], runs).splitlines()
        headers = [h.strip() for h in lines[0].strip("|").split("|")]
        self.assertEqual(headers[0], "mode")
        self.assertIn("time to 0.85 (s)", headers)
        self.assertEqual(headers[-3:], ["overlapping pushes", "vs bsp (samples/s)", "vs bsp (job)"])
        self.assertEqual(lines[1], "|---" * len(headers) + "|")
        r2sp = dict(zip(headers, (c.strip() for c in lines[3].strip("|").split("|"))))
        self.assertEqual(r2sp["mode"], "r2sp")
        self.assertEqual(r2sp["samples/s"], "150")
        self.assertEqual(r2sp["time to 0.85 (s)"], "not reached")
        self.assertEqual(r2sp["overlapping pushes"], "0 of 60")
        self.assertEqual(r2sp["vs bsp (samples/s)"], "1.50")
        self.assertEqual(r2sp["vs bsp (job)"], "1.20")

    def test_repeated_rounds_show_ranges(self):
        runs = [{"bsp": figures(100, 50)}, {"bsp": figures(120, 50)}]
        text = mc.table(0.5, ["bsp"], runs)
        self.assertIn("| 110 (100-120) |", text)
        self.assertIn("1.00 (1.00-1.00)", text)
        self.assertIn("0 (0-0) of 60", text)

    def test_ddp_rows_the_worker_column_and_ratios_to_ddp(self):
        runs = [{"bsp": figures(100, 50, time_to_target_s=40.0),
                 "r2sp": figures(150, 60, time_to_target_s=20.0),
                 "ddp": figures(120, 40, pushes=0, time_to_target_s=30.0)}]
        labels = {"bsp": "r2sp client (script)", "r2sp": "r2sp client (script)",
                  "ddp": "DDP (script)"}
        lines = mc.table(0.85, ["bsp", "r2sp", "ddp"], runs, labels).splitlines()
        headers = [h.strip() for h in lines[0].strip("|").split("|")]
        self.assertEqual(headers[:2], ["mode", "worker"])
        self.assertEqual(headers[-6:], ["overlapping pushes", "vs bsp (samples/s)", "vs bsp (job)",
                                        "vs ddp (samples/s)", "vs ddp (job)",
                                        "vs ddp (time to target)"])
        rows = [dict(zip(headers, (c.strip() for c in line.strip("|").split("|"))))
                for line in lines[2:]]
        self.assertEqual([(r["mode"], r["worker"], r["vs ddp (samples/s)"], r["vs ddp (job)"],
                           r["vs ddp (time to target)"], r["vs bsp (samples/s)"]) for r in rows],
                         [("bsp", "r2sp client (script)", "0.83", "1.25", "0.75", "1.00"),
                          ("r2sp", "r2sp client (script)", "1.25", "1.50", "1.50", "1.50"),
                          ("ddp", "DDP (script)", "1.00", "1.00", "1.00", "1.20")])
        self.assertEqual(rows[2]["overlapping pushes"], "0 of 0")

    def test_result_line_with_ddp(self):
        runs = [{"r2sp": figures(150, 60, time_to_target_s=20.0),
                 "ddp": figures(100, 40, time_to_target_s=30.0),
                 "ddp+fp16": figures(50, None, time_to_target_s=None)}]
        self.assertEqual(mc.result_line(["r2sp", "ddp", "ddp+fp16"], runs),
                         "RESULT r2sp_vs_ddp_throughput=1.50 ddp+fp16_vs_ddp_throughput=0.50 "
                         "r2sp_vs_ddp_job_throughput=1.50 r2sp_vs_ddp_time_to_target=1.50")

    def test_without_plain_ddp_the_first_ddp_configuration_is_the_baseline(self):
        runs = [{"bsp+fp16@overlap": figures(137, 40, time_to_target_s=870.0),
                 "ddp+fp16": figures(125, 50, pushes=0, time_to_target_s=900.0),
                 "ddp+fp16@x": figures(100, 25, pushes=0, time_to_target_s=None)}]
        modes = list(runs[0])
        self.assertEqual(mc.baselines(modes), [("ddp", "ddp+fp16")])
        lines = mc.table(0.88, modes, runs).splitlines()
        headers = [h.strip() for h in lines[0].strip("|").split("|")]
        self.assertEqual(headers[-3:], ["vs ddp+fp16 (samples/s)", "vs ddp+fp16 (job)",
                                        "vs ddp+fp16 (time to target)"])
        rows = [[c.strip() for c in line.strip("|").split("|")][-3:] for line in lines[2:]]
        self.assertEqual(rows, [["1.10", "0.80", "1.03"], ["1.00", "1.00", "1.00"],
                                ["0.80", "0.50", "n/a"]])
        self.assertEqual(mc.result_line(modes, runs),
                         "RESULT bsp+fp16@overlap_vs_ddp+fp16_throughput=1.10 "
                         "ddp+fp16@x_vs_ddp+fp16_throughput=0.80 "
                         "bsp+fp16@overlap_vs_ddp+fp16_job_throughput=0.80 "
                         "ddp+fp16@x_vs_ddp+fp16_job_throughput=0.50 "
                         "bsp+fp16@overlap_vs_ddp+fp16_time_to_target=1.03")

    def test_plain_ddp_is_the_baseline_where_it_ran(self):
        self.assertEqual(mc.baselines(["ddp+fp16", "bsp", "ddp"]), [("bsp", "bsp"), ("ddp", "ddp")])
        self.assertEqual(mc.baselines(["r2sp", "bsp+fp16"]), [])

    def test_without_bsp_no_ratio_columns(self):
        text = mc.table(0.5, ["asp"], [{"asp": figures(100)}])
        self.assertNotIn("vs bsp", text)

    def test_codec_rows_keep_their_names_and_compare_to_plain_bsp(self):
        runs = [{"bsp": figures(100, 50), "r2sp+topk:0.01,fp16": figures(250, 100)}]
        lines = mc.table(0.85, ["bsp", "r2sp+topk:0.01,fp16"], runs).splitlines()
        headers = [h.strip() for h in lines[0].strip("|").split("|")]
        row = dict(zip(headers, (c.strip() for c in lines[3].strip("|").split("|"))))
        self.assertEqual(row["mode"], "r2sp+topk:0.01,fp16")
        self.assertEqual(row["vs bsp (samples/s)"], "2.50")
        self.assertEqual(row["vs bsp (job)"], "2.00")


class TimeToTargetBarsTest(unittest.TestCase):
    def test_median_range_and_runs_that_reached_it(self):
        runs = [{"bsp": figures(1, time_to_target_s=30.0), "ddp": figures(1)},
                {"bsp": figures(1, time_to_target_s=10.0), "ddp": figures(1)},
                {"bsp": figures(1, time_to_target_s=None), "ddp": figures(1)}]
        self.assertEqual(mode_plots.time_to_target_bars(["bsp", "ddp"], runs),
                         [("bsp", 20.0, 10.0, 30.0, 2, 3), ("ddp", None, None, None, 0, 3)])


def write_run_dir(run_dir, workers=2, iterations=5, interval=0.1, batch=32, evals=(),
                  overlap=False):
    """A run directory as tools/launch leaves it (summary, timeline, metrics with evaluations)."""
    os.makedirs(run_dir, exist_ok=True)
    events = []
    for w in range(workers):
        with open(os.path.join(run_dir, f"metrics_worker{w}.jsonl"), "w") as f:
            for i in range(iterations):
                t = 1000.0 + i * interval
                f.write(json.dumps({"worker": w, "clock": i, "epoch": 0, "batch": batch,
                                    "compute_s": 0.01, "wait_s": 0.002, "push_s": 0.001,
                                    "pull_s": 0.001, "push_bytes": 4000, "pull_bytes": 4000,
                                    "loss": 1.0, "gap_s": 0.0, "t": t}) + "\n")
                start = int(t * 1e6) + (0 if overlap else w * 1000)
                events.append(push(w, start, 2000 if overlap else 500))
            for e in evals if w == 0 else ():
                f.write(json.dumps(dict({"worker": 0, "event": "eval", "test_loss": 0.4,
                                         "train_loss": 0.5, "t": 1000.0 + e["elapsed_s"]}, **e))
                        + "\n")
            f.write('{"worker": ')  # killed mid-line
    with open(os.path.join(run_dir, "timeline.json"), "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
    with open(os.path.join(run_dir, "summary.json"), "w") as f:
        json.dump({"wall_seconds": 1.0, "iterations": iterations, "final_test_accuracy":
                   max([e["test_accuracy"] for e in evals] or [-1]), "cpu_cores": {},
                   "machine_busy_cores": 1.0}, f)


class LoadTest(unittest.TestCase):
    def test_reads_a_run_directory(self):
        with tempfile.TemporaryDirectory() as d:
            write_run_dir(d, evals=[{"epoch": 1, "test_accuracy": 0.7, "elapsed_s": 2.5}])
            run = mc.load(d)
        self.assertEqual(run.summary["iterations"], 5)
        self.assertEqual(len(run.metrics), 10)
        self.assertTrue(all("event" not in m for m in run.metrics))
        self.assertEqual([(e["epoch"], e["elapsed_s"]) for e in run.evaluations], [(1, 2.5)])
        self.assertEqual(len(run.events), 10)
        self.assertEqual(run.links, [])

    def test_without_timeline_or_metrics(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "summary.json"), "w") as f:
                json.dump({"wall_seconds": 1.0, "iterations": 0}, f)
            run = mc.load(d)
        self.assertEqual((run.events, run.metrics, run.evaluations, run.links), ([], [], [], []))


# A stand-in worker binary for compare_modes' codec checks (codec_spec: --print_codec): the
# canonical form is the text in lower case; REFUSED texts get the worker's reason.
CODEC_WORKER = r"""#!PYTHON
import sys
REFUSED = {"topk:2": "push_codec: the ratio must be a number in (0, 1]",
           "csc:0.05,exact": "push_codec: unknown option 'exact'"}
text = sys.argv[1].split("=", 1)[1]
if text in REFUSED:
    sys.exit("worker: " + REFUSED[text])
print(text.strip().lower())
"""


class CompareModesScriptTest(unittest.TestCase):
    """tools/compare_modes on run directories written here instead of by jobs (its codecs
    checked by a stand-in worker)."""

    @classmethod
    def setUpClass(cls):
        cls.bin_dir = tempfile.mkdtemp(prefix="compare_modes_bin.")
        os.makedirs(os.path.join(cls.bin_dir, "worker"))
        worker = os.path.join(cls.bin_dir, "worker", "worker")
        with open(worker, "w") as f:
            f.write(CODEC_WORKER.replace("PYTHON", sys.executable))
        os.chmod(worker, 0o755)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.bin_dir)

    def run_script(self, out, argv, plot=None):
        script = runpy.run_path(os.path.join(ROOT, "tools", "compare_modes"), run_name="compare_modes")
        evals = {"bsp": [{"epoch": 1, "test_accuracy": 0.6, "elapsed_s": 4.0},
                         {"epoch": 2, "test_accuracy": 0.7, "elapsed_s": 8.0}],
                 "r2sp": [{"epoch": 1, "test_accuracy": 0.7, "elapsed_s": 3.0}]}

        def fake_run_mode(args, mode, suffix=""):
            run_dir = os.path.join(args.out, cfg.result_key(mode) + suffix)
            base = cfg.split_mode(mode)[0]
            write_run_dir(run_dir, interval=0.1 if mode == "bsp" else 0.05,
                          evals=evals[base], overlap=base == "bsp")
            return run_dir

        stdout = io.StringIO()
        with mock.patch.object(mode_jobs, "run_mode", fake_run_mode), \
                mock.patch.object(mode_plots, "plot_all", plot or mock.Mock()), \
                contextlib.redirect_stdout(stdout):
            status = script["main"](["--out=" + out, "--bin_dir=" + self.bin_dir] + argv)
        return status, stdout.getvalue()

    def test_results_json_table_and_result_line(self):
        with tempfile.TemporaryDirectory() as out:
            status, printed = self.run_script(
                out, ["--modes=bsp,r2sp", "--repeats=2", "--workers=2", "--target_accuracy=0.65"])
            with open(os.path.join(out, "results.json")) as f:
                results = json.load(f)
            with open(os.path.join(out, "results.md")) as f:
                table = f.read()
        self.assertEqual(status, 0)
        self.assertEqual(results["command"][1:], ["--bin_dir=" + self.bin_dir, "--modes=bsp,r2sp",
                                                  "--repeats=2", "--workers=2",
                                                  "--target_accuracy=0.65"])
        self.assertEqual(len(results["runs"]), 2)
        for run in results["runs"]:
            self.assertEqual(run["bsp"]["time_to_target_s"], 8.0)
            self.assertEqual(run["r2sp"]["time_to_target_s"], 3.0)
            self.assertEqual(run["bsp"]["final_accuracy"], 0.7)
            self.assertAlmostEqual(run["bsp"]["iterations_per_s"], 2 * 2 / 0.2)
            self.assertAlmostEqual(run["r2sp"]["iterations_per_s"], 2 * 2 / 0.1)
            self.assertEqual(run["r2sp"]["overlapping_pushes"], 0)
            self.assertEqual(run["bsp"]["overlapping_pushes"], 5)
            self.assertEqual(run["r2sp"]["pushes"], 10)
        self.assertIn("RESULT r2sp_vs_bsp_throughput=2.00 r2sp_vs_bsp_job_throughput=2.00",
                      printed.splitlines()[-1])
        self.assertIn("Each mode ran 2 times", table)
        self.assertIn("| time to 0.65 (s) |", table)
        self.assertIn("0 (0-0) of 10", table)

    def test_codecs_run_every_mode_with_every_codec(self):
        with tempfile.TemporaryDirectory() as out:
            status, printed = self.run_script(
                out, ["--modes=bsp,r2sp", "--codecs=fp32,topk:0.01,exact,csc:0.05,chunk=4096",
                      "--workers=2"])
            with open(os.path.join(out, "results.json")) as f:
                results = json.load(f)
            with open(os.path.join(out, "results.md")) as f:
                table = f.read()
            written = sorted(os.listdir(out))
        self.assertEqual(status, 0)
        names = ["bsp", "bsp+topk:0.01,exact", "bsp+csc:0.05,chunk=4096", "r2sp",
                 "r2sp+topk:0.01,exact", "r2sp+csc:0.05,chunk=4096"]
        self.assertEqual(list(results["runs"][0]), names)
        for name in names:
            self.assertIn(f"| {name} |", table)
            self.assertIn(cfg.result_key(name), written)
        result = printed.splitlines()[-1]
        self.assertTrue(result.startswith("RESULT bsp+topk_0.01_exact_vs_bsp_throughput=2.00 "),
                        result)
        self.assertIn(" r2sp+csc_0.05_chunk_4096_vs_bsp_job_throughput=2.00", result)
        self.assertNotIn(" bsp_vs_bsp", result)

    def test_without_codecs_the_modes_run_as_named(self):
        with tempfile.TemporaryDirectory() as out:
            status, _ = self.run_script(out, ["--modes=bsp;r2sp+topk:0.01,fp16", "--workers=2"])
            with open(os.path.join(out, "results.json")) as f:
                results = json.load(f)
        self.assertEqual(status, 0)
        self.assertEqual(list(results["runs"][0]), ["bsp", "r2sp+topk:0.01,fp16"])

    def test_bad_mode_and_codec_lists_are_usage_errors(self):
        for argv, why in [
                (["--modes=r2sp+fp16", "--codecs=fp32,fp16"], "--codecs takes plain modes"),
                (["--modes=bsp", "--codecs=fp32,topk:0.01,fp16"], "Separate the codecs"),
                (["--modes=bsp", "--codecs=fp32,topk:2"],
                 "codec 'topk:2': worker: push_codec: the ratio must be a number in (0, 1]"),
                (["--modes=bsp,r2sp+csc:0.05,exact"],
                 "codec 'csc:0.05,exact': worker: push_codec: unknown option 'exact'"),
                (["--modes=bsp,bsp"], "listed twice"),
                (["--modes=bsp", "--codecs=fp16,FP16"], "listed twice")]:
            with self.subTest(argv=argv):
                stderr = io.StringIO()
                with tempfile.TemporaryDirectory() as out, contextlib.redirect_stderr(stderr):
                    with self.assertRaises(SystemExit) as exit:
                        self.run_script(out, argv)
                self.assertEqual(exit.exception.code, 2)
                self.assertIn(why, stderr.getvalue())

    def test_no_plain_bsp_no_ratios_and_a_note(self):
        stderr = io.StringIO()
        with tempfile.TemporaryDirectory() as out, contextlib.redirect_stderr(stderr):
            status, printed = self.run_script(out, ["--modes=bsp,r2sp", "--codecs=fp16",
                                                    "--workers=2"])
        self.assertEqual(status, 0)
        self.assertEqual(printed.splitlines()[-1], "RESULT")
        self.assertIn("no plain (fp32) bsp run", stderr.getvalue())

    def test_plots(self):
        if importlib.util.find_spec("matplotlib") is None:
            self.skipTest("no matplotlib for this python (tools/install_deps gives /usr/bin/python3 one)")
        with tempfile.TemporaryDirectory() as out:
            status, _ = self.run_script(out, ["--modes=bsp,r2sp", "--workers=2"],
                                        plot=mode_plots.plot_all)
            sizes = {png: os.path.getsize(os.path.join(out, png))
                     for png in ("accuracy.png", "pushes.png", "link.png",
                                 "time_to_target.png")}
        self.assertEqual(status, 0)
        for png, size in sizes.items():
            self.assertGreater(size, 1000, png)

    def test_ddp_and_script_options_that_cannot_run_are_usage_errors(self):
        script = runpy.run_path(os.path.join(ROOT, "tools", "compare_modes"), run_name="compare_modes")
        cases = [(["--modes=bsp,ddp+fp16"], "ddp+fp16: DDP runs a PyTorch script: give --script "
                                            "(e.g. --script=examples/pytorch/fashion_mnist_cnn.py)"),
                 (["--modes=ddp", "--script=tools/compare_modes", "--worker_cmd=python3 t.py"],
                  "--script runs the script in every configuration: leave out --worker_cmd and "
                  "--worker_cmd_for"),
                 (["--modes=ddp", "--script=no/such.py"], "--script=no/such.py: no such file"),
                 (["--modes=ddp+topk:0.01", "--script=tools/compare_modes"],
                  "ddp+topk:0.01: DDP takes +fp16 only")]
        self.assert_usage_errors(script["parse_args"], cases)

    def test_variants_of_every_role(self):
        script = runpy.run_path(os.path.join(ROOT, "tools", "compare_modes"), run_name="compare_modes")
        parse = script["parse_args"]
        args = parse(["--out=/nowhere", "--bin_dir=" + self.bin_dir, "--modes=r2sp@w2,bsp@a1",
                      "--scheduler_variant=w2=--r2sp_slot_width=2",
                      "--server_variant=a1=--apply_threads=1"])
        self.assertEqual((args.variants, args.scheduler_variants, args.server_variants),
                         ({}, {"w2": "--r2sp_slot_width=2"}, {"a1": "--apply_threads=1"}))
        cases = [(["--modes=r2sp@w9", "--scheduler_variant=w2=--r2sp_slot_width=2"],
                  "r2sp@w9: no --variant, --scheduler_variant or --server_variant w9=FLAGS"),
                 (["--modes=r2sp", "--server_variant=a1"],
                  "--server_variant=a1: want NAME=FLAGS, NAME of letters, digits, _ and -")]
        self.assert_usage_errors(parse, cases)

    def assert_usage_errors(self, parse, cases):
        """Each (argv, message): compare_modes' parse_args exits 2 saying "error: MESSAGE"."""
        for argv, message in cases:
            err = io.StringIO()
            with self.subTest(argv=argv), contextlib.redirect_stderr(err), \
                    self.assertRaises(SystemExit) as e:
                parse(["--out=/nowhere", "--bin_dir=" + self.bin_dir] + argv)
            self.assertEqual(e.exception.code, 2)
            self.assertIn("error: " + message, err.getvalue())

    def test_a_failed_job_stops_the_comparison_with_status_1(self):
        script = runpy.run_path(os.path.join(ROOT, "tools", "compare_modes"), run_name="compare_modes")

        def failing_run_mode(args, mode, suffix=""):
            raise mode_jobs.JobError(f"{mode} failed:\nboom")

        stderr = io.StringIO()
        with tempfile.TemporaryDirectory() as out, \
                mock.patch.object(mode_jobs, "run_mode", failing_run_mode), \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            status = script["main"](["--out=" + out, "--modes=bsp"])
            written = os.listdir(out)
        self.assertEqual(status, 1)
        self.assertIn("compare_modes: error: bsp failed:\nboom", stderr.getvalue())
        self.assertEqual(written, [])


if __name__ == "__main__":
    junit_main.main()
