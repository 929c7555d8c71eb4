"""r2sp.torch.DistributedOptimizer: a torch optimizer whose steps are R2SP exchanges. It joins
the job with the model's named parameters, hooks their gradients (each reported to the worker
as autograd completes it) and makes step() push the gradient and pull the servers' parameters
into the model in place; in the elastic modes (easgd, eawild) step() takes the wrapped
optimizer's own step and, every elastic period, the exchange with the centre (elastic.py)."""

import contextlib
import time

import torch

from . import device
from . import edits
from . import elastic
from . import forward_waits
from . import gradients
from . import job
from . import local_step
from . import optimizer_state
from . import server_optimizer
from . import validation
from . import state
from .state import STATE


class DistributedOptimizer(torch.optim.Optimizer):
    """Trains `optimizer`'s parameters through the R2SP job (r2sp.torch.init() settings).

    optimizer: in bsp, ssp, asp and r2sp a torch.optim.SGD, Adam or AdamW, which the servers
      apply as torch does, to the averaged gradient (bsp) or each push (the asynchronous
      modes; docs/PYTORCH.md), keeping its state (momentum, exp_avg, exp_avg_sq) with the
      parameters: each parameter group's settings (lr, weight_decay, momentum, dampening,
      nesterov, betas, eps) are read before every step's first push, so learning-rate
      schedulers and any change the script makes to a group apply from the next update.
      Any other optimizer (RMSprop, Adagrad, Adam with amsgrad, a user's own; not LBFGS) in
      bsp: each worker applies it to the step's averaged gradient, as Horovod does
      (local_step.py; its state is this worker's own), and in ssp, asp and r2sp it is refused
      (TypeError). In easgd and eawild any torch optimizer (not LBFGS): it takes the local
      step on this worker's copy after every backward, and every elastic period the worker
      pulls the servers' centre c, computes d = alpha (x - c), sets x <- x - d and pushes d
      (docs/MODES.md; centre_state_dict() and centre() give the centre for evaluations). The
      mode is known once joined: a refused optimizer leaves the job then (the worker aborts)
      and raises.
    named_parameters: model.named_parameters() (or a dict name -> tensor): every parameter of
      the optimizer named, names unique; float32 (TypeError), contiguous (ValueError), all on
      one CPU or CUDA device. They are registered with the job in this order; buffers (batch
      norm statistics), frozen parameters (requires_grad False) and named tensors the
      optimizer does not hold stay local to each worker.
    train_samples: the training set's size, for scripts that do not iterate a
      r2sp.torch.DistributedSampler (which otherwise starts the training loop with it).
    module: the model (the torch.nn.Module holding every registered parameter): with
      --overlap (and --overlap_pulls, the default), a step's pull then runs on while the next
      forward does, each module's forward waiting for its own parameters (overlaps_pulls;
      forward_waits.py). The rule it brings: read a parameter only inside the forward of a
      module that holds it, and call the model (model(x), so its hooks run), or call
      sync_params() first. Without module= (or with --nooverlap_pulls) the pull ends inside
      step().

    Joining blocks until every worker of the job has registered; worker 0's parameters then
    become everyone's. On a CPU each parameter's .data and .grad become views into the worker's
    buffers (no copies); on CUDA they are views into flat GPU tensors staged through pinned
    host memory. Move the model to its device before creating the optimizer.

    edits_gradients: the script changes the gradients between backward() and step()
      (torch.nn.utils.clip_grad_norm_, clip_grad_value_, GradScaler.unscale_): with --overlap
      the pushes then wait for step() (backward no longer overlaps them). Without it, such an
      edit after a backward whose pushes began raises RuntimeError (edits.py) rather than be
      lost. Clipping clips this worker's gradient (its b_i samples), before the servers
      average.

    Gradient hooks report each parameter's gradient to the worker as autograd completes it;
    with --overlap the pushes start then, during backward. One step()
    per backward(), or several backward passes accumulated with no_sync(): a second backward
    before step() outside no_sync() raises RuntimeError.

    A torch.optim.Optimizer whose param_groups, state and defaults are the wrapped
    optimizer's, so code that takes an optimizer (learning-rate schedulers) accepts it.

    Not thread-safe: call it from the training thread."""

    # Not calling torch.optim.Optimizer.__init__: the wrapped SGD holds the parameter groups.
    def __init__(self, optimizer, named_parameters, train_samples=None, module=None,
                 edits_gradients=False):
        validation.check_optimizer_object(optimizer)
        named = validation.named_entries(optimizer, named_parameters)
        validation.check_tensors(named)
        if module is not None:
            forward_waits.check_module(module, named)
        if STATE.worker is not None:
            raise RuntimeError("r2sp.torch.DistributedOptimizer: this process already joined "
                               "the job; create one DistributedOptimizer per process")
        if STATE.settings is None:
            job.init()
        self.optimizer = optimizer
        worker = state.create_worker(STATE.settings.options,
                                     [(n, list(p.shape)) for n, p in named],
                                     params_staged=device.stages_parameters(named))
        layout = {name: (offset, count) for name, offset, count in worker.tensors}
        self._entries = [device.Entry(n, p, *layout[n]) for n, p in named]
        self._buffers = device.buffers_for(worker, self._entries)
        self._buffers.stage()
        self._kind = server_optimizer.kind_of(optimizer)  # "sgd", "adam", "adamw" or None
        if server_optimizer.applies(optimizer):  # in every mode but easgd and eawild
            loaded = optimizer_state.initial_state(self._kind, optimizer, self._entries,
                                                   worker.size)
            if loaded is not None:  # a checkpoint's state: worker 0 gives it to the servers
                worker.set_initial_state(*loaded)
            if module is not None:
                worker.enable_forward_waits()  # the pulled values are the parameters
        with STATE.blocking():
            worker.join()
        STATE.worker = worker
        self._worker = worker
        self._elastic = elastic.is_elastic(worker.mode)
        steps_on = self._check_for_mode(optimizer)
        self.steps_submitted = 0  # step() and skip_step() calls (edits.py: a scaler's skips)
        self._exchanged = time.time()  # when the last exchange ended (Unix seconds)
        self._groups = None  # server_optimizer.OptimizerSync outside the elastic modes
        self._groups_synced = False  # this step's settings were sent
        self._servers_keep_state = steps_on == "servers"
        if self._servers_keep_state:
            optimizer.state.clear()  # the servers' now (a loaded state went to them)
            if worker.first_step > 0:  # a resumed job: the servers took the steps before it
                server_optimizer.record_step(optimizer)
        if not self._elastic:
            self._groups = server_optimizer.OptimizerSync(worker, optimizer, self._entries,
                                                          local=steps_on == "workers")
        self._buffers.adopt()
        self._local = None  # local_step.LocalStep where the workers apply the optimizer
        if steps_on == "workers":
            self._local = self._left_on_error(
                lambda: local_step.LocalStep(worker, self._buffers, self._entries, optimizer))
        self._waits = None  # forward_waits.ForwardWaits while pulls overlap
        if worker.overlaps_pulls:
            self._waits = forward_waits.ForwardWaits(worker, self._buffers, module,
                                                     self._entries, guard=STATE.blocking)
        STATE.left = self._left  # after the final pull, or an abort
        self._reporter = gradients.GradientReporter(
            worker, self._buffers, self._entries, live=lambda: STATE.step is not None,
            before_push=self._before_push)
        self._hold_pushes_for_edits(edits_gradients)
        if train_samples is not None:
            STATE.begin(train_samples, "DistributedOptimizer")

    def _check_for_mode(self, optimizer):
        """The joined job's mode decides which optimizers it takes and where their steps run
        ("servers", "workers", or None in the elastic modes): a refusal leaves the job."""
        def check():
            if self._elastic:
                return elastic.check_supported(self._worker, self._entries, optimizer)
            return server_optimizer.check(optimizer, self._worker.mode)
        return self._left_on_error(check)

    @staticmethod
    def _left_on_error(action):
        """action()'s result; a refusal it raises leaves the job first."""
        try:
            return action()
        except (TypeError, ValueError, NotImplementedError, RuntimeError) as e:
            STATE.abort(f"{type(e).__name__}: {e}")
            raise

    def _hold_pushes_for_edits(self, edits_gradients):
        """edits_gradients: nothing leaves before step(). Otherwise, with pushes during
        backward, an edit of a gradient already sent raises (edits.guard)."""
        edits.guard(None)  # GradScaler's skipped steps complete through skip_step()
        if self._elastic:  # the local step reads the edited gradients; pushes are differences
            return
        if edits_gradients:
            self._reporter.hold_until_step = True
            if hasattr(self._buffers, "copies_in_backward"):  # CUDA: no copies before step()
                self._buffers.copies_in_backward = False
        elif self._worker.overlaps_backward:
            edits.guard(self._check_edit)

    def _check_edit(self, name, parameters):
        """RuntimeError if `name` edits a registered gradient this step already pushed."""
        if STATE.worker is not self._worker or not self._reporter.sent:
            return
        registered = {id(e.param) for e in self._entries}
        if any(id(p) in registered for p in parameters):
            raise RuntimeError(
                f"r2sp: {name} after backward with --overlap: this step's gradients were "
                "pushed as backward produced them, so the edit would not reach the servers; "
                "create the optimizer with DistributedOptimizer(..., edits_gradients=True) (the "
                "pushes then wait for step()), or run without --overlap")

    @property
    def overlaps_pulls(self):
        """Whether each step's pull runs on into the next forward (module= with --overlap)."""
        return self._waits is not None

    def sync_params(self):
        """Waits until the model's parameters hold the whole pull of the last step (uploaded on
        CUDA): before reading parameters outside their modules' forwards with overlapped
        pulls (a checkpoint, a parent reading a child's weight). Nothing to do otherwise."""
        if self._waits is not None:
            self._waits.sync_params()

    @contextlib.contextmanager
    def no_sync(self):
        """Gradient accumulation, as DDP's model.no_sync(): backward passes inside accumulate
        into the parameters' .grad and send nothing; the next backward outside it completes
        the sums, which step() pushes once (with --overlap, as that backward produces them).
        Scale each micro-batch's loss as you would under DDP (loss / micro_batches for the
        mean). step() inside it raises RuntimeError."""
        if self._reporter.accumulating:
            raise RuntimeError("r2sp.torch.DistributedOptimizer.no_sync: already inside one")
        self._reporter.accumulating = True
        try:
            yield
        finally:
            self._reporter.accumulating = False

    def _before_push(self):
        """Before the step's gradient leaves: the groups' settings as the script left them
        (the pushes carry them), and the safety net of overlapped pulls (the whole pull)."""
        if self._groups is not None and not self._groups_synced:
            self._groups.sync()
            self._groups_synced = True
        if self._waits is not None:
            self._waits.before_push()

    def _left(self):
        """Training is over (the final pull is whole) or the worker left the job: the hooks
        go, and a device's copy of the parameters gets the final pull."""
        if self._waits is not None:
            self._waits.remove()
            self._waits = None
        if not STATE.aborted:
            self._buffers.after_submit()

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self):
        return self.optimizer.defaults

    def add_param_group(self, param_group):
        """Refused: the job's tensors are fixed once it is joined."""
        raise RuntimeError("r2sp.torch.DistributedOptimizer: the job's tensors are fixed once "
                           "it is joined; give the SGD every parameter before wrapping it")

    def zero_grad(self, set_to_none=False):
        """Zeroes every gradient in place (one fill of the gradient buffer). `set_to_none` is
        accepted and ignored: the gradients stay views of the buffer the pushes read."""
        self._buffers.zero_grad()

    def step(self, closure=None, *, loss=None, samples=None):
        """Ends this worker's step: the gradient goes to the servers and their parameters come
        back into the model (in place), as the job's mode says. Returns the loss.

        closure: re-evaluates the model and returns the loss (as torch optimizers take it).
        loss: this step's loss (a float or a one-element tensor), for the metrics and the
          timeline; 0 if neither is given.
        samples: the samples this step computed; default the batch DistributedSampler gave
          for it (else the step's batch, batch_size()).
        Parameters whose gradient autograd did not produce this step push zeros.
        JobLost if this worker was lost to the job; RuntimeError once training is over."""
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._submit("step", loss, samples, skip=False)
        return loss

    def skip_step(self, loss=None, samples=None):
        """Ends this worker's step without an update from it: what a GradScaler does for a
        gradient with an inf or NaN (its step() calls this then; r2sp wraps GradScaler.step).
        The servers apply nothing of this worker's for the step (in bsp the step averages the
        others' gradients; if every worker skips, nothing moves), and the parameters are
        pulled as after step(); with an optimizer each worker applies, this worker too steps
        with the others' average, so the copies stay equal. In easgd and eawild the local step
        is skipped. RuntimeError if this step's gradient began to leave during backward
        (--overlap without edits_gradients=True)."""
        if self._worker.overlaps_backward and self._reporter.sent and not self._elastic:
            raise RuntimeError("r2sp.torch.DistributedOptimizer.skip_step: this step's "
                               "gradients were pushed during backward (--overlap); create the "
                               "optimizer with edits_gradients=True so the pushes wait for "
                               "step() and a skipped step sends nothing")
        self._submit("skip_step", loss, samples, skip=True)
        return loss

    def _submit(self, what, loss, samples, skip):
        """The step's exchange: step() (skip False) or skip_step()."""
        self.steps_submitted += 1
        if self._reporter.accumulating:
            raise RuntimeError(f"r2sp.torch.DistributedOptimizer.{what}: called inside "
                               "no_sync(); run the last backward of the step outside it, then "
                               "step()")
        value = validation.loss_value(loss)
        step = STATE.step
        began = 0.0  # the step's compute began when it was handed out
        if step is None:  # the script did not take its step from the sampler
            began = self._exchanged  # it computed since the last exchange (a batch asked ahead)
            step = STATE.next_step(f"DistributedOptimizer.{what}")
            if step is None:
                raise RuntimeError(f"r2sp.torch.DistributedOptimizer.{what}: training is over "
                                   "(the job's epochs are done); stop stepping and call "
                                   "r2sp.torch.finish()")
        count = (STATE.batch_trained(step) if samples is None
                 else validation.samples_value(samples))
        self._before_push()  # also when no gradient was reported during backward
        self._reporter.complete()
        if self._elastic and not skip:
            self.optimizer.step()  # the local step, on views of the worker's parameter buffer
        with STATE.blocking():
            self._worker.submit(count, value, fp16=self._buffers.fp16,
                                skip=skip and not self._elastic, began=began)
        self._exchanged = time.time()
        if self._servers_keep_state and not skip:
            server_optimizer.record_step(self.optimizer)
        STATE.submitted()
        self._groups_synced = False
        self._reporter.reset()
        if self._local is not None:
            self._local.after_exchange()  # the average into .grad; the optimizer's step
        elif self._waits is not None:
            self._waits.pull_started()  # the hooks wait for it and upload (CUDA)
        else:
            self._buffers.after_submit()

    def centre_state_dict(self, module=None):
        """easgd, eawild: the servers' centre, pulled now (fp32; in easgd once the rounds this
        worker pushed are added), for evaluating or saving the model the job trains. Without
        `module`: {name: tensor} of the registered parameters; with it (the model):
        module.state_dict() with those parameters' values replaced by the centre's and its
        buffers (batch-norm running statistics) this worker's own, as the C++ worker evaluates.
        After finish() the model's parameters hold the centre already (the final pull), and
        they are returned. RuntimeError in other modes (the parameters are the servers'
        already) and after this worker left the job."""
        return self._centre("centre_state_dict").state_dict(module)

    def centre(self):
        """easgd, eawild: a context manager within which the model's registered parameters
        hold the centre (pulled as centre_state_dict() pulls it) and after which they hold this
        worker's own values again: `with optimizer.centre(): accuracy = test(model)`. Buffers
        (batch-norm statistics) stay this worker's."""
        return self._centre("centre").swapped_in()

    def _centre(self, what):
        if not self._elastic:
            raise RuntimeError(f"r2sp.torch.DistributedOptimizer.{what}: the job's mode is "
                               f"{self._worker.mode}; only easgd and eawild have a centre (in "
                               "the other modes the model's parameters are the servers')")
        if STATE.aborted:
            raise RuntimeError(f"r2sp.torch.DistributedOptimizer.{what}: this worker left "
                               "the job")
        return elastic.Centre(self._worker, self._entries,
                              finished=lambda: STATE.result is not None)

    def state_dict(self):
        """torch's state_dict of the wrapped optimizer. With an optimizer the servers apply,
        its state is pulled from them now (after the pull of the last step: sync_params()),
        and each parameter group also holds the job's step ("r2sp_steps"): saved with the
        model, it is a checkpoint the job resumes from (load_state_dict()). RuntimeError once
        this worker left the job."""
        if not self._servers_keep_state:
            return self.optimizer.state_dict()
        if STATE.aborted or STATE.result is not None:
            raise RuntimeError("r2sp.torch.DistributedOptimizer.state_dict: this worker left "
                               "the job; the optimizer's state is on the servers, which stop "
                               "with it: save the checkpoint before r2sp.torch.finish()")
        self.sync_params()
        with STATE.blocking():
            pulled = self._worker.pull_optimizer_state()
        return optimizer_state.state_dict(self._kind, self.optimizer, self._entries, pulled)

    def load_state_dict(self, state_dict):
        """With an optimizer each worker applies (or easgd, eawild): torch's. With one the
        servers apply, their state is set as the job starts: load it into the optimizer before
        wrapping it (optimizer.load_state_dict(saved), then DistributedOptimizer(optimizer,
        ...)); here, after joining, RuntimeError."""
        if self._servers_keep_state:
            raise RuntimeError(
                "r2sp.torch.DistributedOptimizer.load_state_dict: the servers hold this "
                "optimizer's state and took it when the job started; load a checkpoint into "
                "the torch optimizer before wrapping it (optimizer.load_state_dict(saved), then "
                "r2sp.torch.DistributedOptimizer(optimizer, ...)), and the job resumes from it")
        self.optimizer.load_state_dict(state_dict)

    def __repr__(self):
        return f"r2sp.torch.DistributedOptimizer({self.optimizer!r})"

