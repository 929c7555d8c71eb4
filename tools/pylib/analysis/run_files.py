"""Reading a run directory of tools/launch or tools/netcluster: the workers' metrics files (one
JSON line per iteration, plus one {"event": "eval", ...} line per evaluation), the device copy
spans of the timeline; and the median that figures over repeated runs are quoted as."""

import json
import os


def metrics_records(run_dir):
    """(file name, JSON object) for every object in RUN_DIR/metrics_worker*.jsonl (a worker's
    or a replacement's, metrics_worker1.r1.jsonl), file by file. A torn line (a worker killed
    while writing it) is skipped; a missing directory gives nothing."""
    names = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    for name in names:
        if not (name.startswith("metrics_worker") and name.endswith(".jsonl")):
            continue
        with open(os.path.join(run_dir, name)) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield name, row


def iteration_seconds(row):
    """One iteration row's duration: compute, push and pull, plus the wait only under r2sp
    (gap_s > 0: a slot wait before the push; otherwise the wait is a parked pull, already part
    of pull_s)."""
    busy = row.get("compute_s", 0) + row.get("push_s", 0) + row.get("pull_s", 0)
    return busy + (row.get("wait_s", 0) if row.get("gap_s", 0) > 0 else 0)


def _records(run_dir):
    """Every JSON object in RUN_DIR/metrics_workerN.jsonl (metrics_records without names)."""
    return (row for _, row in metrics_records(run_dir))


def worker_metrics(run_dir):
    """{worker rank: [iteration rows in time order]}; evaluation records (rows with an "event"
    key) are left out. A missing directory gives {}."""
    by_worker = {}
    for row in _records(run_dir):
        if "event" not in row:
            by_worker.setdefault(row["worker"], []).append(row)
    return {w: sorted(rows, key=lambda r: r["t"]) for w, rows in by_worker.items()}


def evaluations(run_dir):
    """The workers' evaluation records in time order: {"worker", "event": "eval", "epoch",
    "test_accuracy", "test_loss", "train_loss", "elapsed_s" (since the worker's training loop
    started), "t" (Unix time)}."""
    return sorted((row for row in _records(run_dir) if row.get("event") == "eval"),
                  key=lambda r: r["t"])


DEVICE_COPIES = ("h2d_params", "d2h_grads")


def device_copies(events):
    """From a timeline's traceEvents: {worker (tid): {"compute": n steps, "h2d_params": mean ms,
    "d2h_grads": mean ms}} for the workers whose steps had device copies (GPU workers), the
    means taken per compute span."""
    steps, totals = {}, {}
    for e in events:
        name, tid = e.get("name"), e.get("tid")
        if name == "compute":
            steps[tid] = steps.get(tid, 0) + 1
        elif name in DEVICE_COPIES:
            totals.setdefault(tid, dict.fromkeys(DEVICE_COPIES, 0.0))[name] += e.get("dur", 0)
    split = {}
    for tid, sums in totals.items():
        n = max(steps.get(tid, 0), 1)
        split[tid] = {"compute": steps.get(tid, 0),
                      **{name: sums[name] / 1e3 / n for name in DEVICE_COPIES}}
    return split


def median(values):
    """Median of the values that are not None (None if there are none)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
