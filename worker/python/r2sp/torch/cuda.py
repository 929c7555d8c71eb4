"""CUDA models: the parameters and gradients are views into one flat GPU tensor each, staged
through the worker's host buffers (page-locked with cudaHostRegister where CUDA allows). Each
gradient is copied to the host as autograd completes it (encoded to fp16 on the GPU first with
the fp16 push codec, into worker.grads16), asynchronously, and reported once its copy is done;
the pulled parameters go up in one copy after each exchange, or, with overlapped pulls
(forward_waits.py), each module's as its forward begins (upload). flush(), which step() calls
before every submit, waits for those copies too, so the next pull never overwrites host values
a copy has yet to read. Its bookkeeping is unit-tested on the CPU with stand-in events; on a
GPU, tests/worker/python/r2sp/torch/cuda_training_test.py checks it in real jobs (gpu_checks
runs it; it passed on an H200: docs/BENCHMARKS.md)."""

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
    """The CUDA calls CudaBuffers makes on the current stream: an event recorded after the work
    enqueued so far, and waiting for all of it."""

    def __init__(self, device):
        self.device = device

    def record(self):
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        return event

    def synchronize(self):
        torch.cuda.current_stream(self.device).synchronize()


class CudaBuffers(FlatGradients):
    """A CUDA model's parameters and gradients as views into flat device tensors, staged
    through the worker's host buffers. `stream`: CudaStream(device) unless given (tests).

    Thread-safety: gradient_done runs on autograd's device thread, the rest on the training
    thread; GradientReporter's lock orders them."""

    def __init__(self, worker, entries, device, stream=None):
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

    def adopt(self):
        """Uploads the joined parameters and makes the model's parameters and gradients views
        of the flat device tensors (gradients zeroed)."""
        with torch.no_grad():
            self.params.copy_(self.host_params)
            self.grads.zero_()
        for e in self.entries:
            e.param.data = e.view(self.params)
            e.param.grad = e.view(self.grads)

    def gradient_done(self, entry):
        """Starts entry's gradient on its way to the host (fp16 first with the fp16 codec);
        returns the entries whose copies have completed, in order."""
        self.own_gradient(entry)
        with torch.no_grad():
            source = entry.span(self.grads)
            if self.fp16:
                entry.span(self.grads16).copy_(source)
                source = entry.span(self.grads16)
            entry.span(self.host_grads).copy_(source, non_blocking=self.pinned)
        self.pending.append((self.stream.record(), entry))
        done = 0
        while done < len(self.pending) and self.pending[done][0].query():
            done += 1
        finished = [e for _, e in self.pending[:done]]
        del self.pending[:done]
        return finished

    def flush(self):
        """Waits for the copies still under way; returns their entries."""
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
        with torch.no_grad():
            self.params.copy_(self.host_params, non_blocking=self.pinned)

    def upload(self, ranges):
        """Uploads these (offset, count) ranges of the pulled parameters (asynchronously when
        pinned: flush() waits for them before the next pull can overwrite the host buffer)."""
        with torch.no_grad():
            for offset, count in ranges:
                self.params[offset:offset + count].copy_(
                    self.host_params[offset:offset + count], non_blocking=self.pinned)
