"""easgd and eawild (docs/MODES.md, elastic averaging): workers step on their own copies and,
every elastic_period steps, pull the centre and push their elastic difference. easgd's pull of
round k waits until every live worker's round k-1 is added; eawild never waits."""

from collections import defaultdict

from pylib.simulation.policy import Policy


class Elastic(Policy):
    """The elastic exchange; a step without one ends with its compute."""

    def __init__(self, sim):
        super().__init__(sim)
        self.period = sim.sc.elastic_period
        self.synchronous = sim.sc.mode == "easgd"
        self.pushed = defaultdict(int)      # round -> differences added
        self.round_ready = {}               # round -> when the servers had added it
        self.parked = defaultdict(list)     # round waited for -> workers

    def on_compute_done(self, w):
        if (w.done + 1) % self.period:
            self.sim.end_iteration(w)
            return
        round_ = (w.done + 1) // self.period - 1
        w.round = round_
        if not self.synchronous or round_ == 0:
            self._pull(w, 0.0)
        elif round_ - 1 in self.round_ready:
            self._pull(w, self.round_ready[round_ - 1])
        else:
            w.start_wait(self.loop.now)
            self.parked[round_ - 1].append(w)

    def _pull(self, w, ready):
        w.end_wait(self.loop.now)
        self.sim.pull(w, self.loop.now, ready, then=self._pulled)

    def _pulled(self, w):
        self.sim.push(w, self.loop.now, self._pushed)

    def _pushed(self, w):
        if self.synchronous:
            self.pushed[w.round] += 1
            self._complete(w.round)
        self.sim.end_iteration(w)

    def _complete(self, round_):
        if round_ in self.round_ready or self.pushed[round_] < self.sim.live:
            return
        now = self.loop.now
        self.round_ready[round_] = self.sim.net.apply_clock(now)
        for w in self.parked.pop(round_, []):
            self._pull(w, self.round_ready[round_])

    def on_finished(self, w):
        if self.synchronous:
            for round_ in list(self.parked):
                self._complete(round_)
