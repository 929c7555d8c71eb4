"""r2sp.torch.cuda.CudaBuffers' bookkeeping, run on the CPU (no GPU here) with a stand-in
stream whose events complete when the test says, or when waited for: flat device tensors the
model views, gradients copied to the host buffer on the copy stream (binary16 with the fp16 push
codec) and reported only once their copies landed, in order, at the end of backward (or at a
later hook, once landed), and the pulled parameters uploaded on the copy stream after submit
(with overlapped pulls, each module's as its forward begins); and CudaStream's own calls into
torch.cuda, against stand-ins specified by torch's Stream and Event. On a machine with CUDA the
same logic runs with real streams (cuda_training_test.py)."""

import contextlib
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
    """cuda.CudaStream's interface. Each call is logged in `calls`; `log` (a list, the fake
    worker's calls once a test sets it) gets ("wait",) as a copy is waited for. Events complete
    once `completed` says so, or each when waited for; synchronize() completes them all."""

    def __init__(self):
        self.completed = False
        self.calls = []
        self.log = []

    @contextlib.contextmanager
    def copying(self):
        self.calls.append("copying")
        yield

    def record(self):
        self.calls.append("record")
        stream = self

        class Event:
            done = False

            def query(self):
                return stream.completed or self.done

            def synchronize(self):
                stream.calls.append("wait")
                stream.log.append(("wait",))
                self.done = True
        return Event()

    def backward_queued(self):
        self.calls.append("backward_queued")

    @contextlib.contextmanager
    def uploading(self):
        self.calls.append("uploading")
        yield

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

    def make(self, model, push_codec="fp32", module=None, overlap=True):
        """A DistributedOptimizer whose buffers are CudaBuffers on the CPU, joined with
        --overlap unless `overlap` is False (overlapped pulls with `module`)."""
        def create(flags, tensors, params_staged=False):
            self.worker = r2sp_testing.FakeWorker(flags, tensors, push_codec=push_codec,
                                                  steps=r2sp_testing.steps_of([2]),
                                                  pulls_overlap=overlap)
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
        self.stream.log = self.worker.calls
        loss = loss_of(model)
        loss.backward()
        # Every copy queued during backward, none landed there; at backward's end each is
        # waited for and reported as it lands, in the order autograd finished them.
        self.assertEqual(self.stream.calls, ["copying", "record"] * 4 + ["wait"] * 4)
        self.assertEqual([c[:3] for c in self.worker.calls],
                         [("next_step",), ("wait",), ("gradient_ready", 8, 1), ("wait",),
                          ("gradient_ready", 6, 2), ("wait",), ("gradient_ready", 4, 2),
                          ("wait",), ("gradient_ready", 0, 4)])
        self.assertEqual(b.pending, [])
        self.assertEqual(b.grads.tolist(), expected.tolist())
        self.assertEqual(list(self.worker.grads), expected.tolist())
        del self.stream.calls[:]
        opt.step(loss=loss)
        self.assertEqual(self.worker.calls[-1], ("submit", 4, float(loss), False))
        self.assertEqual(self.stream.calls, ["backward_queued", "synchronize", "uploading"])
        # The pulled parameters (params - 0.5 * grads in the fake) went up to the device.
        self.assertEqual(b.params.tolist(), list(self.worker.params))
        self.assertEqual(torch.cat([p.reshape(-1) for p in model.parameters()]).tolist(),
                         list(self.worker.params))

    def test_without_overlap_the_copies_wait_for_step_and_see_clipping(self):
        model = tiny_model()
        opt = self.make(model, overlap=False)
        b = self.buffers[0]
        expected = self.expected_grads(model)
        state.STATE.next_step("test")
        loss_of(model).backward()
        self.assertEqual(self.stream.calls, [])  # nothing copied in backward
        self.assertEqual(self.worker.names(), ["next_step"])
        self.assertEqual([e.name for e in b.held], ["2.bias", "2.weight", "0.bias", "0.weight"])
        for p in model.parameters():
            p.grad.mul_(0.5)  # what clipping does, in place
        opt.step()
        self.assertEqual(self.stream.calls, ["copying", "record"] * 4
                         + ["backward_queued", "synchronize", "uploading"])
        halved = (expected * 0.5).tolist()
        self.assertEqual([c[1:] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(8, 1, halved[8:9]), (6, 2, halved[6:8]), (4, 2, halved[4:6]),
                          (0, 4, halved[0:4])])
        self.assertEqual(b.held, [])

    def test_a_copy_is_reported_at_a_hook_once_it_has_landed(self):
        model = tiny_model()
        self.make(model)
        b = self.buffers[0]
        state.STATE.next_step("test")
        first, second = b.entries[3], b.entries[2]
        self.assertEqual(b.gradient_done(first), [])
        self.assertTrue(b.in_flight())
        b.pending[0][0].done = True  # the first copy lands; the second is queued after it
        self.assertEqual(b.gradient_done(second), [first])
        self.assertEqual(list(b.landing()), [second])
        self.assertFalse(b.in_flight())
        self.assertEqual(self.stream.calls, ["copying", "record"] * 2 + ["wait"])

    def test_completed_copies_are_reported_as_the_next_gradient_arrives(self):
        model = tiny_model()
        self.make(model)
        self.stream.completed = True
        state.STATE.next_step("test")
        loss_of(model).backward()
        self.assertEqual([c[1:3] for c in self.worker.calls if c[0] == "gradient_ready"],
                         [(8, 1), (6, 2), (4, 2), (0, 4)])
        self.assertEqual(self.buffers[0].pending, [])
        self.assertEqual(self.stream.calls, ["copying", "record"] * 4)  # nothing waited for

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
        self.assertEqual(self.stream.calls,
                         ["copying", "record"] * 4 + ["wait"] * 4
                         + ["backward_queued", "synchronize", "uploading"])

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
        self.stream.completed = False  # this step's copies land when waited for
        state.STATE.next_step("test")
        opt.zero_grad()
        loss = loss_of(model)  # each Linear waits for its range, then uploads it
        self.assertEqual(b.params.tolist(), pulled)
        loss.backward()  # the uploads between the modules' forwards disturb no saved tensor
        self.assertEqual(b.grads.tolist(), expected.tolist())
        opt.step()
        self.assertEqual([c[1:] for c in self.worker.calls if c[0] == "params_needed"],
                         [(0, 6), (6, 3), (0, 9)])
        # Each module's upload on the copy stream, after the step's backward; every copy (the
        # uploads' included) done before the next pull may overwrite the host.
        self.assertEqual(self.stream.calls,
                         ["uploading"] * 2 + ["copying", "record"] * 4 + ["wait"] * 4
                         + ["backward_queued", "synchronize"])
        self.assertEqual(self.worker.calls[-1][0], "submit")


@unittest.skipIf(SKIP, SKIP or "")
class CudaStreamTest(unittest.TestCase):
    """cuda.CudaStream's calls into torch.cuda (the code only a GPU runs), against stand-ins
    specified by torch's own Stream and Event classes, so that a call torch lacks fails here:
    which stream each copy runs on and what it waits for."""

    def setUp(self):
        self.log = []
        self.compute = self.stream_named("compute")
        streams = iter([self.stream_named("copy")])
        events = iter([self.event_named(f"e{i}") for i in range(2)])  # specs before patching
        log = self.log

        @contextlib.contextmanager
        def on(stream):
            log.append(("on", stream.name))
            yield
            log.append(("off", stream.name))
        for name, value in [("Stream", lambda device: next(streams)),
                            ("Event", lambda: next(events)),
                            ("current_stream", lambda device: self.compute),
                            ("stream", on)]:
            patcher = mock.patch.object(torch.cuda, name, value)
            patcher.start()
            self.addCleanup(patcher.stop)
        self.stream = cuda.CudaStream(torch.device("cuda:0"))

    def stream_named(self, name):
        stream = mock.create_autospec(torch.cuda.Stream, instance=True)
        stream.name = name
        for method in ("wait_stream", "wait_event", "synchronize"):
            getattr(stream, method).side_effect = (
                lambda *a, m=method: self.log.append((name, m) + tuple(x.name for x in a)))
        return stream

    def event_named(self, name):
        event = mock.create_autospec(torch.cuda.Event, instance=True)
        event.name = name
        event.record.side_effect = lambda stream: self.log.append((name, "record", stream.name))
        return event

    def test_a_gradients_copy_runs_on_the_copy_stream_after_the_compute_so_far(self):
        with self.stream.copying():
            self.log.append("copy")
        event = self.stream.record()
        self.assertEqual(event.name, "e0")
        self.assertEqual(self.log, [("copy", "wait_stream", "compute"), ("on", "copy"), "copy",
                                    ("off", "copy"), ("e0", "record", "copy")])

    def test_uploads_wait_for_the_last_backward_and_the_compute_waits_for_them(self):
        with self.stream.uploading():  # before any step: nothing to wait for
            self.log.append("upload")
        self.stream.backward_queued()
        with self.stream.uploading():
            self.log.append("upload")
        self.stream.synchronize()
        self.assertEqual(self.log, [
            ("on", "copy"), "upload", ("off", "copy"), ("compute", "wait_stream", "copy"),
            ("e0", "record", "compute"),
            ("copy", "wait_event", "e0"), ("on", "copy"), "upload", ("off", "copy"),
            ("compute", "wait_stream", "copy"),
            ("copy", "synchronize")])


if __name__ == "__main__":
    junit_main.main()
