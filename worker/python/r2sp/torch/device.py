"""Where a registered model's parameters and gradients live, and the copies between them and
the worker's flat buffers (`_core.Worker.params`, `.grads`, `.grads16`).

CpuBuffers: each parameter's .data and .grad are views into the worker's buffers (zero copy):
pulls land in the model, backward accumulates into the gradient buffer.
CudaBuffers: the parameters and gradients are views into one flat GPU tensor each; each
gradient is copied to the host (encoded to fp16 on the GPU first with the fp16 push codec) as
autograd completes it, asynchronously from pinned memory, and the pulled parameters are
uploaded in one copy after each exchange. The CUDA path awaits a check on a GPU machine."""

import dataclasses

import torch


@dataclasses.dataclass(eq=False)
class Entry:
    """A registered parameter: its name, the tensor, and its range of the flat buffers."""
    name: str
    param: torch.Tensor
    offset: int
    count: int

    def span(self, flat):
        return flat[self.offset:self.offset + self.count]

    def view(self, flat):
        return self.span(flat).view(self.param.shape)


class CpuBuffers:
    """CPU parameters as views into worker.params and worker.grads."""

    fp16 = False  # the worker encodes fp16 pushes itself

    def __init__(self, worker, entries):
        self.entries = entries
        self.params = torch.frombuffer(worker.params, dtype=torch.float32)
        self.grads = torch.frombuffer(worker.grads, dtype=torch.float32)

    def stage(self):
        """Copies each parameter's value into worker.params (before join)."""
        with torch.no_grad():
            for e in self.entries:
                e.span(self.params).copy_(e.param.detach().reshape(-1))

    def adopt(self):
        """Makes each parameter a view of worker.params (holding the joined values) and its
        gradient a zeroed view of worker.grads."""
        self.grads.zero_()
        for e in self.entries:
            e.param.data = e.view(self.params)
            e.param.grad = e.view(self.grads)

    def gradient_done(self, entry):
        """Autograd finished entry's gradient: puts it in the buffer if autograd left it
        elsewhere (a gradient set to None and replaced); returns [entries now final]."""
        grad = entry.param.grad
        if grad is None or grad.data_ptr() != self.grads.data_ptr() + 4 * entry.offset:
            view = entry.view(self.grads)
            with torch.no_grad():
                if grad is None:
                    view.zero_()
                else:
                    view.copy_(grad)
            entry.param.grad = view
        return [entry]

    def flush(self):
        """Gradients still being copied, now final: none on the CPU."""
        return []

    def fill_zero(self, entry):
        """A gradient autograd did not produce this step: zeros."""
        view = entry.view(self.grads)
        view.zero_()
        entry.param.grad = view

    def zero_grad(self):
        """Zeroes every gradient in one fill, keeping them views of the buffer."""
        self.grads.zero_()
        for e in self.entries:
            if e.param.grad is None or e.param.grad.data_ptr() != \
                    self.grads.data_ptr() + 4 * e.offset:
                e.param.grad = e.view(self.grads)

    def after_submit(self):
        """The pulled parameters are in worker.params, which the parameters view: nothing."""


def pin_host_memory(tensor):
    """Page-locks a host tensor's memory for fast asynchronous copies; False if CUDA refuses
    (the copies then stay correct, only slower)."""
    try:
        cudart = torch.cuda.cudart()
        err = cudart.cudaHostRegister(tensor.data_ptr(), tensor.numel() * tensor.element_size(), 0)
    except (AttributeError, RuntimeError):
        return False
    return int(getattr(err, "value", err)) == 0


class CudaBuffers:
    """CUDA parameters as views into flat GPU tensors, staged through the worker's (pinned)
    host buffers."""

    def __init__(self, worker, entries, device):
        self.entries = entries
        self.device = device
        self.fp16 = worker.push_codec == "fp16"
        self.host_params = torch.frombuffer(worker.params, dtype=torch.float32)
        self.host_grads = (torch.frombuffer(worker.grads16, dtype=torch.float16) if self.fp16
                           else torch.frombuffer(worker.grads, dtype=torch.float32))
        self.pinned = pin_host_memory(self.host_params) and pin_host_memory(self.host_grads)
        n = self.host_params.numel()
        self.params = torch.empty(n, dtype=torch.float32, device=device)
        self.grads = torch.zeros(n, dtype=torch.float32, device=device)
        self.grads16 = torch.empty(n, dtype=torch.float16, device=device) if self.fp16 else None
        self.pending = []  # [(cuda event, entry)]: device-to-host copies under way

    def stage(self):
        with torch.no_grad():
            for e in self.entries:
                e.span(self.host_params).copy_(e.param.detach().reshape(-1))

    def adopt(self):
        with torch.no_grad():
            self.params.copy_(self.host_params)
            self.grads.zero_()
        for e in self.entries:
            e.param.data = e.view(self.params)
            e.param.grad = e.view(self.grads)

    def gradient_done(self, entry):
        """Starts entry's gradient on its way to the host; returns [entries whose copies
        completed], this one's included only if its copy already has."""
        grad = entry.param.grad
        view = entry.view(self.grads)
        with torch.no_grad():
            if grad is None or grad.data_ptr() != view.data_ptr():
                view.copy_(grad) if grad is not None else view.zero_()
                entry.param.grad = view
            source = entry.span(self.grads)
            if self.fp16:
                entry.span(self.grads16).copy_(source)
                source = entry.span(self.grads16)
            entry.span(self.host_grads).copy_(source, non_blocking=self.pinned)
        event = torch.cuda.Event()
        event.record()
        self.pending.append((event, entry))
        done = [e for ev, e in self.pending if ev.query()]
        self.pending = [(ev, e) for ev, e in self.pending if e not in done]
        return done

    def flush(self):
        torch.cuda.current_stream(self.device).synchronize()
        done = [e for _, e in self.pending]
        self.pending = []
        return done

    def fill_zero(self, entry):
        entry.span(self.host_grads).zero_()
        view = entry.view(self.grads)
        view.zero_()
        entry.param.grad = view

    def zero_grad(self):
        self.grads.zero_()
        for e in self.entries:
            if e.param.grad is None or e.param.grad.data_ptr() != e.view(self.grads).data_ptr():
                e.param.grad = e.view(self.grads)

    def after_submit(self):
        """Uploads the pulled parameters (one copy; later kernels on the stream see it)."""
        with torch.no_grad():
            self.params.copy_(self.host_params, non_blocking=self.pinned)


def buffers_for(worker, entries):
    """CpuBuffers or CudaBuffers for the entries' device (checked to be one by validation)."""
    device = entries[0].param.device
    if device.type == "cuda":
        return CudaBuffers(worker, entries, device)
    return CpuBuffers(worker, entries)
