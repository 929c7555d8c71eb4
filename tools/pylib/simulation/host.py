"""One machine's cores shared by every process of a job on it (Calibration.host_cores): the servers'
applies and the copies of every push and pull at both ends queue for the same few cores, as a job of
synthetic workers as threads does on this 2-core machine
(docs/RESULTS.md#many-workers-the-simulator)."""


class Cpu:
    """One core of its own: a FIFO of work (a server on a machine of its own)."""

    def __init__(self):
        self.free_at = 0.0
        self.busy_s = 0.0

    def work(self, ready, seconds):
        """Runs `seconds` of work that can start at `ready`; returns when it ends."""
        start = max(ready, self.free_at)
        self.free_at = start + seconds
        self.busy_s += seconds
        return self.free_at


class HostCpu:
    """`cores` cores shared by whoever submits work: each piece goes, whole, to the core that
    is free first (ties: the lower index), in the order submitted."""

    def __init__(self, cores):
        if cores < 1:
            raise ValueError(f"a host needs at least 1 core (got {cores})")
        self.cores = [Cpu() for _ in range(cores)]

    @property
    def busy_s(self):
        return sum(c.busy_s for c in self.cores)

    def work(self, ready, seconds):
        """Runs `seconds` of work that can start at `ready` on the first core free; returns when
        it ends."""
        core = min(self.cores, key=lambda c: max(ready, c.free_at))
        return core.work(ready, seconds)
