"""The process of a worker tools/launch started, found by its --metrics=RUN_DIR/metrics_workerN.jsonl
(the launch_*_test jobs kill and stop workers by their launched index). The lookup reads /proc
itself and retries: a command line that reads back empty once (CI saw `pgrep -f` find no rank 0
while it ran) is looked up again; a worker that is truly gone fails with its log's last lines."""

import os
import time


def _command_line(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:  # gone between the listing and the read
        return ""


def _pids_naming(text):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and text in _command_line(p)]


def pid_of(run_dir, worker, timeout=10):
    """The pid of launched worker `worker` of the job in RUN_DIR; AssertionError (with the
    worker's log tail) when no live process names its metrics file within `timeout` seconds."""
    flag = f"--metrics={run_dir}/metrics_worker{worker}.jsonl"
    deadline = time.time() + timeout
    while True:
        pids = _pids_naming(flag)
        if pids:
            return min(pids)
        if time.time() > deadline:
            raise AssertionError(f"no process of worker {worker} in {run_dir} after {timeout} s; "
                                 f"its log ends:\n{_log_tail(run_dir, worker)}")
        time.sleep(0.1)


def _log_tail(run_dir, worker, lines=20):
    try:
        with open(os.path.join(run_dir, f"worker{worker}.log"), errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return str(e)
