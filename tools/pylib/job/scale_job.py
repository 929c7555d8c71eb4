"""One job of tools/bench/scale_benchmark on this machine: a scheduler, servers, and synthetic
workers as threads of a few worker processes (--workers_per_process), one of them optionally a
worker of its own that is killed mid-job (SIGKILL) to time its removal. Returns what the
benchmark reads: the scheduler's stats JSON (its "scale" instrumentation), its CPU time and peak
RSS (from wait4), and the times of the launch and the kill on the same clock as the scheduler's.

Every process started is stopped whatever happens (an exception included)."""

import dataclasses
import json
import os
import signal
import subprocess
import time

from . import fault_runs


@dataclasses.dataclass(frozen=True)
class ScaleConfig:
    """A job: `workers` synthetic workers in `mode` (bsp, asp or r2sp) on `servers` servers;
    r2sp's `order` (ring or first_come) and slot `width` (1, N or auto); hetero batching."""
    workers: int
    servers: int
    mode: str
    order: str = "ring"
    width: str = "1"
    hetero: bool = False
    workers_per_process: int = 64
    iterations: int = 30
    compute_ms: int = 200
    model_mb: float = 0.25
    kill_one: bool = True  # one worker of its own is killed once it has trained a few steps
    heartbeat_ms: int = 1000
    heartbeat_timeout_ms: int = 3000

    def name(self):
        variant = f"_{self.order}_w{self.width}" if self.mode == "r2sp" else ""
        return f"{self.mode}{variant}{'_hetero' if self.hetero else ''}_{self.workers}"


@dataclasses.dataclass
class ScaleRun:
    """What one job left: the stats JSON, the scheduler's CPU seconds and peak RSS (MB), and
    when (Unix seconds) the worker processes were started and the victim killed (None: not)."""
    stats: dict
    scheduler_cpu_s: float
    scheduler_rss_mb: float
    launched: float
    killed: float
    wall_s: float


def scheduler_argv(c, binary, run_dir):
    """The scheduler's command line for the job `c`."""
    argv = [binary, "--bind=tcp://127.0.0.1:*", f"--endpoint_file={run_dir}/endpoint",
            f"--stats_json={run_dir}/stats.json", f"--num_servers={c.servers}",
            f"--num_workers={c.workers}", f"--sync={c.mode}", "--partition_bytes=65536",
            f"--heartbeat_timeout_ms={c.heartbeat_timeout_ms}", "--register_timeout_s=300"]
    if c.mode == "r2sp":
        argv += [f"--r2sp_order={c.order}", f"--r2sp_slot_width={c.width}"]
    if c.hetero:
        argv += ["--hetero_batching", f"--global_batch={32 * c.workers}"]
    return argv


def worker_argv(c, binary, endpoint, threads, metrics):
    """A worker process's command line: `threads` workers of the job `c`."""
    return [binary, f"--scheduler={endpoint}", "--bind=tcp://127.0.0.1:*",
            f"--workers_per_process={threads}", f"--model_mb={c.model_mb}", "--layers=4",
            f"--iterations={c.iterations}", f"--compute_ms={c.compute_ms}",
            f"--heartbeat_ms={c.heartbeat_ms}", "--log_every=100000", "--request_timeout_s=600",
            f"--metrics={metrics}"]


def _start(argv, log):
    """Starts `argv` in a session of its own, its output into `log`."""
    with open(log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _wait_for(predicate, timeout, what, proc):
    """Waits until predicate(); RuntimeError naming `what` if `proc` exits or time runs out."""
    deadline = time.time() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}")
        if time.time() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


def _wait4(proc, timeout):
    """(cpu seconds, peak RSS in MB) of `proc` once it exits."""
    deadline = time.time() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
        if time.time() > deadline:
            raise RuntimeError(f"the job did not end within {timeout:g} s")
        time.sleep(0.05)


def run(c, bin_dir, run_dir, timeout=900):
    """Runs the job `c` in `run_dir` (created) with the binaries of `bin_dir`: a ScaleRun.
    RuntimeError if a process fails to start or the job does not complete in `timeout`."""
    os.makedirs(run_dir, exist_ok=True)
    procs = []
    try:
        sched = _start(scheduler_argv(c, f"{bin_dir}/scheduler/scheduler", run_dir),
                       f"{run_dir}/scheduler.log")
        procs.append(sched)
        endpoint_file = f"{run_dir}/endpoint"
        _wait_for(lambda: os.path.exists(endpoint_file), 30, "the scheduler's endpoint", sched)
        with open(endpoint_file) as f:
            endpoint = f.read().strip()
        for i in range(c.servers):
            procs.append(_start([f"{bin_dir}/server/server", f"--scheduler={endpoint}",
                                 "--bind=tcp://127.0.0.1:*", f"--heartbeat_ms={c.heartbeat_ms}"],
                                f"{run_dir}/server{i}.log"))
        launched = time.time()
        threaded = c.workers - (1 if c.kill_one else 0)
        worker = f"{bin_dir}/worker/worker"
        for p, first in enumerate(range(0, threaded, c.workers_per_process)):
            n = min(c.workers_per_process, threaded - first)
            procs.append(_start(worker_argv(c, worker, endpoint, n, f"{run_dir}/metrics{p}.jsonl"),
                                f"{run_dir}/worker{p}.log"))
        killed = None
        if c.kill_one:
            victim = _start(worker_argv(c, worker, endpoint, 1, f"{run_dir}/victim.jsonl"),
                            f"{run_dir}/victim.log")
            procs.append(victim)
            # Killed once training (3 iterations done): it holds no slot or barrier by then
            # only by chance, as a crash would.
            _wait_for(lambda: fault_runs.iteration_lines(f"{run_dir}/victim.jsonl") >= 3, timeout,
                      "the victim's training", victim)
            victim.send_signal(signal.SIGKILL)
            killed = time.time()
        cpu, rss = _wait4(sched, timeout)
        wall = time.time() - launched
        if sched.returncode != 0:
            raise RuntimeError(f"the scheduler exited {sched.returncode}; see {run_dir}")
        with open(f"{run_dir}/stats.json") as f:
            stats = json.load(f)
        return ScaleRun(stats, cpu, rss, launched, killed, wall)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
