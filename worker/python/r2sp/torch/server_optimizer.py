"""The script's optimizer as the servers apply it (bsp, ssp, asp, r2sp): torch.optim.SGD
(momentum, dampening, nesterov, weight decay), Adam and AdamW, each parameter group with its
own settings; any other optimizer in bsp, which each worker applies to the averaged gradient
the servers keep (local_step.py). The class and every group's settings (lr, weight_decay, momentum, betas, eps,
...) travel with the pushes of that group's tensors, read again before each step's first push,
so a change the script makes to a group (every learning-rate scheduler does) takes effect at
the next update. The optimizer's state (momentum, exp_avg, exp_avg_sq) lives on the servers."""

import numbers

import torch

APPLIED = ("the servers apply torch.optim.SGD, Adam and AdamW (each parameter group with its "
           "own settings)")

# torch settings that change what the update computes, refused unless at these values.
_UNSUPPORTED = {
    "maximize": (False, "maximisation"),
    "amsgrad": (False, "AMSGrad"),
    "decoupled_weight_decay": (False, "Adam with decoupled weight decay (use AdamW)"),
}


def kind_of(optimizer):
    """'sgd', 'adam' or 'adamw' for an optimizer of exactly that class, else None (a subclass
    may change step(), which the servers would not see)."""
    return {torch.optim.SGD: "sgd", torch.optim.Adam: "adam",
            torch.optim.AdamW: "adamw"}.get(type(optimizer))


def _refusal(optimizer):
    """(what, why) the servers cannot apply of `optimizer`, or None: they apply it."""
    name = type(optimizer).__name__
    if kind_of(optimizer) is None:
        return name, APPLIED
    for i, group in enumerate(optimizer.param_groups):
        for key, (fine, what) in _UNSUPPORTED.items():
            if group.get(key, fine) != fine:
                return (f"{name} {key}={group[key]} (param group {i})",
                        f"the servers do not apply {what}")
    return None


def applies(optimizer):
    """Whether the servers apply `optimizer` themselves, keeping its state (in every mode but
    easgd and eawild, known before joining)."""
    return _refusal(optimizer) is None


def check(optimizer, mode):
    """Where `optimizer`'s steps run in `mode`: "servers" (SGD, Adam and AdamW, their state
    kept there) or "workers" (any other in bsp: each worker applies it to the averaged
    gradient). TypeError for another optimizer in ssp, asp or r2sp, whose pushes are applied
    one by one (there is no averaged gradient to step with), and for LBFGS (its step
    re-evaluates a closure)."""
    refused = _refusal(optimizer)
    if refused is None:
        return "servers"
    if isinstance(optimizer, torch.optim.LBFGS):
        raise TypeError("r2sp.torch.DistributedOptimizer: LBFGS re-evaluates its closure (a "
                        "backward each time) within one step; R2SP takes one backward per "
                        "step. Use another optimizer")
    if mode == "bsp":
        return "workers"
    what, why = refused
    raise TypeError(f"r2sp.torch.DistributedOptimizer: {what} cannot be applied in "
                    f"--sync={mode}: {why}, and each push is applied on its own, with no "
                    "averaged gradient a worker could step with. Use one of those, or "
                    "--sync=bsp (each worker applies any optimizer to the averaged gradient), "
                    "easgd or eawild (any optimizer as the local step)")


def _number(group, key, index):
    value = group[key]
    if isinstance(value, torch.Tensor):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"r2sp.torch.DistributedOptimizer: param group {index}'s {key} is "
                        f"{value!r}, not a number")
    return float(value)


def group_settings(kind, group, index):
    """One parameter group's settings as the worker's set_optimizer takes them."""
    settings = {"kind": kind, "lr": _number(group, "lr", index),
                "weight_decay": _number(group, "weight_decay", index)}
    if kind == "sgd":
        settings.update(momentum=_number(group, "momentum", index),
                        dampening=_number(group, "dampening", index),
                        nesterov=bool(group.get("nesterov", False)))
    else:
        beta1, beta2 = group["betas"]
        settings.update(beta1=float(beta1), beta2=float(beta2), eps=_number(group, "eps", index))
    return settings


class OptimizerSync:
    """Keeps the worker's copy of the script's optimizer current: sync() sends the groups'
    settings when they differ from the last sent (the first call always sends). `local`: the
    workers apply the optimizer (check() said "workers"): every tensor is averaged.

    Thread-safety: sync() may run on autograd's thread (a gradient hook) while the training
    thread waits in backward; never concurrently with itself."""

    def __init__(self, worker, optimizer, entries, local=False):
        self._worker = worker
        self._optimizer = optimizer
        self._kind = None if local else kind_of(optimizer)
        where = {}
        for g, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                where[id(p)] = g
        self._tensor_groups = [where[id(e.param)] for e in entries]
        self._sent = None

    def sync(self):
        if self._kind is None:  # each worker steps: the servers average every tensor
            groups = [{"kind": "average"} for _ in self._optimizer.param_groups]
        else:
            groups = [group_settings(self._kind, group, i)
                      for i, group in enumerate(self._optimizer.param_groups)]
        if groups != self._sent:
            self._worker.set_optimizer(groups, self._tensor_groups)
            self._sent = groups


def record_step(optimizer):
    """Records on the torch optimizer a step the servers took for it, as torch's own step()
    records it for the learning-rate schedulers' order check (torch 1.13: _step_count; torch 2:
    _opt_called), so that a schedule stepped after step() does not warn it ran first."""
    optimizer._step_count = getattr(optimizer, "_step_count", 0) + 1
    optimizer._opt_called = True
