"""A worker's push and pull over its link and the servers' (links.py): a message is the
worker's whole push on its own link and each server's share on that server's link, then the
server's CPU (apply, or r2sp's predicted weights; on a shared host also the share's copies)."""

from pylib.simulation import codecs
from pylib.simulation.links import reserve


class Network:
    """Pushes and pulls of a scenario's workers to its servers."""

    def __init__(self, scenario, servers):
        self.sc = scenario
        self.cal = scenario.calibration
        self.servers = [s for s in servers if s.share > 0]
        self.push_ratio = codecs.byte_ratio(scenario.push_codec)
        self.pull_ratio = codecs.byte_ratio(scenario.pull_codec)

    def efficiency(self):
        """Goodput as a fraction of the shaped rate. Fitted, empirical: where a shaped link
        meets a faster one (unshaped workers, one shaped server: the network-bound sweep and
        elastic averaging's runs), TCP gets link_efficiency of the rate in both directions; where
        both ends are shaped alike (the slot width's setting B: 2 servers, every link at
        419 Mbit/s), the full rate (docs/RESULTS.md#modes-on-a-contended-server-link,
        docs/RESULTS.md#many-workers-the-simulator)."""
        w, s = self.sc.worker_link_bps, self.sc.server_link_bps
        return 1.0 if w == s else self.cal.link_efficiency

    def _order(self, worker):
        # Workers start at different servers, as their partitions' sends interleave.
        k = worker.rank % len(self.servers)
        return self.servers[k:] + self.servers[:k]

    def _shares(self, worker, ratio):
        """(server, bytes, bytes before it on the worker's link), in the worker's send order."""
        before, out = 0.0, []
        for server in self._order(worker):
            nbytes = server.share * self.sc.model_bytes * ratio
            out.append((server, nbytes, before))
            before += nbytes
        return out, before

    def push(self, worker, now, not_before=0.0):
        """Issues worker's push at `now`; returns when every server has applied and acked it
        (no earlier than `not_before`: with overlap, the last gradient's slice)."""
        cal = self.cal
        eff = self.efficiency()
        shares, total = self._shares(worker, self.push_ratio)
        w_start, _ = reserve(worker.up, now, total, eff)
        done = now
        for server, nbytes, before in shares:
            _, end = reserve(server.ingress, now, nbytes, eff)
            sent = w_start + worker.up.seconds_for(before + nbytes, eff)
            arrive = max(end, sent) + worker.up.latency_s + server.ingress.latency_s
            applied = server.work(arrive, nbytes / self.push_ratio * cal.server_cpu_s_per_byte
                                  + nbytes * cal.host_cpu_s_per_byte)
            done = max(done, applied + server.ingress.latency_s)
        return max(done, not_before) + cal.op_overhead_s

    def _serve(self, server, now, ready, predict):
        """Server's CPU work for one pull share asked at `now`, served no earlier than `ready`;
        returns when it is served."""
        cpu = self.cal.server_cpu_s_per_byte if predict else 0.0
        nbytes = server.share * self.sc.model_bytes * self.pull_ratio
        asked = max(now + server.egress.latency_s, ready)
        return server.work(asked, nbytes / self.pull_ratio * cpu
                           + nbytes * self.cal.host_cpu_s_per_byte)

    def serve_released(self, workers, now, ready, rng):
        """The servers' work for pulls parked until `ready` and released together (bsp's
        clock), when every server serves them in an order of its own (`rng`'s shuffles),
        the servers taking turns: {rank: {server index: when served}}. On one host hundreds
        of worker threads race to each server, so a worker's place differs from server to
        server and most pulls end near the burst's end, as measured
        (docs/RESULTS.md#many-workers-the-simulator)."""
        orders = [rng.sample(workers, len(workers)) for _ in self.servers]
        served = {w.rank: {} for w in workers}
        for k in range(len(workers)):
            for server, order in zip(self.servers, orders):
                served[order[k].rank][server.index] = self._serve(server, now, ready, False)
        return served

    def pull(self, worker, now, ready=0.0, predict=False, served=None):
        """Issues worker's pull at `now`, served by each server no earlier than `ready` (bsp's
        clock, easgd's round); r2sp's predicted weights cost a pass on the server's CPU.
        `served`: when each server (by index) served its share, if serve_released did.
        Returns when every share has arrived."""
        eff = self.efficiency()
        shares, total = self._shares(worker, self.pull_ratio)
        first = now
        ends = []
        for server, nbytes, _ in shares:
            done = served[server.index] if served else self._serve(server, now, ready, predict)
            start, end = reserve(server.egress, done, nbytes, eff)
            first = min(first, start) if ends else start
            ends.append(end + server.egress.latency_s + worker.down.latency_s)
        _, w_end = reserve(worker.down, first, total, eff)
        return max(ends + [w_end]) + self.cal.op_overhead_s

    def apply_clock(self, now):
        """bsp and easgd: each server's update once a clock's (round's) pushes are in; returns
        when the last server is done."""
        cost = self.sc.model_bytes * self.cal.server_cpu_s_per_byte
        return max(s.work(now, s.share * cost) for s in self.servers)
