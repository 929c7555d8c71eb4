"""Gradients edited between backward() and step(): torch.nn.utils.clip_grad_norm_ and
clip_grad_value_, and GradScaler.unscale_, change the gradient in place. With --overlap the
pushes start during backward, so an edit after it would not reach the servers: a script that
edits passes DistributedOptimizer(..., edits_gradients=True), and the pushes wait for step().
guard() makes an edit the optimizer was not told of raise instead of being lost: it wraps those
functions (as torch.nn.utils and torch.nn.utils.clip_grad name them, and GradScaler's method)
to ask the optimizer first. A script that imported a function by name before the optimizer was
created keeps the unwrapped one."""

import functools

import torch

_checks = []  # the one DistributedOptimizer's check, once guard() ran


def _guarded(function, parameters_of):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        args = list(args)
        parameters = parameters_of(args, kwargs)
        for check in _checks:
            check(function.__name__, parameters)
        return function(*args, **kwargs)
    wrapper.r2sp_guarded = True
    return wrapper


def _clip_parameters(args, kwargs):
    """The clip functions' parameters (a tensor or an iterable, made a list so it can be read
    twice), put back where they were passed."""
    key = "parameters" if "parameters" in kwargs else 0
    holder = kwargs if key == "parameters" else args
    value = holder[key]
    if isinstance(value, torch.Tensor):
        return [value]
    holder[key] = list(value)
    return holder[key]


def _scaler_parameters(args, kwargs):
    """GradScaler.unscale_(self, optimizer): the optimizer's parameters."""
    optimizer = kwargs.get("optimizer", args[1] if len(args) > 1 else None)
    if optimizer is None:
        return []
    return [p for group in optimizer.param_groups for p in group["params"]]


def _wrap(owner, name, parameters_of):
    function = getattr(owner, name, None)
    if function is not None and not getattr(function, "r2sp_guarded", False):
        setattr(owner, name, _guarded(function, parameters_of))


def guard(check):
    """From now on the edit functions call check(name, parameters) first (which raises for an
    edit that would be lost). Replaces the check a previous call installed."""
    _checks[:] = [check]
    for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
        _wrap(owner, "clip_grad_norm_", _clip_parameters)
        _wrap(owner, "clip_grad_value_", _clip_parameters)
    for module in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        scaler = getattr(_module(module), "GradScaler", None)
        if scaler is not None:
            _wrap(scaler, "unscale_", _scaler_parameters)


def _module(name):
    try:
        return __import__(name, fromlist=["GradScaler"])
    except ImportError:
        return None
