"""The state of an optimizer the servers apply (SGD, Adam, AdamW), in torch's format. The
moments and the update count live on the servers: state_dict() pulls them into torch's
state_dict (SGD's momentum_buffer; Adam's step, exp_avg, exp_avg_sq), each parameter group
also holding the job's step ("r2sp_steps"). An optimizer given that state (load_state_dict()
before DistributedOptimizer wraps it) hands it to the servers as the job starts: worker 0 sends
it with its parameters, and the job goes on from its step (the sampler too), as a DDP script
resumes from its checkpoint. A checkpoint torch wrote (no "r2sp_steps") resumes at its
optimizer's step count (Adam's step; SGD's momentum counts one step)."""

import torch

STEPS_KEY = "r2sp_steps"  # in each param group: the job's global-batch steps at state_dict()

# kind -> (first moment's key, second moment's key or None), as torch names them.
_MOMENTS = {"sgd": ("momentum_buffer", None), "adam": ("exp_avg", "exp_avg_sq"),
            "adamw": ("exp_avg", "exp_avg_sq")}


def _flat(kind_entries, optimizer, key, size):
    """The moment `key` of every entry's parameter in one float32 tensor of `size` (zeros where
    a parameter has none), or None when no parameter has it."""
    flat = None
    for e in kind_entries:
        moment = optimizer.state.get(e.param, {}).get(key)
        if moment is None:
            continue
        if flat is None:
            flat = torch.zeros(size, dtype=torch.float32)
        flat[e.offset:e.offset + e.count] = moment.detach().reshape(-1).to("cpu", torch.float32)
    return flat


def _step_count(optimizer, entries):
    """The fewest steps torch's state counts for the entries' parameters (Adam's "step"), or
    None where it counts none (SGD)."""
    counts = []
    for e in entries:
        step = optimizer.state.get(e.param, {}).get("step")
        if step is not None:
            counts.append(int(float(step)))
    return min(counts) if counts else None


def initial_state(kind, optimizer, entries, size):
    """(first, second, updates, steps) for _core.Worker.set_initial_state from `optimizer`'s
    loaded state (kind: server_optimizer.kind_of), the moments float32 numpy arrays of the
    model's `size` or None; None for an optimizer with no state."""
    saved_steps = optimizer.param_groups[0].get(STEPS_KEY)
    if not optimizer.state and saved_steps is None:
        return None
    first_key, second_key = _MOMENTS[kind]
    first = _flat(entries, optimizer, first_key, size)
    second = _flat(entries, optimizer, second_key, size) if second_key else None
    first, second = (None if m is None else m.numpy() for m in (first, second))
    counted = _step_count(optimizer, entries)
    if counted is None:  # SGD: a momentum buffer has had at least one step
        counted = 1 if first is not None else 0
    if saved_steps is None:  # a checkpoint torch wrote: its optimizer's count is the step
        return first, second, counted, float(counted)
    steps = float(saved_steps)
    updates = int(steps) if kind == "sgd" else min(counted, int(steps))
    return first, second, updates, steps


def state_dict(kind, optimizer, entries, pulled):
    """torch's state_dict of `optimizer` with the servers' state `pulled`
    (_core.Worker.pull_optimizer_state()), each moment on its parameter's device."""
    result = optimizer.state_dict()
    index = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            index[id(p)] = len(index)
    moments = {key: torch.frombuffer(bytearray(pulled[which]), dtype=torch.float32)
               for key, which in zip(_MOMENTS[kind], ("first", "second"))
               if key is not None and pulled[which] is not None}
    state = {}
    for e in entries:
        values = {key: flat[e.offset:e.offset + e.count].view(e.param.shape).to(e.param.device)
                  for key, flat in moments.items()}
        if kind == "sgd":
            state[index[id(e.param)]] = {"momentum_buffer": values.get("momentum_buffer")}
            continue
        zeros = torch.zeros_like(e.param, dtype=torch.float32)
        state[index[id(e.param)]] = {
            "step": torch.tensor(float(pulled["updates"])),
            "exp_avg": values.get("exp_avg", zeros),
            "exp_avg_sq": values.get("exp_avg_sq", zeros.clone())}
    result["state"] = state
    for group in result["param_groups"]:
        group[STEPS_KEY] = pulled["steps"]
    return result
