"""--timeout, checked in one place by every loop that follows a job (the local supervisor and the
remote backends' driver)."""

import time

from .errors import JobError


class Deadline:
    """A job's --timeout, counted from `start` (time.time())."""

    def __init__(self, start, timeout):
        self.start = start
        self.timeout = timeout

    def elapsed(self):
        return time.time() - self.start

    def passed(self):
        return self.elapsed() > self.timeout

    def check(self):
        """JobError once the job has run past its timeout."""
        if self.passed():
            raise JobError(f"the job ran past --timeout={self.timeout:g}s")
