"""Running an R2SP job's processes: start, echo progress, stop everything on failure or signal,
and summarise the run (summary.json, merged timeline). Used by tools/launch (local processes)
and tools/netcluster (processes inside network namespaces)."""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

from cpu_meter import CpuMeter
from run_files import worker_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args(argv, description, parser=None):
    """The launch options (see tools/launch), added to `parser` if given."""
    p = parser or argparse.ArgumentParser(description=description,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--servers", type=int, default=2, help="number of servers (default 2)")
    p.add_argument("--workers", type=int, default=3, help="number of workers (default 3)")
    p.add_argument("--sync", default="asp", choices=["bsp", "ssp", "asp", "r2sp"], help="consistency mode")
    p.add_argument("--run_dir", default="", help="where logs and summary.json go (default runs/TIMESTAMP)")
    p.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"),
                   help="directory holding scheduler/scheduler, server/server, worker/worker")
    p.add_argument("--timeout", type=float, default=3600, help="stop everything after this many seconds")
    p.add_argument("--scheduler_flags", default="", help="extra flags for the scheduler (one string)")
    p.add_argument("--server_flags", default="", help="extra flags for every server (one string)")
    p.add_argument("--worker_flags", default="", help="extra flags for every worker (one string)")
    p.add_argument("--quiet", action="store_true", help="do not echo worker progress")
    p.add_argument("--worker_flags_for", action="append", default=[], metavar="RANK:FLAGS",
                   help="extra flags for the RANK-th worker started (0-based), e.g. "
                        "'3:--compute_slowdown=2'; repeatable")
    args = p.parse_args(argv)
    if args.servers < 1 or args.workers < 1:
        p.error("--servers and --workers must be at least 1")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    return args


class Job:
    """The processes of one job. `prefix(name)` gives the argv prefix a process runs under
    (e.g. ip netns exec NS), `on_start(name, pid)` sees each new process."""

    def __init__(self, args, prefix=None, on_start=None):
        self.args = args
        self.procs = []  # (name, Popen)
        self.lock = threading.Lock()
        self.prefix = prefix or (lambda name: [])
        self.on_start = on_start

    def binary(self, role):
        path = os.path.join(self.args.bin_dir, role, role)
        if not os.access(path, os.X_OK):
            sys.exit(f"launch: error: {path} not found; build first: bazel build -c opt //scheduler //server //worker")
        return path

    def start(self, name, argv, echo):
        log = open(os.path.join(self.args.run_dir, name + ".log"), "wb")
        stdout = subprocess.PIPE if echo else log
        proc = subprocess.Popen(self.prefix(name) + argv, stdout=stdout, stderr=log,
                                start_new_session=True)
        with self.lock:
            self.procs.append((name, proc))
        if self.on_start:
            self.on_start(name, proc.pid)
        if echo:
            threading.Thread(target=self.echo, args=(proc, log), daemon=True).start()
        return proc

    def echo(self, proc, log):
        for line in iter(proc.stdout.readline, b""):
            log.write(line)
            log.flush()
            if not self.args.quiet:
                sys.stdout.write(line.decode(errors="replace"))
                sys.stdout.flush()

    def stop_all(self):
        with self.lock:
            procs = list(self.procs)
        for _, proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 5
        for _, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def merge_timelines(run_dir, workers):
    """Concatenates the workers' Chrome traces into RUN_DIR/timeline.json."""
    events = []
    for i in range(workers):
        path = os.path.join(run_dir, f"timeline_worker{i}.json")
        try:
            events.extend(json.load(open(path)))
        except (OSError, ValueError):
            pass  # a worker that died leaves an unfinished file
    if events:
        with open(os.path.join(run_dir, "timeline.json"), "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)


def read_metrics(run_dir):
    """Mean iteration time and wait fraction from the workers' per-iteration metrics."""
    iterations, wait, total = 0, 0.0, 0.0
    for rows in worker_metrics(run_dir).values():
        for m in rows:
            iterations += 1
            wait += m["wait_s"]
            total += m["compute_s"] + m["push_s"] + m["pull_s"] + (m["wait_s"] if m["gap_s"] > 0 else 0)
    if not iterations:
        return {}
    return {"mean_iteration_seconds": round(total / iterations, 5),
            "wait_fraction": round(wait / total, 4) if total else 0.0}


def loopback_bind(name):
    return ["--bind=tcp://127.0.0.1:*"]


def run_job(args, prefix=None, on_start=None, bind_flags=loopback_bind, during=None):
    """Runs the job `args` describes (see tools/launch); returns the exit status.
    bind_flags(name): where a process listens; during(): called every 0.1 s while it runs."""
    if not args.run_dir:
        args.run_dir = os.path.join(ROOT, "runs", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(args.run_dir, exist_ok=True)
    job = Job(args, prefix, on_start)

    def on_signal(signum, _frame):
        print(f"\nlaunch: signal {signum}: stopping every process", file=sys.stderr)
        job.stop_all()
        sys.exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    endpoint_file = os.path.join(args.run_dir, "scheduler.endpoint")
    stats_file = os.path.join(args.run_dir, "stats.json")
    for f in (endpoint_file, stats_file):
        if os.path.exists(f):
            os.remove(f)
    start = time.time()
    cpu = CpuMeter()
    scheduler = job.start("scheduler", [job.binary("scheduler")] + bind_flags("scheduler") + [
                                        "--endpoint_file=" + endpoint_file, "--stats_json=" + stats_file,
                                        f"--num_servers={args.servers}", f"--num_workers={args.workers}",
                                        "--sync=" + args.sync] + shlex.split(args.scheduler_flags), echo=False)
    endpoint = ""
    while not endpoint:
        if scheduler.poll() is not None:
            job.stop_all()
            sys.exit(f"launch: error: the scheduler exited ({scheduler.returncode}); see {args.run_dir}/scheduler.log")
        if os.path.exists(endpoint_file):
            endpoint = open(endpoint_file).read().strip()
        time.sleep(0.05)
    def common(name):
        return ["--scheduler=" + endpoint] + bind_flags(name)

    for i in range(args.servers):
        job.start(f"server{i}", [job.binary("server")] + common(f"server{i}") + shlex.split(args.server_flags),
                  echo=False)
    per_worker = {}
    for item in args.worker_flags_for:
        rank, _, flags = item.partition(":")
        per_worker.setdefault(int(rank), []).extend(shlex.split(flags))
    for i in range(args.workers):
        trace = [f"--metrics={args.run_dir}/metrics_worker{i}.jsonl",
                 f"--timeline={args.run_dir}/timeline_worker{i}.json"]
        job.start(f"worker{i}", [job.binary("worker")] + common(f"worker{i}") + trace
                  + shlex.split(args.worker_flags) + per_worker.get(i, []), echo=True)
    print(f"launch: {args.servers} servers, {args.workers} workers, sync={args.sync}; logs in {args.run_dir}")

    failed = None
    while True:
        with job.lock:
            procs = list(job.procs)
        for name, proc in procs:
            code = proc.poll()
            if code not in (None, 0):
                failed = f"{name} exited with status {code}; see {args.run_dir}/{name}.log"
        if failed or all(proc.poll() is not None for _, proc in procs):
            break
        cpu.sample(procs)
        if time.time() - start > args.timeout:
            failed = f"the job ran past --timeout={args.timeout:g}s"
            break
        if during:
            during()
        time.sleep(0.1)
    wall = time.time() - start
    cpu_use = cpu.summary()  # over the job, before the timelines are merged
    if failed:
        job.stop_all()
        print(f"launch: error: {failed}", file=sys.stderr)
        return 1

    merge_timelines(args.run_dir, args.workers)
    metrics = read_metrics(args.run_dir)
    stats = json.load(open(stats_file)) if os.path.exists(stats_file) else {"workers": [], "servers": []}
    workers = stats.get("workers", [])
    accuracies = [w["test_accuracy"] for w in workers if w.get("test_accuracy", -1) >= 0]
    samples = sum(w.get("samples", 0) for w in workers)
    summary = {
        "model": next((w.get("model") for w in workers if w.get("model")), ""),
        "epochs": max([w.get("epochs", 0) for w in workers] or [0]),
        "final_test_accuracy": accuracies[0] if accuracies else None,
        "samples_per_second": round(samples / wall, 1) if samples else None,
        "mode": args.sync,
        "workers": args.workers,
        "servers": args.servers,
        "iterations": max([w.get("iterations", 0) for w in workers] or [0]),
        "wall_seconds": round(wall, 3),
        "bytes_pushed": sum(w.get("bytes_pushed", 0) for w in workers),
        "bytes_pulled": sum(w.get("bytes_pulled", 0) for w in workers),
        "dead_workers": sum(1 for w in workers if w.get("state") == "dead"),
        "run_dir": args.run_dir,
    }
    summary.update(metrics)
    summary.update(cpu_use)
    if stats.get("batching"):
        summary["batch_sizes"] = [w["batch"] for w in stats["batching"]["workers"]]
        summary["ideal_batch_sizes"] = [w["ideal"] for w in stats["batching"]["workers"]]
        summary["throughputs"] = [round(w["throughput"], 1) for w in stats["batching"]["workers"]]
    with open(os.path.join(args.run_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    print("launch: summary " + json.dumps(summary))
    return 0


