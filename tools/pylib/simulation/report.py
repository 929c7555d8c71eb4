"""A run's figures (steady iterations/s and samples/s per worker and for the job, waiting,
link and server-CPU utilisation) as a record, a table and JSON."""

from dataclasses import asdict, dataclass, field
import json


@dataclass
class Result:
    """What one simulation measured. Rates leave out each worker's first `skip` iterations."""
    mode: str
    workers: int
    servers: int
    iterations_per_s: float        # sum of the workers' steady rates (compare_modes' it/s)
    samples_per_s: float
    job_iterations_per_s: float    # all iterations over the job's span
    mean_iteration_s: float
    mean_wait_s: float             # per iteration
    span_s: float
    worker_iterations_per_s: list = field(default_factory=list)
    worker_samples_per_s: list = field(default_factory=list)
    batches: list = field(default_factory=list)
    server_in_utilisation: list = field(default_factory=list)
    server_out_utilisation: list = field(default_factory=list)
    worker_out_utilisation: float = 0.0   # mean over workers
    server_cpu_utilisation: list = field(default_factory=list)
    events: int = 0


def _steady_rate(ends, skip):
    start = ends[skip - 1] if skip > 0 else 0.0
    return (len(ends) - skip) / (ends[-1] - start) if ends[-1] > start else 0.0


def summarise(sim):
    """The Result of a finished Simulation."""
    sc, workers = sim.sc, sim.workers
    span = max(w.ends[-1] for w in workers)
    rates = [_steady_rate(w.ends, sc.skip) for w in workers]
    total = sum(w.done for w in workers)
    waits = [x for w in workers for x in w.wait_s[sc.skip:]]
    iteration = [(w.ends[-1] - (w.ends[sc.skip - 1] if sc.skip else 0.0)) / (w.done - sc.skip)
                 for w in workers]

    def util(busy):
        return round(busy / span, 4) if span > 0 else 0.0

    return Result(
        mode=sc.mode, workers=sc.workers, servers=sc.servers,
        iterations_per_s=round(sum(rates), 4),
        samples_per_s=round(sum(r * w.batch for r, w in zip(rates, workers)), 2),
        job_iterations_per_s=round(total / span, 4) if span > 0 else 0.0,
        mean_iteration_s=round(sum(iteration) / len(iteration), 5),
        mean_wait_s=round(sum(waits) / len(waits), 5) if waits else 0.0,
        span_s=round(span, 4),
        worker_iterations_per_s=[round(r, 4) for r in rates],
        worker_samples_per_s=[round(r * w.batch, 2) for r, w in zip(rates, workers)],
        batches=[w.batch for w in workers],
        server_in_utilisation=[util(s.ingress.busy_s) for s in sim.servers],
        server_out_utilisation=[util(s.egress.busy_s) for s in sim.servers],
        worker_out_utilisation=util(sum(w.up.busy_s for w in workers) / len(workers)),
        server_cpu_utilisation=[util(s.cpu_busy_s) for s in sim.servers],
        events=sim.loop.events)


def table(results, per_worker_up_to=16):
    """A text table, one line per Result, then each job's workers where it has no more than
    per_worker_up_to (the JSON has them all)."""
    lines = [f"{'mode':8} {'workers':>7} {'servers':>7} {'it/s':>9} {'samples/s':>10} "
             f"{'iter (s)':>9} {'wait (s)':>9} {'server in':>9} {'server out':>10}"]
    for r in results:
        lines.append(
            f"{r.mode:8} {r.workers:7d} {r.servers:7d} {r.iterations_per_s:9.3f} "
            f"{r.samples_per_s:10.1f} {r.mean_iteration_s:9.4f} {r.mean_wait_s:9.4f} "
            f"{max(r.server_in_utilisation):9.0%} {max(r.server_out_utilisation):10.0%}")
    for r in results:
        if r.workers <= per_worker_up_to:
            lines.append(f"{r.mode} per worker (it/s, samples/s, batch): " + ", ".join(
                f"{i}: {it:.3f} {sps:.1f} {b}" for i, (it, sps, b) in enumerate(
                    zip(r.worker_iterations_per_s, r.worker_samples_per_s, r.batches))))
    return "\n".join(lines)


def to_json(results):
    return json.dumps([asdict(r) for r in results], indent=1)
