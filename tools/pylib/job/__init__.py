"""A job's run: launch options, its processes, the local run and its supervision, --resume,
the job's CurveZMQ keys, and the errors a run ends with."""
