"""The simulation's clock: a queue of timed callbacks, run in time order (ties in the order
they were scheduled, so a run is deterministic)."""

import heapq


class EventLoop:
    """Runs callbacks at simulated times. Not thread-safe; one loop per simulation."""

    def __init__(self):
        self.now = 0.0
        self._queue = []
        self._seq = 0
        self.events = 0

    def at(self, when, callback, *args):
        """Runs callback(*args) at time `when` (never before now)."""
        when = max(when, self.now)
        heapq.heappush(self._queue, (when, self._seq, callback, args))
        self._seq += 1

    def run(self, max_events):
        """Runs until nothing is left. Raises RuntimeError past max_events (a model that never
        ends, for instance a barrier nobody releases)."""
        while self._queue:
            when, _, callback, args = heapq.heappop(self._queue)
            self.now = when
            callback(*args)
            self.events += 1
            if self.events > max_events:
                raise RuntimeError(f"simulation did not finish within {max_events} events: "
                                   "lower --iterations or --workers")
