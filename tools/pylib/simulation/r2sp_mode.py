"""r2sp: after compute a worker asks the scheduler for its slot (SLOT), pushes once granted,
releases (RELEASE) when the push is acked (or after the pull with the paper's push + pull
slot) and pulls the servers' predicted weights. Every scheduler message takes control_s one
way; the scheduler grants with the SlotPlanner's rules (slots.py)."""

from pylib.simulation.policy import Policy
from pylib.simulation.slots import SlotPlanner


class R2sp(Policy):
    """The slot protocol between the workers and the scheduler."""

    def __init__(self, sim):
        super().__init__(sim)
        sc = sim.sc
        self.control = sc.calibration.control_s
        self.planner = SlotPlanner([w.rank for w in sim.workers], sc.headroom, sc.slot_width,
                                   sc.order() == "first_come", gap_holds=sc.gap_holds)
        self.wakeups = set()
        self.spans = []           # (grant received, push acked) of every push, in grant order

    def on_compute_start(self, w, start, end):
        w.granted = False
        if self.sim.sc.overlap:  # ask one predicted push before backward ends
            ask = max(start, end - w.last_push_s - 2 * self.control)
            self.loop.at(ask, self._ask, w)

    def on_compute_done(self, w):
        if not w.granted:
            w.start_wait(self.loop.now)
        if not self.sim.sc.overlap:
            self._ask(w)

    def _ask(self, w):
        self.loop.at(self.loop.now + self.control, self._request, w)

    def _request(self, w):
        self.planner.request(w.rank, w.last_compute_s)
        self._poll()

    def _poll(self):
        now = self.loop.now
        while True:
            rank = self.planner.poll(now)
            if rank is None:
                break
            self.loop.at(now + self.control, self._granted, self.sim.workers[rank])
        wake = self.planner.next_wakeup()
        if wake is not None and wake > now and wake not in self.wakeups:
            self.wakeups.add(wake)
            self.loop.at(wake, self._wake, wake)

    def _wake(self, when):
        self.wakeups.discard(when)
        self._poll()

    def _granted(self, w):
        now = self.loop.now
        w.granted = True
        w.end_wait(now)
        w.granted_at = now
        self.sim.push(w, now, self._pushed)

    def _pushed(self, w):
        self.spans.append((w.granted_at, self.loop.now))
        if self.sim.sc.slot_covers_pull:
            self.sim.pull(w, self.loop.now, predict=True, then=self._pulled_in_slot)
            return
        self._release(w)
        self.sim.pull(w, self.loop.now, predict=True)

    def _pulled_in_slot(self, w):
        self._release(w)
        self.sim.end_iteration(w)

    def _release(self, w):
        self.loop.at(self.loop.now + self.control, self._released, w.rank)

    def _released(self, rank):
        self.planner.release(rank, self.loop.now)
        self._poll()

    def on_finished(self, w):
        self.loop.at(self.loop.now + self.control, self._leave, w.rank)

    def _leave(self, rank):
        self.planner.remove(rank, finished=True)
        self._poll()
