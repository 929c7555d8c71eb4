"""Workers: their batch sizes (hetero batching's b_i), compute-time distributions, links and
what each has done (iteration end times, waiting)."""

from pylib.simulation.links import Link


def hetero_batches(speeds, comm_s, global_batch):
    """Hetero batching's sizes (docs/MODES.md): b_i = v_i (K - c_i), K = (B + sum v c) / sum v,
    rounded by largest remainders so they sum to B, each at least 1.

    speeds: samples per compute second, per worker; comm_s: each worker's push + pull time."""
    total_v = sum(speeds)
    k = (global_batch + sum(v * c for v, c in zip(speeds, comm_s))) / total_v
    exact = [max(1.0, v * (k - c)) for v, c in zip(speeds, comm_s)]
    scale = global_batch / sum(exact)
    exact = [e * scale for e in exact]
    sizes = [max(1, int(e)) for e in exact]
    order = sorted(range(len(exact)), key=lambda i: (sizes[i] - exact[i], i))
    for i in order[:max(0, global_batch - sum(sizes))]:
        sizes[i] += 1
    return sizes


class Worker:
    """One worker: its links, batch, compute model and record."""

    def __init__(self, rank, scenario, batch, rng):
        self.rank = rank
        self.batch = batch
        self.up = Link(f"worker{rank}.out", scenario.worker_link_bps, scenario.latency_s)
        self.down = Link(f"worker{rank}.in", scenario.worker_link_bps, scenario.latency_s)
        slow = scenario.slowdown[rank] if scenario.slowdown else 1.0
        if scenario.ms_per_sample > 0:
            self.mean_compute_s = scenario.ms_per_sample * batch / 1000.0 * slow
        else:
            self.mean_compute_s = scenario.compute_s * slow
        self.cv = scenario.compute_cv
        self.rng = rng
        self.done = 0             # iterations (steps) finished
        self.ends = []            # time each iteration ended
        self.wait_s = []          # waiting (slot, parked pull) per iteration
        self.waiting_since = None
        self.wait_now = 0.0
        self.last_compute_s = 0.0
        self.last_push_s = 0.0
        self.finished = False
        self.compute_start = self.compute_end = 0.0   # the iteration's compute
        self.granted = False      # r2sp: this iteration's slot was granted
        self.granted_at = 0.0
        self.pushed_clocks = 0    # ssp: clocks pushed
        self.round = 0            # easgd/eawild: the exchange in progress

    def sample_compute(self):
        """One iteration's compute time: the mean, spread normally by cv (at least 10% of it)."""
        if self.cv == 0:
            return self.mean_compute_s
        t = self.rng.gauss(self.mean_compute_s, self.cv * self.mean_compute_s)
        return max(0.1 * self.mean_compute_s, t)

    def start_wait(self, now):
        self.waiting_since = now

    def end_wait(self, now):
        if self.waiting_since is not None:
            self.wait_now += now - self.waiting_since
            self.waiting_since = None

    def end_iteration(self, now):
        self.done += 1
        self.ends.append(now)
        self.wait_s.append(self.wait_now)
        self.wait_now = 0.0
