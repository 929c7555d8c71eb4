"""tools/bench/scale_benchmark's figures: one job's measurements from what it left (the
scheduler's stats JSON, "scale" object: scheduler/scheduler_metrics.h), and the medians and
spread (min-max) over repeats, as a text table and JSON rows."""

import statistics

# (key, column title, format) of the table, in order.
COLUMNS = (
    ("registered_s", "reg s", "{:.2f}"),
    ("scheduler_cpu_s", "sched CPU s", "{:.2f}"),
    ("scheduler_cpu_ms_per_worker_iter", "CPU ms/w-it", "{:.3f}"),
    ("scheduler_cpu_ms_per_worker_s", "CPU ms/w-s", "{:.3f}"),
    ("scheduler_rss_mb", "RSS MB", "{:.0f}"),
    ("heartbeats_per_s", "hb/s", "{:.0f}"),
    ("grant_p50_ms", "grant p50 ms", "{:.3f}"),
    ("grant_p99_ms", "grant p99 ms", "{:.3f}"),
    ("gap_planned_ms", "gap plan ms", "{:.3f}"),
    ("gap_achieved_ms", "gap got ms", "{:.3f}"),
    ("gap_bound_ratio_p50", "bound gap/plan p50", "{:.3f}"),
    ("gap_bound_ratio_p99", "p99", "{:.3f}"),
    ("barrier_p50_ms", "barrier p50 ms", "{:.3f}"),
    ("barrier_p99_ms", "barrier p99 ms", "{:.3f}"),
    ("dead_removed_s", "dead out s", "{:.2f}"),
    ("wall_s", "wall s", "{:.1f}"),
)


def measurements(stats, launched, killed, cpu_s, rss_mb, wall_s, workers, iterations):
    """{key: value} of one job (COLUMNS' keys): `launched`/`killed` are the Unix times the
    worker processes were started and the victim killed (None: none was), on the scheduler's
    clock. A value the job did not produce (no slots outside r2sp, no kill) is None. ValueError
    if the stats JSON has no "scale" object (a scheduler without the instrumentation)."""
    scale = stats.get("scale")
    if not isinstance(scale, dict):
        raise ValueError("the stats JSON has no \"scale\" object: rebuild the scheduler")
    slots = scale["slots"]
    grants = slots["grant_latency_ms"]
    bound = slots["gap_bound_ratio"]
    barrier = scale["barrier_release_ms"]
    dead = scale["dead_workers"]
    has_slots = grants["count"] > 0
    worker_iterations = max(1, workers * iterations)
    return {
        "registered_s": (scale["all_registered_unix_us"] / 1e6 - launched
                         if scale["all_registered_unix_us"] else None),
        "scheduler_cpu_s": cpu_s,
        "scheduler_cpu_ms_per_worker_iter": cpu_s * 1000 / worker_iterations,
        # Heartbeats come once a worker-second: their cost shows here.
        "scheduler_cpu_ms_per_worker_s": cpu_s * 1000 / max(1, workers) / max(wall_s, 1e-9),
        "scheduler_rss_mb": rss_mb,
        "heartbeats_per_s": scale["heartbeats_per_s"],
        "grant_p50_ms": grants["p50_ms"] if has_slots else None,
        "grant_p99_ms": grants["p99_ms"] if has_slots else None,
        "gap_planned_ms": slots["gap_planned_mean_ms"] if has_slots else None,
        "gap_achieved_ms": slots["gap_achieved_mean_ms"] if has_slots else None,
        "gap_bound_ratio_p50": bound["p50"] if bound["count"] else None,
        "gap_bound_ratio_p99": bound["p99"] if bound["count"] else None,
        "max_holders": slots["max_holders"] if has_slots else None,
        "barrier_p50_ms": barrier["p50_ms"] if barrier["count"] else None,
        "barrier_p99_ms": barrier["p99_ms"] if barrier["count"] else None,
        "dead_removed_s": (dead[0]["removed_unix_us"] / 1e6 - killed
                           if dead and killed is not None else None),
        "wall_s": wall_s,
    }


def summarize(runs):
    """{key: {"median", "min", "max", "n"}} over the repeats' measurements (None values left
    out; a key none of them has: None)."""
    summary = {}
    for key in runs[0]:
        values = [r[key] for r in runs if r[key] is not None]
        summary[key] = ({"median": statistics.median(values), "min": min(values),
                         "max": max(values), "n": len(values)} if values else None)
    return summary


def _cell(stat, fmt):
    if stat is None:
        return "-"
    text = fmt.format(stat["median"])
    if stat["n"] > 1 and stat["max"] != stat["min"]:
        text += " (" + fmt.format(stat["min"]) + "-" + fmt.format(stat["max"]) + ")"
    return text


def table(rows):
    """Text table of [(name, summary)]: medians, (min-max) where repeats differ."""
    header = ["job"] + [title for _, title, _ in COLUMNS]
    lines = [header] + [[name] + [_cell(s[key], fmt) for key, _, fmt in COLUMNS]
                        for name, s in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                     for line in lines)
