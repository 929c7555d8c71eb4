"""tools/bench/chain_proxy's step: a model's tensors (the examples' Fashion-MNIST cnn and
torchvision's ResNet-18, num_classes=10, by name and shape in the order their forward reads
them), grouped into the modules that hold them, and a step of an accelerator's compute spread
over those modules: `forward_share` of it over the forward, the rest over the backward in
reverse, an even share per module (a GPU running these small layers is bound by launches, not
by each layer's arithmetic). `Pace` spends each share by sleeping, against deadlines so that
the sleeps' overshoot does not add up. No torch: the schedule drives r2sp._core directly."""

import dataclasses
import time


def cnn_tensors():
    """examples/pytorch/fashion_mnist_cnn.py's Net: [(name, shape)]."""
    return [("conv1.weight", [32, 1, 5, 5]), ("conv1.bias", [32]),
            ("conv2.weight", [64, 32, 5, 5]), ("conv2.bias", [64]),
            ("fc1.weight", [1024, 3136]), ("fc1.bias", [1024]),
            ("fc2.weight", [10, 1024]), ("fc2.bias", [10])]


def _conv_bn(prefix, conv, bn, out, inp, k):
    return [(f"{prefix}{conv}.weight", [out, inp, k, k]),
            (f"{prefix}{bn}.weight", [out]), (f"{prefix}{bn}.bias", [out])]


def resnet18_tensors(classes=10):
    """torchvision.models.resnet18(num_classes=classes)'s named_parameters: [(name, shape)]."""
    out = _conv_bn("", "conv1", "bn1", 64, 3, 7)
    inp = 64
    for layer, width in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            prefix = f"layer{layer}.{block}."
            out += _conv_bn(prefix, "conv1", "bn1", width, inp, 3)
            out += _conv_bn(prefix, "conv2", "bn2", width, width, 3)
            if block == 0 and inp != width:
                out += _conv_bn(prefix, "downsample.0", "downsample.1", width, inp, 1)
            inp = width
    return out + [("fc.weight", [classes, 512]), ("fc.bias", [classes])]


MODELS = {"cnn": cnn_tensors, "resnet18": resnet18_tensors}
# (batch, ms): the script alone's step on an H200, measured by tools/bench/pytorch_gpu (its
# "PyTorch alone" runs; docs/BENCHMARKS.md#gpu).
H200_STEPS = {"cnn": (64, 8.5), "resnet18": (128, 27.2)}


@dataclasses.dataclass(frozen=True)
class Module:
    """A module holding tensors: its name and the (offset, count) ranges of its tensors in the
    flat buffers, adjacent ones merged."""
    name: str
    ranges: tuple


def modules(layout):
    """The modules of a layout [(tensor name, offset, count)] in the order given: a module is
    its tensors' name up to the last dot."""
    out, names = [], []
    for name, offset, count in layout:
        module = name.rsplit(".", 1)[0]
        if names and names[-1] == module:
            last = out[-1]
            end = last[-1][0] + last[-1][1]
            if end == offset:
                last[-1] = (last[-1][0], last[-1][1] + count)
            else:
                last.append((offset, count))
        else:
            names.append(module)
            out.append([(offset, count)])
    return [Module(n, tuple(r)) for n, r in zip(names, out)]


def layout_of(tensors):
    """The flat layout of [(name, shape)] packed in order: [(name, offset, count)]."""
    out, offset = [], 0
    for name, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        out.append((name, offset, count))
        offset += count
    return out


@dataclasses.dataclass(frozen=True)
class Shares:
    """Seconds of compute per module: in the forward, and in the backward."""
    forward_s: float
    backward_s: float


def shares(module_count, step_ms, forward_share):
    """The even split of a step of `step_ms` over `module_count` modules. ValueError for a
    step that is not positive, a share outside (0, 1) or no modules."""
    if module_count < 1 or step_ms <= 0 or not 0 < forward_share < 1:
        raise ValueError(f"a step needs modules (got {module_count}), step_ms > 0 (got "
                         f"{step_ms}) and 0 < forward_share < 1 (got {forward_share})")
    step_s = step_ms / 1e3
    return Shares(step_s * forward_share / module_count,
                  step_s * (1 - forward_share) / module_count)


class Pace:
    """Spends compute by sleeping until deadlines: each spend(s) ends `s` after the last one's
    deadline, so an oversleep is taken back from the next. The sleeps wake `early` before the
    deadline, a running mean of how late they wake (a sleep of 1.4 ms took 1.6 ms on the 2-core
    VM). A wait outside the pace (for a pull) that blocked for longer than `blocked_s` moves
    the deadline to its end, as a GPU's next kernel starts after the host's wait; a shorter one
    found its data there and costs nothing. `clock` and `sleep` stand in for the tests."""

    def __init__(self, blocked_s=0.00003, clock=time.perf_counter, sleep=time.sleep):
        self.blocked_s, self.clock, self.sleep = blocked_s, clock, sleep
        self.due = None
        self.early = 0.0

    def restart(self):
        """A step begins: the next spend starts from now."""
        self.due = None

    def spend(self, seconds):
        now = self.clock()
        if self.due is None:
            self.due = now
        self.due += seconds
        wake = self.due - self.early
        if wake > now:
            self.sleep(wake - now)
            late = self.clock() - wake
            self.early = 0.8 * self.early + 0.2 * max(0.0, late)

    def waited(self, start, end):
        """A wait from `start` to `end` (the clock's seconds) happened since the last spend."""
        if self.due is not None and end - start > self.blocked_s:
            self.due = max(self.due, end)
