"""The end of a job: the workers' Chrome traces merged into RUN_DIR/timeline.json, and
RUN_DIR/summary.json from the scheduler's stats, the workers' metrics and the processes' CPU
use, with how the job ended (Outcome: the scheduler's verdict, deaths and restarts). Used by
launcher.finish_job once every process has exited."""

import dataclasses
import json
import os
import re
from typing import List, Optional

from .recovery_times import metrics_by_process, recoveries
from .run_files import iteration_seconds, worker_metrics


@dataclasses.dataclass
class Event:
    """Something that happened to one process during the job (summary.json's "events"):
    "died" (it exited non-zero or by a signal), "restarted" (a replacement started: `process`
    is the replacement, `status` the exit status of the process it replaces) or "stopped" (it
    was still running when the job ended, and the launcher stopped it)."""
    t: float  # seconds since the job started
    process: str  # e.g. "worker1", or a replacement "worker1.r1"
    event: str
    status: int  # exit status, negative for a signal


def _per_role():
    return {"worker": 0, "server": 0}


@dataclasses.dataclass
class Outcome:
    """How the job ended. The defaults are those of a job that completed with no process lost;
    local, ssh, Slurm and EC2 jobs report their supervisor's (job.supervisor, with started_at),
    Kubernetes jobs their pods' (deploy/k8s_events.py)."""
    completed: bool = True
    scheduler_status: Optional[int] = None  # None where the launcher cannot see it
    events: List[Event] = dataclasses.field(default_factory=list)
    restarts: dict = dataclasses.field(default_factory=_per_role)  # role -> replacements started
    deaths: dict = dataclasses.field(default_factory=_per_role)  # role -> "died" events
    started_at: Optional[float] = None  # Unix time the events' t counts from (a supervisor's)

    def summary_keys(self):
        return {"completed": self.completed, "scheduler_status": self.scheduler_status,
                "events": [dataclasses.asdict(e) for e in self.events],
                "restarts": dict(self.restarts), "deaths": dict(self.deaths)}


TIMELINE = re.compile(r"timeline_worker(\d+)(?:\.r(\d+))?\.json")


def merge_timelines(run_dir, workers):
    """Concatenates the Chrome traces of workers 0..workers-1 and of their replacements
    (timeline_workerN.rK.json) into RUN_DIR/timeline.json (if any)."""
    found = []
    for name in os.listdir(run_dir):
        m = TIMELINE.fullmatch(name)
        if m and int(m.group(1)) < workers:
            found.append((int(m.group(1)), int(m.group(2) or 0), name))
    events = []
    for _, _, name in sorted(found):
        try:
            with open(os.path.join(run_dir, name)) as f:
                events.extend(json.load(f))
        except (OSError, ValueError):
            pass  # a worker that died leaves an unfinished file
    if events:
        with open(os.path.join(run_dir, "timeline.json"), "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


def read_stats(path):
    """The scheduler's stats.json, or empty lists of workers and servers if it wrote none."""
    if not os.path.exists(path):
        return {"workers": [], "servers": []}
    with open(path) as f:
        return json.load(f)


def iteration_summary(by_worker):
    """Mean iteration time and wait fraction from worker_metrics() rows ({} without rows). The
    wait adds to an iteration's time only under r2sp (gap_s > 0: a slot wait before the push);
    otherwise it is the time a pull was parked, already part of pull_s."""
    iterations, wait, total = 0, 0.0, 0.0
    for rows in by_worker.values():
        for m in rows:
            iterations += 1
            wait += m["wait_s"]
            total += iteration_seconds(m)
    if not iterations:
        return {}
    return {"mean_iteration_seconds": round(total / iterations, 5),
            "wait_fraction": round(wait / total, 4) if total else 0.0}


def summarise(stats, *, mode, workers, servers, run_dir, wall, iterations=None, cpu_use=None):
    """summary.json's contents: the job's shape and outcome from the scheduler's stats, then the
    iteration summary and the CPU use (tools/launch documents the keys)."""
    nodes = stats.get("workers", [])
    # A dead worker reported nothing (its counters are zeros): only finished ones count.
    accuracies = [w["test_accuracy"] for w in nodes
                  if w.get("test_accuracy", -1) >= 0 and w.get("state") != "dead"]
    samples = sum(w.get("samples", 0) for w in nodes)
    summary = {
        "model": next((w.get("model") for w in nodes if w.get("model")), ""),
        "epochs": max([w.get("epochs", 0) for w in nodes] or [0]),
        "final_test_accuracy": accuracies[0] if accuracies else None,
        "samples_per_second": round(samples / wall, 1) if samples else None,
        "mode": mode,
        "workers": workers,
        "servers": servers,
        "iterations": max([w.get("iterations", 0) for w in nodes] or [0]),
        "wall_seconds": round(wall, 3),
        "bytes_pushed": sum(w.get("bytes_pushed", 0) for w in nodes),
        "bytes_pulled": sum(w.get("bytes_pulled", 0) for w in nodes),
        "dead_workers": sum(1 for w in nodes if w.get("state") == "dead"),
        # The codecs the workers used, e.g. ["fp16"] (several if workers differed).
        "push_codecs": sorted({w["push_codec"] for w in nodes if w.get("push_codec")}),
        "pull_codecs": sorted({w["pull_codec"] for w in nodes if w.get("pull_codec")}),
        "run_dir": run_dir,
        # Lost servers replaced while the job ran: the workers' requests sent again, the pushes
        # a replacement had applied already, and the most global-batch steps a restored shard
        # went back (the updates the losses cost).
        "recovery": {
            "retried_requests": sum(w.get("retried_requests", 0) for w in nodes),
            "repeated_pushes": sum(s.get("repeated_pushes", 0) for s in stats.get("servers", [])),
            "updates_lost_steps": round(max([w.get("rolled_back_steps", 0) for w in nodes] or [0]),
                                        3),
        },
    }
    summary.update(iterations or {})
    summary.update(cpu_use or {})
    batching = stats.get("batching")
    if batching:
        summary["batch_sizes"] = [w["batch"] for w in batching["workers"]]
        summary["ideal_batch_sizes"] = [w["ideal"] for w in batching["workers"]]
        summary["throughputs"] = [round(w["throughput"], 1) for w in batching["workers"]]
    return summary


def write_summary(args, wall, cpu_use, stats_file, outcome=None):
    """Merges the timelines and writes RUN_DIR/summary.json for the ended job `args` describes
    (tools/launch options) and its Outcome (default: completed, nothing lost); returns the
    summary."""
    merge_timelines(args.run_dir, args.workers)
    summary = summarise(read_stats(stats_file), mode=args.sync, workers=args.workers,
                        servers=args.servers, run_dir=args.run_dir, wall=wall,
                        iterations=iteration_summary(worker_metrics(args.run_dir)),
                        cpu_use=cpu_use)
    outcome = outcome or Outcome()
    summary.update(outcome.summary_keys())
    if outcome.started_at is not None:
        # Per death: how long until the job trained at full strength again.
        summary["recovery"]["after_deaths"] = recoveries(
            outcome.events, outcome.started_at, metrics_by_process(args.run_dir))
    # tools/launch --resume sets both (resume.prepare); other tools' options have neither.
    summary["resumed"] = bool(getattr(args, "resume", ""))
    summary["attempt"] = getattr(args, "attempt", 1)
    # How the processes authenticated each other: the mode only, never a key or a key's path.
    summary["auth"] = getattr(args, "auth", None) or "none"
    with open(os.path.join(args.run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    return summary
