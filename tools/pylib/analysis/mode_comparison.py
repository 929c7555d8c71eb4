"""Comparing the consistency modes (tools/compare_modes): reading each run directory, the
figures of one run (steady and job throughput, time to a target accuracy, waits, link use, CPU,
overlapping pushes), and the results table and RESULT line over rounds of runs (medians of
per-round ratios to bsp, and to ddp where it ran). Running the jobs is mode_jobs'; plots are in
mode_plots; configuration names in configurations."""

import dataclasses
import json
import os
import re
import shlex

from .configurations import DDP, is_ddp, result_key
from ..emulation.netcluster import shaped_rate
from .run_files import evaluations, median, worker_metrics


@dataclasses.dataclass
class RunData:
    """What one run directory holds, as read by load()."""
    summary: dict  # summary.json
    events: list  # timeline.json's trace events ([] without a timeline)
    metrics: list  # every worker's iteration rows
    evaluations: list  # evaluation records in time order (run_files.evaluations)
    links: list  # link_bytes.jsonl rows (netcluster only)


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


def configured_link_bytes_per_second(net, ddp=False):
    """The rate of the link the figures watch, in bytes/s, from tools/netcluster options `net`
    (None if unset): server 0's (--server_link), or with --colocate or for a DDP run (`ddp`)
    worker 0's (--worker_link), which a colocated server 0 shares; divided by --time_dilation
    (the rate the link is shaped to)."""
    option = "--worker_link" if ddp or re.search(r"--colocate\b", net) else "--server_link"
    m = re.search(option + r"=(\S+)", net)
    if not m:
        return None
    dilation = re.search(r"--time_dilation=(\S+)", net)
    return shaped_rate(m.group(1), float(dilation.group(1)) if dilation else 1.0) / 8


def watched_host(mode):
    """Whose link a run's utilisation is read from: server 0's, or worker 0's in a DDP run
    (no servers; the ring's traffic through one machine's link)."""
    return "worker0" if is_ddp(mode) else "server0"


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


def mean_utilisation(links, configured, counter, host="server0"):
    """Mean rate of one direction of `host`'s link over `configured` (bytes/s); None without
    samples or a configured rate."""
    rates = [r for _, r in link_rate(links, host, counter)]
    return sum(rates) / len(rates) / configured if rates and configured else None


def run_figures(run, workers, target_accuracy, configured, host="server0"):
    """One run's figures: {name: value or None}. `run`: RunData of a job with `workers`
    workers; `configured`: the rate in bytes/s of `host`'s link (watched_host), or None."""
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
        "link_utilisation": mean_utilisation(run.links, configured, "rx_bytes", host),
        "link_out_utilisation": mean_utilisation(run.links, configured, "tx_bytes", host),
        "server_cores": sum(c for n, c in cores.items() if n.startswith("server")) or None,
        "worker_cores": sum(c for n, c in cores.items() if n.startswith("worker")) or None,
        "machine_busy_cores": summary.get("machine_busy_cores"),
        "overlapping_pushes": overlaps,
        "pushes": pushes,
        # The throughput compared across modes: samples/s, or iterations/s (synthetic workload).
        "throughput": samples if samples else its,
    }


def ratios(runs, mode, key, base="bsp", faster_is_lower=False):
    """Per-round ratios of `mode`'s figure to `base`'s in the same round (rounds interleave the
    modes, so a slow moment of the machine hits both sides of a ratio alike). With
    faster_is_lower (a time), base's over mode's: above 1 means mode is faster either way."""
    def ratio(r):
        a, b = r[mode][key], r[base][key]
        if not a or not b:
            return None
        return b / a if faster_is_lower else a / b
    return [ratio(r) for r in runs]


def vs_bsp(runs, mode, key):
    """ratios() to bsp."""
    return ratios(runs, mode, key)


# The ratios of each row to a baseline that ran: (header, figure, faster_is_lower, RESULT key).
BASELINE_RATIOS = {
    "bsp": [("samples/s", "throughput", False, "throughput"),
            ("job", "job_samples_per_s", False, "job_throughput")],
    DDP: [("samples/s", "throughput", False, "throughput"),
          ("job", "job_samples_per_s", False, "job_throughput"),
          ("time to target", "time_to_target_s", True, "time_to_target")],
}


def baselines(modes):
    """The configurations the rows are compared to, of BASELINE_RATIOS' kinds: plain bsp where it
    ran; plain ddp where it ran, else the first DDP configuration that did ("ddp+fp16"), so a
    comparison against DDP's best alone still gets its ratios. [(kind, configuration)]."""
    found = [("bsp", "bsp")] if "bsp" in modes else []
    ddp = DDP if DDP in modes else next(
        (m for m in modes if m.startswith(DDP) and is_ddp(m)), None)
    if ddp:
        found.append((DDP, ddp))
    return found


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


def table(target_accuracy, modes, runs, labels=None):
    """results.md's table: a row per mode (medians and ranges with repeats), with the ratios to
    bsp and to ddp where they ran. `runs`: one {mode: figures} per round; `labels`: {mode: who
    trained} (mode_jobs.worker_label) for a "worker" column."""
    repeated = len(runs) > 1
    headers = (["worker"] if labels else []) + [
        h.format(target=f"{target_accuracy:.2f}") for h, _, _, _ in COLUMNS]
    headers.append("overlapping pushes")
    bases = baselines(modes)
    headers += [f"vs {b} ({h})" for kind, b in bases for h, _, _, _ in BASELINE_RATIOS[kind]]
    lines = ["| mode | " + " | ".join(headers) + " |", "|---" * (len(headers) + 1) + "|"]
    for mode in modes:
        cells = [labels[mode]] if labels else []
        cells += [cell([r[mode][key] for r in runs], fmt, repeated, missing)
                  for _, key, fmt, missing in COLUMNS]
        cells.append(cell([r[mode]["overlapping_pushes"] for r in runs], "{:.0f}", repeated) +
                     f" of {runs[0][mode]['pushes']}")
        cells += [cell(ratios(runs, mode, key, b, lower), "{:.2f}", repeated)
                  for kind, b in bases for _, key, lower, _ in BASELINE_RATIOS[kind]]
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def result_line(modes, runs):
    """RESULT MODE_vs_bsp_throughput=... MODE_vs_bsp_job_throughput=... and, where ddp ran,
    MODE_vs_ddp_throughput, _job_throughput and _time_to_target (ddp's time over MODE's):
    medians over rounds (MODE as result_key spells it). The baselines are baselines()': plain
    bsp, and ddp or else the first DDP configuration (then MODE_vs_ddp+fp16_...)."""
    parts = []
    for kind, base in baselines(modes):
        for _, key, lower, suffix in BASELINE_RATIOS[kind]:
            for mode in modes:
                ratio = median(ratios(runs, mode, key, base, lower)) if mode != base else None
                if ratio is not None:
                    parts.append(f"{result_key(mode)}_vs_{result_key(base)}_{suffix}={ratio:.2f}")
    return "RESULT" + "".join(" " + p for p in parts)


def write_results(out, argv, repeats, text, runs):
    """OUT/results.md (the command and `text`, the table) and OUT/results.json (every run's
    figures)."""
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(f"# compare_modes\n\nCommand: `tools/compare_modes {' '.join(shlex.quote(a) for a in argv)}`\n\n")
        if repeats > 1:
            f.write(f"Each mode ran {repeats} times, interleaved; each cell is the median "
                    "(min-max); ratios to bsp (and to DDP) are medians of per-round ratios.\n\n")
        f.write(text)
        if any(is_ddp(mode) for mode in runs[0]):
            f.write("\nddp rows: DDP has no servers, so their link columns read worker 0's "
                    "link (the ring's traffic in and out of one machine; with --colocate the "
                    "link server 0 shares) and their waits and pushes are 0: DDP's all-reduce "
                    "runs inside backward. vs ddp (time to target): that DDP configuration's time "
                    "over the row's (above 1: the row reached the target sooner).\n")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"command": argv, "runs": runs}, f, indent=1)
