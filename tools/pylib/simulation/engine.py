"""The simulation: builds the servers, workers and mode of a Scenario and runs each worker's
loop (compute, then the mode's push and pull) on the event clock."""

import random

from pylib.simulation import modes, report
from pylib.simulation.clock import EventLoop
from pylib.simulation.host import HostCpu
from pylib.simulation.network import Network
from pylib.simulation.servers import Server, placement
from pylib.simulation.workers import Worker, hetero_batches


class Simulation:
    """One run of a Scenario. run() returns a report.Result."""

    def __init__(self, scenario):
        scenario.validate()
        self.sc = scenario
        self.loop = EventLoop()
        shares = placement(scenario.model_bytes, scenario.partition_bytes, scenario.servers)
        cores = scenario.calibration.host_cores
        self.host = HostCpu(cores) if cores else None   # None: a machine per server
        self.servers = [Server(i, scenario.server_link_bps, scenario.latency_s, share, self.host)
                        for i, share in enumerate(shares)]
        self.net = Network(scenario, self.servers)
        seeds = random.Random(scenario.seed)
        self.workers = [Worker(r, scenario, b, random.Random(seeds.getrandbits(64)))
                        for r, b in enumerate(self._batches())]
        self.order_rng = random.Random(seeds.getrandbits(64))   # servers' orders of a release
        self.live = len(self.workers)   # workers not finished
        self.mode = modes.make(scenario, self)

    def _batches(self):
        sc = self.sc
        if not sc.hetero:
            return [sc.batch] * sc.workers
        slow = sc.slowdown or [1.0] * sc.workers
        speeds = [1000.0 / (sc.ms_per_sample * f) for f in slow]
        comm = [self.comm_estimate()] * sc.workers
        return hetero_batches(speeds, comm, sc.batch * sc.workers)

    def comm_estimate(self):
        """A lone worker's push + pull time on idle links (hetero batching's c_i): the slower
        of its own link and the busiest server's, each way, plus the fixed costs."""
        sc, eff = self.sc, self.net.efficiency()
        share = max(s.share for s in self.servers)
        total = 0.0
        for ratio in (self.net.push_ratio, self.net.pull_ratio):
            bits = 8.0 * sc.model_bytes * ratio
            on_worker = bits / (sc.worker_link_bps * eff) if sc.worker_link_bps else 0.0
            on_server = bits * share / (sc.server_link_bps * eff) if sc.server_link_bps else 0.0
            total += max(on_worker, on_server) + sc.calibration.op_overhead_s
        return total

    def run(self, max_events=20_000_000):
        for w in self.workers:
            self.loop.at(0.0, self.start_compute, w, 0.0)
        self.loop.run(max_events)
        unfinished = [w.rank for w in self.workers if not w.finished]
        if unfinished:
            raise RuntimeError(f"workers {unfinished[:5]} never finished: the mode's barrier "
                               "or slot was never released (a simulator bug; please report)")
        return report.summarise(self)

    def start_compute(self, w, now, pull_done=None):
        """Starts an iteration's compute at `now`. With overlap the pull may still be running
        (pull_done): forward waits for its layers, so compute ends no sooner than the pull's
        end plus backward (2/3 of compute) and forward's last slice (1/48)."""
        c = w.sample_compute()
        w.last_compute_s = c
        end = now + c
        if pull_done is not None:
            end = max(end, pull_done + c * (2.0 / 3.0 + 1.0 / 48.0))
        w.compute_start, w.compute_end = now, end
        self.mode.on_compute_start(w, now, end)
        self.loop.at(end, self.mode.on_compute_done, w)

    def push(self, w, allowed, then):
        """Pushes w's gradient once it may (`allowed`: compute's end, or an r2sp grant); with
        overlap from backward's first gradient (the last 2/3 of compute) on, ending no sooner
        than the last slice after compute. Calls then(w) when every server has acked."""
        issue, not_before = allowed, 0.0
        if self.sc.overlap:
            issue = max(allowed, w.compute_end - w.last_compute_s * 2.0 / 3.0)
            not_before = w.compute_end + w.last_push_s / 16.0
        done = self.net.push(w, issue, not_before)
        w.last_push_s = done - issue
        self.loop.at(done, then, w)

    def pull_released(self, workers, now, ready):
        """bsp's release: the parked pulls of `workers`, served no sooner than `ready`. On a
        shared host each server serves them in an order of its own (Network.serve_released);
        else worker by worker."""
        served = (self.net.serve_released(workers, now, ready, self.order_rng)
                  if self.host else {})
        for w in workers:
            self.pull(w, now, ready, served=served.get(w.rank))

    def pull(self, w, now, ready=0.0, predict=False, then=None, served=None):
        """Pulls for w's next iteration at `now`, served no sooner than `ready` (`served`: when
        each server served it, if already decided). Without `then` the iteration ends with the
        pull (with overlap, when it is issued) and the next compute starts; else then(w) is
        called when it lands."""
        if ready > now:
            w.wait_now += ready - now
        done = self.net.pull(w, now, ready, predict, served)
        if then is not None:
            self.loop.at(done, then, w)
        elif self.sc.overlap:
            self.end_iteration(w, pull_done=done)
        else:
            self.loop.at(done, self.end_iteration, w)

    def end_iteration(self, w, pull_done=None):
        now = self.loop.now
        w.end_iteration(now)
        if w.done >= self.sc.iterations:
            w.finished = True
            self.live -= 1
            self.mode.on_finished(w)
        else:
            self.start_compute(w, now, pull_done)
