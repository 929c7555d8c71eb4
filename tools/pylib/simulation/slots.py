"""R2SP's slot planner, as scheduler/slot_planner.cc decides: a ring in rank order (or first
come), up to `width` holders, grants at least gap = T / (h * W) apart, T an exponential average
(weight 0.2) of the compute times the workers report, W the ring plus those that finished; with
gap_holds k > 0 the gap is at most k * H, H the same average of the holds (grant to release)."""

import bisect


class SlotPlanner:
    """The scheduler's slot state. Times are the simulation's."""

    def __init__(self, ranks, headroom, width, first_come, smoothing=0.2, gap_holds=0):
        self.ring = sorted(ranks)
        self.headroom = headroom
        self.gap_holds = gap_holds
        self.mean_hold = None
        self.width = width
        self.first_come = first_come
        self.smoothing = smoothing
        self.finished = 0
        self.next = 0
        self.holds = {}           # holder -> when it was granted
        self.waiting = {}         # rank -> None, in the order they asked
        self.members = set(self.ring)
        self.last_grant = float("-inf")
        self.mean_compute = None
        self.grants = []          # (time, rank), in order

    def request(self, rank, compute_s):
        if rank not in self.members or rank in self.waiting:
            raise ValueError(f"worker {rank} cannot ask for a slot now")
        self.waiting[rank] = None
        if compute_s > 0:
            self.mean_compute = self._smoothed(self.mean_compute, compute_s)

    def release(self, rank, now):
        if rank not in self.holds:
            raise ValueError(f"worker {rank} does not hold the slot")
        self.mean_hold = self._smoothed(self.mean_hold, max(0.0, now - self.holds.pop(rank)))

    def _smoothed(self, mean, sample):
        """The exponential average `mean` (None: no sample yet) with `sample` added."""
        return sample if mean is None else (1 - self.smoothing) * mean + self.smoothing * sample

    def remove(self, rank, finished):
        """Takes `rank` out of the ring (done training: it still counts in the gap's W)."""
        index = bisect.bisect_left(self.ring, rank)
        self.ring.pop(index)
        self.members.discard(rank)
        self.waiting.pop(rank, None)
        self.holds.pop(rank, None)
        self.finished += 1 if finished else 0
        if index < self.next:
            self.next -= 1
        if not self.ring or self.next >= len(self.ring):
            self.next = 0

    def gap(self):
        if not self.ring or self.mean_compute is None:
            return 0.0
        paper = self.mean_compute / (self.headroom * (len(self.ring) + self.finished))
        if not self.gap_holds or self.mean_hold is None:
            return paper
        return min(paper, self.gap_holds * self.mean_hold)

    def candidate(self):
        if len(self.holds) >= self.width or not self.ring or not self.waiting:
            return None
        if self.first_come:
            return next(iter(self.waiting))
        turn = self.ring[self.next]
        return turn if turn in self.waiting else None

    def next_wakeup(self):
        """When poll could next grant without another request or release (None: never)."""
        return None if self.candidate() is None else self.last_grant + self.gap()

    def poll(self, now):
        """The rank granted now, if any (at most one per call)."""
        rank = self.candidate()
        if rank is None or now < self.last_grant + self.gap() - 1e-12:
            return None
        del self.waiting[rank]
        self.holds[rank] = now
        self.last_grant = now
        self.next = (bisect.bisect_left(self.ring, rank) + 1) % len(self.ring)
        self.grants.append((now, rank))
        return rank
