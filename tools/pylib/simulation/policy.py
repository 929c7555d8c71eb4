"""The base class of every mode's policy: what a mode does between a worker's compute and its
next compute. A policy reacts to a worker's compute ending and its push being acked; the
default pushes, then pulls, and never waits (asp)."""


class Policy:
    """What a mode does between compute and the next compute. Subclasses override."""

    def __init__(self, sim):
        self.sim = sim
        self.loop = sim.loop

    def on_compute_start(self, w, start, end):
        pass

    def on_compute_done(self, w):
        # With overlap the push may begin during backward (engine.push takes it from there).
        allowed = w.compute_start if self.sim.sc.overlap else self.loop.now
        self.sim.push(w, allowed, self.on_push_done)

    def on_push_done(self, w):
        self.sim.pull(w, self.loop.now)

    def on_finished(self, w):
        pass
