"""Elastic averaging (easgd, eawild; docs/MODES.md) in r2sp.torch: the script's own torch
optimizer takes the local step on the worker's copy of the parameters, and the worker's C++
exchange (worker/elastic_exchange.h) pulls the servers' centre every elastic period and pushes
the elastic difference. This module holds what the DistributedOptimizer adds for these modes:
which optimizers and devices they take, and the centre for evaluations and export."""

import collections
import contextlib

import torch

MODES = ("easgd", "eawild")


def is_elastic(mode):
    """Whether the job's mode trains a copy per worker tied to a centre (easgd, eawild)."""
    return mode in MODES


def check_supported(worker, entries, optimizer):
    """NotImplementedError for what the Python client cannot run in elastic modes yet: CUDA
    parameters (the exchange reads and writes the host copy; CPU parameters are views of it)
    and torch.optim.LBFGS (its step re-evaluates a closure, a backward each time, where the
    client takes one backward per step).
    What the C++ worker refuses (fp16_delta pulls, --overlap, --early_pulls,
    --momentum_correction, a sparse push codec without error feedback) was refused at join
    already (r2sp.R2SPError)."""
    device = entries[0].param.device
    if device.type != "cpu":
        raise NotImplementedError(
            f"r2sp.torch.DistributedOptimizer: --sync={worker.mode} trains CPU parameters only "
            f"so far, not {device} ones (docs/PYTORCH.md, elastic averaging); move the model "
            "to the CPU or use another mode")
    if isinstance(optimizer, torch.optim.LBFGS):
        raise NotImplementedError(
            "r2sp.torch.DistributedOptimizer: LBFGS re-evaluates its closure (a backward each "
            "time) within one step; R2SP takes one backward per step. Use another optimizer "
            "(SGD, Adam, ...)")


class Centre:
    """The servers' centre of an elastic job, for the worker's registered parameters.

    `worker` is the joined _core.Worker, `entries` its device.Entry list (CPU parameters that
    view worker.params), `finished` says whether the worker has finished (then its final pull
    has brought the centre into the parameters, and nothing is pulled)."""

    def __init__(self, worker, entries, finished):
        self._worker = worker
        self._entries = entries
        self._finished = finished

    def values(self):
        """{name: flat float32 tensor} of the centre (copies), pulled now (easgd: once the rounds
        this worker pushed are added to it) unless the worker has finished."""
        if self._finished():
            return {e.name: e.param.detach().reshape(-1).clone() for e in self._entries}
        self._worker.pull_centre()  # releases the GIL; Ctrl-C leaves the job
        centre = torch.frombuffer(self._worker.centre, dtype=torch.float32)
        return {e.name: e.span(centre).clone() for e in self._entries}

    def state_dict(self, module=None):
        """The centre as a state dict: without `module`, {name: tensor} of the registered
        parameters (their shapes); with it, module.state_dict() with every registered
        parameter's value replaced by the centre's, and the rest (batch-norm running
        statistics, frozen parameters) the module's own, i.e. this worker's."""
        values = self.values()
        shaped = collections.OrderedDict(
            (e.name, values[e.name].view(e.param.shape)) for e in self._entries)
        if module is None:
            return shaped
        state = module.state_dict()
        missing = [name for name in shaped if name not in state]
        if missing:
            raise ValueError("r2sp.torch.DistributedOptimizer.centre_state_dict: the module has "
                             f"no {missing[0]!r}; pass the module whose named_parameters() "
                             "the optimizer registered")
        for name, value in shaped.items():
            state[name] = value
        return state

    @contextlib.contextmanager
    def swapped_in(self):
        """Within the block the registered parameters hold the centre; after it (also after an
        exception) this worker's own values again."""
        values = self.values()
        own = [e.param.detach().clone() for e in self._entries]
        with torch.no_grad():
            for e in self._entries:
                e.param.copy_(values[e.name].view(e.param.shape))
        try:
            yield
        finally:
            with torch.no_grad():
                for e, saved in zip(self._entries, own):
                    e.param.copy_(saved)
