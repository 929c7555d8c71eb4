"""DistributedOptimizer's checks of what it is given, each failing with a message that says
what to change: the optimizer (a torch optimizer; which ones a mode takes: server_optimizer.py),
the named parameters (every optimized parameter named once, float32, contiguous, one
device), and step()'s loss and sample count."""

import numbers

import torch


def check_optimizer_object(optimizer):
    """TypeError unless `optimizer` is a torch.optim.Optimizer (before joining: the mode, which
    decides which optimizers a job takes, is known only after)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError("r2sp.torch.DistributedOptimizer wraps a torch optimizer "
                        "(torch.optim.SGD(model.parameters(), lr=...)), not "
                        f"{type(optimizer).__name__}")


def _describe(group_index, index, p):
    return f"parameter {index} of param group {group_index} (shape {list(p.shape)})"


def named_entries(optimizer, named_parameters):
    """[(name, tensor)] to register: the optimizer's parameters in named_parameters' order.

    ValueError for a parameter of the optimizer missing from named_parameters, a name used
    twice or a tensor under two names; TypeError for a name that is not a string or a value
    that is not a tensor. Parameters named but not optimized, and frozen ones (requires_grad
    False, which SGD leaves alone), are left out: they stay local."""
    if isinstance(named_parameters, dict):
        named_parameters = named_parameters.items()
    names, seen = {}, {}
    for item in named_parameters:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError("r2sp.torch.DistributedOptimizer: named_parameters holds "
                            f"{type(item).__name__}s; pass model.named_parameters() "
                            "(pairs of name and tensor)")
        name, p = item
        if not isinstance(name, str) or not name:
            raise TypeError(f"r2sp.torch.DistributedOptimizer: parameter name {name!r} is not "
                            "a non-empty string")
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"r2sp.torch.DistributedOptimizer: '{name}' is a "
                            f"{type(p).__name__}, not a tensor")
        if name in names:
            raise ValueError(f"r2sp.torch.DistributedOptimizer: named_parameters holds the name "
                             f"'{name}' twice; names must be unique")
        if id(p) in seen:
            raise ValueError(f"r2sp.torch.DistributedOptimizer: one tensor is named both "
                             f"'{seen[id(p)]}' and '{name}'; name each parameter once")
        names[name] = p
        seen[id(p)] = name
    optimized = set()
    for gi, group in enumerate(optimizer.param_groups):
        for i, p in enumerate(group["params"]):
            if id(p) not in seen:
                raise ValueError(f"r2sp.torch.DistributedOptimizer: {_describe(gi, i, p)} is "
                                 "not in named_parameters; pass the named parameters of the "
                                 "model the optimizer trains (model.named_parameters())")
            optimized.add(id(p))
    entries = [(n, p) for n, p in names.items() if id(p) in optimized and p.requires_grad]
    if not entries:
        raise ValueError("r2sp.torch.DistributedOptimizer: the optimizer has no parameters "
                         "that require grad")
    return entries


def check_tensors(entries):
    """TypeError for a tensor that is not float32 or not on a CPU or CUDA device; ValueError
    for one that is not contiguous, or for tensors on different devices."""
    first = None
    for name, p in entries:
        if p.dtype != torch.float32:
            raise TypeError(f"r2sp.torch.DistributedOptimizer: parameter '{name}' is {p.dtype}; "
                            "R2SP trains float32 parameters (model.float())")
        if p.device.type not in ("cpu", "cuda"):
            raise TypeError(f"r2sp.torch.DistributedOptimizer: parameter '{name}' is on "
                            f"{p.device}; R2SP trains on CPU or CUDA devices")
        if not p.is_contiguous():
            raise ValueError(f"r2sp.torch.DistributedOptimizer: parameter '{name}' is not "
                             "contiguous; make it so before (p.data = p.data.contiguous())")
        if first is None:
            first = (name, p.device)
        elif p.device != first[1]:
            raise ValueError(f"r2sp.torch.DistributedOptimizer: parameter '{name}' is on "
                             f"{p.device} and '{first[0]}' on {first[1]}; put the model on "
                             "one device before wrapping its optimizer")


def loss_value(loss):
    """step()'s loss as a float (0 for None); ValueError or TypeError saying what it takes."""
    if loss is None:
        return 0.0
    if isinstance(loss, torch.Tensor):
        if loss.numel() != 1:
            raise ValueError("r2sp.torch.DistributedOptimizer.step: loss must be one value, "
                             f"not a tensor of shape {list(loss.shape)}")
        return float(loss.detach().item())
    if isinstance(loss, numbers.Real):
        return float(loss)
    raise TypeError("r2sp.torch.DistributedOptimizer.step: loss must be a number or a "
                    f"one-element tensor, not {type(loss).__name__}")


def samples_value(samples):
    """step()'s sample count as an int; ValueError unless a positive integer."""
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 1:
        raise ValueError("r2sp.torch.DistributedOptimizer.step: samples must be a positive "
                         f"integer, not {samples!r}")
    return int(samples)
