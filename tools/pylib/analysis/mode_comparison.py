"""Comparing the consistency modes (tools/compare_modes): running one job per mode through
tools/launch or tools/netcluster, reading each run directory, the figures of one run
(steady and job throughput, time to a target accuracy, waits, link use, CPU, overlapping
pushes), and the results table and RESULT line over rounds of runs (medians of per-round
ratios to bsp). Plots are in mode_plots; configuration names in configurations."""

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys

from .configurations import MODES, result_key, split_mode, split_variant
from ..job.launcher import JobError
from ..emulation.netcluster import parse_rate
from .run_files import evaluations, median, worker_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

@dataclasses.dataclass
class RunData:
    """What one run directory holds, as read by load()."""
    summary: dict  # summary.json
    events: list  # timeline.json's trace events ([] without a timeline)
    metrics: list  # every worker's iteration rows
    evaluations: list  # evaluation records in time order (run_files.evaluations)
    links: list  # link_bytes.jsonl rows (netcluster only)


def job_command(args, mode, run_dir):
    """The tools/launch or tools/netcluster command line that runs `mode` into `run_dir`, from
    tools/compare_modes' options `args`."""
    tool = ["tools/netcluster"] + shlex.split(args.net) if args.net else ["tools/launch"]
    configuration, variant = split_variant(mode)
    base, codec = split_mode(configuration)
    sync, mode_flags = MODES[base]
    sched = " ".join(f for f in (args.scheduler_flags,
                                 mode_flags.format(global_batch=args.global_batch)) if f)
    worker_flags = args.worker_flags
    if codec:  # by default training pulls in fp16 only with fp16 pushes (sparse codecs push)
        pull = args.pull_codec if args.pull_codec != "auto" else (
            "fp16" if codec == "fp16" else "fp32")
        worker_flags += f" --push_codec={codec} --pull_codec={pull}"
    if variant:
        worker_flags += " " + args.variants[variant]
    cmd = [sys.executable, os.path.join(ROOT, tool[0])] + tool[1:] + [f"--sync={sync}"] + [
        f"--run_dir={run_dir}", f"--servers={args.servers}", f"--workers={args.workers}",
        f"--server_flags={args.server_flags}", f"--worker_flags={worker_flags}",
        f"--timeout={args.timeout}", "--quiet"]
    if sched:
        cmd.append(f"--scheduler_flags={sched}")
    for item in args.worker_flags_for:
        cmd.append(f"--worker_flags_for={item}")
    if getattr(args, "worker_cmd", ""):  # Python workers (tools/launch --worker_cmd)
        cmd.append(f"--worker_cmd={args.worker_cmd}")
    for item in getattr(args, "worker_cmd_for", []):
        cmd.append(f"--worker_cmd_for={item}")
    if args.bin_dir:
        cmd.append(f"--bin_dir={args.bin_dir}")
    if getattr(args, "auth", "none") != "none":
        cmd.append(f"--auth={args.auth}")
    return cmd


def check_job(r, what, run_dir):
    """JobError unless the finished job command `r` (subprocess.run's result) succeeded with no
    process lost: a job the launcher completed after a worker or server died (its summary.json
    "events") measured something else than the other runs."""
    if r.returncode != 0:
        raise JobError(f"{what} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            events = json.load(f).get("events", [])
    except (OSError, ValueError):
        return  # load() says what is missing
    died = [f"{e['process']} (status {e['status']})" for e in events if e.get("event") == "died"]
    if died:
        raise JobError(f"{what}: {', '.join(died)} died during the run, so its figures do not "
                       f"compare with the other runs'; see {run_dir}")


def run_mode(args, mode, suffix=""):
    """Runs `mode` into OUT/KEY+SUFFIX (KEY: result_key(mode)); returns that directory.
    JobError if the job failed or lost a process (check_job)."""
    run_dir = os.path.join(args.out, result_key(mode) + suffix)
    print(f"compare_modes: {mode}{suffix} ...", flush=True)
    r = subprocess.run(job_command(args, mode, run_dir), cwd=ROOT, capture_output=True, text=True)
    check_job(r, mode, run_dir)
    return run_dir


def load(run_dir):
    """RunData of a finished run; summary.json must exist, the rest may not."""
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    events = []
    try:
        with open(os.path.join(run_dir, "timeline.json")) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError):
        pass
    links = []
    try:
        with open(os.path.join(run_dir, "link_bytes.jsonl")) as f:
            links = [json.loads(line) for line in f]
    except OSError:
        pass
    metrics = [row for rows in worker_metrics(run_dir).values() for row in rows]
    return RunData(summary, events, metrics, evaluations(run_dir), links)


def configured_link_bytes_per_second(net):
    """The --server_link rate in tools/netcluster options `net`, in bytes/s; None if unset."""
    m = re.search(r"--server_link=(\S+)", net)
    return parse_rate(m.group(1)) / 8 if m else None


def overlapping_pushes(events):
    """(pushes that start while another worker's push is still going on, all pushes)."""
    pushes = sorted((e["ts"], e["ts"] + e["dur"], e["tid"]) for e in events if e.get("name") == "push")
    count, busy_until, holder = 0, 0, None
    for start, end, tid in pushes:
        if start < busy_until and tid != holder:
            count += 1
        if end > busy_until:
            busy_until, holder = end, tid
    return count, len(pushes)


def iterations_by_worker(metrics):
    """{worker: [(end time, batch), ...] in time order}."""
    by_worker = {}
    for m in metrics:
        by_worker.setdefault(m["worker"], []).append((m["t"], m["batch"]))
    return {w: sorted(rows) for w, rows in by_worker.items()}


def steady_iterations_per_second(metrics, skip=2):
    """Iterations per second of all workers together, from each worker's iteration end times,
    leaving out its first `skip` iterations (start-up, ring forming)."""
    rate = 0.0
    for rows in iterations_by_worker(metrics).values():
        if len(rows) <= skip + 1:
            return None
        rate += (len(rows) - 1 - skip) / (rows[-1][0] - rows[skip][0])
    return rate or None


def job_samples_per_second(metrics, skip=2):
    """Samples per second of the whole job: every sample after each worker's first `skip`
    iterations, over the span from the earliest of those iterations' start to the last
    iteration's end. Unlike the steady rate, a worker that finishes early and leaves a slow one
    to train alone counts for only the time it ran."""
    start, end, samples = None, None, 0
    for rows in iterations_by_worker(metrics).values():
        if len(rows) <= skip + 1:
            return None
        start = rows[skip][0] if start is None else min(start, rows[skip][0])
        end = rows[-1][0] if end is None else max(end, rows[-1][0])
        samples += sum(b for _, b in rows[skip + 1:])
    return samples / (end - start) if start is not None and end > start else None


def time_to_accuracy(evals, target):
    """Seconds of training (elapsed_s) until the first evaluation at or above `target`; None if
    none reached it."""
    return min((e["elapsed_s"] for e in evals if e["test_accuracy"] >= target), default=None)


def link_rate(links, host="server0", counter="rx_bytes"):
    """[(seconds, bytes per second)] from the sampled link counters: into `host` (rx_bytes, the
    pushes) or, with counter="tx_bytes", out of it (the pulls)."""
    rows = [l for l in links if l["host"] == host]
    return [(b["t"], (b[counter] - a[counter]) / max(1e-6, b["t"] - a["t"]))
            for a, b in zip(rows, rows[1:])]


def mean_utilisation(links, configured, counter):
    """Mean rate of one direction of server0's link over `configured` (bytes/s); None without
    samples or a configured rate."""
    rates = [r for _, r in link_rate(links, counter=counter)]
    return sum(rates) / len(rates) / configured if rates and configured else None


def run_figures(run, workers, target_accuracy, configured):
    """One run's figures: {name: value or None}. `run`: RunData of a job with `workers`
    workers; `configured`: the server link's rate in bytes/s, or None."""
    summary, metrics = run.summary, run.metrics
    wall = summary["wall_seconds"]
    its = steady_iterations_per_second(metrics) or summary["iterations"] * workers / wall
    total_batch = sum(x["batch"] for x in metrics)
    samples = its * total_batch / len(metrics) if metrics and total_batch else None
    overlaps, pushes = overlapping_pushes(run.events)
    cores = summary.get("cpu_cores", {})
    return {
        "iterations_per_s": its,
        "samples_per_s": samples,
        "job_samples_per_s": job_samples_per_second(metrics) if total_batch else None,
        "time_to_target_s": time_to_accuracy(run.evaluations, target_accuracy),
        "final_accuracy": summary.get("final_test_accuracy"),
        "wait_ms": 1e3 * sum(x["wait_s"] for x in metrics) / len(metrics) if metrics else None,
        "link_utilisation": mean_utilisation(run.links, configured, "rx_bytes"),
        "link_out_utilisation": mean_utilisation(run.links, configured, "tx_bytes"),
        "server_cores": sum(c for n, c in cores.items() if n.startswith("server")) or None,
        "worker_cores": sum(c for n, c in cores.items() if n.startswith("worker")) or None,
        "machine_busy_cores": summary.get("machine_busy_cores"),
        "overlapping_pushes": overlaps,
        "pushes": pushes,
        # The throughput compared across modes: samples/s, or iterations/s (synthetic workload).
        "throughput": samples if samples else its,
    }


def vs_bsp(runs, mode, key):
    """Per-round ratios of `mode`'s figure to bsp's in the same round (rounds interleave the
    modes, so a slow moment of the machine hits both sides of a ratio alike)."""
    return [r[mode][key] / r["bsp"][key] if r[mode][key] and r["bsp"][key] else None for r in runs]


def cell(values, fmt, repeated, missing="n/a"):
    """One figure: its value, or with repeats its median and (min-max) over the runs; runs
    without it (None) are counted as `missing`."""
    v = [x for x in values if x is not None]
    if not v:
        return missing
    text = fmt.format(median(v))
    if repeated:
        text += f" ({fmt.format(min(v))}-{fmt.format(max(v))})"
        if len(v) < len(values):
            text += f", {len(values) - len(v)} {missing}"
    return text


COLUMNS = [  # (header, figure, format, text for a run without it)
    ("iterations/s", "iterations_per_s", "{:.1f}", "n/a"),
    ("samples/s", "samples_per_s", "{:.0f}", "n/a"),
    ("job samples/s", "job_samples_per_s", "{:.0f}", "n/a"),
    ("time to {target} (s)", "time_to_target_s", "{:.1f}", "not reached"),
    ("final accuracy", "final_accuracy", "{:.4f}", "n/a"),
    ("mean wait per iteration (ms)", "wait_ms", "{:.1f}", "n/a"),
    ("server-link utilisation in (pushes)", "link_utilisation", "{:.0%}", "n/a"),
    ("server-link utilisation out (pulls)", "link_out_utilisation", "{:.0%}", "n/a"),
    ("servers' CPU (cores)", "server_cores", "{:.2f}", "n/a"),
    ("workers' CPU (cores)", "worker_cores", "{:.2f}", "n/a"),
    ("machine busy (cores)", "machine_busy_cores", "{:.2f}", "n/a"),
]


def table(target_accuracy, modes, runs):
    """results.md's table: a row per mode (medians and ranges with repeats). `runs`: one
    {mode: figures} per round."""
    repeated = len(runs) > 1
    headers = [h.format(target=f"{target_accuracy:.2f}") for h, _, _, _ in COLUMNS]
    headers.append("overlapping pushes")
    if "bsp" in modes:
        headers += ["vs bsp (samples/s)", "vs bsp (job)"]
    lines = ["| mode | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
    for mode in modes:
        cells = [cell([r[mode][key] for r in runs], fmt, repeated, missing)
                 for _, key, fmt, missing in COLUMNS]
        cells.append(cell([r[mode]["overlapping_pushes"] for r in runs], "{:.0f}", repeated) +
                     f" of {runs[0][mode]['pushes']}")
        if "bsp" in modes:
            cells += [cell(vs_bsp(runs, mode, key), "{:.2f}", repeated)
                      for key in ("throughput", "job_samples_per_s")]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def result_line(modes, runs):
    """RESULT MODE_vs_bsp_throughput=... MODE_vs_bsp_job_throughput=...: medians over rounds
    (MODE as result_key spells it). The baseline is plain (fp32) bsp."""
    parts = []
    if "bsp" not in modes:
        return "RESULT"
    for key, suffix in (("throughput", "throughput"), ("job_samples_per_s", "job_throughput")):
        for mode in modes:
            ratio = median(vs_bsp(runs, mode, key)) if mode != "bsp" else None
            if ratio is not None:
                parts.append(f"{result_key(mode)}_vs_bsp_{suffix}={ratio:.2f}")
    return "RESULT " + " ".join(parts)


def write_results(out, argv, repeats, text, runs):
    """OUT/results.md (the command and `text`, the table) and OUT/results.json (every run's
    figures)."""
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"# compare_modes\n\nCommand: `tools/compare_modes {' '.join(shlex.quote(a) for a in argv)}`\n\n")
        if repeats > 1:
            f.write(f"Each mode ran {repeats} times, interleaved; each cell is the median "
                    "(min-max); ratios to bsp are medians of per-round ratios.\n\n")
        f.write(text)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": argv, "runs": runs}, f, indent=1)
