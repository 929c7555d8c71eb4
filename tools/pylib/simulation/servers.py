"""Servers: the model's partitions spread over them (each holds about the same bytes, as
common/model_layout does), each with an ingress and an egress link and a CPU that applies
pushes and computes r2sp's predicted weights in arrival order: one core of its own, or the
cores of a host that the whole job shares (host.py)."""

from pylib.simulation.host import Cpu
from pylib.simulation.links import Link


def placement(model_bytes, partition_bytes, servers):
    """Each server's fraction of the model: partitions of up to partition_bytes, largest first
    to the server holding the fewest bytes. A model with fewer partitions than servers leaves
    some servers empty."""
    count = max(1, int(-(-model_bytes // partition_bytes)))
    sizes = [partition_bytes] * (count - 1) + [model_bytes - partition_bytes * (count - 1)]
    held = [0.0] * servers
    for size in sorted(sizes, reverse=True):
        i = min(range(servers), key=lambda s: (held[s], s))
        held[i] += size
    return [h / model_bytes for h in held]


class Server:
    """One server: its links and its CPU (a FIFO of work on a core of its own, or on `cpu`, a
    host.HostCpu shared with the job's other servers)."""

    def __init__(self, index, rate_bps, latency_s, share, cpu=None):
        self.index = index
        self.ingress = Link(f"server{index}.in", rate_bps, latency_s)
        self.egress = Link(f"server{index}.out", rate_bps, latency_s)
        self.share = share
        self.cpu = cpu or Cpu()
        self.cpu_busy_s = 0.0   # this server's own work (the cpu may be shared)

    def work(self, ready, seconds):
        """Runs `seconds` of CPU work that can start at `ready`; returns when it ends."""
        self.cpu_busy_s += seconds
        return self.cpu.work(ready, seconds)
