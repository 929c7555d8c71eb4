"""The two exceptions a job's run ends with, in a module of their own so that launcher,
supervisor and resume can all raise them without importing each other in a cycle; launcher
re-exports them (launcher.JobError is the name the scripts and backends use)."""


class JobError(Exception):
    """The job could not start or did not finish; the message says why (the scripts print it
    after "launch: error: " and exit with status 1)."""


class Interrupted(Exception):
    """A signal asked the job to stop (raised by an entry script's handler; exit status 130)."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum
