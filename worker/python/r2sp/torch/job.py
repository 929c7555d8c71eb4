"""r2sp.torch's functions about the job: init() (settings), this worker's place in the job
(rank, size, local_rank, mode, first_step), the batch of the next step, evaluation reports and finish()."""

import math
import numbers
import os

from . import settings as settings_module
from .state import STATE


def init(flags=None, **settings):
    """Reads the job's settings; call once, before DistributedOptimizer (which calls it if the
    script did not). Connects to nothing.

    The scheduler's address comes from R2SP_SCHEDULER (tools/launch sets it), else torchrun's
    MASTER_ADDR and MASTER_PORT (tcp://MASTER_ADDR:MASTER_PORT); the worker's flags from
    R2SP_WORKER_FLAGS (as tools/launch gives them), then `flags` (a list such as
    ['--epochs=2']), then keyword settings (batch_size=64 -> --batch_size=64, overlap=True ->
    --overlap, overlap=False -> --nooverlap); a later value replaces an earlier one. The flags
    are the C++ worker's (README.md, "Flags"); model and data flags (--model, --data,
    --data_dir, --device, --threads, --gpu, --augment) are accepted and ignored: the script owns
    its model and data. LOCAL_RANK gives local_rank(). RANK (torchrun's; tools/launch sets it)
    is the rank the worker asks the scheduler for (the worker flag --rank, which a later flag or
    setting replaces), so that rank() and, with WORLD_SIZE, size() are known from init() on.

    ValueError or TypeError, saying what to set, for a missing scheduler address or a malformed
    flag, setting or variable (RANK and WORLD_SIZE: integers, 0 <= RANK < WORLD_SIZE);
    RuntimeError once the job is joined. An unknown flag or a bad value is refused by the worker
    when DistributedOptimizer is created (r2sp.R2SPError), a rank the job does not have or
    another worker asked for by the scheduler then."""
    if STATE.worker is not None:
        raise RuntimeError("r2sp.torch.init: the job is already joined (DistributedOptimizer "
                           "was created); call init() before it")
    STATE.settings = settings_module.resolve(os.environ, flags, settings)


def rank():
    """This worker's rank in the job (0-based). Before the job is joined, the rank init() read
    from RANK (or --rank): the scheduler gives a worker the rank it asked for when the job
    starts, so per-rank seeding and rank-0-only work can come before DistributedOptimizer. Once
    joined, the scheduler's: the same, except for a worker joining a running job (a replacement
    of a lost one), which takes the next rank whatever it asked for. RuntimeError before
    joining without RANK."""
    if STATE.worker is not None:
        return STATE.worker.rank
    return _before_joining("rank()", "RANK", lambda s: s.rank)


def size():
    """The number of workers in the job. Before the job is joined, WORLD_SIZE as init() read it;
    once joined, the scheduler's count. RuntimeError before joining without WORLD_SIZE."""
    if STATE.worker is not None:
        return STATE.worker.workers
    return _before_joining("size()", "WORLD_SIZE", lambda s: s.world_size)


def local_rank():
    """This worker's index among the workers on its host (LOCAL_RANK; 0 when unset), e.g. for
    torch.cuda.set_device(local_rank()). Known after init()."""
    if STATE.settings is None:
        raise RuntimeError("r2sp.torch.local_rank(): call r2sp.torch.init() first")
    return STATE.settings.local_rank


def seed():
    """The job's --seed (1 unless given): what DistributedSampler shuffles with, and what a
    script seeds its model's initial parameters with, so that its runs under R2SP, DDP and
    alone start alike. Known after init()."""
    if STATE.settings is None:
        raise RuntimeError("r2sp.torch.seed(): call r2sp.torch.init() first")
    return STATE.settings.seed


def mode():
    """The job's consistency mode: 'bsp', 'ssp', 'asp', 'r2sp', 'easgd' or 'eawild'
    (docs/MODES.md)."""
    return STATE.require_worker("mode()").mode


def first_step():
    """The job's step this worker's training starts at: 0 in a new job; where the job goes on
    when it resumed (from the servers' checkpoints, tools/launch --resume, or from an optimizer
    state loaded before wrapping) or when this worker joined it running (a replacement). The
    DistributedSampler starts there; bring the script's own step counters and learning-rate
    schedule there too (for _ in range(first_step()): schedule.step()). Known once
    DistributedOptimizer has joined."""
    return STATE.require_worker("first_step()").first_step


def batch_size():
    """The batch of the step being computed (the scheduler tunes it under hetero batching);
    before the first step, the job's initial batch."""
    worker = STATE.require_worker("batch_size()")
    step = STATE.step or STATE.last_step
    return step.batch if step is not None else worker.batch_size


def evaluates():
    """Whether this worker evaluates the model now (the lowest-ranked live worker: worker 0
    until it dies, then the next): its report_eval() reaches the job's metrics, timeline and
    summary.json. Ask before each evaluation; the answer can change during the job."""
    return STATE.require_worker("evaluates()").evaluates


def report_eval(accuracy, loss=0.0):
    """Reports a test evaluation of the model as it is now: `accuracy` a fraction in [0, 1],
    `loss` the mean test loss. Call it after an epoch's last step (the job waits for the
    evaluating worker's report then). Returns True if it reached the job's metrics and
    summary.json (on the evaluating worker), else False."""
    worker = STATE.require_worker("report_eval()")
    accuracy = _number("accuracy", accuracy)
    loss = _number("loss", loss)
    if not 0.0 <= accuracy <= 1.0:
        raise ValueError(f"r2sp.torch.report_eval: accuracy is a fraction in [0, 1], not "
                         f"{accuracy} (a percentage? divide it by 100)")
    return bool(worker.report_eval(accuracy, loss))


def finish():
    """Leaves the job after training: the final barrier, the final pull into the model's
    parameters, then FINISH. Returns the worker's totals ({'steps', 'samples', 'epochs',
    'seconds', 'compute_seconds', 'push_seconds', 'pull_seconds', 'wait_seconds',
    'overlapped_pulls', 'test_accuracy', 'final_batch', and the traffic: 'bytes_pushed',
    'bytes_pulled', 'pushes', 'pulls'}); later calls return the same. Runs at
    exit if the script does not call it (and after an unhandled exception the worker aborts
    instead)."""
    return STATE.finish()


def _before_joining(what, variable, known):
    """What the settings know of `what` before the job is joined; RuntimeError if nothing."""
    if STATE.settings is not None and known(STATE.settings) is not None:
        return known(STATE.settings)
    why = "init() has not run" if STATE.settings is None else f"init() found no {variable}"
    raise RuntimeError(f"r2sp.torch.{what}: no job joined yet and {why}; set {variable} "
                       "(torchrun and tools/launch do) before r2sp.torch.init(), or create "
                       "r2sp.torch.DistributedOptimizer(optimizer, model.named_parameters()) "
                       "first (it joins the job)")


def _number(name, value):
    if hasattr(value, "item") and callable(value.item):  # a one-element tensor
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or math.isnan(value):
        raise TypeError(f"r2sp.torch.report_eval: {name} must be a number, not {value!r}")
    return float(value)
