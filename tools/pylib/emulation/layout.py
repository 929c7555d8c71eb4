"""Where a job's processes go in an emulated cluster (tools/netcluster): which machines (network
namespaces) it needs, which processes share a machine, each machine's link rate and CPU quotas,
and which link the self-check and the link counters watch. Dedicated server machines are the
default; with colocate, server i runs on worker i's machine, sharing its address and its link
(BytePS's advice when there are no spare machines); a DDP job has only its workers' machines."""

import dataclasses
from typing import Dict, List, Optional


@dataclasses.dataclass
class Layout:
    """An emulated cluster's machines and who runs where."""
    machines: List[str]  # one namespace each, in address order ("scheduler", "server0", ...)
    colocated: Dict[str, str]  # process host -> the machine it shares ("server0": "worker0")
    rates: Dict[str, Optional[str]]  # machine -> its link's rate (tc text), None: unshaped

    def machine(self, host):
        """The machine process host `host` runs on."""
        return self.colocated.get(host, host)

    def rate(self, host):
        """The rate of the link process host `host` uses (its machine's)."""
        return self.rates.get(self.machine(host))


def plan(servers, workers, server_link="", worker_link="", colocate=False, ddp=False):
    """The Layout of a job with `servers` servers and `workers` workers (ddp: a DDP job, only
    workers). ValueError where colocate cannot place the servers or is given a server link."""
    if colocate and not ddp:
        if servers > workers:
            raise ValueError(f"--colocate puts server i on worker i's machine: {servers} "
                             f"servers need at least as many workers (got {workers})")
        if server_link:
            raise ValueError("--colocate: a server shares its worker's link; give --worker_link "
                             "only, not --server_link")
    worker_hosts = [f"worker{i}" for i in range(workers)]
    server_hosts = [f"server{i}" for i in range(servers)]
    if ddp:
        machines, colocated = worker_hosts, {}
    elif colocate:
        machines = ["scheduler"] + worker_hosts
        colocated = {s: w for s, w in zip(server_hosts, worker_hosts)}
    else:
        machines, colocated = ["scheduler"] + server_hosts + worker_hosts, {}
    rates = {m: (server_link if m.startswith("server") else
                 worker_link if m.startswith("worker") else "") or None for m in machines}
    return Layout(machines, colocated, rates)


def parse_quotas(items, workers):
    """{"workerN": CPUs} from --cpu_quota values "RANK:FRACTION"; ValueError saying what is
    wrong with an item (not RANK:FRACTION, a rank outside [0, workers), a share outside
    [0.1, 64])."""
    quotas = {}
    for item in items:
        rank, _, fraction = item.partition(":")
        try:
            index, share = int(rank), float(fraction)
        except ValueError:
            raise ValueError(f"--cpu_quota wants RANK:FRACTION, got {item!r}") from None
        if not 0 <= index < workers or not 0.1 <= share <= 64:
            raise ValueError(f"--cpu_quota {item!r}: rank must be in [0, {workers}) and the "
                             "fraction in [0.1, 64] CPUs")
        quotas[f"worker{index}"] = share
    return quotas


def watched_hosts(layout, servers, ddp=False):
    """The process hosts whose links' counters are logged (link_bytes.jsonl): every server and
    worker 0 (a DDP job's: worker 0 only). A colocated server's are its machine's."""
    return ([] if ddp else [f"server{i}" for i in range(servers)]) + ["worker0"]


def probe_pair(layout):
    """(sender, receiver) of the self-check: into server 0's link, or worker 0's where there is
    no server (DDP), from the first other machine (a colocated server's own worker would send
    over loopback)."""
    receiver = "server0" if "server0" in layout.machines or "server0" in layout.colocated \
        else "worker0"
    for sender in ("worker0", "worker1", "scheduler"):
        if sender in layout.machines and layout.machine(sender) != layout.machine(receiver):
            return sender, receiver
    return None, receiver
