"""What the r2sp package's tests share: running under a Python that has PyTorch, finding the
built extension in the test's runfiles, and FakeWorker, a stand-in for `_core.Worker` in unit
tests of the Python logic (it records every call and "pulls" a known update)."""

import array
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import types

# tests/worker/python/r2sp_testing.py -> the runfiles (or repository) root
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TORCH_PYTHON = "/usr/bin/python3"
# Names a runner to re-execute the test under instead (tools/torch2_python: PyTorch 2). The
# runner takes a Python command line; `RUNNER --check` prints the path of the extension it runs
# with, or exits 3 where it cannot run here (skip) and with another status where it is broken.
RUNNER = "R2SP_TORCH_PYTHON"


def use_torch_python():
    """Re-executes this test under $R2SP_TORCH_PYTHON when set, else under /usr/bin/python3
    (Debian's torch) when the running Python has no torch; returns the reason to skip if no
    Python here has one, else None."""
    if os.environ.get(RUNNER):
        return _use_runner(os.path.abspath(os.environ[RUNNER]))
    if importlib.util.find_spec("torch") is not None:
        return None
    if os.path.exists(TORCH_PYTHON) and os.path.realpath(sys.executable) != \
            os.path.realpath(TORCH_PYTHON):
        os.execv(TORCH_PYTHON, [TORCH_PYTHON] + sys.argv)
    return "no Python with PyTorch here (needs python3-torch at /usr/bin/python3)"


def _use_runner(runner):
    """Re-executes this test under `runner`; the reason to skip where it cannot run here.
    RuntimeError where it is broken (say, the root made but the extension not built). The
    re-executed test gets a bin dir (R2SP_BIN_DIR) whose extension is the runner's, so the
    Python workers tools/launch starts load it too."""
    check = subprocess.run([runner, "--check"], capture_output=True, text=True)
    if check.returncode == 3:
        return check.stderr.strip() or f"{runner} cannot run here"
    if check.returncode != 0:
        raise RuntimeError(f"{runner} --check: exit {check.returncode}: {check.stderr.strip()}")
    core = check.stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != RUNNER}
    env["R2SP_BIN_DIR"] = bin_dir_with(core)
    os.execve(runner, [runner] + sys.argv, env)


def bin_dir_with(core):
    """A bin dir of symbolic links to the test's binaries (R2SP_BIN_DIR, else the runfiles', else
    bazel-bin) in which worker/python's _core.so and _models.so are `core` and the _models.so
    beside it. Under the test's TEST_TMPDIR, else in the temporary directory."""
    base = os.environ.get("R2SP_BIN_DIR") or (
        ROOT if "TEST_SRCDIR" in os.environ else os.path.join(ROOT, "bazel-bin"))
    name = "r2sp_bin_" + hashlib.md5(f"{base}:{core}".encode()).hexdigest()[:12]
    out = os.path.join(os.environ.get("TEST_TMPDIR") or tempfile.gettempdir(), name)
    shutil.rmtree(out, ignore_errors=True)
    python = os.path.join("worker", "python")
    _shadow(base, out, {os.path.join(python, "_core.so"): core,
                        os.path.join(python, "_models.so"):
                            os.path.join(os.path.dirname(core), "_models.so")})
    return out


def _shadow(base, out, replace):
    """Makes `out` a copy of folder `base` of symbolic links, but for the files `replace` names
    ({path relative to base: the file to link there}); only the folders on their way are real."""
    inner = {}
    for path, target in replace.items():
        head, _, rest = path.partition(os.sep)
        inner.setdefault(head, {})
        if rest:
            inner[head][rest] = target
        else:
            inner[head] = target
    os.makedirs(out, exist_ok=True)
    names = set(os.listdir(base)) if os.path.isdir(base) else set()
    for name in sorted(names | set(inner)):
        if name not in inner:
            os.symlink(os.path.join(base, name), os.path.join(out, name))
        elif isinstance(inner[name], str):
            os.symlink(inner[name], os.path.join(out, name))
        else:
            _shadow(os.path.join(base, name), os.path.join(out, name), inner[name])


def core_path():
    """The built extension: $R2SP_CORE, else the runfiles' or the build tree's _core.so."""
    for path in (os.environ.get("R2SP_CORE", ""),
                 os.path.join(ROOT, "worker", "python", "_core.so"),
                 os.path.join(ROOT, "bazel-bin", "worker", "python", "_core.so")):
        if path and os.path.isfile(path):
            return path
    return None


def setup_path():
    """Puts the r2sp package (worker/python) on sys.path and R2SP_CORE in the environment."""
    package_parent = os.path.join(ROOT, "worker", "python")
    if package_parent not in sys.path:
        sys.path.insert(0, package_parent)
    if core_path():
        os.environ["R2SP_CORE"] = core_path()


class FakeStep(types.SimpleNamespace):
    """A _core.Step: clock, epoch, index, epoch_steps, batch, live_shards."""


def steps_of(epochs, batch=4, live_shards=(0,)):
    """FakeSteps for epochs of the given step counts, clocks from 0."""
    steps, clock = [], 0
    for epoch, count in enumerate(epochs):
        for index in range(count):
            steps.append(FakeStep(clock=clock, epoch=epoch, index=index, epoch_steps=count,
                                  batch=batch, live_shards=list(live_shards)))
            clock += 1
    return steps


class FakeWorker:
    """Records the calls a _core.Worker gets. join() replaces params with `initial` (worker
    0's parameters) when given; submit() "pulls" params - lr * grads; gradient_ready records the
    range's values as they were when reported; pull_centre() "pulls" `centre` (elastic modes);
    set_optimizer() records the script's optimizer settings in `optimizers`. Once the settings
    sent are "average" (each worker applies its optimizer), submit() "pulls" the gradient
    itself (the average of one worker's), NaN when skipped, as servers of a 1-worker job."""

    def __init__(self, options, tensors, model_name="pytorch", *, steps=(), initial=None, lr=0.5,
                 rank=0, workers=2, mode="bsp", push_codec="fp32", data_world=1, data_shard=0,
                 batch_size=4, evaluates=True, hetero_batching=False, pulls_overlap=False,
                 elastic_period=0, centre=None, overlap=None, first_step=0):
        self.options, self.model_name = dict(options), model_name
        self.tensors, offset = [], 0
        for name, shape in tensors:
            count = 1
            for d in shape:
                count *= d
            self.tensors.append((name, offset, count))
            offset += count
        self.size = offset
        self._params = array.array("f", [0.0] * offset)
        self._grads = array.array("f", [0.0] * offset)
        self._grads16 = array.array("H", [0] * offset)
        self.params, self.grads = memoryview(self._params), memoryview(self._grads)
        self.grads16 = memoryview(self._grads16)
        self.steps, self.initial, self.lr = list(steps), initial, lr
        self.rank, self.workers, self.mode, self.push_codec = rank, workers, mode, push_codec
        self.data_world, self.data_shard, self.batch_size = data_world, data_shard, batch_size
        self.evaluates, self.hetero_batching = evaluates, hetero_batching
        self.pulls_overlap = pulls_overlap  # joined with --overlap (and --overlap_pulls)
        # Joined with --overlap (pushes start in backward): by default as pulls_overlap says.
        self.overlaps_backward = pulls_overlap if overlap is None else overlap
        self.forward_waits = False
        self.elastic_period, self.centre_values = elastic_period, centre
        self.centre = memoryview(array.array("f"))
        self.calls = []
        self.optimizers = []  # set_optimizer's (groups, tensor_groups), in order
        self.began = []  # each submit's `began` (0: the step's compute began when handed out)
        self.staged = None  # params as join() found them
        self.optimizer_state = None  # what pull_optimizer_state() returns
        self.first_step = first_step

    @property
    def overlaps_pulls(self):
        return self.pulls_overlap and self.forward_waits

    def enable_forward_waits(self):
        self.calls.append(("enable_forward_waits",))
        self.forward_waits = True

    def params_needed(self, offset, count):
        self.calls.append(("params_needed", offset, count))

    def join(self):
        self.staged = list(self._params)
        self.calls.append(("join",))
        if self.initial is not None:
            self._params[:] = array.array("f", self.initial)

    def begin_training(self, samples):
        self.calls.append(("begin_training", samples))

    def next_step(self):
        self.calls.append(("next_step",))
        return self.steps.pop(0) if self.steps else None

    def gradient_ready(self, offset, count, fp16=False):
        """Records the range's values (fp32; binary16 bit patterns with fp16)."""
        values = self._grads16 if fp16 else self._grads
        self.calls.append(("gradient_ready", offset, count, list(values[offset:offset + count])))

    def push_nonzero_rows(self, offset, count):
        self.calls.append(("push_nonzero_rows", offset, count))

    def submit(self, samples, loss, fp16=False, skip=False, began=0.0):
        """Records the call ("skip" last when skipping); "pulls" params - lr * grads unless
        the step is skipped."""
        self.calls.append(("submit", samples, loss, fp16) + (("skip",) if skip else ()))
        self.began.append(began)
        if self.optimizers and self.optimizers[-1][0][0]["kind"] == "average":
            self._params[:] = array.array("f", [float("nan")] * self.size if skip
                                          else self._grads)
            return
        if skip:
            return
        for i in range(self.size):
            self._params[i] -= self.lr * self._grads[i]

    def set_optimizer(self, groups, tensor_groups):
        """Recorded apart from `calls` (in `optimizers`): the settings each step sends."""
        self.optimizers.append((groups, list(tensor_groups)))

    def set_initial_state(self, first, second, updates, steps):
        self.calls.append(("set_initial_state", first, second, updates, steps))

    def pull_optimizer_state(self):
        """The servers' state as `optimizer_state` says (set by the test)."""
        self.calls.append(("pull_optimizer_state",))
        return self.optimizer_state

    def pull_centre(self):
        self.calls.append(("pull_centre",))
        self.centre = memoryview(array.array("f", self.centre_values))

    def report_eval(self, accuracy, loss):
        self.calls.append(("report_eval", accuracy, loss))
        return self.evaluates

    def finish(self):
        self.calls.append(("finish",))
        return {"steps": 3}

    def abort(self, why="aborted"):
        self.calls.append(("abort", why))

    def names(self):
        """The calls' names, in order."""
        return [c[0] for c in self.calls]
