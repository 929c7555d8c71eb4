"""DDP's communication hooks for --backend=ddp: none (DDP's own all-reduce), fp16 (DDP's fp16
compression hook, default_hooks.fp16_compress_hook), and --ddp_timing, which times whichever
runs (AllReduceTimer) so that a DDP run's metrics split its step as an R2SP worker's do: how
long each step's all-reduce took, how much of it came after the last gradient was ready (not
hidden behind backward), and the bytes it sent. Timing wraps allreduce_hook, the hook PyTorch
documents as "the same as the case where no hook was registered"."""

import time


def _default_hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    return default_hooks


class AllReduceTimer:
    """A DDP communication hook (run) that runs `hook` and times it. DDP calls it once per gradient
    bucket as backward makes each ready; its future completes when that bucket's all-reduce
    has. `wire_bytes`: bytes per gradient element on the wire (2 for fp16)."""

    def __init__(self, hook, wire_bytes=4):
        self.hook, self.wire_bytes = hook, wire_bytes
        self.reset()

    def reset(self):
        self.first_ready = self.last_ready = self.last_done = None
        self.bytes = 0

    def run(self, state, bucket):
        """The hook (DDP registers this bound method: it reads a hook's name)."""
        now = time.perf_counter()
        self.first_ready = self.first_ready if self.first_ready is not None else now
        self.last_ready = now
        self.bytes += bucket.buffer().numel() * self.wire_bytes

        def done(fut):
            self.last_done = time.perf_counter()
            return fut.value()
        return self.hook(state, bucket).then(done)

    def take(self):
        """(seconds from the first bucket ready to the last all-reduced, seconds of that after
        the last bucket was ready, bytes sent) of the step just done; then starts afresh."""
        if self.first_ready is None or self.last_done is None:
            self.reset()
            return 0.0, 0.0, 0
        result = (self.last_done - self.first_ready, max(0.0, self.last_done - self.last_ready),
                  self.bytes)
        self.reset()
        return result


def register(model, hook, timing):
    """Registers on `model` (a DistributedDataParallel) the hook --ddp_comm_hook names ("none":
    no hook unless timing), timed with `timing`; returns the AllReduceTimer or None."""
    if hook == "none" and not timing:
        return None
    hooks = _default_hooks()
    inner = hooks.fp16_compress_hook if hook == "fp16" else hooks.allreduce_hook
    if not timing:
        model.register_comm_hook(None, inner)
        return None
    timer = AllReduceTimer(inner, wire_bytes=2 if hook == "fp16" else 4)
    model.register_comm_hook(None, timer.run)
    return timer
