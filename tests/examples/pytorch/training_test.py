"""Tests of examples/pytorch/r2sp_examples/training.py: the flags (which become R2SP worker
flags, the defaults alone and under DDP, refused values), the emulation's pacing, evaluation,
the loop's step and epoch bounds, the metrics and --step_times lines and the JSON result
line."""

import contextlib
import io
import json
import os
import tempfile
import time
import unittest

import example_paths

HAVE_TORCH = example_paths.use_torch_python()
if HAVE_TORCH:
    import torch
    from r2sp_examples import backends
    from r2sp_examples import metrics_log
    from r2sp_examples import step_times
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

    def test_ddp_timing_is_ignored_by_the_other_backends(self):
        self.assertTrue(parse("--ddp_timing").ddp_timing)
        self.assertEqual(parse("--ddp_timing").r2sp_settings, {})
        self.assertFalse(parse("--backend=ddp").ddp_timing)

    def test_single_and_ddp_get_the_defaults(self):
        for backend in ("single", "ddp"):
            args = parse(f"--backend={backend}", "--epochs=3")
            self.assertEqual((args.epochs, args.batch_size, args.seed, args.max_steps,
                              args.emulate_ms_per_sample), (3, 64, 1, 0, 0.0))

    def test_the_data_order_is_torchs_unless_r2sps_is_asked_or_the_jobs(self):
        self.assertEqual([parse(*argv).data_order for argv in (
            ["--backend=ddp"], ["--backend=single"], ["--backend=ddp", "--data_order=r2sp"],
            [], ["--data_order=r2sp"])], ["torch", "torch", "r2sp", "r2sp", "r2sp"])

    def test_bad_values_are_refused_with_usage(self):
        cases = [(["--epochs=0"], "--epochs must be at least 1"),
                 (["--batch_size=-3"], "--batch_size must be at least 1"),
                 (["--max_steps=-1"],
                  "--max_steps and --emulate_ms_per_sample must not be negative"),
                 (["--lr=0"], "--lr must be positive and --threads not negative"),
                 (["--device=tpu"], "--device=tpu: not cpu, cuda or cuda:N"),
                 (["--metrics=m.jsonl"], "--metrics: under r2sp the job writes the metrics "
                                         "(tools/launch's run directory)"),
                 (["--backend=single", "--ddp_comm_hook=fp16"],
                  "--ddp_comm_hook=fp16 needs --backend=ddp"),
                 (["--data_order=torch"], "--data_order=torch: under --backend=r2sp the job's "
                                          "sampler decides (r2sp)"),
                 (["--backend=ddp", "--data_order=tf"],
                  "argument --data_order: invalid choice: 'tf' (choose from 'torch', 'r2sp')"),
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
class DeviceTest(unittest.TestCase):
    def test_cpu(self):
        self.assertEqual(training.device_for("cpu"), torch.device("cpu"))

    def test_cuda_is_local_ranks_gpu(self):
        if not torch.cuda.is_available():
            with self.assertRaises(backends.SetupError) as e:
                training.device_for("cuda:1")
            self.assertEqual(str(e.exception), "--device=cuda:1: torch sees no CUDA device "
                                               "(torch.cuda.is_available() is False)")
            return
        self.assertEqual(training.device_for("cuda", {"LOCAL_RANK": "0"}), torch.device("cuda:0"))
        self.assertEqual(training.device_for("cuda", {}), torch.device("cuda:0"))

    def test_more_workers_than_gpus_share_them(self):
        # On a GPU machine 4 Python workers on one GPU asked for cuda:1 to cuda:3 ("invalid
        # device ordinal"); LOCAL_RANK wraps modulo the GPUs torch sees.
        self.assertEqual(training.device_for("cuda", {"LOCAL_RANK": "3"}, cuda_devices=1),
                         torch.device("cuda:0"))
        self.assertEqual(training.device_for("cuda", {"LOCAL_RANK": "3"}, cuda_devices=2),
                         torch.device("cuda:1"))
        self.assertEqual(training.device_for("cuda:1", {}, cuda_devices=2), torch.device("cuda:1"))

    def test_a_gpu_index_torch_does_not_see_is_refused(self):
        with self.assertRaises(backends.SetupError) as e:
            training.device_for("cuda:2", {}, cuda_devices=2)
        self.assertEqual(str(e.exception), "--device=cuda:2: torch sees 2 CUDA devices "
                                           "(cuda:0 to cuda:1)")
        with self.assertRaises(backends.SetupError) as e:
            training.device_for("cuda:1", {}, cuda_devices=1)
        self.assertEqual(str(e.exception), "--device=cuda:1: torch sees 1 CUDA device "
                                           "(cuda:0 to cuda:0)")
        with self.assertRaises(backends.SetupError) as e:
            training.device_for("cuda", {}, cuda_devices=0)
        self.assertEqual(str(e.exception), "--device=cuda: torch sees no CUDA device "
                                           "(torch.cuda.is_available() is False)")


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
        labels = torch.tensor([1, 0] * (n // 2))
        return torch.utils.data.TensorDataset(torch.zeros(n, 1), labels)

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
        t0 = time.time()
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
        self.assertEqual((line["started"], line["ended"]), (stats.started, stats.ended))
        self.assertLessEqual(stats.ended - stats.started, time.time() - t0)
        self.assertGreaterEqual(stats.ended - stats.started, stats.seconds - 0.01)

    def test_the_steady_rate_leaves_out_the_first_steps_across_epochs(self):
        # 3 epochs of 3 steps: steps 6 to 9 are steady (STEADY_AFTER_STEPS = 5).
        args = parse("--backend=single", "--epochs=3", "--batch_size=4")
        model = Constant()
        with contextlib.redirect_stdout(io.StringIO()):
            stats = training.train(backends.Single(args), model,
                                   torch.optim.SGD(model.parameters(), lr=0.1),
                                   self.data(12), self.data(4), args)
        self.assertEqual(training.STEADY_AFTER_STEPS, 5)
        self.assertEqual((stats.steps, stats.samples, stats.steady_samples), (9, 36, 16))
        self.assertGreater(stats.steady_seconds, 0)
        self.assertLess(stats.steady_seconds, stats.seconds)
        line = json.loads(training.result_line(stats, backends.Single(args)))
        self.assertEqual(line["steady_samples_per_s"],
                         round(16 / stats.steady_seconds, 3))

    def test_no_steady_rate_without_steps_after_the_first_ones(self):
        args = parse("--backend=single", "--epochs=1", "--batch_size=4", "--max_steps=5")
        model = Constant()
        with contextlib.redirect_stdout(io.StringIO()):
            stats = training.train(backends.Single(args), model,
                                   torch.optim.SGD(model.parameters(), lr=0.1),
                                   self.data(40), self.data(4), args)
        self.assertEqual((stats.steps, stats.steady_samples, stats.steady_seconds), (5, 0, 0.0))
        self.assertIsNone(json.loads(training.result_line(stats, backends.Single(args)))
                          ["steady_samples_per_s"])

    def test_epochs_bound_the_loop(self):
        args = parse("--backend=single", "--epochs=2", "--batch_size=4")
        model = Constant()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            stats = training.train(backends.Single(args), model,
                                   torch.optim.SGD(model.parameters(), lr=0.1),
                                   self.data(10), self.data(4), args)
        self.assertEqual((stats.steps, stats.samples), (6, 20))  # 3 batches (4, 4, 2) per epoch
        self.assertEqual([l[:7] for l in out.getvalue().splitlines()], ["epoch 1", "epoch 2"])

    def test_metrics_lines_are_the_cpp_workers(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "metrics_worker0.jsonl")
            args = parse("--backend=single", "--epochs=2", "--batch_size=4", f"--metrics={path}")
            model = Constant()
            t0 = time.time()
            with contextlib.redirect_stdout(io.StringIO()):
                training.train(backends.Single(args), model,
                               torch.optim.SGD(model.parameters(), lr=0.1),
                               self.data(10), self.data(4), args)
            with open(path) as f:
                rows = [json.loads(line) for line in f]
        steps = [r for r in rows if "event" not in r]
        evals = [r for r in rows if r.get("event") == "eval"]
        self.assertEqual([(r["worker"], r["clock"], r["epoch"], r["batch"]) for r in steps],
                         [(0, 0, 0, 4), (0, 1, 0, 4), (0, 2, 0, 2),
                          (0, 3, 1, 4), (0, 4, 1, 4), (0, 5, 1, 2)])
        self.assertEqual({(r["wait_s"], r["push_s"], r["pull_s"], r["gap_s"]) for r in steps},
                         {(0.0, 0.0, 0.0, 0.0)})
        self.assertEqual([(r["epoch"], r["step"], r["test_accuracy"]) for r in evals],
                         [(1, 3, 0.5), (2, 6, 0.5)])
        self.assertEqual([r["clock"] for r in rows if "event" not in r], list(range(6)))
        self.assertTrue(all(t0 <= r["t"] <= time.time() for r in rows))
        self.assertLess(evals[0]["elapsed_s"], evals[1]["elapsed_s"])

    def test_step_times_are_each_steps_compute_and_interval(self):
        # 2 epochs of 3 steps; the file is worker 0's ({rank} replaced).
        with tempfile.TemporaryDirectory() as tmp:
            args = parse("--backend=single", "--epochs=2", "--batch_size=4",
                         f"--step_times={tmp}/times_{{rank}}.jsonl")
            self.assertEqual(args.step_times, f"{tmp}/times_{{rank}}.jsonl")
            model = Constant()
            with contextlib.redirect_stdout(io.StringIO()):
                stats = training.train(backends.Single(args), model,
                                       torch.optim.SGD(model.parameters(), lr=0.1),
                                       self.data(10), self.data(4), args)
            self.assertEqual(os.listdir(tmp), ["times_0.jsonl"])
            with open(os.path.join(tmp, "times_0.jsonl")) as f:
                rows = [json.loads(line) for line in f]
        self.assertEqual([sorted(r) for r in rows], [["compute_s", "interval_s", "step"]] * 6)
        self.assertEqual([r["step"] for r in rows], list(range(6)))
        self.assertTrue(all(0 < r["compute_s"] <= r["interval_s"] for r in rows), rows)
        # Each epoch's intervals add up to its time from its start to its last step's end.
        self.assertAlmostEqual(sum(r["interval_s"] for r in rows), stats.seconds, delta=1e-5)

    def test_a_step_times_file_per_rank(self):
        self.assertEqual(step_times.path_for("/r/times_{rank}.jsonl", 3), "/r/times_3.jsonl")
        self.assertEqual(step_times.path_for("/r/times.jsonl", 1), "/r/times.jsonl.1")
        with tempfile.TemporaryDirectory() as tmp:
            times = step_times.StepTimes(os.path.join(tmp, "t"), 2)
            times.step(0, 0.25, 0.5)
            times.close()
            times.close()
            with open(os.path.join(tmp, "t.2")) as f:
                self.assertEqual(f.read(), '{"step": 0, "compute_s": 0.25, "interval_s": 0.5}\n')
        nothing = step_times.StepTimes("", 0)
        nothing.step(0, 0.1, 0.2)
        nothing.close()
        self.assertIsNone(nothing.file)
        self.assertEqual(parse().step_times, "")

    def test_no_metrics_file_without_the_flag(self):
        log = metrics_log.MetricsLog("", 0)
        log.step(0, 4, 0.1, 1.0)
        log.evaluation(1, 1, 0.5, 1.0, 1.0)
        log.close()
        self.assertIsNone(log.file)


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
