"""Reading a run directory of tools/launch or tools/netcluster: the workers' per-iteration
metrics; and the median that figures over repeated runs are quoted as."""

import json
import os


def worker_metrics(run_dir):
    """{worker rank: [metrics rows in time order]} from RUN_DIR/metrics_workerN.jsonl. A torn
    line (a worker killed while writing it) is skipped; a missing directory gives {}."""
    by_worker = {}
    names = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    for name in names:
        if not (name.startswith("metrics_worker") and name.endswith(".jsonl")):
            continue
        for line in open(os.path.join(run_dir, name)):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            by_worker.setdefault(row["worker"], []).append(row)
    return {w: sorted(rows, key=lambda r: r["t"]) for w, rows in by_worker.items()}


def median(values):
    """Median of the values that are not None (None if there are none)."""
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2
