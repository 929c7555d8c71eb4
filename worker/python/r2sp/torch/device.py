"""Where a registered model's parameters and gradients live on a CPU, and which buffers a
model gets: CpuBuffers makes each parameter's .data and .grad views into the worker's flat
buffers (`_core.Worker.params`, `.grads`; zero copy), so pulls land in the model and backward
accumulates into the gradient buffer. CUDA models get cuda.CudaBuffers.

The buffers' interface (CpuBuffers, CudaBuffers): fp16 (submit's flag), stage() (the
parameters into worker.params before join), adopt() (the model onto the joined values),
gradient_done(entry) and flush() (the entries whose gradient is final in the worker's buffer),
fill_zero(entry), zero_grad(), after_submit()."""

import dataclasses

import torch

from . import cuda


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


def buffers_for(worker, entries):
    """CpuBuffers or cuda.CudaBuffers for the entries' device (validation checked it is one)."""
    device = entries[0].param.device
    if device.type == "cuda":
        return cuda.CudaBuffers(worker, entries, device)
    return CpuBuffers(worker, entries)
