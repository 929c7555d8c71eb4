"""CUDA models: the parameters and gradients are views into one flat GPU tensor each, staged
through the worker's host buffers (page-locked with cudaHostRegister where CUDA allows), with
every copy on a copy stream beside the compute stream, as the C++ CUDA worker's CopyPipeline
does. With --overlap each gradient's copy to the host (encoded to fp16 on the GPU first with the
fp16 push codec, into worker.grads16) is queued in its hook as autograd completes it, once the
compute stream gets there, so the copies overlap the rest of backward instead of delaying it.
The hooks only queue: the host hears of a gradient once its copy has landed, which the hooks see
for the copies already done (query) and landing() waits for, copy by copy in backward's order,
at the end of backward (gradients.py), while the GPU is still computing the rest. Without
--overlap the copies wait for step(), so that what the script does to the gradients after
backward (clipping) is what the servers get. The pulled parameters go up on the copy stream
after each exchange, or, with overlapped pulls (forward_waits.py), each module's as its forward
begins (upload), once the step's backward is done with them, and the compute stream's later work
waits for them: a module's upload overlaps the forward of the modules before it. flush(), which
step() calls before every submit, waits for every copy, so the next pull never overwrites host
values a copy has yet to read. Its bookkeeping and CudaStream's calls are unit-tested on the CPU
with stand-in streams and events (cuda_test.py); on a GPU,
tests/worker/python/r2sp/torch/cuda_training_test.py checks it in real jobs (gpu_checks runs
it)."""

import contextlib

import torch

from .flat import FlatGradients


def pin_host_memory(tensor):
    """Page-locks a host tensor's memory for asynchronous copies; False where CUDA refuses or
    is absent (the copies then stay correct, only synchronous)."""
    try:
        cudart = torch.cuda.cudart()
        err = cudart.cudaHostRegister(tensor.data_ptr(), tensor.numel() * tensor.element_size(), 0)
    except (AssertionError, AttributeError, RuntimeError):
        return False
    return int(getattr(err, "value", err)) == 0


class CudaStream:
    """The CUDA calls CudaBuffers makes: a copy stream beside the compute stream (the current
    one), and the order between the two."""

    def __init__(self, device):
        self.device = device
        self.copy = torch.cuda.Stream(device)
        self.backward = None  # an event after the last step's backward (backward_queued)

    def _compute(self):
        return torch.cuda.current_stream(self.device)

    @contextlib.contextmanager
    def copying(self):
        """Work queued within runs on the copy stream, after the compute stream's work queued
        so far (the gradient it copies)."""
        self.copy.wait_stream(self._compute())
        with torch.cuda.stream(self.copy):
            yield

    def record(self):
        """An event (query(), synchronize()) after the copy stream's work queued so far."""
        event = torch.cuda.Event()
        event.record(self.copy)
        return event

    def backward_queued(self):
        """The step's backward is all queued: uploads wait for it, not for later work."""
        self.backward = torch.cuda.Event()
        self.backward.record(self._compute())

    @contextlib.contextmanager
    def uploading(self):
        """Work queued within runs on the copy stream once the last step's backward is done
        (it reads the parameters an upload writes); the compute stream's work queued later
        waits for it."""
        if self.backward is not None:
            self.copy.wait_event(self.backward)
        with torch.cuda.stream(self.copy):
            yield
        self._compute().wait_stream(self.copy)

    def synchronize(self):
        """Waits for every copy queued so far."""
        self.copy.synchronize()


class CudaBuffers(FlatGradients):
    """A CUDA model's parameters and gradients as views into flat device tensors, staged
    through the worker's host buffers. `stream`: CudaStream(device) unless given (tests).

    Thread-safety: gradient_done and landing run on autograd's device thread, the rest on the
    training thread; GradientReporter's lock orders them."""

    def __init__(self, worker, entries, device, stream=None):
        self.worker = worker
        self.entries = entries
        self.stream = stream or CudaStream(device)
        self.fp16 = worker.push_codec == "fp16"
        self.host_params = torch.frombuffer(worker.params, dtype=torch.float32)
        self.host_grads = (torch.frombuffer(worker.grads16, dtype=torch.float16) if self.fp16
                           else torch.frombuffer(worker.grads, dtype=torch.float32))
        self.pinned = pin_host_memory(self.host_params) and pin_host_memory(self.host_grads)
        n = self.host_params.numel()
        self.params = torch.empty(n, dtype=torch.float32, device=device)
        self.grads = torch.zeros(n, dtype=torch.float32, device=device)
        self.grads16 = torch.empty(n, dtype=torch.float16, device=device) if self.fp16 else None
        self.pending = []  # [(event, entry)]: device-to-host copies under way, in order
        self.held = []     # entries whose copies wait for flush() (pushes not in backward)
        self.copies_in_backward = True  # adopt(): whether the job pushes during backward

    def adopt(self):
        """Uploads the joined parameters and makes the model's parameters and gradients views
        of the flat device tensors (gradients zeroed)."""
        with torch.no_grad():
            self.params.copy_(self.host_params)
            self.grads.zero_()
        for e in self.entries:
            e.param.data = e.view(self.params)
            e.param.grad = e.view(self.grads)
        # Without --overlap nothing leaves before step(): the copies wait for it, so that what
        # the script does to the gradients in between (clipping) reaches the servers.
        self.copies_in_backward = self.worker.overlaps_backward

    def gradient_done(self, entry):
        """Queues entry's gradient's copy to the host (fp16 first with the fp16 codec) on the
        copy stream, or holds it for flush() when the job does not push during backward;
        returns the entries whose copies have landed, in order."""
        self.own_gradient(entry)
        if not self.copies_in_backward:
            self.held.append(entry)
            return []
        self._queue_copy(entry)
        done = 0
        while done < len(self.pending) and self.pending[done][0].query():
            done += 1
        finished = [e for _, e in self.pending[:done]]
        del self.pending[:done]
        return finished

    def _queue_copy(self, entry):
        with torch.no_grad(), self.stream.copying():
            source = entry.span(self.grads)
            if self.fp16:
                entry.span(self.grads16).copy_(source)
                source = entry.span(self.grads16)
            entry.span(self.host_grads).copy_(source, non_blocking=self.pinned)
            self.pending.append((self.stream.record(), entry))

    def in_flight(self):
        """Whether gradient copies are still under way."""
        return bool(self.pending)

    def landing(self):
        """Yields each gradient copy's entry as it lands, in the order they were queued
        (waiting for each, the GIL released)."""
        while self.pending:
            event, entry = self.pending[0]
            event.synchronize()
            del self.pending[0]
            yield entry

    def flush(self):
        """The step's backward is queued: copies the held gradients and waits for every copy
        still under way; returns their entries, in backward's order."""
        for entry in self.held:
            self._queue_copy(entry)
        self.held = []
        self.stream.backward_queued()
        self.stream.synchronize()
        finished = [e for _, e in self.pending]
        self.pending = []
        return finished

    def fill_zero(self, entry):
        """A gradient autograd did not produce this step: zeros, on both sides."""
        entry.span(self.host_grads).zero_()
        super().fill_zero(entry)

    def after_submit(self):
        """Uploads the pulled parameters (one copy; later kernels on the stream see it)."""
        with torch.no_grad(), self.stream.uploading():
            self.params.copy_(self.host_params, non_blocking=self.pinned)

    def upload(self, ranges):
        """Uploads these (offset, count) ranges of the pulled parameters (asynchronously when
        pinned: flush() waits for them before the next pull can overwrite the host buffer)."""
        with torch.no_grad(), self.stream.uploading():
            for offset, count in ranges:
                self.params[offset:offset + count].copy_(
                    self.host_params[offset:offset + count], non_blocking=self.pinned)
