"""r2sp.torch's overlapped pulls (forward_waits.py; DistributedOptimizer(..., module=model))
over a FakeWorker with real torch models: the ranges each module's forward waits for (merged,
in forward order, each module once however often it is shared), the safety net (the whole pull
before the step's first gradient report, so a parent reading a child's parameter gets it
whole before the gradient leaves), uploads once per pull (a tied weight once; a stand-in for
CUDA's copies), sync_params, hooks gone after finish, Ctrl-C in a wait (the worker left the
job), nothing without module= or --overlap, and a module that does not hold the registered
parameters."""

import unittest
from unittest import mock

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import device, forward_waits, state  # noqa: E402

    class Net(torch.nn.Module):
        """A parameter of its own, a Linear and a Sequential holding a Linear. Registered
        (named_parameters' order): scale [0, 1), l1.weight [1, 7), l1.bias [7, 9),
        block.0.weight [9, 13), block.0.bias [13, 15)."""

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.scale = torch.nn.Parameter(torch.ones(1))
            self.l1 = torch.nn.Linear(3, 2)
            self.block = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())

        def forward(self, x):
            return self.block(self.l1(x) * self.scale)

    class ReadsChild(Net):
        """Reads block[0]'s parameters itself, never calling it: its hook never runs."""

        def forward(self, x):
            linear = self.block[0]
            return F.linear(self.l1(x) * self.scale, linear.weight, linear.bias)


def needed(worker):
    return [c[1:] for c in worker.calls if c[0] == "params_needed"]


class Base(unittest.TestCase):
    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"},
                                                    ["--epochs=1", "--overlap"])
        self.workers = []

    def tearDown(self):
        state.STATE.__init__()

    def make(self, model, pulls_overlap=True, **kwargs):
        def create(flags, tensors, params_staged=False):
            self.workers.append(r2sp_testing.FakeWorker(
                flags, tensors, steps=r2sp_testing.steps_of([3]), pulls_overlap=pulls_overlap))
            return self.workers[-1]
        with mock.patch.object(state, "create_worker", create):
            return r2t.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                            model.named_parameters(), train_samples=8, **kwargs)

    def train_step(self, model, optimizer):
        state.STATE.next_step("test")  # as DistributedSampler takes it, before forward
        optimizer.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        optimizer.step()


@unittest.skipIf(SKIP, SKIP or "")
class HooksTest(Base):
    def test_each_module_waits_for_its_merged_ranges_then_the_whole_pull_before_pushes(self):
        model = Net()
        optimizer = self.make(model, module=model)
        worker = self.workers[0]
        self.assertTrue(optimizer.overlaps_pulls)
        self.assertEqual(worker.names()[:3], ["enable_forward_waits", "join", "begin_training"])
        self.train_step(model, optimizer)
        names = worker.names()
        self.assertEqual(needed(worker), [(0, 1), (1, 8), (9, 6), (0, 15)])
        self.assertEqual(names.index("gradient_ready"), names.index("params_needed") + 4)
        # Forwards after the step (an evaluation) wait for the next pull, each module once.
        del worker.calls[:]
        with torch.no_grad():
            model(torch.ones(1, 3))
            model(torch.ones(1, 3))
        self.assertEqual(worker.calls, [("params_needed", 0, 1), ("params_needed", 1, 8),
                                        ("params_needed", 9, 6)])
        # The next step's forward has nothing left to wait for; the safety net still runs.
        del worker.calls[:]
        self.train_step(model, optimizer)
        self.assertEqual(needed(worker), [(0, 15)])

    def test_safety_net_a_parameter_read_outside_its_module_is_whole_before_the_push(self):
        model = ReadsChild()
        optimizer = self.make(model, module=model)
        worker = self.workers[0]
        self.train_step(model, optimizer)
        # block.0's range [9, 15) is waited for only by the safety net, before any report.
        self.assertEqual(needed(worker), [(0, 1), (1, 8), (0, 15)])
        names = worker.names()
        self.assertLess(names.index("params_needed") + 2, names.index("gradient_ready"))
        self.assertEqual(worker.calls[names.index("gradient_ready") - 1], ("params_needed", 0, 15))

    def test_without_module_or_without_overlap_nothing_changes(self):
        model = Net()
        optimizer = self.make(model)  # --overlap, no module=
        self.assertFalse(optimizer.overlaps_pulls)
        self.train_step(model, optimizer)
        self.assertNotIn("enable_forward_waits", self.workers[0].names())
        self.assertEqual(needed(self.workers[0]), [])
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, [])
        model = Net()
        optimizer = self.make(model, pulls_overlap=False, module=model)  # no --overlap
        self.assertFalse(optimizer.overlaps_pulls)
        self.train_step(model, optimizer)
        self.assertIn("enable_forward_waits", self.workers[1].names())
        self.assertEqual(needed(self.workers[1]), [])

    def test_finish_removes_the_hooks_and_sync_params_waits_for_the_whole_pull(self):
        model = Net()
        optimizer = self.make(model, module=model)
        worker = self.workers[0]
        self.train_step(model, optimizer)
        del worker.calls[:]
        optimizer.sync_params()
        optimizer.sync_params()
        model(torch.ones(1, 3))
        self.assertEqual(needed(worker), [(0, 15)])
        r2t.finish()
        self.assertFalse(optimizer.overlaps_pulls)
        del worker.calls[:]
        model(torch.ones(1, 3))
        optimizer.sync_params()
        self.assertEqual(worker.calls, [])

    def test_ctrl_c_in_a_forward_wait_means_the_worker_left_the_job(self):
        model = Net()
        optimizer = self.make(model, module=model)

        def interrupted(offset, count):
            raise KeyboardInterrupt
        self.workers[0].params_needed = interrupted
        state.STATE.next_step("test")
        with self.assertRaises(KeyboardInterrupt):
            model(torch.ones(1, 3))
        self.assertTrue(state.STATE.aborted)
        self.assertTrue(optimizer.overlaps_pulls)

    def test_a_module_that_does_not_hold_the_registered_parameters(self):
        model = Net()
        other = torch.nn.Sequential(torch.nn.Linear(3, 2), model.l1)
        with self.assertRaises(ValueError) as e:
            self.make(model, module=other)
        self.assertEqual(str(e.exception),
                         "r2sp.torch.DistributedOptimizer: module= does not hold the registered "
                         "parameter(s) 'scale', 'block.0.weight', 'block.0.bias'; pass the model "
                         "whose named_parameters() the optimizer was given")
        with self.assertRaises(TypeError) as e:
            self.make(model, module=model.state_dict())
        self.assertEqual(str(e.exception),
                         "r2sp.torch.DistributedOptimizer: module= is the model (a "
                         "torch.nn.Module), not OrderedDict")
        self.assertEqual(self.workers, [])


class FakeBuffers:
    """Records the ranges a CUDA model would upload."""

    def __init__(self):
        self.uploads = []

    def upload(self, ranges):
        self.uploads.append(list(ranges))


@unittest.skipIf(SKIP, SKIP or "")
class UploadTest(unittest.TestCase):
    def waits(self, model):
        worker = r2sp_testing.FakeWorker([], [(n, list(p.shape))
                                              for n, p in model.named_parameters()])
        entries = [device.Entry(n, p, offset, count) for (n, p), (_, offset, count)
                   in zip(model.named_parameters(), worker.tensors)]
        buffers = FakeBuffers()
        return worker, buffers, forward_waits.ForwardWaits(worker, buffers, model, entries)

    def test_a_tied_weight_and_a_shared_module_are_uploaded_once_per_pull(self):
        embed = torch.nn.Embedding(4, 2)
        head = torch.nn.Linear(2, 4)
        head.weight = embed.weight  # tied: registered once, as '0.weight'
        shared = torch.nn.Linear(4, 4, bias=False)
        model = torch.nn.Sequential(embed, head, shared, shared)
        worker, buffers, waits = self.waits(model)
        self.assertEqual(worker.tensors, [("0.weight", 0, 8), ("1.bias", 8, 4),
                                          ("2.weight", 12, 16)])
        model(torch.tensor([1, 2]))
        self.assertEqual(needed(worker), [(0, 8), (0, 12), (12, 16)])
        self.assertEqual(buffers.uploads, [[(0, 8)], [(8, 4)], [(12, 16)]])
        waits.before_push()
        waits.pull_started()
        del worker.calls[:]
        model(torch.tensor([1, 2]))  # the next pull: again
        self.assertEqual(needed(worker), [(0, 8), (0, 12), (12, 16)])
        self.assertEqual(len(buffers.uploads), 6)

    def test_sync_params_uploads_what_no_forward_did(self):
        model = torch.nn.Sequential(torch.nn.Linear(1, 2), torch.nn.Linear(2, 1))
        worker, buffers, waits = self.waits(model)
        model[0](torch.ones(1))
        waits.sync_params()
        self.assertEqual(needed(worker), [(0, 4), (0, 7)])
        self.assertEqual(buffers.uploads, [[(0, 4)], [(4, 3)]])
        model(torch.ones(1))
        waits.remove()
        waits.pull_started()
        model(torch.ones(1))
        self.assertEqual(len(worker.calls), 2)
        self.assertEqual(len(buffers.uploads), 2)


def merged(*spans):
    return forward_waits.merged_ranges([device.Entry("", None, o, c) for o, c in spans])


@unittest.skipIf(SKIP, SKIP or "")
class MergedRangesTest(unittest.TestCase):
    def test_adjacent_ranges_merge_in_offset_order(self):
        self.assertEqual(merged((6, 2), (0, 6), (10, 1), (8, 0)), [(0, 8), (10, 1)])
        self.assertEqual(merged(), [])


if __name__ == "__main__":
    junit_main.main()
