"""Tests of examples/pytorch/r2sp_examples/pacing.py: a step filled up to ms_per_sample per
sample, and each gradient held to the time the emulated machine's backward would produce it
(the fraction of the step at which it came in the previous one), on a clock the test drives,
through a real torch backward."""

import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    from r2sp_examples import pacing

import junit_main  # noqa: E402


class FakeClock:
    """Seconds that pass only when the test's compute or the pacer's sleep says so."""

    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(round(seconds, 9))
        self.now += seconds

    def compute(self, seconds):
        self.now += seconds


def pacer(ms_per_sample, clock):
    return pacing.Pacer(ms_per_sample, clock=clock, sleep=clock.sleep)


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class StepTest(unittest.TestCase):
    def test_the_first_step_sleeps_at_the_end_only(self):
        clock = FakeClock()
        p = pacer(10.0, clock)  # 10 ms a sample: 4 samples, 40 ms
        p.begin(4)
        clock.compute(0.004)
        p._hold("a", None)  # a gradient at 4 ms: where it comes is not known yet
        clock.compute(0.006)
        p._hold("b", None)
        clock.compute(0.002)  # backward's wait for DDP's all-reduce, not compute
        p.after_backward()
        self.assertEqual(clock.sleeps, [0.028])
        self.assertAlmostEqual(clock.now, 0.04)
        # Where each came in the real compute up to the last gradient (10 ms).
        self.assertEqual({k: round(f, 9) for k, f in p.fractions.items()},
                         {"a": 0.4, "b": 1.0})

    def test_later_gradients_are_held_to_their_fraction_of_the_target(self):
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.fractions = {"a": 0.2, "b": 0.5}
        p.begin(4)
        clock.compute(0.002)
        p._hold("a", None)      # held until 0.2 of 40 ms: 8 ms
        clock.compute(0.003)
        p._hold("b", None)      # clock 11 ms, real 5 ms: held until 20 ms
        clock.compute(0.001)    # the rest of backward (DDP: its all-reduce's wait)
        p.after_backward()      # until 40 ms
        self.assertEqual(clock.sleeps, [0.006, 0.009, 0.019])
        self.assertAlmostEqual(clock.now, 0.04)
        self.assertEqual({k: round(f, 9) for k, f in p.fractions.items()},
                         {"a": 0.4, "b": 1.0})

    def test_a_slower_real_compute_is_not_stretched_past_the_target(self):
        # The last step's real compute was 5 ms; this one's takes twice as long. Scaling it by
        # the last step's stretch (8) would end backward at 80 ms; the fractions keep 40 ms.
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.fractions = {"a": 0.4, "b": 1.0}
        p.begin(4)
        clock.compute(0.004)
        p._hold("a", None)      # held until 16 ms
        clock.compute(0.006)
        p._hold("b", None)      # clock 22 ms: held until 40 ms
        p.after_backward()
        self.assertEqual(clock.sleeps, [0.012, 0.018])
        self.assertAlmostEqual(clock.now, 0.04)

    def test_a_machine_slower_than_the_pace_is_never_held(self):
        clock = FakeClock()
        p = pacer(1.0, clock)
        p.fractions = {"a": 0.5, "b": 1.0}
        p.begin(4)              # 4 ms of target
        clock.compute(0.01)
        p._hold("a", None)
        clock.compute(0.01)
        p._hold("b", None)
        p.after_backward()      # 20 ms spent
        self.assertEqual(clock.sleeps, [])
        self.assertAlmostEqual(clock.now, 0.02)

    def test_a_smaller_step_has_its_own_target(self):
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.fractions = {"a": 0.5}
        p.begin(2)              # the epoch's last batch, 2 samples: 20 ms
        clock.compute(0.002)
        p._hold("a", None)      # held until 10 ms
        p.after_backward()
        self.assertEqual(clock.sleeps, [0.008, 0.01])

    def test_a_cuda_step_is_not_held(self):
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.fractions, p.holds = {"a": 0.5}, False
        p.begin(4)
        clock.compute(0.002)
        p._hold("a", None)
        p.after_backward()
        self.assertEqual(clock.sleeps, [0.038])

    def test_without_emulation_nothing_sleeps_or_hooks(self):
        for ms in (0.0, None):
            clock = FakeClock()
            p = pacer(ms, clock)
            model = torch.nn.Linear(2, 1)
            p.install(model)
            self.assertEqual(model.weight._backward_hooks, None)
            p.begin(10)
            clock.compute(0.01)
            p.after_backward()
            self.assertEqual((clock.sleeps, p.fractions), ([], {}))


class Timed(torch.autograd.Function if HAVE_TORCH else object):
    """Identity whose forward and backward take given times on the test's clock."""

    @staticmethod
    def forward(ctx, x, clock, forward_s, backward_s):
        clock.compute(forward_s)
        ctx.clock, ctx.backward_s = clock, backward_s
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        ctx.clock.compute(ctx.backward_s)
        return grad, None, None, None


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class TorchBackwardTest(unittest.TestCase):
    def test_gradients_reach_later_hooks_at_the_emulated_machines_times(self):
        # Two layers: forward 10 + 20 ms, backward 40 ms (second layer) then 30 ms (first):
        # real compute 100 ms, the step paced to 400 ms (4 samples at 100 ms). The second
        # step's real compute runs 1.5 times as long (contention on a shared CPU): its
        # gradients still come at the first step's fractions of 400 ms.
        clock = FakeClock()
        first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        model = torch.nn.Sequential(first, second)
        p = pacer(100.0, clock)
        p.install(model)
        seen = {}  # hooks registered after the pacer's see the gradient once it lets it go

        def when(name):
            return lambda grad: seen.setdefault(name, clock.now) and None

        second.weight.register_hook(when("second"))
        first.weight.register_hook(when("first"))
        for slowdown in (1.0, 1.5):
            seen.clear()
            p.begin(4)
            h = Timed.apply(first(torch.ones(4, 2)), clock, 0.010 * slowdown, 0.030 * slowdown)
            out = Timed.apply(second(h), clock, 0.020 * slowdown, 0.040 * slowdown)
            out.sum().backward()
            p.after_backward()
        # Second step (from 400 ms): the second layer's gradients came at 0.7 of the first
        # step's real compute, so they are let go at 280 ms; the first layer's at 400 ms; the
        # step ends at its target. (Stretching this step's real times by 4 would have put
        # them at 420 and 600 ms.)
        self.assertAlmostEqual(seen["second"], 0.4 + 0.28)
        self.assertAlmostEqual(seen["first"], 0.4 + 0.4)
        self.assertAlmostEqual(clock.now, 0.8)
        # The fractions from the second step: its own real compute's proportions.
        self.assertEqual(sorted(round(f, 6) for f in p.fractions.values()),
                         [0.7, 0.7, 1.0, 1.0])

if __name__ == "__main__":
    junit_main.main()
