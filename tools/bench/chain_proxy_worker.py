#!/usr/bin/env python3
"""One worker of tools/bench/chain_proxy: a GPU's step played by sleeps over a real model's
tensors (tools/pylib/analysis/step_schedule.py), driving r2sp._core as r2sp.torch's CUDA path
does with --overlap: each module waits for its ranges of the last pull before its forward share
(params_needed), each gradient is reported as its module's backward share ends
(gradient_ready), then submit. With --alone the same sleeps run without R2SP: the script alone.
No torch compute, so what R2SP adds per step is the chain (push, apply, pull) that the sleeps
do not hide, with the real bytes, partitions, sockets and server.

  chain_proxy_worker.py --model=resnet18 --step_ms=27.2 [--alone --steps=N] [--fp16]
Under tools/launch --worker_cmd the job's settings (R2SP_WORKER_FLAGS and the rest) come from
the environment as r2sp.torch.init() reads them. Prints one JSON line: samples_per_s and
steady_samples_per_s (the steps after the first five), as the examples' scripts do."""

import argparse
import json
import os
import struct
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from pylib.analysis import step_schedule  # noqa: E402

STEADY_AFTER = 5
BLOCK = 4096  # floats of the repeated gradient pattern


def options(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(step_schedule.MODELS), required=True)
    p.add_argument("--step_ms", type=float, required=True, help="the GPU's step alone")
    p.add_argument("--forward_share", type=float, default=1 / 3)
    p.add_argument("--batch_size", type=int, default=64, help="--alone: samples per step")
    p.add_argument("--steps", type=int, default=100, help="--alone: steps")
    p.add_argument("--alone", action="store_true", help="no R2SP: the sleeps alone")
    p.add_argument("--fp16", action="store_true", help="gradients reported as fp16 (encoded "
                   "on the GPU, as r2sp.torch's CUDA path with --push_codec=fp16)")
    a = p.parse_args(argv)
    if a.step_ms <= 0 or not 0 < a.forward_share < 1 or a.steps < 1 or a.batch_size < 1:
        p.error("--step_ms must be positive, --forward_share in (0, 1), --steps and "
                "--batch_size at least 1")
    return a


class Rate:
    """Samples over the whole run and over the steps after the first STEADY_AFTER."""

    def __init__(self):
        self.start = self.last = time.perf_counter()
        self.steps = self.samples = self.steady_samples = 0
        self.steady_s = 0.0

    def step_done(self, samples):
        now = time.perf_counter()
        self.steps += 1
        self.samples += samples
        if self.steps > STEADY_AFTER:
            self.steady_samples += samples
            self.steady_s += now - self.last
        self.last = now

    def line(self, **extra):
        whole = self.last - self.start
        return json.dumps(dict(
            samples_per_s=round(self.samples / whole, 3) if whole > 0 else 0.0,
            steady_samples_per_s=round(self.steady_samples / self.steady_s, 3)
            if self.steady_s > 0 else None, steps=self.steps, samples=self.samples, **extra))


def fill_pattern(buffer, fp16):
    """Small nonzero gradients (the same block repeated) in the worker's fp32 or fp16
    gradient buffer, once: the bytes a real gradient has, without denormals or NaN."""
    view = memoryview(buffer).cast("B")
    size = 2 if fp16 else 4
    block = struct.pack(f"<{BLOCK}{'e' if fp16 else 'f'}",
                        *((i % 97 - 48) * 1e-4 for i in range(BLOCK)))
    whole, rest = divmod(len(view), len(block))
    for i in range(whole):
        view[i * len(block):(i + 1) * len(block)] = block
    view[whole * len(block):] = block[:rest - rest % size] + bytes(rest % size)


class Alone:
    """drive()'s worker without R2SP (the script alone): `steps` steps of `batch` samples,
    nothing pulled or sent, so both sides of the comparison run the same loop."""
    overlaps_pulls = False

    def __init__(self, steps, batch):
        self._left, self._batch = steps, batch

    def next_step(self):
        if self._left == 0:
            return None
        self._left -= 1
        return types.SimpleNamespace(batch=self._batch)

    def gradient_ready(self, offset, count, fp16=False):
        pass

    def submit(self, samples, loss, fp16=False):
        pass


def waited_for(pace, wait, *args):
    """Calls wait(*args) and tells the pace how long it blocked."""
    start = time.perf_counter()
    wait(*args)
    pace.waited(start, time.perf_counter())


def needed(worker, ranges):
    """Waits for each of `ranges` of the pull (the module's parameters)."""
    for offset, count in ranges:
        worker.params_needed(offset, count)


def drive(worker, modules, shares, pace, fp16):
    """The steps of a joined worker, as r2sp.torch's CUDA path with --overlap takes them: in
    the forward each module waits for its ranges of the last pull (when pulls overlap it), in
    the backward each module's ranges are reported as its share ends (the whole pull waited
    for before the first, r2sp.torch's safety net), then submit. Returns the Rate."""
    overlapped, rate = worker.overlaps_pulls, Rate()
    while (step := worker.next_step()) is not None:
        pace.restart()
        for m in modules:
            if overlapped:
                waited_for(pace, needed, worker, m.ranges)
            pace.spend(shares.forward_s)
        for i, m in enumerate(reversed(modules)):
            pace.spend(shares.backward_s)
            if overlapped and i == 0:
                waited_for(pace, worker.params_needed, 0, worker.size)
            for offset, count in m.ranges:
                worker.gradient_ready(offset, count, fp16=fp16)
        worker.submit(step.batch, 0.0, fp16=fp16)
        rate.step_done(step.batch)
    return rate


def play_job(a, tensors, pace):
    """Joins the job whose settings the environment holds and drives it; (Rate, rank)."""
    from r2sp import _core
    from r2sp.torch import settings
    options = settings.resolve(os.environ).options
    worker = _core.Worker(dict(options), tensors, "pytorch", True)  # staged: as a CUDA model
    worker.enable_forward_waits()
    worker.join()
    modules = step_schedule.modules(worker.tensors)
    fill_pattern(worker.grads16 if a.fp16 else worker.grads, a.fp16)
    worker.begin_training(1 << 30)
    rate = drive(worker, modules, step_schedule.shares(len(modules), a.step_ms,
                                                       a.forward_share), pace, a.fp16)
    worker.finish()
    return rate, worker.rank


def main(argv=None):
    a = options(argv)
    tensors = step_schedule.MODELS[a.model]()
    pace = step_schedule.Pace()
    if a.alone:
        modules = step_schedule.modules(step_schedule.layout_of(tensors))
        rate = drive(Alone(a.steps, a.batch_size), modules,
                     step_schedule.shares(len(modules), a.step_ms, a.forward_share), pace,
                     fp16=False)
        print(rate.line(backend="single", rank=0), flush=True)
    else:
        rate, rank = play_job(a, tensors, pace)
        print(rate.line(backend="r2sp", rank=rank), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
