"""Tests of examples/pytorch/r2sp_examples/training.py: the flags (which become R2SP worker
flags, the defaults alone and under DDP, refused values), the emulation's pacing, evaluation,
the loop's step and epoch bounds and the JSON result line."""

import contextlib
import io
import json
import time
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    from r2sp_examples import backends
    from r2sp_examples import training

import junit_main  # noqa: E402


def parse(*argv):
    return training.parse(training.parser("test", 0.01), list(argv))


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class FlagsTest(unittest.TestCase):
    def test_r2sp_passes_on_only_the_flags_given(self):
        args = parse("--batch_size=32", "--emulate_ms_per_sample=0.5", "--threads=2")
        self.assertEqual(args.backend, "r2sp")
        self.assertEqual(args.r2sp_settings, {"batch_size": 32, "emulate_ms_per_sample": 0.5})
        self.assertIsNone(args.epochs)  # the job's
        self.assertEqual(parse().r2sp_settings, {})

    def test_single_and_ddp_get_the_defaults(self):
        for backend in ("single", "ddp"):
            args = parse(f"--backend={backend}", "--epochs=3")
            self.assertEqual((args.epochs, args.batch_size, args.seed, args.max_steps,
                              args.emulate_ms_per_sample), (3, 64, 1, 0, 0.0))

    def test_bad_values_are_refused_with_usage(self):
        cases = [(["--epochs=0"], "--epochs must be at least 1"),
                 (["--batch_size=-3"], "--batch_size must be at least 1"),
                 (["--max_steps=-1"], "--max_steps and --emulate_ms_per_sample must not be negative"),
                 (["--lr=0"], "--lr must be positive and --threads not negative"),
                 (["--backend=horovod"], "argument --backend: invalid choice: 'horovod' "
                                         "(choose from 'r2sp', 'ddp', 'single')")]
        for argv, message in cases:
            with self.subTest(argv=argv):
                err = io.StringIO()
                with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
                    parse(*argv)
                self.assertEqual(e.exception.code, 2)
                self.assertTrue(err.getvalue().endswith(f"error: {message}\n"), err.getvalue())


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class PacerTest(unittest.TestCase):
    def test_sleeps_until_the_step_lasts_ms_per_sample(self):
        pacer = training.Pacer(2.0)
        pacer.begin()
        pacer.after_backward(50)  # 100 ms
        self.assertGreaterEqual(time.perf_counter() - pacer.start, 0.1)

    def test_no_sleep_when_compute_already_took_longer_or_no_emulation(self):
        for pacer in (training.Pacer(0.001), training.Pacer(None)):
            pacer.begin()
            time.sleep(0.02)
            t = time.perf_counter()
            pacer.after_backward(10)  # 0.01 ms or nothing: already past
            self.assertLess(time.perf_counter() - t, 0.01)


class Constant(torch.nn.Module if HAVE_TORCH else object):
    """Logits that always say class 1 (a trainable bias, so SGD has a parameter)."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([0.0, 1.0]))

    def forward(self, x):
        return self.bias.expand(len(x), 2)


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class LoopTest(unittest.TestCase):
    def data(self, n):
        return torch.utils.data.TensorDataset(torch.zeros(n, 1), torch.tensor([1, 0] * (n // 2)))

    def test_evaluate_counts_correct_answers_and_mean_loss(self):
        accuracy, loss = training.evaluate(Constant(), self.data(10), batch_size=3)
        self.assertEqual(accuracy, 0.5)
        expected = 0.5 * (-torch.log_softmax(torch.tensor([0.0, 1.0]), 0)).sum().item()
        self.assertAlmostEqual(loss, expected, places=6)

    def test_max_steps_stops_the_single_loop_and_the_line_says_what_ran(self):
        args = parse("--backend=single", "--epochs=5", "--batch_size=4", "--max_steps=3")
        backend = backends.Single(args)
        model = Constant()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            stats = training.train(backend, model, torch.optim.SGD(model.parameters(), lr=0.1),
                                   self.data(10), self.data(4), args)
        self.assertEqual((stats.steps, stats.samples, stats.test_accuracy), (3, 10, 0.5))
        self.assertEqual(out.getvalue().splitlines()[0][:38], "epoch 1: test accuracy 0.5000, test lo")
        self.assertEqual(len(out.getvalue().splitlines()), 1)  # epoch 1 had 3 steps, then the end
        line = json.loads(training.result_line(stats, backend))
        self.assertEqual({k: line[k] for k in ("test_accuracy", "backend", "rank", "world",
                                               "steps", "samples")},
                         {"test_accuracy": 0.5, "backend": "single", "rank": 0, "world": 1,
                          "steps": 3, "samples": 10})
        self.assertAlmostEqual(line["samples_per_s"], 10 / stats.seconds, delta=0.01)
        self.assertEqual(line["seconds"], round(stats.seconds, 3))

    def test_epochs_bound_the_loop(self):
        args = parse("--backend=single", "--epochs=2", "--batch_size=4")
        model = Constant()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            stats = training.train(backends.Single(args), model,
                                   torch.optim.SGD(model.parameters(), lr=0.1),
                                   self.data(10), self.data(4), args)
        self.assertEqual((stats.steps, stats.samples), (6, 20))  # 3 batches (4, 4, 2) per epoch
        self.assertEqual([l[:7] for l in out.getvalue().splitlines()], ["epoch 1", "epoch 2"])


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class ExitStatusTest(unittest.TestCase):
    class R2SPError(RuntimeError):
        pass

    class JobLost(R2SPError):
        pass

    def test_what_each_error_exits_with(self):
        r2sp_backend = backends.Single(parse("--backend=single"))
        r2sp_backend.errors = (self.R2SPError,)
        cases = [(datasets_error(), None, 2), (backends.SetupError("x"), None, 2),
                 (self.R2SPError("bad flag"), r2sp_backend, 2),
                 (self.JobLost("declared dead"), r2sp_backend, 3),
                 (self.R2SPError("x"), None, None), (ValueError("x"), r2sp_backend, None)]
        for error, backend, status in cases:
            with self.subTest(error=repr(error)):
                self.assertEqual(training.exit_status(error, backend), status)


def datasets_error():
    from r2sp_examples import datasets
    return datasets.DataError("f: no such file")


if __name__ == "__main__":
    junit_main.main()
