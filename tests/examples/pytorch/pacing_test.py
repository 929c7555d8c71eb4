"""Tests of examples/pytorch/r2sp_examples/pacing.py: a step filled up to ms_per_sample per
sample, and each gradient held to the time the emulated machine's backward would produce it
(the stretch of the previous step's real compute), on a clock the test drives, through a real
torch backward."""

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
        p.begin()
        clock.compute(0.004)
        p._hold(None)  # a gradient at 4 ms: no stretch known yet
        clock.compute(0.006)
        p.after_backward(4)
        self.assertEqual(clock.sleeps, [0.03])
        self.assertAlmostEqual(clock.now, 0.04)
        # 40 ms over the real compute up to the last gradient (what follows it is backward's
        # wait for DDP's all-reduce, not compute).
        self.assertAlmostEqual(p.stretch, 10.0)

    def test_later_gradients_are_held_to_their_stretched_times(self):
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.stretch = 4.0
        p.begin()
        clock.compute(0.002)
        p._hold(None)           # real 2 ms: held until 8 ms
        clock.compute(0.003)
        p._hold(None)           # real 5 ms (clock 11 ms): held until 20 ms
        clock.compute(0.001)    # the rest of backward (DDP: its all-reduce's wait)
        p.after_backward(4)     # until 40 ms
        self.assertEqual(clock.sleeps, [0.006, 0.009, 0.019])
        self.assertAlmostEqual(clock.now, 0.04)
        self.assertAlmostEqual(p.stretch, 8.0)  # 40 ms over the 5 ms up to the last gradient

    def test_a_machine_slower_than_the_pace_is_never_held(self):
        clock = FakeClock()
        p = pacer(1.0, clock)
        p.stretch = 0.5
        p.begin()
        clock.compute(0.01)
        p._hold(None)
        clock.compute(0.01)
        p.after_backward(4)  # 4 ms of target, 20 ms spent
        self.assertEqual(clock.sleeps, [])
        self.assertAlmostEqual(p.stretch, 0.4)

    def test_a_cuda_step_is_not_held(self):
        clock = FakeClock()
        p = pacer(10.0, clock)
        p.stretch, p.holds = 4.0, False
        p.begin()
        clock.compute(0.002)
        p._hold(None)
        p.after_backward(4)
        self.assertEqual(clock.sleeps, [0.038])

    def test_without_emulation_nothing_sleeps_or_hooks(self):
        for ms in (0.0, None):
            clock = FakeClock()
            p = pacer(ms, clock)
            model = torch.nn.Linear(2, 1)
            p.install(model)
            self.assertEqual(model.weight._backward_hooks, None)
            p.begin()
            clock.compute(0.01)
            p.after_backward(10)
            self.assertEqual((clock.sleeps, p.stretch), ([], None))


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
        # real compute 100 ms, the step paced to 400 ms (4 samples at 100 ms): stretch 4.
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
        stretches = []
        for _ in range(2):
            seen.clear()
            p.begin()
            h = Timed.apply(first(torch.ones(4, 2)), clock, 0.010, 0.030)
            out = Timed.apply(second(h), clock, 0.020, 0.040)
            out.sum().backward()
            p.after_backward(4)
            stretches.append(p.stretch)
        # Second step: the second layer's gradient at real 70 ms is let go at 280 ms, the
        # first's at real 100 ms at 400 ms; the step ends at its target, 400 ms after the first.
        self.assertAlmostEqual(seen["second"], 0.4 + 0.28)
        self.assertAlmostEqual(seen["first"], 0.4 + 0.4)
        self.assertAlmostEqual(clock.now, 0.8)
        self.assertEqual([round(s, 6) for s in stretches], [4.0, 4.0])


if __name__ == "__main__":
    junit_main.main()
