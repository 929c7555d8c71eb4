"""The metrics lines of a process that trains without R2SP (--backend=ddp or single with
--metrics=PATH), in the C++ worker's format (worker/run_log.cc): one JSON line per step and one
{"event": "eval", ...} line per evaluation, so that tools/compare_modes and tools/run_report
read a DDP run's directory as they read an R2SP job's. Under R2SP the job writes these lines
itself (the worker flags' --metrics)."""

import json
import time


class MetricsLog:
    """Appends this process's lines to `path` (None: writes nothing). Not thread-safe: the
    training loop writes it. Times are Unix seconds ("t") as the C++ worker's are; elapsed_s
    counts from start() (the training loop's start). With `timer` (ddp_hooks.AllReduceTimer)
    each step's line also carries its all-reduce: allreduce_s, allreduce_exposed_s and
    allreduce_bytes."""

    def __init__(self, path, rank, timer=None):
        self.rank, self.timer = rank, timer
        self.file = open(path, "w") if path else None
        self.started = time.time()
        self.clock = 0

    def start(self):
        self.started = time.time()

    def step(self, epoch, batch, compute_s, loss):
        """One step: `batch` samples, `compute_s` its forward and backward (DDP: the all-reduce
        runs inside backward, so there is no separate push or pull; those times are 0)."""
        reduced = self.timer.take() if self.timer is not None else None
        if self.file is None:
            return
        row = {"worker": self.rank, "clock": self.clock, "epoch": epoch, "batch": batch,
               "compute_s": round(compute_s, 6), "wait_s": 0.0, "push_s": 0.0,
               "pull_s": 0.0, "push_bytes": 0, "pull_bytes": 0, "loss": round(loss, 6),
               "gap_s": 0.0, "t": round(time.time(), 6)}
        if reduced is not None:
            row.update(allreduce_s=round(reduced[0], 6), allreduce_exposed_s=round(reduced[1], 6),
                       allreduce_bytes=reduced[2])
        self._write(row)
        self.clock += 1

    def evaluation(self, epoch, step, accuracy, test_loss, train_loss):
        """One evaluation of the test set after epoch `epoch` (1-based), `step` steps done."""
        if self.file is None:
            return
        self._write({"worker": self.rank, "event": "eval", "epoch": epoch, "step": step,
                     "test_accuracy": round(accuracy, 6), "test_loss": round(test_loss, 6),
                     "train_loss": round(train_loss, 6),
                     "elapsed_s": round(time.time() - self.started, 6),
                     "t": round(time.time(), 6)})
        self.file.flush()

    def _write(self, row):
        self.file.write(json.dumps(row) + "\n")

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None
