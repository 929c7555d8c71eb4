"""The gradient hooks: each registered parameter's range of the gradient buffer is reported to
the worker (`gradient_ready`) as soon as autograd has accumulated it, so pushes overlap
backward (with --overlap); on CUDA, as soon as its copy to the host has landed, which a
callback at the end of backward waits for copy by copy while the GPU runs on (the hooks run
ahead of the GPU, so most copies are still under way when they return). step() completes the
ranges autograd did not produce."""

import threading

import torch


def at_backward_end(callback):
    """Runs `callback` once the backward now running has run every hook, before backward()
    returns (autograd's final callbacks; call it from a hook). A reentrant checkpoint's inner
    backward is a backward of its own: its callback runs as it ends, within the outer one."""
    torch.autograd.Variable._execution_engine.queue_callback(callback)


class GradientReporter:
    """Hooks on each parameter's AccumulateGrad node (what torch 1.13 calls after a leaf's
    .grad is final for this backward), and the bookkeeping of which ranges were reported in
    the current step.

    While `accumulating` (DistributedOptimizer.no_sync()), the hooks report nothing: autograd
    accumulates each gradient into .grad, and the backward after it reports the sums. With
    `hold_until_step` (the script edits gradients after backward) every report waits for
    complete(), so the pushes carry the edited values; `sent` says whether this step's
    gradient began to leave (a report reached the worker).

    Thread-safety: autograd may run the hooks on its own threads (CUDA), so the reported set
    is guarded by a lock; complete() and reset() run on the training thread."""

    def __init__(self, worker, buffers, entries, live=lambda: True, before_push=None):
        """`live()`: whether the worker has a step under way; ranges completed outside one (a
        script computing before step() asks for its step) are reported by complete().
        `before_push()`: called before the step's first report (overlapped pulls' safety net)."""
        self._worker = worker
        self._before_push = before_push
        self._live = live
        self._buffers = buffers
        self._entries = entries
        self._lock = threading.Lock()
        self._reported = set()   # indices into entries, completed by autograd this step
        self._deferred = []      # entries completed while no step was under way
        self._waits_queued = False  # landed() is queued for the end of this backward
        self._accumulators = []  # the AccumulateGrad nodes: the hooks live as long as they do
        self._kind_known = set()  # indices into entries whose first gradient was looked at
        self.accumulating = False  # set by the training thread between backward passes
        self.hold_until_step = False
        self.sent = False
        for index, e in enumerate(entries):
            if e.param.requires_grad:
                self._hook(index, e)

    def _hook(self, index, entry):
        accumulator = entry.param.expand_as(entry.param).grad_fn.next_functions[0][0]
        accumulator.register_hook(lambda _, incoming: self._ready(index, incoming))
        self._accumulators.append(accumulator)

    def _ready(self, index, incoming):
        entry = self._entries[index]
        if index not in self._kind_known:  # a module's gradients are sparse or not for good
            self._kind_known.add(index)
            if any(g is not None and g.is_sparse for g in incoming):
                self._worker.push_nonzero_rows(entry.offset, entry.count)  # an embedding's rows
        if self.accumulating:
            return
        with self._lock:
            if index in self._reported:
                raise RuntimeError(
                    f"r2sp: parameter '{entry.name}' got a second gradient before "
                    "optimizer.step(); its first was already sent. Call step() after each "
                    "backward(), or accumulate over several backward passes by running all "
                    "but the last inside optimizer.no_sync()")
            self._reported.add(index)
            self._report(self._buffers.gradient_done(entry))
            if self._buffers.in_flight() and not self._waits_queued:
                at_backward_end(self._landed)
                self._waits_queued = True

    def _landed(self):
        """Backward is all queued: reports each copy still under way as it lands."""
        with self._lock:
            self._waits_queued = False
            for entry in self._buffers.landing():
                self._report([entry])

    def _report(self, entries, final=False):
        """Reports `entries` (with those deferred) to the worker, or defers them: no step under
        way, or held until step() (`final`: complete() reporting)."""
        if not self._live() or (self.hold_until_step and not final):
            self._deferred.extend(entries)
            return
        if self._before_push is not None and (self._deferred or entries):
            self._before_push()
        for e in self._deferred + entries:
            self._worker.gradient_ready(e.offset, e.count, fp16=self._buffers.fp16)
            self.sent = True
        self._deferred = []

    def complete(self):
        """Reports what is still outstanding (REQUIRES: a step under way): ranges deferred,
        copies in flight, then the parameters whose gradient autograd did not produce this step
        (zeros). Returns the latter's names."""
        with self._lock:
            self._report(self._buffers.flush(), final=True)
            missing = [i for i in range(len(self._entries)) if i not in self._reported]
            for i in missing:
                self._buffers.fill_zero(self._entries[i])
                self._report([self._entries[i]], final=True)
            return [self._entries[i].name for i in missing]

    def reset(self):
        """A new step begins: nothing reported."""
        with self._lock:
            self._reported.clear()
            self._deferred = []
            self._waits_queued = False
            self.sent = False
