"""Gradients edited between backward() and step(): torch.nn.utils.clip_grad_norm_ and
clip_grad_value_, and GradScaler.unscale_, change the gradient in place. With --overlap the
pushes start during backward, so an edit after it would not reach the servers: a script that
edits passes DistributedOptimizer(..., edits_gradients=True), and the pushes wait for step().
guard() makes an edit the optimizer was not told of raise instead of being lost: it wraps those
functions (as torch.nn.utils and torch.nn.utils.clip_grad name them, and GradScaler's method)
to ask the optimizer first. A script that imported a function by name before the optimizer was
created keeps the unwrapped one.

GradScaler.step skips optimizer.step() when the gradient has an inf or NaN; wrapped too, it
then calls the DistributedOptimizer's skip_step(), so the job's step completes without an
update from this worker."""

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


def _completing_skips(function):
    """GradScaler.step that completes a step it skipped (skip_step) on an optimizer that has
    one (a DistributedOptimizer, which counts its steps in steps_submitted)."""
    @functools.wraps(function)
    def step(self, optimizer, *args, **kwargs):
        before = getattr(optimizer, "steps_submitted", None)
        result = function(self, optimizer, *args, **kwargs)
        if before is not None and optimizer.steps_submitted == before:
            optimizer.skip_step()
        return result
    step.r2sp_guarded = True
    return step


def _scalers():
    """GradScaler classes as torch defines them (torch.amp's, and torch.cuda.amp's in 1.13)."""
    found = []
    for module in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        scaler = getattr(_module(module), "GradScaler", None)
        if scaler is not None:
            found.append(scaler)
    return found


def install():
    """Wraps the edit functions and GradScaler.step (once; idempotent)."""
    for owner in (torch.nn.utils, torch.nn.utils.clip_grad):
        _wrap(owner, "clip_grad_norm_", _clip_parameters)
        _wrap(owner, "clip_grad_value_", _clip_parameters)
    for scaler in _scalers():
        _wrap(scaler, "unscale_", _scaler_parameters)
        if not getattr(scaler.step, "r2sp_guarded", False):
            scaler.step = _completing_skips(scaler.step)


def guard(check):
    """From now on the edit functions call check(name, parameters) first (which raises for an
    edit that would be lost); None: they call nothing. Replaces the check a previous call
    installed."""
    _checks[:] = [check] if check is not None else []
    install()


def _module(name):
    try:
        return __import__(name, fromlist=["GradScaler"])
    except ImportError:
        return None
