"""The script's optimizer as the servers apply it (bsp, ssp, asp, r2sp): torch.optim.SGD
(momentum, dampening, nesterov, weight decay), Adam and AdamW, each parameter group with its
own settings. The class and every group's settings (lr, weight_decay, momentum, betas, eps,
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


def check(optimizer, mode):
    """TypeError unless the servers apply `optimizer` in `mode`; ValueError for a setting they
    do not apply (maximize, amsgrad)."""
    kind = kind_of(optimizer)
    if kind is None:
        raise TypeError(f"r2sp.torch.DistributedOptimizer: {type(optimizer).__name__} cannot "
                        f"be applied in --sync={mode}: {APPLIED}, whose state they keep. Use "
                        "one of those, or run the job in easgd or eawild, whose local step is "
                        "any torch optimizer")
    for i, group in enumerate(optimizer.param_groups):
        for key, (fine, what) in _UNSUPPORTED.items():
            if group.get(key, fine) != fine:
                raise ValueError(f"r2sp.torch.DistributedOptimizer: {type(optimizer).__name__} "
                                 f"{key}={group[key]} (param group {i}): the servers do not "
                                 f"apply {what}; {APPLIED}")


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
    settings when they differ from the last sent (the first call always sends).

    Thread-safety: sync() may run on autograd's thread (a gradient hook) while the training
    thread waits in backward; never concurrently with itself."""

    def __init__(self, worker, optimizer, entries):
        self._worker = worker
        self._optimizer = optimizer
        self._kind = kind_of(optimizer)
        where = {}
        for g, group in enumerate(optimizer.param_groups):
            for p in group["params"]:
                where[id(p)] = g
        self._tensor_groups = [where[id(e.param)] for e in entries]
        self._sent = None

    def sync(self):
        groups = [group_settings(self._kind, group, i)
                  for i, group in enumerate(self._optimizer.param_groups)]
        if groups != self._sent:
            self._worker.set_optimizer(groups, self._tensor_groups)
            self._sent = groups
