"""The synchronous and asynchronous modes with one model copy (docs/MODES.md): bsp's clock
barrier, ssp's staleness bound, asp; make() picks any mode's policy, r2sp and the elastic
modes included. The policies' base class is policy.Policy; this module sits above every
policy module and none of them imports it."""

from collections import defaultdict

from pylib.simulation import elastic, r2sp_mode
from pylib.simulation.policy import Policy


class Asp(Policy):
    """Pushes are applied on arrival and pulls never wait."""


class Bsp(Policy):
    """A clock's pulls wait until every live worker's gradient of that clock is applied."""

    def __init__(self, sim):
        super().__init__(sim)
        self.pushed = defaultdict(int)
        self.parked = defaultdict(list)

    def on_push_done(self, w):
        clock = w.done
        self.pushed[clock] += 1
        w.start_wait(self.loop.now)
        self.parked[clock].append(w)
        self._release(clock)

    def _release(self, clock):
        if self.pushed[clock] < self.sim.live or not self.parked[clock]:
            return
        now = self.loop.now
        ready = self.sim.net.apply_clock(now)
        released = self.parked.pop(clock)
        for w in released:
            w.end_wait(now)
        self.sim.pull_released(released, now, ready)

    def on_finished(self, w):
        for clock in list(self.parked):
            self._release(clock)


class Ssp(Policy):
    """A worker may start clock c+1 only while the slowest live worker has pushed at least
    c+1-s clocks (its pull is parked until then)."""

    def __init__(self, sim):
        super().__init__(sim)
        self.parked = []

    def on_push_done(self, w):
        w.pushed_clocks = w.done + 1
        self.parked.append(w)
        self._release()

    def _release(self):
        live = [x.pushed_clocks for x in self.sim.workers if not x.finished]
        slowest = min(live) if live else float("inf")
        keep = []
        for w in self.parked:
            if slowest >= w.pushed_clocks - self.sim.sc.staleness:
                w.end_wait(self.loop.now)
                self.sim.pull(w, self.loop.now)
            else:
                if w.waiting_since is None:
                    w.start_wait(self.loop.now)
                keep.append(w)
        self.parked = keep

    def on_finished(self, w):
        self._release()


def make(scenario, sim):
    """The policy for scenario.mode."""
    policies = {"bsp": Bsp, "ssp": Ssp, "asp": Asp, "r2sp": r2sp_mode.R2sp,
                "easgd": elastic.Elastic, "eawild": elastic.Elastic}
    return policies[scenario.mode](sim)
