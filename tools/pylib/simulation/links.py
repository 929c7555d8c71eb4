"""Links: one direction of a network interface, with a rate, a latency and FIFO sharing.

A link serves one transfer at a time, in the order they were issued (FIFO). We chose FIFO over fair
sharing because it is what the measurements show: in bsp on one contended server link
(docs/RESULTS.md#modes-on-a-contended-server-link) the 8 pulls that leave the server together do not
finish together, as fair sharing would make them (which predicts a bsp slower than measured);
the first puller computes while the last is still pulling. A message
between a worker and the servers is one transfer on the worker's link (all of it) and one on each
server's link (that server's share): the two ends are reserved independently, and a share arrives
when both its end on the server's link and the bytes before it on the worker's link have passed
(store-and-forward would make a worker's shares queue behind each other at servers that are
free)."""

from dataclasses import dataclass


@dataclass
class Link:
    """One direction of a link. rate_bps None: unlimited (loopback-fast beside the others)."""
    name: str
    rate_bps: float = None
    latency_s: float = 0.0
    free_at: float = 0.0
    busy_s: float = 0.0
    bytes_sent: float = 0.0

    def seconds_for(self, nbytes, efficiency):
        if self.rate_bps is None:
            return 0.0
        return 8.0 * nbytes / (self.rate_bps * efficiency)


def reserve(link, now, nbytes, efficiency):
    """Queues `nbytes` on `link` at `now` (FIFO); returns (start, end) on the link."""
    start = max(now, link.free_at)
    duration = link.seconds_for(nbytes, efficiency)
    link.free_at = start + duration
    link.busy_s += duration
    link.bytes_sent += nbytes
    return start, start + duration
