"""How the examples distribute one training script: --backend=r2sp (through the parameter
servers, with r2sp.torch), ddp (torch.distributed over gloo, DistributedDataParallel) or single
(one process). Each backend wraps the model and optimizer, gives the batches of each epoch,
takes each step, and says who evaluates; the training loop (training.py) is the same for all
three. The R2SP class holds every line an R2SP user writes."""

import contextlib
import itertools
import os

import torch

BACKENDS = ("r2sp", "ddp", "single")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class SetupError(RuntimeError):
    """The backend cannot start as asked; the message says what to do."""


class EpochBatches:
    """Batches of `batch_size` indices of a permutation of range(size), reshuffled each epoch
    from seed + epoch (set_epoch), as torch's samplers do; the last batch may be short."""

    def __init__(self, indices, batch_size, seed):
        self.indices, self.batch_size, self.seed, self.epoch = indices, batch_size, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return (len(self.indices) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = [self.indices[i] for i in torch.randperm(len(self.indices), generator=g).tolist()]
        for start in range(0, len(order), self.batch_size):
            yield order[start:start + self.batch_size]


def import_r2sp_torch(what, how=""):
    """The r2sp.torch module; SetupError saying that `what` needs it, how to provide it
    (`how`, then the package's path and build) when it cannot be imported."""
    try:
        import r2sp.torch  # (tools/launch puts it on PYTHONPATH, for --ddp_cmd as well)
    except ImportError as e:
        raise SetupError(f"{what} needs the r2sp package ({e}): {how}put <repo>/worker/python "
                         "on PYTHONPATH after bazel build //worker/python:_core.so") from None
    return r2sp.torch


class R2SPOrderBatches:
    """--data_order=r2sp: the batches an R2SP job with fixed batches gives worker `rank` of
    `world` in each epoch (set_epoch), every worker live (r2sp.torch.epoch_batches): its fixed
    shard, every world-th sample, reshuffled each epoch from the seed as the C++ worker does,
    in as many full batches as the smallest shard holds. So a DDP or single-process run trains
    the batches an R2SP job does, and a comparison differs in nothing else."""

    def __init__(self, size, world, rank, batch_size, seed):
        order = import_r2sp_torch("--data_order=r2sp").epoch_batches
        self.order = lambda epoch: order(size, world, rank, batch_size, epoch, seed)
        try:  # the values checked before training (a negative --seed, a shard without samples)
            self.epoch, self.batches = 0, self.order(0)
        except (ValueError, TypeError) as e:
            raise SetupError(f"--data_order=r2sp: {e}") from None

    def set_epoch(self, epoch):
        if epoch != self.epoch:
            self.epoch, self.batches = epoch, self.order(epoch)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


class Single:
    """One process, no distribution: the reference the other two are compared with."""
    name = "single"
    errors = ()  # the backend's own exceptions that mean bad input or a lost job
    paces_itself = False  # the loop sleeps for --emulate_ms_per_sample
    owns_step_count = False  # the loop stops after --epochs and --max_steps

    def __init__(self, args):
        self.args = args
        self.rank, self.world = 0, 1

    def evaluates(self):
        return self.rank == 0

    def wrap(self, model, optimizer):
        return model, optimizer

    def batches(self, train_set):
        """The batch sampler of --data_order: R2SP's order, else torch's (_torch_batches)."""
        if self.args.data_order == "r2sp":
            return R2SPOrderBatches(len(train_set), self.world, self.rank, self.args.batch_size,
                                    self.args.seed)
        return self._torch_batches(train_set)

    def _torch_batches(self, train_set):
        return EpochBatches(list(range(len(train_set))), self.args.batch_size, self.args.seed)

    def epochs(self):
        return range(self.args.epochs)

    def step(self, optimizer, loss, samples):
        optimizer.step()

    def evaluating(self):
        """A context within which the model holds the parameters an evaluation should see."""
        return contextlib.nullcontext()

    def report_eval(self, accuracy, loss):
        pass

    def finish(self):
        return {}

    def abort(self):
        pass


class DDP(Single):
    """torch.distributed (gloo) with DistributedDataParallel and torch's DistributedSampler,
    started by torchrun or anything else that sets RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT (tools/bench/pytorch_client sets them itself)."""
    name = "ddp"

    def __init__(self, args):
        super().__init__(args)
        missing = [v for v in TORCHRUN_VARS if v not in os.environ]
        if missing:
            raise SetupError(f"--backend=ddp needs torchrun's environment ({', '.join(missing)} "
                             "not set): run it as torchrun --nproc_per_node=N SCRIPT "
                             "--backend=ddp ...")
        torch.distributed.init_process_group("gloo")
        self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()

    def wrap(self, model, optimizer):
        # DDP broadcasts rank 0's parameters and buffers, then all-reduces (averages) the
        # gradients in buckets while backward runs.
        device = torch.device(self.args.device)
        ddp = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
        return ddp, optimizer

    def _torch_batches(self, train_set):
        sampler = torch.utils.data.DistributedSampler(
            train_set, num_replicas=self.world, rank=self.rank, shuffle=True, seed=self.args.seed)
        return _ShardBatches(sampler, self.args.batch_size, drop_last=False)

    def finish(self):
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
        return {}

    def abort(self):
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class _ShardBatches(torch.utils.data.BatchSampler):
    """Batches of torch's DistributedSampler, with set_epoch passed down to it."""

    def set_epoch(self, epoch):
        self.sampler.set_epoch(epoch)


class R2SP(Single):
    """Through R2SP's parameter servers. The job (tools/launch --worker_cmd=...) owns the
    settings: the script passes on only the flags given on its own command line."""
    name = "r2sp"
    paces_itself = True  # --emulate_ms_per_sample is the worker's own flag
    owns_step_count = True  # epochs and steps are the job's: the sampler stops when it ends

    def __init__(self, args):
        super().__init__(args)
        self.r2sp = import_r2sp_torch(
            "--backend=r2sp", how="run the script under tools/launch --worker_cmd=..., or ")
        self.errors = (self.r2sp.R2SPError,)
        try:
            self.r2sp.init(**args.r2sp_settings)
        except (ValueError, TypeError) as e:  # no scheduler address, a malformed setting
            raise SetupError(str(e)) from None
        if args.seed is None:  # the initial parameters from the job's seed, as under DDP
            args.seed = self.r2sp.seed()

    def evaluates(self):
        return self.r2sp.evaluates()

    def wrap(self, model, optimizer):
        # Joins the job: worker 0's parameters become everyone's; the servers apply SGD (in
        # easgd and eawild the optimizer takes each worker's step on its own copy). With
        # the model, --overlap also overlaps each pull with the next forward (the job's
        # --nooverlap_pulls turns that off for A/B runs).
        optimizer = self.r2sp.DistributedOptimizer(optimizer, model.named_parameters(),
                                                   module=model)
        self.rank, self.world = self.r2sp.rank(), self.r2sp.size()
        self.optimizer = optimizer
        return model, optimizer

    def evaluating(self):
        # easgd, eawild: each worker trains its own copy (the optimizer's own step); the model
        # the job trains is the servers' centre, swapped in for the evaluation.
        if self.r2sp.mode() in ("easgd", "eawild"):
            return self.optimizer.centre()
        return contextlib.nullcontext()

    def batches(self, train_set):
        # The scheduler's epoch plans; batches of r2sp.torch.batch_size() (hetero batching).
        return self.r2sp.DistributedSampler(train_set, seed=self.args.seed)

    def epochs(self):
        return itertools.count()  # until an epoch has no step: the job is over

    def step(self, optimizer, loss, samples):
        optimizer.step(loss=loss, samples=samples)

    def report_eval(self, accuracy, loss):
        self.r2sp.report_eval(accuracy, loss)

    def finish(self):
        return self.r2sp.finish()

    def abort(self):
        pass  # r2sp.torch leaves the job itself when the process ends with an exception


def make(args):
    """The backend --backend names, started."""
    return {"r2sp": R2SP, "ddp": DDP, "single": Single}[args.backend](args)
