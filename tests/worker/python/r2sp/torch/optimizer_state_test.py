"""r2sp.torch.DistributedOptimizer's state where the servers apply the optimizer, over a
FakeWorker (r2sp_testing): a torch optimizer loaded from a checkpoint gives its moments, update
count and the job's step to the worker before it joins (and keeps none of it after); a fresh
one gives nothing; state_dict() is torch's format from the servers' state (and loads into a
torch optimizer, which gives it back unchanged); load_state_dict() after joining is refused."""

import unittest

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import numpy  # noqa: E402
    import torch  # noqa: E402

    import optimizer_test  # noqa: E402

Base = optimizer_test.OptimizerTestBase if not SKIP else unittest.TestCase
SIZES = [6, 2, 2, 1, 2]  # tiny_model()'s parameters, in order


@unittest.skipIf(SKIP, SKIP or "")
class OptimizerStateTest(Base):
    def setUp(self):
        super().setUp()
        self.model = optimizer_test.tiny_model()

    def adamw(self):
        return torch.optim.AdamW(self.model.parameters(), lr=0.01)

    def pulled(self, first, second, updates=7, steps=9.0):
        return {"first": None if first is None else numpy.float32(first).tobytes(),
                "second": None if second is None else numpy.float32(second).tobytes(),
                "updates": updates, "steps": steps}

    def test_a_fresh_optimizer_gives_the_servers_nothing(self):
        self.make(self.adamw(), self.model.named_parameters())
        self.assertEqual(self.workers[0].names(), ["join"])

    def test_a_loaded_checkpoint_goes_to_the_servers_and_leaves_the_optimizer(self):
        first, second = list(range(13)), [v / 2 for v in range(13)]
        saved = self.adamw().state_dict()
        for i, p in enumerate(self.model.parameters()):
            begin = sum(SIZES[:i])
            saved["state"][i] = {
                "step": torch.tensor(6.0),
                "exp_avg": torch.tensor(first[begin:begin + SIZES[i]]).view(p.shape).float(),
                "exp_avg_sq": torch.tensor(second[begin:begin + SIZES[i]]).view(p.shape)}
        for group in saved["param_groups"]:
            group["r2sp_steps"] = 8.0
        optimizer = self.adamw()
        optimizer.load_state_dict(saved)
        self.make(optimizer, self.model.named_parameters())
        call = self.workers[0].calls[0]
        self.assertEqual(call[0], "set_initial_state")
        self.assertEqual(call[1].tolist(), first)
        self.assertEqual(call[2].tolist(), second)
        self.assertEqual(call[3:], (6, 8.0))
        self.assertEqual(self.workers[0].names(), ["set_initial_state", "join"])
        self.assertEqual(len(optimizer.state), 0)  # the servers' now

    def test_a_checkpoint_torch_wrote_resumes_at_its_step_count(self):
        saved = self.adamw().state_dict()
        for i, p in enumerate(self.model.parameters()):
            saved["state"][i] = {"step": torch.tensor(5.0 + i), "exp_avg": torch.zeros_like(p),
                                 "exp_avg_sq": torch.ones_like(p)}
        optimizer = self.adamw()
        optimizer.load_state_dict(saved)
        self.make(optimizer, self.model.named_parameters())
        self.assertEqual(self.workers[0].calls[0][3:], (5, 5.0))

    def test_state_dict_is_torchs_format_of_the_servers_state(self):
        optimizer = self.make(self.adamw(), self.model.named_parameters())
        worker = self.workers[0]
        worker.optimizer_state = self.pulled(range(13), [2.0] * 13)
        saved = optimizer.state_dict()
        self.assertEqual(worker.names()[-1], "pull_optimizer_state")
        self.assertEqual([g["r2sp_steps"] for g in saved["param_groups"]], [9.0])
        self.assertEqual(sorted(saved["state"]), [0, 1, 2, 3, 4])
        weight = saved["state"][0]
        self.assertEqual(float(weight["step"]), 7.0)
        self.assertEqual(weight["exp_avg"].tolist(), [[0, 1, 2], [3, 4, 5]])
        self.assertEqual(weight["exp_avg_sq"].tolist(), [[2.0] * 3] * 2)
        self.assertEqual(saved["state"][4]["exp_avg"].tolist(), [[11], [12]])
        # It loads into a torch optimizer, which gives the same state back.
        torch_optimizer = self.adamw()
        torch_optimizer.load_state_dict(saved)
        from r2sp.torch import device, optimizer_state
        entries = [device.Entry(n, p, sum(SIZES[:i]), SIZES[i])
                   for i, (n, p) in enumerate(self.model.named_parameters())]
        first, second, updates, steps = optimizer_state.initial_state(
            "adamw", torch_optimizer, entries, 13)
        self.assertEqual((first.tolist(), second.tolist(), updates, steps),
                         (list(range(13)), [2.0] * 13, 7, 9.0))

    def test_sgd_without_momentum_has_no_buffers(self):
        optimizer = self.make(torch.optim.SGD(self.model.parameters(), lr=0.1),
                              self.model.named_parameters())
        self.workers[0].optimizer_state = self.pulled(None, None, 3, 3.0)
        saved = optimizer.state_dict()
        self.assertEqual(saved["state"], {i: {"momentum_buffer": None} for i in range(5)})

    def test_load_state_dict_after_joining_is_refused(self):
        optimizer = self.make(self.adamw(), self.model.named_parameters())
        self.assertRaisesExactly(
            RuntimeError, "r2sp.torch.DistributedOptimizer.load_state_dict: the servers hold "
            "this optimizer's state and took it when the job started; load a checkpoint into "
            "the torch optimizer before wrapping it (optimizer.load_state_dict(saved), then "
            "r2sp.torch.DistributedOptimizer(optimizer, ...)), and the job resumes from it",
            optimizer.load_state_dict, self.adamw().state_dict())


if __name__ == "__main__":
    junit_main.main()
