"""Tests of examples/pytorch/r2sp_examples/ddp_hooks.py: the all-reduce timer's split of a step
(span, the part after the last bucket, bytes on the wire), and which hook each flag registers."""

import time
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    from r2sp_examples import ddp_hooks

import junit_main  # noqa: E402


class Bucket:
    def __init__(self, n):
        self.tensor = torch.zeros(n)

    def buffer(self):
        return self.tensor


class Model:
    def __init__(self):
        self.hooks = []

    def register_comm_hook(self, state, hook):
        self.hooks.append((state, hook))


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class AllReduceTimerTest(unittest.TestCase):
    def test_a_step_of_two_buckets(self):
        futures = []

        def hook(state, bucket):
            futures.append(torch.futures.Future())
            return futures[-1]

        timer = ddp_hooks.AllReduceTimer(hook, wire_bytes=2)
        done = [timer.run(None, Bucket(10)), None]
        time.sleep(0.05)
        done[1] = timer.run(None, Bucket(6))
        futures[0].set_result(torch.ones(10))
        time.sleep(0.03)
        futures[1].set_result(torch.ones(6))
        self.assertEqual(done[1].wait().tolist(), [1.0] * 6)  # the hook's value passes through
        span, exposed, nbytes = timer.take()
        self.assertGreaterEqual(span, 0.08)
        self.assertGreaterEqual(exposed, 0.03)
        self.assertLess(exposed, span - 0.04)
        self.assertEqual(nbytes, 32)  # 16 elements, 2 bytes each
        self.assertEqual(timer.take(), (0.0, 0.0, 0))  # afresh: nothing this step

    def test_which_hook_each_flag_registers(self):
        hooks = ddp_hooks._default_hooks()
        for hook, timing, expected in (("none", False, None),
                                       ("fp16", False, hooks.fp16_compress_hook),
                                       ("none", True, "timer of allreduce_hook"),
                                       ("fp16", True, "timer of fp16_compress_hook")):
            with self.subTest(hook=hook, timing=timing):
                model = Model()
                timer = ddp_hooks.register(model, hook, timing)
                if expected is None:
                    self.assertEqual((model.hooks, timer), ([], None))
                elif timing:
                    self.assertEqual(model.hooks, [(None, timer.run)])
                    self.assertEqual(f"timer of {timer.hook.__name__}", expected)
                    self.assertEqual(timer.wire_bytes, 2 if hook == "fp16" else 4)
                else:
                    self.assertEqual((model.hooks, timer), ([(None, expected)], None))


if __name__ == "__main__":
    junit_main.main()
