"""r2sp.torch.DistributedOptimizer with an optimizer the servers do not apply, in bsp, over a
FakeWorker (r2sp_testing) that "pulls" the pushed gradient as a 1-worker job's averaged one:
the parameters become the worker's own tensors holding the joined values, every step's pulled
average becomes .grad and the script's optimizer steps with it, exactly as torch steps alone;
a step no worker contributed to (NaN pulled) moves nothing; a worker that joins a running job
has nothing to start from and leaves it."""

import unittest

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

    import optimizer_test  # noqa: E402
    from r2sp.torch import state  # noqa: E402

Base = optimizer_test.OptimizerTestBase if not SKIP else unittest.TestCase


@unittest.skipIf(SKIP, SKIP or "")
class LocalStepTest(Base):
    def setUp(self):
        super().setUp()
        self.model = optimizer_test.tiny_model()
        self.twin = optimizer_test.tiny_model()  # the same model, stepped by torch alone
        self.options = {"steps": r2sp_testing.steps_of([3])}

    def rmsprop(self, params):
        return torch.optim.RMSprop(params, lr=0.01, momentum=0.5, weight_decay=0.1)

    def step_twin(self, optimizer):
        x, y = optimizer_test.data()
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(self.twin(x), y).backward()
        for p in self.twin.parameters():  # R2SP averages zeros for a gradient not produced
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        optimizer.step()

    def step(self, opt, skip=False):
        state.STATE.next_step("test")
        x, y = optimizer_test.data()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return opt.skip_step(loss=loss) if skip else opt.step(loss=loss)

    def test_each_step_applies_the_scripts_optimizer_to_the_pulled_average(self):
        opt = self.make(self.rmsprop(self.model.parameters()), self.model.named_parameters(),
                        train_samples=8)
        worker = self.workers[0]
        self.assertEqual(worker.optimizers, [])  # sent with the first step's pushes
        params = torch.frombuffer(worker.params, dtype=torch.float32)
        grads = torch.frombuffer(worker.grads, dtype=torch.float32)
        for p, offset in zip(self.model.parameters(), [0, 6, 8, 10, 11]):
            self.assertNotEqual(p.data_ptr(), params[offset:].data_ptr())  # the worker's own
            self.assertTrue(torch.equal(p.reshape(-1), params[offset:offset + p.numel()]))
            self.assertEqual(p.grad.data_ptr(), grads[offset:].data_ptr())  # pushed from here
        twin_opt = self.rmsprop(self.twin.parameters())
        for _ in range(2):
            self.step(opt)
            self.step_twin(twin_opt)
        self.assertEqual(worker.optimizers[-1], ([{"kind": "average"}], [0, 0, 0, 0, 0]))
        for (name, p), t in zip(self.model.named_parameters(), self.twin.parameters()):
            with self.subTest(name=name):
                self.assertTrue(torch.equal(p, t), (p, t))
                self.assertTrue(torch.equal(p.grad, t.grad))
        self.assertEqual(set(opt.state_dict()["state"]), {0, 1, 2, 3, 4})

    def test_a_step_no_worker_contributed_to_moves_nothing(self):
        opt = self.make(self.rmsprop(self.model.parameters()), self.model.named_parameters(),
                        train_samples=8)
        before = [p.detach().clone() for p in self.model.parameters()]
        self.step(opt, skip=True)  # the fake's only worker skipped: NaN comes back
        self.assertEqual(self.workers[0].calls[-1][-1], "skip")
        for p, b in zip(self.model.parameters(), before):
            self.assertTrue(torch.equal(p, b))
        self.assertEqual(opt.state_dict()["state"], {})

    def test_a_worker_joining_a_running_job_leaves_it(self):
        self.options = {"first_step": 7}
        message = ("r2sp.torch.DistributedOptimizer: this worker joins the job at step 7, but "
                   "with RMSprop the servers hold the averaged gradient, not the parameters, "
                   "so there is nothing to start from; restart the job from the script's own "
                   "checkpoint, or use an optimizer the servers apply (SGD, Adam, AdamW), "
                   "whose parameters a joining worker pulls")
        with self.assertRaises(RuntimeError) as e:
            self.make(self.rmsprop(self.model.parameters()), self.model.named_parameters())
        self.assertEqual(str(e.exception), message)
        self.assertEqual(self.workers[0].calls[-1], ("abort", "RuntimeError: " + message))

    def test_with_module_the_pulls_end_in_step(self):
        # The pulled values are gradients: no forward waits for them.
        self.options = {"pulls_overlap": True}
        self.make(self.rmsprop(self.model.parameters()), self.model.named_parameters(),
                  module=self.model)
        self.assertNotIn(("enable_forward_waits",), self.workers[0].calls)


if __name__ == "__main__":
    junit_main.main()
