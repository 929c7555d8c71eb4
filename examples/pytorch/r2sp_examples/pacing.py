"""--emulate_ms_per_sample for ddp and single: each step's compute made to last ms_per_sample
per sample, as a slower machine's would, the way the C++ worker's EmulatedStep does it for
R2SP (worker/emulated_step.h).

The real compute is short; the emulated machine's lasts the step's target. A sleep only at the
end would let whatever backward starts run inside the whole emulated step: DDP's all-reduce,
launched as backward's buckets fill, would get the emulated forward's time too, which on the
real machine it never has. So each parameter's gradient is held (a hook that sleeps) until the
emulated machine's backward would have produced it: DDP's buckets start where that machine's
would, and only the rest of its backward hides them; then the step is filled up to its target.

Where that is: the C++ worker holds backward's reports until the real compute is done and
replays them at the same fractions of the target. A hook cannot wait for the rest of backward,
so each gradient is let go at the fraction of the step at which it came in the previous step
(where in backward a parameter's gradient comes is steady from step to step; how long the real
compute takes is not, on a shared CPU). An earlier version scaled this step's real times by
the last step's target over its real compute: a step whose real compute ran long was stretched
by that factor as a whole, so DDP's workers' steps averaged 2-9% over their target where
R2SP's met it exactly (1.28 s and 2.56 s targets over 0.3-0.5 s of real compute).

CPU steps only: on CUDA the hooks see launches, not compute, so a CUDA step sleeps at the end
alone."""

import functools
import time


class Pacer:
    """begin(samples) at a step's start, install() once on the model, after_backward() once
    backward (DDP: its all-reduce included) has returned. `clock` and `sleep` stand in for the
    tests."""

    def __init__(self, ms_per_sample, clock=time.perf_counter, sleep=time.sleep):
        self.ms_per_sample = ms_per_sample or 0.0
        self.clock, self.sleep = clock, sleep
        # Gradient key -> the fraction of the last step's real compute (up to its last
        # gradient) at which that gradient came; empty: not known yet, nothing is held.
        self.fractions = {}
        self.holds = True    # False for a CUDA step (train_epoch)
        self.start = self.slept = self.target = 0.0
        self._came = {}      # this step's: key -> real compute up to that gradient

    def install(self, model):
        """Holds each of `model`'s parameters' gradients to its emulated time (before DDP's
        reducer or the optimizer sees it)."""
        if self.ms_per_sample > 0:
            trained = (p for p in model.parameters() if p.requires_grad)
            for key, p in enumerate(trained):
                p.register_hook(functools.partial(self._hold, key))

    def begin(self, samples):
        """A step of `samples` starts: its target is ms_per_sample * samples."""
        self.start, self.slept = self.clock(), 0.0
        self.target = self.ms_per_sample * samples / 1e3
        self._came = {}

    def _hold(self, key, grad):
        self._came[key] = self._computed()  # real compute up to this gradient
        if self.holds and key in self.fractions:
            self._sleep_until(self.start + self.fractions[key] * self.target)
        return grad

    def after_backward(self):
        """Sleeps until the step has lasted its target; where this step's gradients came in its
        real compute up to the last one (not backward's wait for DDP's all-reduce) places the
        next step's."""
        if self.ms_per_sample <= 0:
            return
        # The last gradient's, or without hooks the whole backward.
        last = max(self._came.values(), default=None) or self._computed()
        self.fractions = {k: t / last for k, t in self._came.items()} if last > 0 else {}
        self._sleep_until(self.start + self.target)

    def _computed(self):
        return self.clock() - self.start - self.slept

    def _sleep_until(self, when):
        before = self.clock()
        if when > before:
            self.sleep(when - before)
            self.slept += self.clock() - before  # an oversleep is not compute either
