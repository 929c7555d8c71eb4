"""r2sp.torch.DistributedOptimizer over a FakeWorker (r2sp_testing) with a real tiny torch
model: what it refuses, how it joins (worker 0's parameters become the model's, zero copy),
and each step's gradient reports and exchange."""

import time
import types
import unittest
import warnings
from unittest import mock

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import device, state  # noqa: E402

FakeWorker = r2sp_testing.FakeWorker
NAMES = ["l1.weight", "l1.bias", "l2.weight", "l2.bias", "unused.weight"]


def tiny_model():
    """Linear(3, 2) -> ReLU -> Linear(2, 1), with fixed weights, and a layer forward never
    uses; parameters 6 + 2 + 2 + 1 + 2 floats."""
    torch.manual_seed(0)
    model = torch.nn.Module()
    model.l1 = torch.nn.Linear(3, 2)
    model.l2 = torch.nn.Linear(2, 1)
    model.unused = torch.nn.Linear(1, 2, bias=False)
    model.forward = lambda x: model.l2(torch.relu(model.l1(x)))
    return model


def data():
    x = torch.tensor([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0], [2.0, 0.0, 1.0], [-1.0, 1.5, 0.0]])
    return x, torch.tensor([[1.0], [-1.0], [0.5], [2.0]])


def reference_grads(model):
    """{name: gradient} of the loss on data() for a copy of the model (no R2SP)."""
    twin = tiny_model()
    twin.load_state_dict(model.state_dict())
    x, y = data()
    torch.nn.functional.mse_loss(twin(x), y).backward()
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).tolist()
            for n, p in twin.named_parameters()}


class OptimizerTestBase(unittest.TestCase):
    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"},
                                                    ["--epochs=1"])
        self.workers = []
        self.params_staged = []  # create_worker's argument, per worker created
        self.options = {}

    def tearDown(self):
        state.STATE.__init__()  # no finish at exit for a fake

    def make(self, optimizer, named, **kwargs):
        def create(flags, tensors, params_staged=False):
            self.workers.append(FakeWorker(flags, tensors, **self.options))
            self.params_staged.append(params_staged)
            return self.workers[-1]
        with mock.patch.object(state, "create_worker", create):
            return r2t.DistributedOptimizer(optimizer, named, **kwargs)

    def assertRaisesExactly(self, error, message, fn, *args, **kwargs):
        with self.assertRaises(error) as e:
            fn(*args, **kwargs)
        self.assertEqual(str(e.exception), message)


@unittest.skipIf(SKIP, SKIP or "")
class RefusalTest(OptimizerTestBase):
    APPLIED = ("the servers apply torch.optim.SGD, Adam and AdamW (each parameter group with "
               "its own settings)")

    def test_an_optimizer_the_servers_do_not_apply_outside_bsp(self):
        # Known once joined (the mode decides): the worker then leaves the job.
        self.options = {"mode": "r2sp"}
        model = tiny_model()
        message = ("r2sp.torch.DistributedOptimizer: RMSprop cannot be applied in --sync=r2sp: "
                   + self.APPLIED + ", and each push is applied on its own, with no averaged "
                   "gradient a worker could step with. Use one of those, or --sync=bsp (each "
                   "worker applies any optimizer to the averaged gradient), easgd or eawild "
                   "(any optimizer as the local step)")
        self.assertRaisesExactly(
            TypeError, message,
            self.make, torch.optim.RMSprop(model.parameters()), model.named_parameters())
        self.assertEqual(self.workers[0].names(), ["join", "abort"])
        self.assertEqual(self.workers[0].calls[-1], ("abort", "TypeError: " + message))
        self.assertTrue(state.STATE.aborted)

    def test_lbfgs_is_refused_in_bsp(self):
        model = tiny_model()
        self.assertRaisesExactly(
            TypeError, "r2sp.torch.DistributedOptimizer: LBFGS re-evaluates its closure (a "
            "backward each time) within one step; R2SP takes one backward per step. Use "
            "another optimizer",
            self.make, torch.optim.LBFGS(model.parameters()), model.named_parameters())
        self.assertEqual(self.workers[0].names(), ["join", "abort"])

    def test_a_subclass_is_refused_its_step_being_its_own(self):
        class MySGD(torch.optim.SGD):
            pass
        self.options = {"mode": "ssp"}
        model = tiny_model()
        with self.assertRaises(TypeError) as e:
            self.make(MySGD(model.parameters(), lr=0.1), model.named_parameters())
        self.assertTrue(str(e.exception).startswith(
            "r2sp.torch.DistributedOptimizer: MySGD cannot be applied in --sync=ssp"))

    def test_not_an_optimizer(self):
        model = tiny_model()
        self.assertRaisesExactly(
            TypeError, "r2sp.torch.DistributedOptimizer wraps a torch optimizer "
            "(torch.optim.SGD(model.parameters(), lr=...)), not list",
            self.make, list(model.parameters()), model.named_parameters())
        self.assertEqual(self.workers, [])

    def test_settings_the_servers_do_not_apply_outside_bsp(self):
        for make, key, what in (
                (lambda ps: torch.optim.SGD(ps, lr=0.1, maximize=True), "maximize",
                 "maximisation"),
                (lambda ps: torch.optim.Adam(ps, amsgrad=True), "amsgrad", "AMSGrad"),
                (lambda ps: torch.optim.AdamW(ps, amsgrad=True), "amsgrad", "AMSGrad")):
            model = tiny_model()
            optimizer = make(model.parameters())
            self.options = {"mode": "asp"}
            with self.subTest(optimizer=type(optimizer).__name__, key=key):
                state.STATE.__init__()
                state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, [])
                self.assertRaisesExactly(
                    TypeError, f"r2sp.torch.DistributedOptimizer: {type(optimizer).__name__} "
                    f"{key}=True (param group 0) cannot be applied in --sync=asp: the servers "
                    f"do not apply {what}, and each push is applied on its own, with no "
                    "averaged gradient a worker could step with. Use one of those, or "
                    "--sync=bsp (each worker applies any optimizer to the averaged gradient), "
                    "easgd or eawild (any optimizer as the local step)",
                    self.make, optimizer, model.named_parameters())

    def test_parameter_missing_from_named_parameters(self):
        model = tiny_model()
        named = [(n, p) for n, p in model.named_parameters() if n != "l1.bias"]
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: parameter 1 of param group 0 (shape "
            "[2]) is not in named_parameters; pass the named parameters of the model the "
            "optimizer trains (model.named_parameters())",
            self.make, torch.optim.SGD(model.parameters(), lr=0.1), named)

    def test_names_and_tensors_used_twice(self):
        model = tiny_model()
        sgd = torch.optim.SGD(model.parameters(), lr=0.1)
        named = list(model.named_parameters())
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: named_parameters holds the name "
            "'l1.weight' twice; names must be unique",
            self.make, sgd, named + [("l1.weight", torch.zeros(1))])
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: one tensor is named both 'l1.bias' "
            "and 'again'; name each parameter once",
            self.make, sgd, named + [("again", model.l1.bias)])

    def test_wrong_dtype(self):
        model = tiny_model().double()
        self.assertRaisesExactly(
            TypeError, "r2sp.torch.DistributedOptimizer: parameter 'l1.weight' is "
            "torch.float64; R2SP trains float32 parameters (model.float())",
            self.make, torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())

    def test_non_contiguous_tensor(self):
        model = tiny_model()
        model.l1.weight.data = torch.zeros(3, 2).t()  # shape [2, 3], strides (1, 2)
        self.assertFalse(model.l1.weight.is_contiguous())
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: parameter 'l1.weight' is not "
            "contiguous; make it so before (p.data = p.data.contiguous())",
            self.make, torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())

    def test_device_other_than_cpu_or_cuda(self):
        p = torch.nn.Parameter(torch.empty(2, device="meta"))
        self.assertRaisesExactly(
            TypeError, "r2sp.torch.DistributedOptimizer: parameter 'p' is on meta; R2SP trains "
            "on CPU or CUDA devices", self.make, torch.optim.SGD([p], lr=0.1), [("p", p)])

    def test_a_second_optimizer_in_the_process(self):
        model = tiny_model()
        self.make(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
        self.assertRaisesExactly(
            RuntimeError, "r2sp.torch.DistributedOptimizer: this process already joined the "
            "job; create one DistributedOptimizer per process",
            self.make, torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())

    def test_each_steps_first_push_carries_the_groups_settings_when_they_changed(self):
        model = tiny_model()
        groups = [{"params": [model.l1.weight, model.l2.weight], "weight_decay": 0.01},
                  {"params": [model.l1.bias, model.l2.bias, model.unused.weight],
                   "weight_decay": 0.0}]
        adamw = torch.optim.AdamW(groups, lr=0.002, betas=(0.8, 0.95), eps=1e-6)
        self.options = {"steps": r2sp_testing.steps_of([3])}
        optimizer = self.make(adamw, model.named_parameters(), train_samples=12)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))
        x, y = data()
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            if len(self.workers[0].optimizers) < 2:
                schedule.step()  # lr 0.002, then 0.001 from the second step on

        def settings(lr, weight_decay):
            return {"kind": "adamw", "lr": lr, "weight_decay": weight_decay, "beta1": 0.8,
                    "beta2": 0.95, "eps": 1e-6}
        # Registered order: l1.weight, l1.bias, l2.weight, l2.bias, unused.weight.
        tensor_groups = [0, 1, 0, 1, 1]
        self.assertEqual(self.workers[0].optimizers, [
            ([settings(0.002, 0.01), settings(0.002, 0.0)], tensor_groups),
            ([settings(0.001, 0.01), settings(0.001, 0.0)], tensor_groups)])


    def test_a_schedule_of_the_torch_optimizer_sees_the_servers_steps(self):
        """torch warns of a schedule stepped before the optimizer; the servers' steps count as
        the optimizer's, also those a resumed job took before first_step()."""
        for first_step in (0, 5):
            state.STATE.__init__()
            state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, [])
            model = tiny_model()
            adamw = torch.optim.AdamW(model.parameters(), lr=0.002)
            schedule = torch.optim.lr_scheduler.LambdaLR(adamw, lambda step: 1.0 / (step + 1))
            self.options = {"steps": r2sp_testing.steps_of([2]), "first_step": first_step}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                optimizer = self.make(adamw, model.named_parameters(), train_samples=8)
                self.assertEqual(r2t.first_step(), first_step)
                for _ in range(first_step):
                    schedule.step()
                x, y = data()
                for _ in range(2):
                    optimizer.zero_grad()
                    torch.nn.functional.mse_loss(model(x), y).backward()
                    optimizer.step()
                    schedule.step()
            self.assertEqual([str(w.message) for w in caught], [])
            self.assertEqual(adamw.param_groups[0]["lr"], 0.002 / (first_step + 3))


@unittest.skipIf(SKIP, SKIP or "")
class JoinTest(OptimizerTestBase):
    def test_joins_with_the_named_tensors_and_takes_worker_0s_parameters_without_copies(self):
        model = tiny_model()
        before = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()
        self.options = {"initial": [float(i) for i in range(13)]}
        self.make(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                  train_samples=8)
        worker = self.workers[0]
        self.assertEqual(worker.options, {"scheduler": "tcp://h:1", "epochs": "1"})
        self.assertEqual(worker.model_name, "pytorch")
        self.assertEqual(worker.tensors, [("l1.weight", 0, 6), ("l1.bias", 6, 2),
                                          ("l2.weight", 8, 2), ("l2.bias", 10, 1),
                                          ("unused.weight", 11, 2)])
        self.assertEqual(worker.staged, before)  # what join() registered: this model's values
        self.assertEqual(self.params_staged, [False])  # backward reads worker.params itself
        self.assertEqual(worker.calls, [("join",), ("begin_training", 8)])
        self.assertEqual(model.l1.weight.tolist(), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
        self.assertEqual(model.l2.bias.tolist(), [10.0])
        base = torch.frombuffer(worker.params, dtype=torch.float32).data_ptr()
        gbase = torch.frombuffer(worker.grads, dtype=torch.float32).data_ptr()
        for (name, offset, _), p in zip(worker.tensors, model.parameters()):
            with self.subTest(name=name):
                self.assertEqual(p.data_ptr(), base + 4 * offset)
                self.assertEqual(p.grad.data_ptr(), gbase + 4 * offset)
        self.assertEqual(state.STATE.worker, worker)

    def test_an_optimizer_for_code_that_takes_one(self):
        model = tiny_model()
        sgd = torch.optim.SGD(model.parameters(), lr=0.1)
        opt = self.make(sgd, model.named_parameters(), train_samples=4)
        self.assertIsInstance(opt, torch.optim.Optimizer)
        self.assertIs(opt.param_groups, sgd.param_groups)
        self.assertIs(opt.state, sgd.state)
        self.assertEqual(opt.defaults["lr"], 0.1)
        self.workers[0].steps = r2sp_testing.steps_of([1])
        schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        opt.step()
        schedule.step()  # runs; the servers' schedule is the one that counts
        self.assertEqual(sgd.param_groups[0]["lr"], 0.05)
        self.assertEqual(self.workers[0].names(), ["join", "begin_training", "next_step",
                                                   "gradient_ready", "gradient_ready",
                                                   "gradient_ready", "gradient_ready",
                                                   "gradient_ready", "submit"])
        with self.assertRaises(RuntimeError) as e:
            opt.add_param_group({"params": [torch.zeros(1)]})
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer: the job's tensors "
                                           "are fixed once it is joined; give the SGD every "
                                           "parameter before wrapping it")

    def test_frozen_parameters_stay_local(self):
        model = tiny_model()
        model.l1.bias.requires_grad_(False)
        frozen = model.l1.bias.detach().clone()
        self.options = {"initial": [float(i) for i in range(11)]}
        self.make(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
        self.assertEqual(self.workers[0].tensors, [("l1.weight", 0, 6), ("l2.weight", 6, 2),
                                                   ("l2.bias", 8, 1), ("unused.weight", 9, 2)])
        self.assertTrue(torch.equal(model.l1.bias, frozen))
        self.assertEqual(model.l2.bias.tolist(), [8.0])
        for p in model.parameters():
            p.requires_grad_(False)
        state.STATE.__init__()
        self.assertRaisesExactly(
            ValueError, "r2sp.torch.DistributedOptimizer: the optimizer has no parameters that "
            "require grad", self.make, torch.optim.SGD(model.parameters(), lr=0.1),
            model.named_parameters())

    def test_batch_norm_buffers_stay_local(self):
        model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
        self.make(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
        self.assertEqual(self.workers[0].tensors, [("0.weight", 0, 4), ("0.bias", 4, 2),
                                                   ("1.weight", 6, 2), ("1.bias", 8, 2)])
        model(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))  # training mode: the statistics move
        self.assertEqual(model[1].num_batches_tracked.item(), 1)
        self.assertNotEqual(model[1].running_mean.tolist(), [0.0, 0.0])

    def test_only_a_cuda_model_computes_on_a_copy_of_the_parameters(self):
        # The worker may then pull into its buffers while backward runs (--early_pulls with
        # --overlap); a CUDA tensor is not needed to tell the device.
        cuda = types.SimpleNamespace(device=torch.device("cuda", 0))
        self.assertTrue(device.stages_parameters([("w", cuda)]))
        self.assertFalse(device.stages_parameters([("w", torch.zeros(2))]))

    def test_a_join_that_fails_leaves_the_model_and_the_process_unjoined(self):
        model = tiny_model()
        before = model.l1.weight.detach().clone()

        def refuse(flags, tensors, params_staged=False):
            raise r2t.R2SPError("scheduler not there")
        with mock.patch.object(state, "create_worker", refuse):
            self.assertRaisesExactly(r2t.R2SPError, "scheduler not there", r2t.DistributedOptimizer,
                                     torch.optim.SGD(model.parameters(), lr=0.1),
                                     model.named_parameters())
        self.assertTrue(torch.equal(model.l1.weight, before))
        self.assertIsNone(state.STATE.worker)


@unittest.skipIf(SKIP, SKIP or "")
class StepTest(OptimizerTestBase):
    def setUp(self):
        super().setUp()
        self.model = tiny_model()
        self.options = {"steps": r2sp_testing.steps_of([3])}
        self.opt = self.make(torch.optim.SGD(self.model.parameters(), lr=0.1),
                             self.model.named_parameters(), train_samples=8)
        self.worker = self.workers[0]
        self.worker.calls.clear()

    def backward(self):
        x, y = data()
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        return loss

    def reports(self):
        return [c[1:] for c in self.worker.calls if c[0] == "gradient_ready"]

    def test_gradients_reported_as_autograd_completes_them_then_the_rest_as_zeros(self):
        expected = reference_grads(self.model)
        before = {n: p.detach().reshape(-1).tolist() for n, p in self.model.named_parameters()}
        state.STATE.next_step("test")  # as the sampler does before the batch's compute
        self.opt.zero_grad()
        loss = self.backward()
        # Autograd's order: the last layer first; each range holds its final values when reported.
        self.assertEqual(self.reports(), [(10, 1, expected["l2.bias"]),
                                          (8, 2, expected["l2.weight"]),
                                          (6, 2, expected["l1.bias"]),
                                          (0, 6, expected["l1.weight"])])
        self.assertEqual(self.opt.step(loss=loss), loss)
        self.assertEqual(self.worker.names(), ["next_step"] + ["gradient_ready"] * 5 + ["submit"])
        self.assertEqual(self.worker.calls[5], ("gradient_ready", 11, 2, [0.0, 0.0]))
        self.assertEqual(self.worker.calls[6], ("submit", 4, float(loss), False))
        # The fake's pull: params - 0.5 * grads, which the model now holds in place.
        for name, p in self.model.named_parameters():
            with self.subTest(name=name):
                want = (torch.tensor(before[name]) - 0.5 * torch.tensor(expected[name])).tolist()
                self.assertEqual(p.reshape(-1).tolist(), want)
        self.assertIsNone(state.STATE.step)

    def test_a_script_without_the_sampler_gets_its_step_at_step_and_reports_then(self):
        expected = reference_grads(self.model)
        loss = self.backward()
        self.assertEqual(self.reports(), [])  # no step under way yet
        self.opt.step(closure=lambda: 2.5)
        self.assertEqual(self.worker.names(), ["next_step"] + ["gradient_ready"] * 5 + ["submit"])
        self.assertEqual(self.reports(), [(10, 1, expected["l2.bias"]),
                                          (8, 2, expected["l2.weight"]),
                                          (6, 2, expected["l1.bias"]),
                                          (0, 6, expected["l1.weight"]), (11, 2, [0.0, 0.0])])
        self.assertEqual(self.worker.calls[-1], ("submit", 4, 2.5, False))
        del loss

    def test_zero_grad_fills_the_buffer_and_keeps_the_views(self):
        self.backward()
        self.opt.zero_grad(set_to_none=True)
        self.assertEqual(list(self.worker.grads), [0.0] * 13)
        gbase = torch.frombuffer(self.worker.grads, dtype=torch.float32).data_ptr()
        self.assertEqual(self.model.l2.weight.grad.data_ptr(), gbase + 4 * 8)

    def test_a_gradient_set_to_none_is_copied_into_the_buffer(self):
        expected = reference_grads(self.model)
        for p in self.model.parameters():
            p.grad = None
        state.STATE.next_step("test")
        self.backward()
        self.assertEqual(self.reports()[3], (0, 6, expected["l1.weight"]))
        gbase = torch.frombuffer(self.worker.grads, dtype=torch.float32).data_ptr()
        self.assertEqual(self.model.l1.weight.grad.data_ptr(), gbase)
        self.assertEqual(list(self.worker.grads)[:6], expected["l1.weight"])

    def test_samples_given_to_step(self):
        state.STATE.next_step("test")
        self.opt.step(samples=3, loss=torch.tensor([1.5]))
        self.assertEqual(self.worker.calls[-1], ("submit", 3, 1.5, False))

    def test_a_second_backward_before_step(self):
        state.STATE.next_step("test")
        self.backward()
        self.assertRaisesExactly(
            RuntimeError, "r2sp: parameter 'l2.bias' got a second gradient before "
            "optimizer.step(); its first was already sent. Call step() after each backward(), "
            "or accumulate over several backward passes by running all but the last inside "
            "optimizer.no_sync()",
            self.backward)

    def test_no_sync_accumulates_and_the_next_backward_reports_the_sums(self):
        expected = reference_grads(self.model)
        state.STATE.next_step("test")
        self.opt.zero_grad()
        with self.opt.no_sync():
            self.backward()
            self.backward()
            self.assertEqual(self.reports(), [])  # nothing sent while accumulating
            self.assertRaisesExactly(
                RuntimeError, "r2sp.torch.DistributedOptimizer.step: called inside no_sync(); "
                "run the last backward of the step outside it, then step()", self.opt.step)
        self.backward()  # the third: its hooks report the sums of all three
        reported = {offset: values for offset, _, values in self.reports()}
        for name, offset in (("l2.bias", 10), ("l2.weight", 8), ("l1.bias", 6),
                             ("l1.weight", 0)):
            with self.subTest(name=name):
                # Sums of three equal float32 gradients, accumulated in place as autograd does.
                want = torch.tensor(expected[name])
                want = (want + want + want).tolist()
                self.assertEqual(reported[offset], want)
        self.opt.step()
        self.assertEqual(self.worker.names().count("submit"), 1)
        self.assertEqual(self.worker.names().count("gradient_ready"), 5)

    def test_no_sync_inside_no_sync(self):
        with self.opt.no_sync():
            with self.assertRaises(RuntimeError) as e:
                with self.opt.no_sync():
                    pass
        self.assertEqual(str(e.exception),
                         "r2sp.torch.DistributedOptimizer.no_sync: already inside one")

    def test_a_step_taken_at_step_says_when_its_compute_began(self):
        # A sampler's step: its compute began when handed out (0). One taken at step() (a
        # batch loaded ahead): since the last exchange ended.
        state.STATE.next_step("test")
        self.opt.step()
        before = time.time()
        self.backward()
        self.opt.step()
        self.assertEqual(self.worker.began[0], 0.0)
        self.assertGreater(self.worker.began[1], before - 5)
        self.assertLessEqual(self.worker.began[1], before)

    def test_skip_step_submits_the_step_without_an_update(self):
        before = [p.detach().clone() for p in self.model.parameters()]
        state.STATE.next_step("test")
        loss = self.backward()
        self.assertEqual(self.opt.skip_step(loss=loss), loss)
        self.assertEqual(self.worker.calls[-1], ("submit", 4, float(loss), False, "skip"))
        for p, b in zip(self.model.parameters(), before):
            self.assertTrue(torch.equal(p, b))  # the fake pulls nothing new for a skip
        self.assertIsNone(state.STATE.step)

    def test_a_grad_scalers_skipped_step_completes_as_skip_step(self):
        from r2sp.torch import edits
        calls = []

        def scaler_step(scaler, optimizer):  # a GradScaler that found an inf: no step()
            calls.append("scaler")

        state.STATE.next_step("test")
        self.backward()
        edits._completing_skips(scaler_step)(object(), self.opt)
        self.assertEqual(calls, ["scaler"])
        self.assertEqual(self.worker.calls[-1][-1], "skip")
        # A scaler that stepped (torch's, disabled without CUDA, steps at once): one submit.
        state.STATE.next_step("test")
        self.backward()
        with mock.patch("warnings.warn"):
            scaler = torch.cuda.amp.GradScaler()
        scaler.step(self.opt)
        self.assertEqual(self.worker.names().count("submit"), 2)
        self.assertEqual(len(self.worker.calls[-1]), 4)  # not a skip

    def test_step_after_training_is_over(self):
        for _ in range(3):
            self.opt.step()
        self.assertRaisesExactly(
            RuntimeError, "r2sp.torch.DistributedOptimizer.step: training is over (the job's "
            "epochs are done); stop stepping and call r2sp.torch.finish()", self.opt.step)

    def test_bad_loss_and_samples(self):
        state.STATE.next_step("test")
        self.assertRaisesExactly(TypeError, "r2sp.torch.DistributedOptimizer.step: loss must "
                                 "be a number or a one-element tensor, not str",
                                 self.opt.step, loss="1")
        self.assertRaisesExactly(ValueError, "r2sp.torch.DistributedOptimizer.step: loss must "
                                 "be one value, not a tensor of shape [2]",
                                 self.opt.step, loss=torch.zeros(2))
        self.assertRaisesExactly(ValueError, "r2sp.torch.DistributedOptimizer.step: samples "
                                 "must be a positive integer, not 0", self.opt.step, samples=0)


@unittest.skipIf(SKIP, SKIP or "")
class EditsTest(OptimizerTestBase):
    """Gradients clipped between backward() and step(), with --overlap (the fake's
    overlaps_backward): announced (edits_gradients=True), the pushes wait for step() and carry
    the clipped values; unannounced, the clip raises."""

    EDIT_AFTER_PUSH = (
        "r2sp: clip_grad_norm_ after backward with --overlap: this step's gradients were pushed "
        "as backward produced them, so the edit would not reach the servers; create the "
        "optimizer with DistributedOptimizer(..., edits_gradients=True) (the pushes then wait "
        "for step()), or run without --overlap")

    def start(self, overlap=True, **kwargs):
        self.model = tiny_model()
        self.options = {"steps": r2sp_testing.steps_of([3]), "overlap": overlap}
        self.opt = self.make(torch.optim.SGD(self.model.parameters(), lr=0.1),
                             self.model.named_parameters(), train_samples=8, **kwargs)
        self.worker = self.workers[-1]
        state.STATE.next_step("test")
        self.opt.zero_grad()
        x, y = data()
        torch.nn.functional.mse_loss(self.model(x), y).backward()

    def test_announced_edits_hold_the_pushes_until_step(self):
        self.start(edits_gradients=True)
        self.assertNotIn("gradient_ready", self.worker.names())
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e-3)
        clipped = {n: p.grad.reshape(-1).tolist() for n, p in self.model.named_parameters()}
        self.opt.step()
        reports = {c[1]: c[3] for c in self.worker.calls if c[0] == "gradient_ready"}
        self.assertEqual(reports[0], clipped["l1.weight"])
        self.assertEqual(reports[10], clipped["l2.bias"])
        norm = sum(v * v for values in clipped.values() for v in values) ** 0.5
        self.assertAlmostEqual(norm, 1e-3, places=9)

    def test_an_unannounced_clip_after_pushes_began_raises(self):
        self.start()
        self.assertIn("gradient_ready", self.worker.names())
        self.assertRaisesExactly(RuntimeError, self.EDIT_AFTER_PUSH,
                                 torch.nn.utils.clip_grad_norm_, self.model.parameters(), 1.0)
        # torch.nn.utils.clip_grad names the same function.
        with self.assertRaises(RuntimeError):
            torch.nn.utils.clip_grad.clip_grad_value_(self.model.parameters(), 1.0)
        # Tensors the job does not train are the script's own.
        other = torch.nn.Parameter(torch.ones(3))
        other.grad = torch.full((3,), 4.0)
        torch.nn.utils.clip_grad_norm_([other], 1.0)
        self.assertAlmostEqual(other.grad.norm().item(), 1.0, places=6)

    def test_a_skip_after_pushes_began_raises_and_is_announced_with_edits(self):
        self.start()
        self.assertRaisesExactly(
            RuntimeError, "r2sp.torch.DistributedOptimizer.skip_step: this step's gradients "
            "were pushed during backward (--overlap); create the optimizer with "
            "edits_gradients=True so the pushes wait for step() and a skipped step sends "
            "nothing", self.opt.skip_step)
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, [])
        self.start(edits_gradients=True)
        self.opt.skip_step()
        self.assertEqual(self.worker.calls[-1][-1], "skip")

    def test_without_overlap_a_clip_reaches_the_push(self):
        self.start(overlap=False)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1e-3)
        clipped = self.model.l1.weight.grad.reshape(-1).tolist()
        self.opt.step()
        self.assertEqual(list(self.worker.grads)[:6], clipped)


if __name__ == "__main__":
    junit_main.main()
