"""A Python worker for server_optimizer_job_test.py: the script's optimizer applied by the
servers. Three tensors (w 8x4, b 16, n 48; everyone starts from known values), two parameter
groups (w: weight decay 0.1 at the base rate; b, n: no weight decay at half of it), a
LambdaLR scheduler changing the rate every step, and each step's gradient the known one of
(rank, step) from known_gradient() (the loss sum(p * g), so backward gives g exactly).
$OPTIMIZER names the optimizer (sgd_nesterov, sgd_dampening, adam, adamw, which the servers
apply; rmsprop and adam_amsgrad, which each worker applies to the averaged gradient).
$ACCUMULATE=N (default 1) computes each step in N backward passes of loss / N, all but the
last inside no_sync(); $CLIP=C (default none) clips the gradient's norm to C before step()
(announced: edits_gradients=True); $SKIP=R:S makes worker R (* for every worker) skip step S
(optimizer.skip_step(), as a GradScaler skips a step with an inf or NaN). With $CHECKPOINT:
$SAVE_AT=S makes worker 0 save, after S steps, the parameters, optimizer.state_dict(), the
schedule's state and S there, and then every worker stops as if killed (exit status 9); with
$RESUME=1 every worker starts from that checkpoint instead (the optimizer's state loaded before
wrapping it, as a script resumes), and checks that r2sp.torch.first_step() is the saved step.
$RESUME=servers: the job resumed from the servers' checkpoints; the step and the schedule's
position come from first_step(). $PROGRESS: a file each step's count is written to, after
$STEP_SLEEP seconds (default 0) a step. Writes the final parameters (raw fp32 in w, b, n order) to
argv[1]."""

import contextlib
import os
import sys
import time

import torch

import r2sp.torch as r2t

SHAPES = {"w": (8, 4), "b": (16,), "n": (48,)}  # multiples of 16: torch's vectorised kernels
BASE_LR = {"sgd_nesterov": 0.1, "sgd_dampening": 0.1, "adam": 0.01, "adamw": 0.01,
           "rmsprop": 0.01, "adam_amsgrad": 0.01}


def initial():
    """{name: tensor}: the known starting values."""
    values, start = {}, 0
    for name, shape in SHAPES.items():
        count = 1
        for d in shape:
            count *= d
        values[name] = (torch.arange(start, start + count, dtype=torch.float32) % 7 - 3) / 8
        values[name] = values[name].reshape(shape)
        start += count
    return values


def known_gradient(name, rank, step):
    """A gradient of varied signs and magnitudes, the same wherever it is computed."""
    generator = torch.Generator().manual_seed(1000 * step + 10 * rank + len(name))
    return torch.randn(SHAPES[name], generator=generator) * (1 + rank)


def make_optimizer(kind, params):
    """The optimizer over {name: parameter}."""
    lr = BASE_LR[kind]
    groups = [{"params": [params["w"]], "weight_decay": 0.1},
              {"params": [params["b"], params["n"]], "weight_decay": 0.0, "lr": lr / 2}]
    if kind == "sgd_nesterov":
        optimizer = torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)
    elif kind == "sgd_dampening":
        optimizer = torch.optim.SGD(groups, lr=lr, momentum=0.8, dampening=0.3)
    elif kind == "adam":
        optimizer = torch.optim.Adam(groups, lr=lr, betas=(0.8, 0.99), eps=1e-6)
    elif kind == "adam_amsgrad":
        optimizer = torch.optim.Adam(groups, lr=lr, amsgrad=True)
    elif kind == "rmsprop":
        optimizer = torch.optim.RMSprop(groups, lr=lr, momentum=0.5, centered=True)
    else:
        optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))
    return optimizer


def make_schedule(optimizer):
    """A rate that changes every step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))


def start(params, clip):
    """The wrapped optimizer, its schedule and the first step, from $CHECKPOINT with
    $RESUME (the parameters, the optimizer's and schedule's states, the step)."""
    optimizer = make_optimizer(os.environ["OPTIMIZER"], params)
    schedule = make_schedule(optimizer)
    step = 0
    if os.environ.get("RESUME") == "1":
        saved = torch.load(os.environ["CHECKPOINT"])
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(saved["params"][name])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        step = saved["step"]
    wrapped = r2t.DistributedOptimizer(optimizer, list(params.items()), edits_gradients=clip > 0)
    if os.environ.get("RESUME") == "servers":
        step = r2t.first_step()
        for _ in range(step):
            schedule.step()
    elif r2t.first_step() != step:
        sys.exit(f"first_step() is {r2t.first_step()}, the checkpoint's step {step}")
    return wrapped, schedule, step


def save_and_stop(params, optimizer, schedule, step):
    """Worker 0 saves the checkpoint; every worker then stops as if killed."""
    state = optimizer.state_dict()  # every worker may ask; worker 0 saves it
    if r2t.rank() == 0:
        torch.save({"params": {n: p.detach().clone() for n, p in params.items()},
                    "optimizer": state, "schedule": schedule.state_dict(), "step": step},
                   os.environ["CHECKPOINT"])
    os._exit(9)


def report_progress(step):
    """Sleeps $STEP_SLEEP, then writes `step` to $PROGRESS (if set)."""
    time.sleep(float(os.environ.get("STEP_SLEEP", "0")))
    if os.environ.get("PROGRESS"):
        with open(os.environ["PROGRESS"], "w") as f:
            f.write(str(step))


def main():
    r2t.init()
    params = {name: torch.nn.Parameter(value.clone()) for name, value in initial().items()}
    accumulate = int(os.environ.get("ACCUMULATE", "1"))
    skip_rank, skip_step = os.environ.get("SKIP", "-1:-1").split(":")
    clip = float(os.environ.get("CLIP", "0"))
    save_at = int(os.environ.get("SAVE_AT", "-1"))
    optimizer, schedule, step = start(params, clip)
    sampler = r2t.DistributedSampler(int(os.environ.get("KNOWN_SAMPLES", "24")))
    epoch_steps = None
    while epoch_steps != 0:  # each epoch, until the job's are done
        epoch_steps = 0
        for _ in sampler:
            optimizer.zero_grad()
            for micro in range(accumulate):
                last = micro == accumulate - 1
                with contextlib.nullcontext() if last else optimizer.no_sync():
                    loss = sum((p * known_gradient(name, r2t.rank(), step)).sum()
                               for name, p in params.items()) / accumulate
                    loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(params.values(), clip)
            if step == int(skip_step) and skip_rank in ("*", str(r2t.rank())):
                optimizer.skip_step(loss=loss)
            else:
                optimizer.step(loss=loss)
            schedule.step()
            step += 1
            epoch_steps += 1
            report_progress(step)
            if step == save_at:
                save_and_stop(params, optimizer, schedule, step)
    r2t.finish()
    with open(sys.argv[1], "wb") as f:
        f.write(torch.cat([p.detach().reshape(-1) for p in params.values()]).numpy().tobytes())


if __name__ == "__main__":
    main()
