"""The one R2SP worker of this process and what r2sp.torch's functions share about it: the
settings from init(), the `_core.Worker` the DistributedOptimizer joined with, the step being
computed, and the finish at exit (abort instead after an unhandled exception)."""

import atexit
import collections
import contextlib
import os
import sys

from .. import _core


def create_worker(options, tensors, params_staged=False):
    """A `_core.Worker` for these options ({name: value}, as settings.Settings.options) and
    [(name, shape)] tensors (not yet joined); `params_staged`: the model computes on its own
    copy of the parameters (CUDA)."""
    return _core.Worker(dict(options), tensors, "pytorch", params_staged)


class JobState:
    """The process's worker and its training-loop position.

    Thread-safety: used from the training thread only (the gradient hooks, which run on
    autograd's threads, never touch it)."""

    def __init__(self):
        self.settings = None   # settings.Settings, once init() ran
        self.worker = None     # the joined _core.Worker
        self.step = None       # the _core.Step handed out and not yet submitted
        self.last_step = None  # the last step handed out
        self.train_samples = 0  # the training set's size, once begin_training() was called
        self.over = False      # next_step() said training is over
        self.result = None     # finish()'s dict
        self.aborted = False   # this worker left the job (abort(), Ctrl-C, lost)
        self.batches = collections.deque()  # sizes of the batches the sampler yielded and no
                               # step() took yet, oldest first (DataLoader workers run ahead)
        self.pid = os.getpid()  # the process that may leave the job (not a forked child)
        self.left = None       # called once the worker is out of the job: after finish()
                               # pulled the final parameters (a device's copy of them needs
                               # them: CUDA), or after an abort (self.aborted says which)

    @contextlib.contextmanager
    def blocking(self):
        """Around the worker's blocking calls: after Ctrl-C (the extension has left the job
        and raises KeyboardInterrupt) or JobLost, this worker is out of the job."""
        try:
            yield
        except (KeyboardInterrupt, _core.JobLost):
            self.aborted = True
            raise

    def require_worker(self, what):
        """The joined worker; RuntimeError saying `what` needs DistributedOptimizer first."""
        if self.worker is None:
            raise RuntimeError(f"r2sp.torch.{what}: no job joined yet; create "
                               "r2sp.torch.DistributedOptimizer(optimizer, "
                               "model.named_parameters()) first (it joins the job)")
        return self.worker

    def begin(self, train_samples, what):
        """worker.begin_training(train_samples) once; later calls must name the same size."""
        worker = self.require_worker(what)
        if not isinstance(train_samples, int) or isinstance(train_samples, bool) \
                or train_samples < 1:
            raise ValueError(f"r2sp.torch.{what}: the training set's size must be a positive "
                             f"integer, not {train_samples!r}")
        if self.train_samples:
            if train_samples != self.train_samples:
                raise ValueError(f"r2sp.torch.{what}: training began with {self.train_samples} "
                                 f"samples; it cannot change to {train_samples}")
            return
        worker.begin_training(train_samples)
        self.train_samples = train_samples

    def next_step(self, what):
        """The next step of the training loop (blocks until the loop wants it), or None once
        training is over. RuntimeError if the step handed out before was never submitted."""
        worker = self.require_worker(what)
        if not self.train_samples:
            raise RuntimeError(f"r2sp.torch.{what}: training has not begun: iterate a "
                               "r2sp.torch.DistributedSampler, or pass train_samples= (the "
                               "training set's size) to DistributedOptimizer")
        if self.step is not None:
            raise RuntimeError(f"r2sp.torch.{what}: step {self.step.clock} was handed out and "
                               "optimizer.step() has not run for it; call step() once per "
                               "batch")
        if self.over:
            return None
        with self.blocking():
            step = worker.next_step()
        if step is None:
            self.over = True
        self.step = step
        self.last_step = step or self.last_step
        return step

    def submitted(self):
        """The step handed out has been submitted."""
        self.step = None

    def batch_trained(self, step):
        """The samples of the batch the step just computed: the oldest batch the sampler
        yielded and no step took (a DataLoader with workers runs ahead, and under hetero
        batching its batches may be of an earlier tuning than the step's), else the step's."""
        return self.batches.popleft() if self.batches else step.batch

    def finish(self):
        """worker.finish() once (its dict; the same dict again later); {} with no worker."""
        if self.result is not None:
            return self.result
        if self.worker is None:
            return {}
        if self.aborted:
            raise RuntimeError("r2sp.torch.finish: this worker already left the job (aborted)")
        try:
            with self.blocking():
                self.result = dict(self.worker.finish())
        except _core.R2SPError:
            self.aborted = True  # a worker that cannot finish leaves the job
            raise
        if self.left is not None:
            self.left()
        return self.result

    def abort(self, why):
        if self.worker is not None and self.result is None and not self.aborted:
            self.aborted = True
            self.worker.abort(why)
            if self.left is not None:
                self.left()

    def at_exit(self):
        """Leaves the job as the script ended: abort after an unhandled exception, else finish
        (which the worker refuses, leaving the job, if training was not over)."""
        if self.worker is None or self.result is not None or self.aborted:
            return
        if os.getpid() != self.pid:  # a forked child (a DataLoader worker): not in the job
            return
        error = getattr(sys, "last_value", None)
        if error is not None:
            self.abort(f"the script raised {type(error).__name__}: {error}")
            return
        try:
            self.finish()
        except Exception as e:  # at exit there is nobody to raise to: say it
            self.aborted = True
            print(f"r2sp: this worker left the job without finishing: {e}", file=sys.stderr)


STATE = JobState()
atexit.register(STATE.at_exit)
