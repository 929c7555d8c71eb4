"""The two exceptions a job's run ends with, in a module of their own so that every part of
pylib (launcher, supervisor, resume, the deploy backends) raises them and the entry scripts
catch them from here, without importing each other in a cycle."""


class JobError(Exception):
    """The job could not start or did not finish; the message says why (the scripts print it
    after "launch: error: " and exit with status 1)."""


class Interrupted(Exception):
    """A signal asked the job to stop (raised by an entry script's handler; exit status 130)."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum
