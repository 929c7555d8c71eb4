"""Where a registered model's parameters and gradients live on a CPU, and which buffers a
model gets: CpuBuffers makes each parameter's .data and .grad views into the worker's flat
buffers (`_core.Worker.params`, `.grads`; zero copy), so pulls land in the model and backward
accumulates into the gradient buffer. CUDA models get cuda.CudaBuffers.

The buffers' interface (CpuBuffers, CudaBuffers): fp16 (submit's flag), stage() (the
parameters into worker.params before join), adopt() (the model onto the joined values),
gradient_done(entry) and flush() (the entries whose gradient is final in the worker's buffer),
in_flight() and landing() (copies under way, and each entry as its copy lands), fill_zero(entry),
zero_grad(), after_submit(), upload(ranges) (overlapped pulls: those host ranges to the
device)."""

import dataclasses

import torch

from . import cuda
from .flat import FlatGradients


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


class CpuBuffers(FlatGradients):
    """CPU parameters as views into worker.params and worker.grads."""

    fp16 = False  # the worker encodes fp16 pushes itself

    def __init__(self, worker, entries):
        self.entries = entries
        self.params = self.host_params = torch.frombuffer(worker.params, dtype=torch.float32)
        self.grads = torch.frombuffer(worker.grads, dtype=torch.float32)

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
        self.own_gradient(entry)
        return [entry]

    def in_flight(self):
        """Gradients still being copied: none on the CPU."""
        return False

    def flush(self):
        """Gradients still being copied, now final: none on the CPU."""
        return []

    def after_submit(self):
        """The pulled parameters are in worker.params, which the parameters view: nothing."""

    def upload(self, ranges):
        """The parameters are the host buffer: nothing to copy."""


def stages_parameters(named):
    """Whether a model of these (name, tensor) pairs computes on its own copy of the
    parameters, so that pulls may land in the worker's while its backward runs (--early_pulls
    with --overlap): CUDA models, whose device copy is staged through the host buffers."""
    return named[0][1].device.type == "cuda"


def buffers_for(worker, entries):
    """CpuBuffers or cuda.CudaBuffers for the entries' device (validation checked it is one)."""
    device = entries[0].param.device
    if device.type == "cuda":
        return cuda.CudaBuffers(worker, entries, device)
    return CpuBuffers(worker, entries)
