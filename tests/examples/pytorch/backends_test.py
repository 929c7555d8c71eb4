"""Tests of examples/pytorch/r2sp_examples/backends.py: the single backend's epoch batches, the
DDP and R2SP backends' setup errors, and the R2SP backend's calls into r2sp.torch as api.md
specifies them, against a test double of r2sp.torch (the real package is tested in
tests/worker/python; the scripts run through real jobs in the benchmark)."""

import contextlib
import io
import os
import sys
import types
import unittest
from unittest import mock

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
class EpochBatchesTest(unittest.TestCase):
    def test_each_epoch_a_permutation_in_batches_from_seed_plus_epoch(self):
        b = backends.EpochBatches(list(range(10, 17)), 3, seed=4)
        first = list(b)
        self.assertEqual([len(x) for x in first], [3, 3, 1])
        self.assertEqual(sorted(sum(first, [])), list(range(10, 17)))
        self.assertEqual(len(b), 3)
        self.assertEqual(list(b), first)  # same epoch, same order
        b.set_epoch(1)
        second = list(b)
        self.assertNotEqual(second, first)
        g = torch.Generator()
        g.manual_seed(5)
        order = [10 + i for i in torch.randperm(7, generator=g).tolist()]
        self.assertEqual(sum(second, []), order)


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class R2SPOrderBatchesTest(unittest.TestCase):
    """--data_order=r2sp: each epoch's batches are r2sp.torch.epoch_batches' (a test double
    here: the function itself is tested with the package, tests/worker/python)."""

    def test_each_epoch_asks_for_that_epochs_batches(self):
        calls = []

        def epoch_batches(size, world, rank, batch_size, epoch, seed):
            calls.append((size, world, rank, batch_size, epoch, seed))
            return [[epoch, rank], [size, seed]]

        package = types.ModuleType("r2sp")
        package.torch = types.SimpleNamespace(epoch_batches=epoch_batches)
        with mock.patch.dict(sys.modules, {"r2sp": package, "r2sp.torch": package.torch}):
            single = backends.Single(parse("--backend=single", "--data_order=r2sp",
                                           "--batch_size=5", "--seed=9"))
            b = single.batches(list(range(40)))
        self.assertEqual(list(b), [[0, 0], [40, 9]])
        b.set_epoch(2)
        self.assertEqual(len(b), 2)
        self.assertEqual(list(b), [[2, 0], [40, 9]])
        self.assertEqual(calls, [(40, 1, 0, 5, 0, 9), (40, 1, 0, 5, 2, 9)])  # once an epoch

    def test_values_the_order_refuses_are_a_setup_error_before_training(self):
        def epoch_batches(size, world, rank, batch_size, epoch, seed):
            raise ValueError("r2sp.torch.epoch_batches: needs ... seed not negative")

        package = types.ModuleType("r2sp")
        package.torch = types.SimpleNamespace(epoch_batches=epoch_batches)
        with mock.patch.dict(sys.modules, {"r2sp": package, "r2sp.torch": package.torch}), \
                self.assertRaises(backends.SetupError) as e:
            backends.Single(parse("--backend=single", "--data_order=r2sp", "--seed=-1")
                            ).batches([0, 1])
        self.assertEqual(str(e.exception), "--data_order=r2sp: r2sp.torch.epoch_batches: "
                                           "needs ... seed not negative")

    def test_without_the_package_says_what_to_build(self):
        with mock.patch.dict(sys.modules, {"r2sp": None}), \
                self.assertRaises(backends.SetupError) as e:
            backends.Single(parse("--backend=single", "--data_order=r2sp")).batches([0, 1])
        self.assertEqual(str(e.exception),
                         "--data_order=r2sp needs the r2sp package (No module named "
                         "'r2sp.torch'; 'r2sp' is not a package): put <repo>/worker/python on "
                         "PYTHONPATH after bazel build //worker/python:_core.so")

    def test_torchs_order_by_default(self):
        b = backends.Single(parse("--backend=single", "--batch_size=3")).batches(list(range(7)))
        self.assertIsInstance(b, backends.EpochBatches)


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class SetupErrorsTest(unittest.TestCase):
    def test_ddp_without_torchrun_environment_says_how_to_launch(self):
        env = {k: v for k, v in os.environ.items() if k not in backends.TORCHRUN_VARS}
        env["RANK"] = "0"
        with mock.patch.dict(os.environ, env, clear=True), \
                self.assertRaises(backends.SetupError) as e:
            backends.DDP(parse("--backend=ddp"))
        self.assertEqual(str(e.exception),
                         "--backend=ddp needs torchrun's environment (WORLD_SIZE, MASTER_ADDR, "
                         "MASTER_PORT not set): run it as torchrun --nproc_per_node=N SCRIPT "
                         "--backend=ddp ...")

    def test_r2sp_without_the_package_says_what_to_build(self):
        with mock.patch.dict(sys.modules, {"r2sp": None}), \
                self.assertRaises(backends.SetupError) as e:
            backends.R2SP(parse())
        self.assertEqual(str(e.exception),
                         "--backend=r2sp needs the r2sp package (No module named 'r2sp.torch'; "
                         "'r2sp' is not a package): run the script under tools/launch "
                         "--worker_cmd=..., or "
                         "put <repo>/worker/python on PYTHONPATH after bazel build "
                         "//worker/python:_core.so")


class FakeR2spTorch:
    """Records the calls the backend makes; its sampler gives two epochs of two steps (the
    job's) then nothing, as r2sp.torch.DistributedSampler does when training is over."""

    def __init__(self, sync="bsp"):
        self.calls = []
        self.epochs_planned = 2
        self.sync = sync

    def module(self):
        m = types.ModuleType("r2sp.torch")
        m.R2SPError = type("R2SPError", (RuntimeError,), {})
        for name in ("init", "DistributedOptimizer", "DistributedSampler", "rank", "size",
                     "seed", "mode", "evaluates", "report_eval", "finish"):
            setattr(m, name, getattr(self, name))
        return m

    def init(self, **settings):
        self.calls.append(("init", settings))

    def DistributedOptimizer(self, optimizer, named_parameters, module=None):
        self.calls.append(("optimizer", type(optimizer).__name__,
                           [n for n, _ in named_parameters], type(module).__name__))
        fake = self

        class Wrapped:
            def zero_grad(self):
                optimizer.zero_grad()

            def step(self, loss=None, samples=None):
                fake.calls.append(("step", round(loss, 4), samples))

            @contextlib.contextmanager
            def centre(self):
                fake.calls.append(("centre", "in"))
                yield
                fake.calls.append(("centre", "out"))
        return Wrapped()

    def DistributedSampler(self, dataset, seed=None):
        self.calls.append(("sampler", len(dataset), seed))
        fake = self

        class Sampler:
            epoch = 0

            def set_epoch(self, epoch):
                self.epoch = epoch

            def __iter__(self):
                if self.epoch < fake.epochs_planned:
                    yield [0, 1]
                    yield [2]
        return Sampler()

    def rank(self):
        return 1

    def size(self):
        return 2

    def seed(self):
        return 5  # the job's --seed

    def mode(self):
        return self.sync

    def evaluates(self):
        return True

    def report_eval(self, accuracy, loss=0.0):
        self.calls.append(("report_eval", accuracy, round(loss, 4)))
        return True

    def finish(self):
        self.calls.append(("finish",))
        return {"steps": 4}


@unittest.skipUnless(HAVE_TORCH, example_paths.NO_TORCH)
class R2spBackendTest(unittest.TestCase):
    def test_init_refusing_its_settings_is_a_setup_error(self):
        fake = FakeR2spTorch()
        package = types.ModuleType("r2sp")
        package.torch = fake.module()

        def init(**settings):
            raise ValueError("r2sp.torch.init: no scheduler address: set R2SP_SCHEDULER")
        package.torch.init = init
        with mock.patch.dict(sys.modules, {"r2sp": package, "r2sp.torch": package.torch}), \
                self.assertRaises(backends.SetupError) as e:
            backends.make(parse())
        self.assertEqual(str(e.exception),
                         "r2sp.torch.init: no scheduler address: set R2SP_SCHEDULER")

    def test_without_its_own_seed_the_script_takes_the_jobs(self):
        # The initial parameters (training.run seeds torch with args.seed) as a DDP run of the
        # same --seed draws them; a --seed on the script's command line is the job's already.
        package = types.ModuleType("r2sp")
        package.torch = FakeR2spTorch().module()
        with mock.patch.dict(sys.modules, {"r2sp": package, "r2sp.torch": package.torch}):
            args = parse()
            backends.make(args)
            self.assertEqual(args.seed, 5)
            args = parse("--seed=7")
            backends.make(args)
            self.assertEqual(args.seed, 7)

    def test_the_loop_drives_r2sp_torch_as_api_md_says(self):
        for sync in ("bsp", "eawild"):
            with self.subTest(sync=sync):
                self.check_loop(sync)

    def check_loop(self, sync):
        fake = FakeR2spTorch(sync)
        package = types.ModuleType("r2sp")
        package.torch = fake.module()
        args = parse("--batch_size=2", "--seed=7")
        with mock.patch.dict(sys.modules, {"r2sp": package, "r2sp.torch": package.torch}):
            backend = backends.make(args)
            model = torch.nn.Linear(1, 2)
            torch.nn.init.zeros_(model.weight)
            with torch.no_grad():
                model.bias.copy_(torch.tensor([0.0, 1.0]))
            data = torch.utils.data.TensorDataset(torch.zeros(3, 1), torch.tensor([1, 1, 0]))
            with contextlib.redirect_stdout(io.StringIO()):
                stats = training.train(backend, model, torch.optim.SGD(model.parameters(), lr=1),
                                       data, data, args)
        loss = round(torch.nn.functional.cross_entropy(
            torch.tensor([[0.0, 1.0]] * 2), torch.tensor([1, 1])).item(), 4)
        loss0 = round(torch.nn.functional.cross_entropy(
            torch.tensor([[0.0, 1.0]]), torch.tensor([0])).item(), 4)
        mean = round((2 * loss + loss0) / 3, 4)  # the servers own the update: params unchanged
        step = [("step", loss, 2), ("step", loss0, 1)]
        # Elastic modes evaluate the centre (swapped into the model), the others the model.
        centre = [("centre", "in"), ("centre", "out")] if sync == "eawild" else []
        self.assertEqual(fake.calls, [
            ("init", {"batch_size": 2, "seed": 7}),
            ("optimizer", "SGD", ["weight", "bias"], "Linear"),  # module=: overlapped pulls
            ("sampler", 3, 7),
            *step, *centre, ("report_eval", 2 / 3, mean),
            *step, *centre, ("report_eval", 2 / 3, mean),
            ("finish",)])
        self.assertEqual((stats.steps, stats.samples, backend.rank, backend.world), (4, 6, 1, 2))
        self.assertEqual(backend.errors, (package.torch.R2SPError,))


if __name__ == "__main__":
    junit_main.main()
