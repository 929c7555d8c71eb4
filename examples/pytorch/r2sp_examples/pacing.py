"""--emulate_ms_per_sample for ddp and single: each step's compute made to last ms_per_sample
per sample, as a slower machine's would, the way the C++ worker's EmulatedStep does it for
R2SP (worker/emulated_step.h).

The real compute is short; the emulated machine's is longer by a stretch (the step's target over
the real compute, measured on the previous step). A sleep only at the end would let whatever
backward starts run inside the whole emulated step: DDP's all-reduce, launched as backward's
buckets fill, would get the emulated forward's time too, which on the real machine it never
has. So each parameter's gradient is held (a hook that sleeps) until the stretched time at
which the emulated machine's backward would have produced it: DDP's buckets start where that
machine's would, and only the rest of its backward hides them; then the step is filled up to
its target. CPU steps only: on CUDA the hooks see launches, not compute, so a CUDA step sleeps
at the end alone."""

import time


class Pacer:
    """begin() at a step's start, install() once on the model, after_backward() once backward
    (DDP: its all-reduce included) has returned. `clock` and `sleep` stand in for the tests."""

    def __init__(self, ms_per_sample, clock=time.perf_counter, sleep=time.sleep):
        self.ms_per_sample = ms_per_sample or 0.0
        self.clock, self.sleep = clock, sleep
        self.stretch = None  # target over real compute, from the last step (None: unknown)
        self.holds = True    # False for a CUDA step (train_epoch)
        self.start = self.slept = self.computed = 0.0

    def install(self, model):
        """Holds each of `model`'s parameters' gradients to its stretched time (before DDP's
        reducer or the optimizer sees it)."""
        if self.ms_per_sample > 0:
            for p in model.parameters():
                if p.requires_grad:
                    p.register_hook(self._hold)

    def begin(self):
        self.start, self.slept, self.computed = self.clock(), 0.0, 0.0

    def _hold(self, grad):
        now = self.clock()
        self.computed = now - self.start - self.slept  # real compute up to this gradient
        if self.holds and self.stretch is not None:
            self._sleep_until(self.start + self.stretch * self.computed)
        return grad

    def after_backward(self, samples):
        """Sleeps until the step has lasted ms_per_sample * samples; the real compute up to
        the last gradient (not backward's wait for DDP's all-reduce) sets the next stretch."""
        if self.ms_per_sample <= 0:
            return
        target = self.ms_per_sample * samples / 1e3
        if not self.computed:  # no gradient hook ran: the whole backward
            self.computed = self.clock() - self.start - self.slept
        self.stretch = target / self.computed if self.computed > 0 else None
        self._sleep_until(self.start + target)

    def _sleep_until(self, when):
        before = self.clock()
        if when > before:
            self.sleep(when - before)
            self.slept += self.clock() - before  # an oversleep is not compute either
