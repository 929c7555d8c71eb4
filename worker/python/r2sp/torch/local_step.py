"""bsp with an optimizer the servers do not apply (RMSprop, Adagrad, Adam with amsgrad, LAMB, a
user's own): each worker applies the script's optimizer itself to the step's averaged gradient,
as Horovod does. The servers hold, in place of the parameters, the clock's average of the
pushed gradients (weighted by batch as the servers' own updates weigh them; proto
OPTIMIZER_AVERAGE): after each exchange the pulled average becomes every parameter's .grad, and
the optimizer's step() runs on the worker's own copy of the parameters. Every worker starts
from worker 0's values and applies the same update to the same average, so the copies stay
equal, as under Horovod (on the same hardware and torch build). A step every worker skipped (a
GradScaler's inf or NaN) has no average: the servers return NaN and no worker steps; a step some
workers skipped averages the others' gradients, and every worker, the skipping ones too, steps
with it. The optimizer's state is each worker's (state_dict() is torch's own); the servers'
checkpoints hold gradients, so a job resumes from the script's checkpoint, not the servers'."""

import math

import torch


class LocalStep:
    """The exchange's end for a worker that applies its own optimizer: `buffers` (device.py)
    hold the pulled averages, `entries` the registered parameters, whose .data become the
    worker's own tensors (holding the joined values) instead of views of the pulled buffer."""

    def __init__(self, worker, buffers, entries, optimizer):
        if worker.first_step > 0:
            raise RuntimeError(
                "r2sp.torch.DistributedOptimizer: this worker joins the job at step "
                f"{worker.first_step}, but with {type(optimizer).__name__} the servers hold the "
                "averaged gradient, not the parameters, so there is nothing to start from; "
                "restart the job from the script's own checkpoint, or use an optimizer the "
                "servers apply (SGD, Adam, AdamW), whose parameters a joining worker pulls")
        self._buffers = buffers
        self._optimizer = optimizer
        with torch.no_grad():
            for e in entries:
                e.param.data = e.param.data.clone()

    def after_exchange(self):
        """The pulled average becomes the gradients, and the optimizer steps with it; returns
        False, stepping nothing, when no worker contributed to the step (NaN came back)."""
        buffers = self._buffers
        buffers.after_submit()  # CUDA: the pulled values uploaded
        with torch.no_grad():
            buffers.grads.copy_(buffers.params)
        if math.isnan(buffers.grads[0].item()):  # NaN everywhere: every worker skipped
            return False
        self._optimizer.step()
        return True
