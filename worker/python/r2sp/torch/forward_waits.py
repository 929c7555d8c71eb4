"""Overlapped pulls (DistributedOptimizer(..., module=model) with --overlap): a step's pull runs
on while the next forward does. A forward pre-hook on each submodule that holds registered
parameters itself waits for their ranges of the pull (`worker.params_needed`, merged ranges
precomputed per module) and, on CUDA, uploads them to the device; before the gradient leaves
(the step's first gradient report, or step()) the whole pull is waited for: the safety net for
parameters read outside their modules' forwards.

The rule for scripts: a parameter is read only inside the forward of a module that holds it
(a tied weight held by two modules is covered by both). Anything else (a parent reading a
child's parameter without calling the child, a checkpoint, a metric over the weights) comes
after DistributedOptimizer.sync_params(), which waits for the whole pull (and on CUDA uploads
it)."""

import contextlib

import torch


def eager(fn):
    """`fn`, which TorchDynamo leaves to run as plain Python inside a torch.compile'd forward
    (PyTorch 2) instead of tracing it: a hook's waits in the extension stay where they were, and
    its bookkeeping is not compiled into guarded graphs. `fn` itself where torch has no
    torch.compiler.disable (torch 1.13)."""
    compiler = getattr(torch, "compiler", None)
    return compiler.disable(fn) if hasattr(compiler, "disable") else fn


def check_module(module, named):
    """TypeError unless `module` is a torch.nn.Module; ValueError naming the registered
    parameters (`named`: [(name, tensor)]) that none of its modules holds."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError("r2sp.torch.DistributedOptimizer: module= is the model (a "
                        f"torch.nn.Module), not {type(module).__name__}")
    held = {id(p) for m in module.modules() for p in m._parameters.values() if p is not None}
    missing = [n for n, p in named if id(p) not in held]
    if missing:
        raise ValueError("r2sp.torch.DistributedOptimizer: module= does not hold the registered "
                         f"parameter(s) {', '.join(repr(n) for n in missing)}; pass the model "
                         "whose named_parameters() the optimizer was given")


def merged_ranges(entries):
    """The (offset, count) ranges of `entries` (device.Entry), sorted, adjacent ones merged."""
    ranges = []
    for e in sorted(entries, key=lambda e: e.offset):
        if ranges and ranges[-1][0] + ranges[-1][1] == e.offset:
            ranges[-1] = (ranges[-1][0], ranges[-1][1] + e.count)
        elif e.count > 0:
            ranges.append((e.offset, e.count))
    return ranges


def module_entries(module, entries):
    """[(submodule, its entries)]: each submodule holding registered parameters itself, once (a
    module shared in two places is one module)."""
    by_id = {id(e.param): e for e in entries}
    out = []
    for m in module.modules():
        held = [by_id[id(p)] for p in m._parameters.values() if p is not None and id(p) in by_id]
        if held:
            out.append((m, held))
    return out


class ForwardWaits:
    """The hooks of one model and what the current pull has delivered.

    `buffers` (device.CpuBuffers or cuda.CudaBuffers) gives upload(ranges): the host ranges to
    the device (nothing on a CPU, whose parameters are the host buffer).

    Thread-safety: the hooks and sync_params run on the training thread (forward); before_push
    may run on autograd's thread, while the training thread waits in backward()."""

    def __init__(self, worker, buffers, module, entries, guard=contextlib.nullcontext):
        """`guard()`: the context around each wait (state.JobState.blocking: Ctrl-C or the job
        lost there means this worker left the job)."""
        self._worker = worker
        self._guard = guard
        self._buffers = buffers
        self._size = worker.size
        owners = module_entries(module, entries)
        self._modules = [(held, merged_ranges(held)) for _, held in owners]
        self._waited = set()     # indices into _modules waited for since the pull began
        self._uploaded = set()   # offsets of the entries uploaded since the pull began
        self._pulled = False     # the whole pull has been waited for
        self._whole = False      # ... and the device holds all of it
        self._handles = [m.register_forward_pre_hook(self._hook(i))
                         for i, (m, _) in enumerate(owners)]

    def _hook(self, index):
        @eager
        def hook(_module, _inputs):
            self.needed(index)
        return hook

    def needed(self, index):
        """Module `index`'s forward is about to read its parameters: waits for their ranges
        of the pull and uploads those not uploaded since it began (each module once however
        often it runs, a tied weight once)."""
        if self._whole or index in self._waited:
            return
        held, ranges = self._modules[index]
        if not self._pulled:
            with self._guard():
                for offset, count in ranges:
                    self._worker.params_needed(offset, count)
        self._upload(held)
        self._waited.add(index)

    def _upload(self, held):
        todo = [e for e in held if e.offset not in self._uploaded]
        if todo:
            self._buffers.upload(merged_ranges(todo))
            self._uploaded.update(e.offset for e in todo)

    def before_push(self):
        """The safety net: the whole pull has landed in the host buffer before any gradient
        of this step leaves (parameters no hook covered, read outside their modules)."""
        if not self._pulled:
            with self._guard():
                self._worker.params_needed(0, self._size)
            self._pulled = True

    def sync_params(self):
        """Waits for the whole pull and makes every parameter hold it (CUDA: uploaded)."""
        self.before_push()
        for held, _ in self._modules:
            self._upload(held)
        self._whole = True

    def pull_started(self):
        """A step was submitted: its pull may still be running."""
        self._waited.clear()
        self._uploaded.clear()
        self._pulled = self._whole = False

    def remove(self):
        """Removes the hooks (training is over or the worker left the job)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._whole = True
