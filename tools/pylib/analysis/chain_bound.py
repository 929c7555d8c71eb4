"""The step time a transfer rate allows: a model of one worker's steps with overlapped pulls
(tools/bench/chain_proxy's schedule, step_schedule.py), in which each module's gradient goes out
as its backward share ends, in partitions of at most 1 MiB, its parameters come back once its
push has landed, and the next forward's module waits for them. The transport is one FIFO link of
`rate` bytes/s each way (duplex) or one link that both directions share (shared): the ZeroMQ I/O
thread at each end carries both. No apply time, no per-message cost: what it gives is a bound,
the best a step can do at that rate, and which part of the chain decides it.

  pulls "after":  every pull asked for behind the last push, in key order (with --overlap);
  pulls "early":  each as soon as its push has landed (--early_pulls);
  pulls "gated":  so, but at most `in_flight` at a time until every push has landed, the lowest
                  key first, then the rest (--early_pulls_in_flight, worker/gated_pulls.h);
  reports "backward": each gradient as its share ends (r2sp.torch's copy stream);
  reports "end":  every gradient at the backward's end (its CUDA path before the copy stream,
                  whose pushes began when backward had ended on the GPU)."""

import dataclasses

PARTITION_BYTES = 1 << 20  # the scheduler's default --partition_bytes


@dataclasses.dataclass(frozen=True)
class Chain:
    """How the step's transfers are ordered: pulls "after", "early" or "gated" (`in_flight` at
    a time), reports "backward" or "end", and the link "duplex" or "shared"."""
    pulls: str = "after"
    reports: str = "backward"
    link: str = "duplex"
    in_flight: int = 1

    def __post_init__(self):
        if (self.pulls not in ("after", "early", "gated") or self.in_flight < 1
                or self.reports not in ("backward", "end")
                or self.link not in ("duplex", "shared")):
            raise ValueError(f"{self}: pulls after|early|gated (in_flight >= 1), reports "
                             "backward|end, link duplex|shared")


class _Links:
    """One FIFO link each way, or one for both."""

    def __init__(self, shared):
        self.shared = shared
        self.free = {"up": 0.0, "down": 0.0}

    def send(self, way, earliest, seconds):
        key = "up" if self.shared else way
        start = max(earliest, self.free[key])
        self.free[key] = start + seconds
        return self.free[key]


def partitions(sizes):
    """[(module, bytes)] in key order: each module's bytes in equal parts of at most
    PARTITION_BYTES."""
    out = []
    for m, size in enumerate(sizes):
        count = max(1, -(-int(size) // PARTITION_BYTES))
        out += [(m, size / count)] * count
    return out


class _Gate:
    """Which pulls may go: at most `limit` in flight until the last push has landed, the lowest
    key first, then all (worker/gated_pulls.h's PullGate). Every policy is one: "after" a
    limit of 0, "early" no limit in effect (as many as there are pushes)."""

    def __init__(self, pushes, limit):
        self.pushes_left, self.limit, self.in_flight, self.waiting = pushes, limit, 0, []

    def pushed(self, key):
        self.pushes_left -= 1
        self.waiting.append(key)
        return self._release()

    def landed(self):
        self.in_flight -= 1
        return self._release()

    def _release(self):
        self.waiting.sort()
        out = []
        while self.waiting and (self.pushes_left == 0 or self.in_flight < self.limit):
            out.append(self.waiting.pop(0))
            self.in_flight += 1
        return out


def _transfers(parts, ready, submit, rate, chain, links):
    """Schedules one step's pushes and pulls, first come first served (pushes first at a tie);
    returns when each module's last partition has been pulled."""
    n = len(parts)
    order = sorted(range(n), key=lambda k: (ready[parts[k][0]], -parts[k][0], k))
    waiting = [(ready[parts[k][0]], 0, i, k) for i, k in enumerate(order)]  # pushes
    gate = _Gate(n, {"after": 0, "early": n}.get(chain.pulls, chain.in_flight))
    pulled = [0.0] * (max(m for m, _ in parts) + 1)
    while waiting:
        waiting.sort()
        earliest, kind, _, k = waiting.pop(0)
        module, size = parts[k]
        if kind == 0:
            end = links.send("up", earliest, size / rate)
            if chain.pulls == "after":  # asked at submit at the earliest
                end = max(end, submit)
            waiting += [(end, 1, key, key) for key in gate.pushed(k)]
        else:
            end = links.send("down", earliest, size / rate)
            pulled[module] = max(pulled[module], end)
            waiting += [(end, 1, key, key) for key in gate.landed()]
    return pulled


def step_seconds(sizes, forward_s, backward_s, rate, chain, steps=40):
    """The steady step time (seconds; the mean of the last half of `steps`) of modules of
    `sizes` bytes in forward order, each with forward_s and backward_s of compute, at `rate`
    bytes/s over `chain`. ValueError for no modules or a rate that is not positive."""
    if not sizes or rate <= 0 or steps < 4:
        raise ValueError("step_seconds needs modules, a positive rate and at least 4 steps")
    links, parts = _Links(chain.link == "shared"), partitions(sizes)
    t, pulled, starts = 0.0, [0.0] * len(sizes), []
    for _ in range(steps):
        starts.append(t)
        for m in range(len(sizes)):
            t = max(t, pulled[m]) + forward_s
        ready = [0.0] * len(sizes)
        for m in reversed(range(len(sizes))):
            t += backward_s
            ready[m] = t
        if chain.reports == "end":
            ready = [t] * len(sizes)
        pulled = _transfers(parts, ready, t, rate, chain, links)
    half = steps // 2
    return (starts[-1] - starts[half]) / (steps - 1 - half)


def rate_for(sizes, forward_s, backward_s, chain, target_s, low=1e8, high=1e12):
    """The smallest rate (bytes/s, to 0.1%) at which the step takes at most `target_s`; None
    when even `high` does not."""
    if step_seconds(sizes, forward_s, backward_s, high, chain) > target_s:
        return None
    while high / low > 1.001:
        mid = (low * high) ** 0.5
        if step_seconds(sizes, forward_s, backward_s, mid, chain) <= target_s:
            high = mid
        else:
            low = mid
    return high
