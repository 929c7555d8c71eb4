"""The examples' shared command line and training loop, the same under every backend
(backends.py): flags, the epoch/step loop with optional emulated accelerator pacing
(pacing.py), the test evaluation, the metrics lines of ddp and single (metrics_log.py), each
step's compute and interval under any backend (step_times.py), and the final JSON line
tools/bench/pytorch_client reads."""

import argparse
import json
import os
import re
import sys
import time

import torch

from . import backends
from . import builtin_init
from . import datasets
from . import ddp_hooks
from . import metrics_log
from . import pacing
from . import step_times

# Defaults where the script runs alone or under DDP. Under R2SP a flag not given on the
# script's command line is the job's (tools/launch --worker_flags, the worker's defaults).
DEFAULTS = {"epochs": 1, "batch_size": 64, "seed": 1, "max_steps": 0, "emulate_ms_per_sample": 0.0}
# The script flags that become the R2SP worker's flags when given.
WORKER_FLAGS = tuple(DEFAULTS)


def parser(description, default_lr):
    """The flags every example takes."""
    p = argparse.ArgumentParser(description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=backends.BACKENDS, default="r2sp",
                   help="r2sp (through the parameter servers; launch with tools/launch "
                        "--worker_cmd), ddp (torch.distributed, gloo; launch with torchrun) or "
                        "single (one process)")
    p.add_argument("--data_dir", default="", help="the data set's directory (default: "
                   "$R2SP_DATA_DIR, then the script's own default)")
    p.add_argument("--epochs", type=int, help=f"passes over the training set (default "
                   f"{DEFAULTS['epochs']}; r2sp: the job's)")
    p.add_argument("--batch_size", type=int, help=f"samples per step and process (default "
                   f"{DEFAULTS['batch_size']}; r2sp: the job's, tuned under hetero batching)")
    p.add_argument("--lr", type=float, default=default_lr,
                   help=f"SGD learning rate (default {default_lr})")
    p.add_argument("--momentum", type=float, default=0.9, help="SGD momentum")
    p.add_argument("--seed", type=int, help="initial parameters and shuffling (default 1; r2sp: "
                   "the job's)")
    p.add_argument("--init", choices=("torch", "builtin"), default="torch",
                   help="initial parameters: torch (the layers' own, from --seed), or builtin "
                        "(the C++ worker's for the same built-in model and --seed, "
                        "r2sp.builtin_parameters: the script then trains the numbers the "
                        "built-in model does)")
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda[:N] (cuda: the GPU LOCAL_RANK names modulo the GPUs, "
                        "else 0); the model and batches live there")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's)")
    p.add_argument("--max_steps", type=int, help="stop after this many steps (default 0: all "
                   "epochs; r2sp: the job's)")
    p.add_argument("--emulate_ms_per_sample", type=float,
                   help="EMULATION of an accelerator: each step's compute lasts at least this "
                        "many ms per sample (r2sp: the worker's flag; ddp/single: a sleep after "
                        "backward)")
    p.add_argument("--data_order", choices=("torch", "r2sp"),
                   help="ddp/single: which samples each process trains in each step: torch "
                        "(the default: DistributedSampler, the whole set reshuffled each epoch "
                        "and dealt out, the last batch short) or r2sp (an R2SP job's: each "
                        "process its fixed shard, every world-th sample, reshuffled each epoch, "
                        "as many full batches as the smallest shard holds; needs the r2sp "
                        "package), so that a DDP run trains the batches an R2SP job does "
                        "(r2sp: always R2SP's)")
    p.add_argument("--metrics", default="",
                   help="ddp/single: write the C++ worker's metrics lines (one per step, one per "
                        "evaluation) to this file, as tools/compare_modes reads them (r2sp: the "
                        "job writes them)")
    p.add_argument("--ddp_comm_hook", choices=("none", "fp16"), default="none",
                   help="ddp: none (fp32 all-reduce), or fp16: DDP's fp16 compression hook "
                        "(default_hooks.fp16_compress_hook: gradients travel in fp16)")
    p.add_argument("--ddp_timing", action="store_true",
                   help="ddp: time each step's all-reduce (a timing hook around DDP's own, "
                        "ddp_hooks.py) into the --metrics lines: allreduce_s, "
                        "allreduce_exposed_s (after the last gradient was ready), "
                        "allreduce_bytes; ignored by the other backends, so that one set of "
                        "script flags serves every configuration of a comparison")
    p.add_argument("--step_times", default="", metavar="PATH",
                   help="every backend: one JSON line per step, {\"step\": k (from 0), "
                        "\"compute_s\": its forward and backward as the loop times them, "
                        "\"interval_s\": from the previous step's end}, to PATH with {rank} "
                        "replaced by this process's rank (PATH.RANK when PATH has no {rank}); "
                        "interval_s - compute_s is the step's time outside the script's "
                        "compute (the backend's exchange, the loop's bookkeeping)")
    return p


def parse(p, argv=None):
    """Parsed flags, checked: defaults filled in for ddp/single, and `r2sp_settings`, the
    worker flags to pass to r2sp.torch.init (only those given). Bad values: p.error."""
    args = p.parse_args(argv)
    given = {k: getattr(args, k) for k in WORKER_FLAGS if getattr(args, k) is not None}
    for key in ("epochs", "batch_size"):
        if key in given and given[key] < 1:
            p.error(f"--{key} must be at least 1")
    if given.get("max_steps", 0) < 0 or given.get("emulate_ms_per_sample", 0) < 0:
        p.error("--max_steps and --emulate_ms_per_sample must not be negative")
    if args.lr <= 0 or args.threads < 0:
        p.error("--lr must be positive and --threads not negative")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", args.device):
        p.error(f"--device={args.device}: not cpu, cuda or cuda:N")
    if args.backend == "r2sp" and args.metrics:
        p.error("--metrics: under r2sp the job writes the metrics (tools/launch's run directory)")
    if args.backend == "r2sp" and args.data_order == "torch":
        p.error("--data_order=torch: under --backend=r2sp the job's sampler decides (r2sp)")
    if args.data_order is None:
        args.data_order = "r2sp" if args.backend == "r2sp" else "torch"
    if args.backend != "ddp" and args.ddp_comm_hook != "none":
        p.error(f"--ddp_comm_hook={args.ddp_comm_hook} needs --backend=ddp")
    args.r2sp_settings = given
    if args.backend != "r2sp":
        for key, value in DEFAULTS.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    return args


def device_for(name, environ=os.environ, cuda_devices=None):
    """The torch.device --device names; "cuda" is LOCAL_RANK's GPU, modulo the GPUs torch sees
    (cuda_devices; default torch.cuda.device_count()), so that more workers than GPUs on one
    machine share them as C++ workers do. SetupError when torch sees no CUDA device or not N."""
    if name == "cpu":
        return torch.device("cpu")
    count = cuda_devices
    if count is None:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise backends.SetupError(f"--device={name}: torch sees no CUDA device "
                                  "(torch.cuda.is_available() is False)")
    if name == "cuda":
        return torch.device(f"cuda:{int(environ.get('LOCAL_RANK', '0') or 0) % count}")
    if int(name.split(":")[1]) >= count:
        raise backends.SetupError(f"--device={name}: torch sees {count} CUDA device"
                                  f"{'s' if count > 1 else ''} (cuda:0 to cuda:{count - 1})")
    return torch.device(name)


def evaluate(model, test_set, batch_size=1000):
    """(accuracy, mean cross-entropy) of `model` on the whole test set, on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    correct, loss_sum = 0, 0.0
    loader = torch.utils.data.DataLoader(test_set, batch_size=batch_size)
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            logits = model(x)
            loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
            correct += int((logits.argmax(1) == y).sum())
    model.train()
    return correct / len(test_set), loss_sum / len(test_set)


# The steady rate leaves out this many first steps (start-up: CUDA's and cuDNN's first calls,
# the first parameters): a short run's rate over all its steps measures mostly them.
STEADY_AFTER_STEPS = 5


class Stats:
    """What this process trained and for how long: each epoch from its start to the end of its
    last step (evaluations and the final barrier left out); and the same over the steps after
    the first STEADY_AFTER_STEPS, each from the previous step's end (or its epoch's start)."""

    def __init__(self):
        self.steps = self.samples = 0
        self.seconds = 0.0
        self.steady_samples = 0
        self.steady_seconds = 0.0
        self.test_accuracy = None
        # Wall-clock (Unix) times of the first step's start and the last step's end, so that a
        # job's rate can be taken over the span in which any of its processes trained.
        self.started = self.ended = None


def train_epoch(backend, model, optimizer, loader, pacer, args, stats, log, epoch, times):
    """One epoch's steps, each written to `log` (metrics_log.MetricsLog) and `times`
    (step_times.StepTimes); returns how many it took (0: the job is over) and the mean loss."""
    steps, loss_sum = 0, 0.0
    start = end = time.perf_counter()
    previous_end = start
    if stats.started is None:
        stats.started = time.time()
    for x, y in loader:
        if not backend.owns_step_count and 0 < args.max_steps <= stats.steps:
            break
        pacer.begin(len(y))
        step_start = time.perf_counter()
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        pacer.holds = not x.is_cuda
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if not backend.paces_itself:
            if x.is_cuda:
                torch.cuda.synchronize(x.device)  # the compute, not its launch, is paced
            pacer.after_backward()
        value = loss.item()
        computed = time.perf_counter() - step_start
        backend.step(optimizer, value, len(y))
        steps += 1
        loss_sum += value
        stats.steps += 1
        stats.samples += len(y)
        end = time.perf_counter()
        stats.ended = time.time()
        if stats.steps > STEADY_AFTER_STEPS:
            stats.steady_samples += len(y)
            stats.steady_seconds += end - previous_end
        times.step(stats.steps - 1, computed, end - previous_end)
        previous_end = end
        log.step(epoch, len(y), computed, value)
    stats.seconds += end - start
    return steps, loss_sum / max(steps, 1)


def train(backend, model, optimizer, train_set, test_set, args):
    """The loop every backend runs: epochs of steps, the evaluating process's test accuracy
    after each epoch (reported to the job under R2SP; ddp/single: to --metrics). Returns the
    Stats."""
    model, optimizer = backend.wrap(model, optimizer)
    timer = None
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        timer = ddp_hooks.register(model, args.ddp_comm_hook, args.ddp_timing)
    batches = backend.batches(train_set)
    loader = torch.utils.data.DataLoader(train_set, batch_sampler=batches)
    evaluated = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) \
        else model
    pacer, stats = pacing.Pacer(args.emulate_ms_per_sample), Stats()
    if not backend.paces_itself:
        pacer.install(model)
    log = metrics_log.MetricsLog(args.metrics, backend.rank, timer)
    times = step_times.StepTimes(args.step_times, backend.rank)  # the rank known once joined
    log.start()
    for epoch in backend.epochs():
        batches.set_epoch(epoch)
        steps, train_loss = train_epoch(backend, model, optimizer, loader, pacer, args, stats,
                                        log, epoch, times)
        if steps == 0:
            break
        if backend.evaluates():
            with backend.evaluating():  # the centre in easgd and eawild
                accuracy, test_loss = evaluate(evaluated, test_set)
            stats.test_accuracy = accuracy
            backend.report_eval(accuracy, test_loss)
            log.evaluation(epoch + 1, stats.steps, accuracy, test_loss, train_loss)
            say(f"epoch {epoch + 1}: test accuracy {accuracy:.4f}, test loss {test_loss:.4f}, "
                f"train loss {train_loss:.4f} ({stats.steps} steps)")
        if not backend.owns_step_count and 0 < args.max_steps <= stats.steps:
            break
    log.close()
    times.close()
    backend.finish()
    return stats


def say(line):
    """Prints `line` in one write: processes sharing a pipe (ddp_launch.py) cannot interleave
    their lines."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def result_line(stats, backend):
    """The final JSON line: this process's training samples/s, the same after its first
    STEADY_AFTER_STEPS steps (null without later steps), the test accuracy (null on a process
    that does not evaluate), the training seconds, and when its first step started and its last
    ended (Unix seconds)."""
    return json.dumps({
        "samples_per_s": round(stats.samples / stats.seconds, 3) if stats.seconds > 0 else 0.0,
        "steady_samples_per_s": round(stats.steady_samples / stats.steady_seconds, 3)
        if stats.steady_seconds > 0 else None,
        "test_accuracy": stats.test_accuracy,
        "seconds": round(stats.seconds, 3),
        "backend": backend.name, "rank": backend.rank, "world": backend.world,
        "steps": stats.steps, "samples": stats.samples,
        "started": stats.started, "ended": stats.ended,
    })


def exit_status(error, backend):
    """2 for bad input or setup (a data file, the backend's environment, an R2SP flag), 3 when
    the R2SP job lost this worker (as the worker binary exits), None for anything else."""
    if isinstance(error, (datasets.DataError, backends.SetupError)):
        return 2
    if backend is not None and backend.errors and isinstance(error, backend.errors):
        return 3 if type(error).__name__ == "JobLost" else 2
    return None


def run(description, default_lr, default_data_dir, build_model, load_data, argv=None,
        builtin=None):
    """An example's main: flags, data, backend, model (build_model(seed)), SGD, training,
    the JSON line. `builtin`: (name, (c, h, w), classes) of the built-in model the script's
    model is, for --init=builtin. Returns the exit status: 0, 2 for bad input or setup, 3 when the job lost
    this worker, 130 on Ctrl-C."""
    args = parse(parser(description, default_lr), argv)
    backend = None
    try:
        if args.threads:
            torch.set_num_threads(args.threads)
        train_set, test_set = load_data(datasets.data_dir_for(args.data_dir, default_data_dir))
        args.device = device_for(args.device)
        backend = backends.make(args)
        torch.manual_seed(args.seed if args.seed is not None else 1)
        model = build_model()
        if args.init == "builtin":
            builtin_init.load(model, builtin, args.seed if args.seed is not None else 1)
        model = model.to(args.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
        stats = train(backend, model, optimizer, train_set, test_set, args)
    except KeyboardInterrupt:
        if backend is not None:
            backend.abort()
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001  (only the kinds below; the rest propagate)
        status = exit_status(e, backend)
        if status is None:
            raise
        print(f"error: {e}", file=sys.stderr)
        return status
    say(result_line(stats, backend))
    return 0
