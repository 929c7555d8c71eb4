"""A Python worker for training_test.py's bit-exact check: a torch model of the C++ synthetic
model's tensors (_core.synthetic_model(4096, 2), zeros), trained through r2sp.torch in bsp with
the synthetic workload's known gradients: each step's loss is sum(p * g) over the parameters,
g the known gradient of (rank, clock) (_core.fill_known_gradient), so backward gives exactly g,
as a C++ `worker --model=synthetic --grad=known` pushes. Writes the final parameters (raw
fp32, the registered order) to argv[1]. The job's flags come from the environment
(R2SP_SCHEDULER, R2SP_WORKER_FLAGS); KNOWN_DEVICE (default cpu) is where the model and the
gradients live (cuda: through r2sp.torch.cuda's device buffers; the gradients stay exact there,
d sum(p * g) / dp being g; staged: on the CPU, but staged through the worker's buffers as a CUDA
model's are, cuda.CudaBuffers with synchronous copies reported at the end of backward, so that
a CPU job runs the CUDA path's exchange: --early_pulls with --overlap, pulls landing while
backward runs)."""

import array
import contextlib
import os
import sys

import torch

import r2sp.torch as r2t
from r2sp import _core
from r2sp.torch import cuda
from r2sp.torch import device as device_module

TRAIN_SAMPLES = 48


class LandsWhenWaited:
    """A stream for CudaBuffers on the CPU, whose copies are synchronous but reported as a
    GPU's mostly are: no copy has landed when its hook asks, each lands when waited for (at the
    end of backward: gradients.GradientReporter)."""

    class Event:
        def query(self):
            return False

        def synchronize(self):
            pass

    def record(self):
        return self.Event()

    def copying(self):
        return contextlib.nullcontext()

    uploading = copying

    def backward_queued(self):
        pass

    def synchronize(self):
        pass


def stage_cpu_models():
    """CPU models get CUDA's buffers: a copy of the parameters of their own."""
    device_module.stages_parameters = lambda named: True
    device_module.buffers_for = lambda worker, entries: cuda.CudaBuffers(
        worker, entries, torch.device("cpu"), stream=LandsWhenWaited())


def main():
    r2t.init()
    where = os.environ.get("KNOWN_DEVICE", "cpu")
    if where == "staged":
        stage_cpu_models()
    device = torch.device("cpu" if where == "staged" else where)
    named = [(name, torch.nn.Parameter(torch.zeros(shape, device=device)))
             for name, shape in _core.synthetic_model(4096, 2)]  # the C++ worker's names
    params = [p for _, p in named]
    optimizer = r2t.DistributedOptimizer(torch.optim.SGD(params, lr=0.1, momentum=0.9), named)
    known = array.array("f", bytes(4 * 4096))
    flat_known = torch.frombuffer(known, dtype=torch.float32)
    sampler = r2t.DistributedSampler(TRAIN_SAMPLES)
    clock = 0  # bsp from the first step: the job's clock
    while True:
        batches = 0
        for _ in sampler:
            _core.fill_known_gradient(r2t.rank(), clock, known)
            on_device = flat_known.to(device)
            optimizer.zero_grad()
            loss, offset = 0, 0
            for p in params:
                g = on_device[offset:offset + p.numel()].view(p.shape)
                loss = loss + (p * g).sum()
                offset += p.numel()
            loss.backward()
            optimizer.step(loss=loss)
            clock += 1
            batches += 1
        if batches == 0:
            break
    r2t.finish()
    with open(sys.argv[1], "wb") as f:
        f.write(torch.cat([p.detach().reshape(-1) for p in params]).cpu().numpy().tobytes())


if __name__ == "__main__":
    main()
