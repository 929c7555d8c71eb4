"""r2sp.torch in the elastic modes (elastic.py and DistributedOptimizer's use of it) over a
FakeWorker (r2sp_testing) with a real tiny torch model: the wrapped optimizer (Adam, SGD) takes
the local step exactly as it would alone, before the exchange; the centre comes as a state
dict (the module's buffers its own) or swapped into the model for a block; what the elastic
modes refuse. The exchange itself runs in C++ (elastic_exchange_test, elastic_job_test)."""

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
    from r2sp.torch import state  # noqa: E402

FakeWorker = r2sp_testing.FakeWorker
NAMES = ["l1.weight", "l1.bias", "l2.weight", "l2.bias"]
SIZE = 6 + 2 + 2 + 1


def tiny_model():
    """Linear(3, 2) -> ReLU -> Linear(2, 1) with fixed weights, and a buffer (as batch norm's
    running statistics are)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential()
    model.l1 = torch.nn.Linear(3, 2)
    model.act = torch.nn.ReLU()
    model.l2 = torch.nn.Linear(2, 1)
    model.register_buffer("stat", torch.tensor([7.0, 8.0]))
    return model


def batch():
    x = torch.tensor([[1.0, -2.0, 0.5], [0.25, 1.0, -1.0], [2.0, 0.0, 1.0], [-1.0, 1.5, 0.0]])
    return x, torch.tensor([[1.0], [-1.0], [0.5], [2.0]])


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


@unittest.skipIf(SKIP, SKIP or "")
class ElasticTest(unittest.TestCase):
    CENTRE = [0.5 * i - 2.0 for i in range(SIZE)]

    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"}, [])
        self.workers = []

    def tearDown(self):
        state.STATE.__init__()  # no finish at exit for a fake

    def make(self, model, optimizer, mode="eawild", steps=2):
        def create(flags, tensors, params_staged=False):
            # lr=0: the fake's exchange leaves the parameters as the local step left them.
            self.workers.append(FakeWorker(
                flags, tensors, steps=r2sp_testing.steps_of([steps]), lr=0.0, mode=mode,
                elastic_period=2, centre=self.CENTRE))
            return self.workers[-1]
        with mock.patch.object(state, "create_worker", create):
            return r2t.DistributedOptimizer(optimizer, model.named_parameters(),
                                            train_samples=8)

    def train(self, model, optimizer, steps, **step_args):
        x, y = batch()
        for _ in range(steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step(**step_args)

    def test_the_wrapped_optimizer_takes_the_local_step_as_it_would_alone(self):
        for make_optimizer in (lambda ps: torch.optim.Adam(ps, lr=0.01),
                               lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                          nesterov=True)):
            with self.subTest(optimizer=type(make_optimizer([torch.zeros(1)])).__name__):
                self.setUp()
                alone = tiny_model()
                self.train(alone, make_optimizer(alone.parameters()), 2)
                model = tiny_model()
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # no "not applied" warning here
                    optimizer = self.make(model, make_optimizer(model.parameters()))
                self.train(model, optimizer, 2, loss=1.5)
                self.assertEqual(flat(model), flat(alone))
                self.assertNotEqual(flat(model), flat(tiny_model()))
                worker = self.workers[0]
                self.assertEqual([(c[1], c[3]) for c in worker.calls if c[0] == "submit"],
                                 [(4, False)] * 2)  # samples, fp32 (fp16 is the pushes')
                # The parameters are views of the worker's buffer: the exchange sees the step.
                self.assertEqual(list(worker.params), flat(model))

    def test_the_centre_as_a_state_dict(self):
        model = tiny_model()
        optimizer = self.make(model, torch.optim.Adam(model.parameters()))
        own = flat(model)
        centre = optimizer.centre_state_dict()
        self.assertEqual(list(centre), NAMES)
        self.assertEqual(torch.cat([t.reshape(-1) for t in centre.values()]).tolist(),
                         self.CENTRE)
        self.assertEqual([list(t.shape) for t in centre.values()], [[2, 3], [2], [1, 2], [1]])
        whole = optimizer.centre_state_dict(model)
        self.assertEqual(list(whole), ["stat"] + NAMES)
        self.assertEqual(whole["stat"].tolist(), [7.0, 8.0])  # the module's own buffer
        self.assertEqual(whole["l2.bias"].tolist(), [self.CENTRE[-1]])
        self.assertEqual(flat(model), own)  # the model is untouched
        self.assertEqual(self.workers[0].names().count("pull_centre"), 2)
        other = torch.nn.Linear(3, 2)
        with self.assertRaises(ValueError) as e:
            optimizer.centre_state_dict(other)
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer.centre_state_dict: "
                         "the module has no 'l1.weight'; pass the module whose "
                         "named_parameters() the optimizer registered")

    def test_the_centre_swapped_into_the_model_for_a_block(self):
        model = tiny_model()
        optimizer = self.make(model, torch.optim.Adam(model.parameters()))
        own = flat(model)
        with optimizer.centre():
            self.assertEqual(flat(model), self.CENTRE)
            self.assertEqual(model.stat.tolist(), [7.0, 8.0])
        self.assertEqual(flat(model), own)
        with self.assertRaises(ZeroDivisionError):
            with optimizer.centre():
                1 / 0
        self.assertEqual(flat(model), own)
        self.assertEqual(list(self.workers[0].params), own)  # still the worker's buffer

    def test_after_finish_the_parameters_are_the_centre(self):
        model = tiny_model()
        optimizer = self.make(model, torch.optim.Adam(model.parameters()))
        state.STATE.result = {"steps": 2}  # finished: the final pull brought the centre
        centre = optimizer.centre_state_dict()
        self.assertEqual(torch.cat([t.reshape(-1) for t in centre.values()]).tolist(),
                         flat(model))
        self.assertNotIn("pull_centre", self.workers[0].names())

    def test_refusals(self):
        model = tiny_model()
        lbfgs = torch.optim.LBFGS(model.parameters())
        with self.assertRaises(NotImplementedError) as e:
            self.make(model, lbfgs)
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer: LBFGS "
                         "re-evaluates its closure (a backward each time) within one step; "
                         "R2SP takes one backward per step. Use another optimizer (SGD, Adam, "
                         "...)")
        self.assertEqual(self.workers[0].names(), ["join", "abort"])
        self.setUp()
        optimizer = self.make(model, torch.optim.SGD(model.parameters(), lr=0.1), mode="bsp")
        for call in (optimizer.centre_state_dict, optimizer.centre):
            with self.assertRaises(RuntimeError) as e:
                call()
            self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer."
                             f"{call.__name__}: the job's mode is bsp; only easgd and eawild "
                             "have a centre (in the other modes the model's parameters are the "
                             "servers')")
        self.setUp()
        optimizer = self.make(model, torch.optim.Adam(model.parameters()))
        r2t.job.STATE.abort("test")
        with self.assertRaises(RuntimeError) as e:
            optimizer.centre_state_dict()
        self.assertEqual(str(e.exception), "r2sp.torch.DistributedOptimizer.centre_state_dict: "
                         "this worker left the job")


if __name__ == "__main__":
    junit_main.main()
