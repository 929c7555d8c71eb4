"""r2sp.torch.DistributedSampler: the batch sampler that gives each step of this worker's
training loop its sample indices, following the scheduler's epoch plans (survivors take over a
dead worker's samples from the next epoch) and the batch sizes it tunes."""

from .. import _core
from .sample_stream import SampleStream
from .state import STATE


class DistributedSampler:
    """A batch sampler: DataLoader(dataset, batch_sampler=DistributedSampler(dataset)), with or
    without DataLoader workers (num_workers, prefetch_factor, persistent_workers).

    dataset_or_size: the training set (its len()) or its size; the whole set: the job
      shards it.
    seed: the shuffles' seed; default the job's --seed. The order is the C++ worker's
      (sample_stream.py): the same seed gives Python and C++ workers the same batches.

    Each iteration is one epoch of the job: every batch first waits for the job's next step
    (the scheduler's mode and slots decide when), then yields that step's batch of indices from
    this worker's samples of the epoch, shuffled for the epoch (when the scheduler tunes batch
    sizes, the shuffled passes over the samples run on across epochs, a new one starting where
    one runs out); it ends after the epoch's last step, or when training is over. The first iteration
    starts the training loop (the DistributedOptimizer must exist). Call optimizer.step() once
    per batch. len() is the epoch's steps (known once its first step is).

    DataLoader workers ask for batches ahead of training (num_workers * prefetch_factor of
    them): a batch asked for while the step before is still being computed is yielded at once,
    without waiting for the job's step, which optimizer.step() then takes. Its size is the
    latest the scheduler gave (under hetero batching a new size reaches the batches up to that
    many steps late), and step() counts the samples it had. Each epoch's first batch still
    waits for the epoch's first step, whose plan says which samples the epoch trains (a dead
    worker's included)."""

    def __init__(self, dataset_or_size, seed=None):
        if isinstance(dataset_or_size, int) and not isinstance(dataset_or_size, bool):
            size = dataset_or_size
        elif hasattr(dataset_or_size, "__len__"):
            size = len(dataset_or_size)
        else:
            raise TypeError("r2sp.torch.DistributedSampler: pass the training set (with a "
                            "len()) or its size, not "
                            f"{type(dataset_or_size).__name__}")
        if size < 1:
            raise ValueError(f"r2sp.torch.DistributedSampler: the training set is empty ({size} "
                             "samples)")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"r2sp.torch.DistributedSampler: seed must be an integer, not "
                            f"{seed!r}")
        self.size = size
        self.seed = seed
        self.epoch = None      # what set_epoch() was told
        self._pending = None   # a step taken from the job that belongs to the next iteration
        self._steps = None     # the current or last epoch's steps
        self._stream = None    # SampleStream, from the first iteration on

    def set_epoch(self, epoch):
        """Accepted for torch's DistributedSampler compatibility; the epochs are the
        scheduler's (each iteration of this sampler is the job's next epoch)."""
        self.epoch = epoch

    def __len__(self):
        if self._steps is not None:
            return self._steps
        worker = STATE.require_worker("DistributedSampler.__len__")
        live = list(range(worker.data_world))
        fewest = _core.fewest_epoch_samples(self.size, worker.data_world, live)
        return max(1, fewest // worker.batch_size)

    def __iter__(self):
        worker = STATE.require_worker("DistributedSampler")
        STATE.begin(self.size, "DistributedSampler")
        step = self._take(worker)
        if step is None:
            return
        if self._stream is None:
            seed = STATE.settings.seed if self.seed is None else self.seed
            self._stream = SampleStream(self.size, worker.data_world, worker.data_shard, seed,
                                        continuous=worker.hetero_batching)
        self._stream.start_epoch(step.epoch, step.live_shards)
        epoch = step.epoch
        self._steps = step.epoch_steps
        STATE.batches.clear()
        remaining, batch = step.epoch_steps - step.index, step.batch
        while True:
            indices = self._stream.take(batch)
            STATE.batches.append(len(indices))
            yield indices
            remaining -= 1
            if remaining <= 0:
                return  # not asking for the next step: the job may want an evaluation first
            if STATE.step is not None:  # asked ahead (DataLoader workers): step() takes it
                batch = STATE.last_step.batch
                continue
            step = STATE.next_step("DistributedSampler")
            if step is None:
                return
            if step.epoch != epoch:
                self._pending = step
                return
            batch = step.batch

    def _take(self, worker):
        """The first step of this iteration: one put aside by the last, else the next."""
        if self._pending is not None and STATE.step is self._pending:
            step, self._pending = self._pending, None
            return step
        self._pending = None
        return STATE.next_step("DistributedSampler")


def epoch_batches(size, world, rank, batch_size, epoch, seed):
    """The batches (lists of sample indices) worker `rank` of `world` trains in `epoch` (from
    0) of a job with fixed batches of `batch_size` and every worker live: what
    DistributedSampler gives it there, its shard (every world-th sample from `rank`) shuffled
    for the epoch from `seed`, in the job's steps of the epoch (the smallest shard's samples
    over batch_size, at least one). Needs no job: it runs the same data order elsewhere (a DDP
    or single-process run compared with an R2SP job). ValueError or TypeError for bad values."""
    values = {"size": size, "world": world, "rank": rank, "batch_size": batch_size,
              "epoch": epoch, "seed": seed}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"r2sp.torch.epoch_batches: {name} must be an integer, not "
                            f"{value!r}")
    if size < 1 or world < 1 or batch_size < 1 or epoch < 0 or seed < 0:
        raise ValueError(f"r2sp.torch.epoch_batches: needs size, world and batch_size of at "
                         f"least 1 and epoch and seed not negative (size={size}, world={world}, "
                         f"batch_size={batch_size}, epoch={epoch}, seed={seed})")
    if not 0 <= rank < world:
        raise ValueError(f"r2sp.torch.epoch_batches: rank {rank} is not one of 0..{world - 1}")
    if rank >= size:
        raise ValueError(f"r2sp.torch.epoch_batches: a training set of {size} samples has none "
                         f"for shard {rank} of {world}")
    live = list(range(world))
    stream = SampleStream(size, world, rank, seed, continuous=False)
    stream.start_epoch(epoch, live)
    steps = max(1, _core.fewest_epoch_samples(size, world, live) // batch_size)
    return [stream.take(batch_size) for _ in range(steps)]
