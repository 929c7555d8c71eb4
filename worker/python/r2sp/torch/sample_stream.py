"""The order in which a worker trains its samples, as the C++ worker's Batcher does (the same
seed policy: _core.epoch_order, models::OrderForEpoch): each pass over the samples is shuffled
by (seed, pass, data shard). With fixed batches a pass is an epoch: each epoch starts a fresh
pass over its planned samples. With tuned batches (hetero batching) the passes run on across
epochs, a new one starting when the samples run out, over the latest plan's samples."""

from .. import _core


class SampleStream:
    """Sample indices for one worker's steps, pass after pass.

    size: the training set's samples; data_world, data_shard: how the job shards it;
    seed: the shuffles'; continuous: passes run on across epochs (tuned batches)."""

    def __init__(self, size, data_world, data_shard, seed, continuous):
        self.size, self.world, self.shard = size, data_world, data_shard
        self.seed, self.continuous = seed, continuous
        self.epoch = None    # the epoch started last
        self.samples = None  # the latest epoch plan's samples (unordered)
        self.order = []      # the current pass
        self.passes = -1     # the current pass's number (its shuffle's epoch)
        self.position = 0

    def start_epoch(self, epoch, live_shards):
        """An epoch with these live shards begins (again: nothing changes, the epoch goes on
        where it was); ValueError if it leaves this shard no samples."""
        if epoch == self.epoch:
            return
        self.epoch = epoch
        samples = list(_core.epoch_samples(self.size, self.world, self.shard, list(live_shards)))
        if not samples:
            raise ValueError(f"r2sp.torch.DistributedSampler: a training set of {self.size} "
                             f"samples has none for data shard {self.shard} of {self.world}; "
                             "every worker needs samples")
        self.samples = samples
        if not self.continuous or self.passes < 0:
            self._new_pass(epoch)

    def take(self, count):
        """The next `count` indices (a new pass begins where the current one runs out)."""
        out = []
        while len(out) < count:
            if self.position == len(self.order):
                self._new_pass(self.passes + 1)
            n = min(count - len(out), len(self.order) - self.position)
            out += self.order[self.position:self.position + n]
            self.position += n
        return out

    def _new_pass(self, number):
        self.passes = number
        self.order = list(_core.epoch_order(self.samples, self.seed, number, self.shard))
        self.position = 0
