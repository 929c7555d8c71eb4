"""A model compiled with torch.compile (PyTorch 2; skipped under torch 1.13) trains through
r2sp.torch as the same model uncompiled does. Over a FakeWorker (r2sp_testing): each step
reports every parameter's range once, holding the uncompiled twin's gradients, and the next
compiled forward reads the parameters the step pulled; with module= (overlapped pulls) the
forward pre-hooks wait for each step's pull outside the compiled code. In a real job (when the
binaries are built): two Python workers running tiny_train.py with a compiled model in bsp end
with the parameters of the same job uncompiled, within float rounding (the compiled kernels may
round differently)."""

import unittest
from unittest import mock

import r2sp_testing
import training_test

import junit_main  # noqa: E402  (training_test set up the path)

SKIP = training_test.SKIP
if not SKIP:
    import torch  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import state  # noqa: E402

    if not hasattr(torch, "compile"):
        SKIP = f"torch.compile needs PyTorch 2 (this is torch {torch.__version__})"

FakeWorker = r2sp_testing.FakeWorker
X = [[1.0, -2.0, 0.5], [0.25, 1.0, -1.0], [2.0, 0.0, 1.0], [-1.0, 1.5, 0.0]]
Y = [[1.0], [-1.0], [0.5], [2.0]]


def tiny_model():
    """Linear(3, 4) -> ReLU -> Linear(4, 1) with fixed weights: 12 + 4 + 4 + 1 floats."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).tolist()


@unittest.skipIf(SKIP, SKIP or "")
class CompiledModelTest(unittest.TestCase):
    def setUp(self):
        torch.compiler.reset()
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"},
                                                    ["--epochs=1"])
        self.model, self.twin = tiny_model(), tiny_model()
        self.x, self.y = torch.tensor(X), torch.tensor(Y)

    def tearDown(self):
        state.STATE.__init__()  # no finish at exit for a fake
        torch.compiler.reset()

    def make(self, pulls_overlap=False, **kwargs):
        workers = []

        def create(flags, tensors, params_staged=False):
            workers.append(FakeWorker(flags, tensors, steps=r2sp_testing.steps_of([3]),
                                      pulls_overlap=pulls_overlap))
            return workers[-1]
        with mock.patch.object(state, "create_worker", create):
            optimizer = r2t.DistributedOptimizer(torch.optim.SGD(self.model.parameters(), lr=0.1),
                                                 self.model.named_parameters(), train_samples=12,
                                                 **kwargs)
        return optimizer, workers[0]

    def train(self, forward, optimizer, worker):
        """Three steps of `forward` against the uncompiled twin holding the same parameters:
        [(the step's calls, its gradient reports sorted by offset, the twin's gradient, the
        losses of both)]."""
        steps = []
        for _ in range(3):
            self.twin.load_state_dict(self.model.state_dict())
            self.twin.zero_grad()
            twin_loss = torch.nn.functional.mse_loss(self.twin(self.x), self.y)
            twin_loss.backward()
            worker.calls.clear()
            state.STATE.next_step("test")  # as the sampler does before the batch's compute
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(forward(self.x), self.y)
            loss.backward()
            reports = sorted(c[1:] for c in worker.calls if c[0] == "gradient_ready")
            before = flat(self.model.parameters())
            reported = [v for _, _, values in reports for v in values]
            optimizer.step(loss=loss)
            # The fake's pull: params - 0.5 * the gradient it got, which the model now holds.
            self.assertEqual(flat(self.model.parameters()),
                             (torch.tensor(before) - 0.5 * torch.tensor(reported)).tolist())
            steps.append((worker.names(), [r[:2] for r in reports], reported,
                          flat(p.grad for p in self.twin.parameters()),
                          (loss.item(), twin_loss.item())))
        return steps

    def test_a_compiled_model_trains_as_the_model_uncompiled(self):
        optimizer, worker = self.make()
        steps = self.train(torch.compile(self.model), optimizer, worker)
        for names, ranges, reported, twin_grads, (loss, twin_loss) in steps:
            self.assertEqual(names, ["next_step"] + ["gradient_ready"] * 4 + ["submit"])
            self.assertEqual(ranges, [(0, 12), (12, 4), (16, 4), (20, 1)])
            for got, want in zip(reported, twin_grads):
                self.assertAlmostEqual(got, want, places=5)
            self.assertAlmostEqual(loss, twin_loss, places=5)  # the pulled parameters' loss
        self.assertNotEqual(steps[0][4], steps[2][4])

    def test_overlapped_pulls_wait_in_each_compiled_forward(self):
        optimizer, worker = self.make(pulls_overlap=True, module=self.model)
        self.assertTrue(optimizer.overlaps_pulls)
        steps = self.train(torch.compile(self.model), optimizer, worker)
        for names, ranges, reported, twin_grads, (loss, twin_loss) in steps:
            # Each Linear's ranges before its forward, the whole pull before the first push.
            self.assertEqual(names, ["next_step"] + ["params_needed"] * 3
                             + ["gradient_ready"] * 4 + ["submit"])
            self.assertEqual(ranges, [(0, 12), (12, 4), (16, 4), (20, 1)])
            for got, want in zip(reported, twin_grads):
                self.assertAlmostEqual(got, want, places=5)
            self.assertAlmostEqual(loss, twin_loss, places=5)


@unittest.skipIf(SKIP or training_test.cannot_run(), SKIP or training_test.cannot_run() or "")
class CompiledJobTest(unittest.TestCase):
    def run_job(self, compiled):
        """Both workers' results of a bsp job of 2 epochs of 4 steps, both from the same
        parameters (TINY_SEED), so that it does not depend on which becomes worker 0."""
        job = training_test.Job(workers=2)
        self.addCleanup(job.close)
        env = {"TINY_COMPILE": "1" if compiled else "0", "TINY_SEED": "100"}
        workers = [job.torch_worker(i, "--epochs=2 --batch_size=8 --seed=3", "2", script_env=env)
                   for i in range(2)]
        for i, w in enumerate(workers):
            self.assertEqual(w.wait(timeout=240), 0, job.log(f"worker{i}"))
        return [job.result(i) for i in range(2)]

    def test_compiled_workers_end_with_the_parameters_of_the_uncompiled_job(self):
        compiled = self.run_job(True)
        plain = self.run_job(False)
        self.assertEqual(compiled[0]["final"], compiled[1]["final"])
        self.assertEqual(compiled[0]["joined"], plain[0]["joined"])
        self.assertNotEqual(compiled[0]["final"], compiled[0]["joined"])
        for r in compiled:
            self.assertEqual({k: r["finish"][k] for k in ("steps", "samples", "epochs")},
                             {"steps": 8, "samples": 64, "epochs": 2})
        for got, want in zip(compiled[0]["final"], plain[0]["final"]):
            self.assertAlmostEqual(got, want, places=4)


if __name__ == "__main__":
    junit_main.main()
