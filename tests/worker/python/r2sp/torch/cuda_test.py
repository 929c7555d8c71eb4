"""r2sp.torch.cuda.CudaBuffers' bookkeeping, run on the CPU (no GPU here) with a stand-in
stream whose events complete when the test says: flat device tensors the model views,
gradients copied to the host buffer (binary16 with the fp16 push codec) and reported only once
their copies completed, in order, and the pulled parameters uploaded after submit (with
overlapped pulls, each module's as its forward begins). On a
machine with CUDA the same logic runs with real streams (cuda_training_test.py)."""

import unittest
from unittest import mock

import r2sp_testing

SKIP = r2sp_testing.use_torch_python()
r2sp_testing.setup_path()
import junit_main  # noqa: E402

if not SKIP:
    import torch  # noqa: E402

    import r2sp.torch as r2t  # noqa: E402
    from r2sp.torch import cuda, device, state  # noqa: E402


class FakeStream:
    """Events complete once `completed` says so; synchronize() completes them all."""

    def __init__(self):
        self.completed = False
        self.calls = []

    def record(self):
        self.calls.append("record")
        stream = self

        class Event:
            def query(self):
                return stream.completed
        return Event()

    def synchronize(self):
        self.calls.append("synchronize")
        self.completed = True


def tiny_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))


def loss_of(model):
    x = torch.tensor([[1.0, 2.0], [-0.5, 0.25]])
    return model(x).pow(2).mean()


@unittest.skipIf(SKIP, SKIP or "")
class CudaBuffersTest(unittest.TestCase):
    def setUp(self):
        state.STATE.__init__()
        state.STATE.settings = r2t.settings.resolve({"R2SP_SCHEDULER": "tcp://h:1"})
        self.stream = FakeStream()
        self.buffers = []

    def tearDown(self):
        state.STATE.__init__()

    def make(self, model, push_codec="fp32", module=None):
        """A DistributedOptimizer whose buffers are CudaBuffers on the CPU (overlapped pulls
        with `module`)."""
        def create(flags, tensors, params_staged=False):
            self.worker = r2sp_testing.FakeWorker(flags, tensors, push_codec=push_codec,
                                                  steps=r2sp_testing.steps_of([2]),
                                                  pulls_overlap=True)
            return self.worker

        def buffers_for(worker, entries):
            self.buffers.append(cuda.CudaBuffers(worker, entries, torch.device("cpu"),
                                                 stream=self.stream))
            return self.buffers[-1]
        with mock.patch.object(state, "create_worker", create), \
                mock.patch.object(device, "buffers_for", buffers_for):
            opt = r2t.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                           model.named_parameters(), train_samples=4,
                                           module=module)
        self.worker.calls.clear()
        return opt

    def expected_grads(self, model):
        twin = tiny_model()
        twin.load_state_dict(model.state_dict())
        loss_of(twin).backward()
        return torch.cat([p.grad.reshape(-1) for p in twin.parameters()])

    def test_pinning_needs_cuda(self):
        self.assertEqual(cuda.pin_host_memory(torch.zeros(4)), torch.cuda.is_available())

    def test_parameters_view_the_device_tensor_and_reports_wait_for_the_copies(self):
        model = tiny_model()
        opt = self.make(model)
        b = self.buffers[0]
        self.assertFalse(b.fp16)
        self.assertEqual(model[0].weight.data_ptr(), b.params.data_ptr())
        self.assertNotEqual(b.params.data_ptr(), b.host_params.data_ptr())
        expected = self.expected_grads(model)
        state.STATE.next_step("test")
        loss = loss_of(model)
        loss.backward()
        self.assertEqual(self.worker.names(), ["next_step"])  # copies not complete yet
        self.assertEqual(len(b.pending), 4)
        self.assertEqual(b.grads.tolist(), expected.tolist())
        self.assertEqual(list(self.worker.grads), expected.tolist())
        opt.step(loss=loss)
        # Completed at flush, in the order autograd finished them.
        self.assertEqual([c[1:3] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(8, 1), (6, 2), (4, 2), (0, 4)])
        self.assertEqual(self.worker.calls[-1], ("submit", 4, float(loss), False))
        self.assertEqual(self.stream.calls, ["record"] * 4 + ["synchronize"])
        # The pulled parameters (params - 0.5 * grads in the fake) went up to the device.
        self.assertEqual(b.params.tolist(), list(self.worker.params))
        self.assertEqual(torch.cat([p.reshape(-1) for p in model.parameters()]).tolist(),
                         list(self.worker.params))

    def test_completed_copies_are_reported_as_the_next_gradient_arrives(self):
        model = tiny_model()
        self.make(model)
        self.stream.completed = True
        state.STATE.next_step("test")
        loss_of(model).backward()
        self.assertEqual([c[1:3] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(8, 1), (6, 2), (4, 2), (0, 4)])
        self.assertEqual(self.buffers[0].pending, [])

    def test_fp16_push_codec_encodes_before_the_copy(self):
        model = tiny_model()
        opt = self.make(model, push_codec="fp16")
        b = self.buffers[0]
        self.assertTrue(b.fp16)
        expected = self.expected_grads(model)
        state.STATE.next_step("test")
        loss_of(model).backward()
        host16 = torch.frombuffer(self.worker.grads16, dtype=torch.float16)
        self.assertEqual(host16.tolist(), expected.half().tolist())
        self.assertEqual(list(self.worker.grads), [0.0] * 9)  # fp32 buffer untouched
        opt.step()
        bits = expected.half().view(torch.int16).tolist()
        self.assertEqual([c[1:] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(8, 1, [b & 0xFFFF for b in bits[8:9]]),
                          (6, 2, [b & 0xFFFF for b in bits[6:8]]),
                          (4, 2, [b & 0xFFFF for b in bits[4:6]]),
                          (0, 4, [b & 0xFFFF for b in bits[0:4]])])
        self.assertEqual(self.worker.calls[-1], ("submit", 4, 0.0, True))

    def test_finish_uploads_the_final_pull(self):
        model = tiny_model()
        self.make(model)

        def finish():  # the final pull lands in worker.params
            torch.frombuffer(self.worker.params, dtype=torch.float32).copy_(
                torch.arange(9, dtype=torch.float32))
            return {"steps": 2}
        self.worker.finish = finish
        self.assertEqual(r2t.finish(), {"steps": 2})
        self.assertEqual(torch.cat([p.reshape(-1) for p in model.parameters()]).tolist(),
                         [float(i) for i in range(9)])

    def test_an_unused_parameter_is_zero_on_both_sides(self):
        model = tiny_model()
        opt = self.make(model)
        b = self.buffers[0]
        b.host_grads.fill_(7.0)
        state.STATE.next_step("test")
        opt.step()
        self.assertEqual(list(self.worker.grads), [0.0] * 9)
        self.assertEqual([c[1:] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(0, 4, [0.0] * 4), (4, 2, [0.0, 0.0]), (6, 2, [0.0, 0.0]),
                          (8, 1, [0.0])])

    def test_overlapped_pulls_upload_each_modules_parameters_as_its_forward_begins(self):
        model = tiny_model()
        opt = self.make(model, module=model)
        b = self.buffers[0]
        state.STATE.next_step("test")
        loss_of(model).backward()
        opt.step()
        pulled = list(self.worker.params)
        self.assertNotEqual(b.params.tolist(), pulled)  # not uploaded after submit
        twin = tiny_model()
        torch.nn.utils.vector_to_parameters(torch.tensor(pulled), twin.parameters())
        loss_of(twin).backward()
        expected = torch.cat([p.grad.reshape(-1) for p in twin.parameters()])
        del self.worker.calls[:]
        del self.stream.calls[:]
        state.STATE.next_step("test")
        opt.zero_grad()
        loss = loss_of(model)  # each Linear waits for its range, then uploads it
        self.assertEqual(b.params.tolist(), pulled)
        loss.backward()  # the uploads between the modules' forwards disturb no saved tensor
        self.assertEqual(b.grads.tolist(), expected.tolist())
        opt.step()
        self.assertEqual([c[1:] for c in self.worker.calls if c[0] == "params_needed"],
                         [(0, 6), (6, 3), (0, 9)])
        # Every copy (the uploads' included) done before the next pull may overwrite the host.
        self.assertEqual(self.stream.calls[-1], "synchronize")
        self.assertEqual(self.worker.calls[-1][0], "submit")


if __name__ == "__main__":
    junit_main.main()
