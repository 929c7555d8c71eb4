"""tools/bench/chain_proxy_worker.py: the calls it makes on the worker in each step (those of
r2sp.torch's CUDA path with --overlap), on a recording stand-in for r2sp._core.Worker and a pace
that only records, and the gradient pattern it fills the worker's buffers with."""

import contextlib
import importlib.util
import io
import os
import struct
import types
import unittest

import junit_main
from pylib.analysis.step_schedule import Module, Shares

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPEC = importlib.util.spec_from_file_location(
    "chain_proxy_worker", os.path.join(ROOT, "tools", "bench", "chain_proxy_worker.py"))
proxy = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(proxy)


class RecordingWorker:
    """r2sp._core.Worker's calls that drive() makes, recorded in order with the pace's."""

    def __init__(self, calls, steps, overlaps_pulls=True, size=10):
        self.calls, self.steps = calls, list(steps)
        self.overlaps_pulls, self.size = overlaps_pulls, size

    def next_step(self):
        return self.steps.pop(0) if self.steps else None

    def params_needed(self, offset, count):
        self.calls.append(("needed", offset, count))

    def gradient_ready(self, offset, count, fp16=False):
        self.calls.append(("ready", offset, count, fp16))

    def submit(self, samples, loss, fp16=False):
        self.calls.append(("submit", samples, loss, fp16))


class RecordingPace:
    def __init__(self, calls):
        self.calls = calls

    def restart(self):
        self.calls.append(("restart",))

    def spend(self, seconds):
        self.calls.append(("spend", seconds))

    def waited(self, start, end):
        self.calls.append(("waited",))


MODULES = [Module("conv", ((0, 4),)), Module("fc", ((4, 5), (9, 1)))]
SHARES = Shares(forward_s=1.0, backward_s=2.0)


class DriveTest(unittest.TestCase):
    def test_each_step_waits_in_the_forward_and_reports_in_the_backward(self):
        calls = []
        worker = RecordingWorker(calls, [types.SimpleNamespace(batch=64)])
        rate = proxy.drive(worker, MODULES, SHARES, RecordingPace(calls), fp16=True)
        self.assertEqual(calls, [
            ("restart",),
            ("needed", 0, 4), ("waited",), ("spend", 1.0),
            ("needed", 4, 5), ("needed", 9, 1), ("waited",), ("spend", 1.0),
            ("spend", 2.0), ("needed", 0, 10), ("waited",),  # the safety net, as r2sp.torch
            ("ready", 4, 5, True), ("ready", 9, 1, True),
            ("spend", 2.0), ("ready", 0, 4, True),
            ("submit", 64, 0.0, True)])
        self.assertEqual((rate.steps, rate.samples), (1, 64))

    def test_without_overlapped_pulls_nothing_is_waited_for(self):
        calls = []
        steps = [types.SimpleNamespace(batch=8), types.SimpleNamespace(batch=6)]
        rate = proxy.drive(RecordingWorker(calls, steps, overlaps_pulls=False), MODULES[:1],
                           SHARES, RecordingPace(calls), fp16=False)
        self.assertEqual(calls, [("restart",), ("spend", 1.0), ("spend", 2.0),
                                 ("ready", 0, 4, False), ("submit", 8, 0.0, False),
                                 ("restart",), ("spend", 1.0), ("spend", 2.0),
                                 ("ready", 0, 4, False), ("submit", 6, 0.0, False)])
        self.assertEqual((rate.steps, rate.samples), (2, 14))


class OptionsTest(unittest.TestCase):
    def test_a_step_needs_time_and_a_share_in_between(self):
        for bad in (["--step_ms=0"], ["--step_ms=8", "--forward_share=1"],
                    ["--step_ms=8", "--alone", "--steps=0"]):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                proxy.options(["--model=cnn"] + bad)
            self.assertEqual(e.exception.code, 2, bad)
        a = proxy.options(["--model=resnet18", "--step_ms=27.2"])
        self.assertEqual((a.model, a.step_ms, a.forward_share, a.alone, a.fp16),
                         ("resnet18", 27.2, 1 / 3, False, False))


class AloneTest(unittest.TestCase):
    def test_the_script_alone_takes_the_same_steps_and_sends_nothing(self):
        calls = []
        rate = proxy.drive(proxy.Alone(steps=2, batch=128), MODULES, SHARES,
                           RecordingPace(calls), fp16=False)
        self.assertEqual(calls, [("restart",), ("spend", 1.0), ("spend", 1.0), ("spend", 2.0),
                                 ("spend", 2.0)] * 2)
        self.assertEqual((rate.steps, rate.samples), (2, 256))


class PatternTest(unittest.TestCase):
    def test_fp32_buffer_gets_the_block_repeated_and_cut(self):
        buffer = bytearray(4 * (proxy.BLOCK + 3))
        proxy.fill_pattern(buffer, fp16=False)
        values = struct.unpack(f"<{proxy.BLOCK + 3}f", buffer)
        self.assertAlmostEqual(values[0], -48e-4, places=7)
        self.assertAlmostEqual(values[1], -47e-4, places=7)
        self.assertEqual(values[proxy.BLOCK:], values[:3])

    def test_fp16_buffer_gets_halves(self):
        buffer = bytearray(2 * 100)
        proxy.fill_pattern(buffer, fp16=True)
        values = struct.unpack("<100e", buffer)
        self.assertAlmostEqual(values[97], -48e-4, places=5)
        self.assertTrue(all(v != 0 or i % 97 == 48 for i, v in enumerate(values)))


if __name__ == "__main__":
    junit_main.main()
