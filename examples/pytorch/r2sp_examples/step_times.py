"""--step_times=PATH: one JSON line per training step, the same under every backend, so that
the time a step spends outside the script's own compute (the backend's exchange and the loop's
bookkeeping) can be told apart from its forward and backward, whichever build of the client
runs it (tools/bench/pytorch_client --measure=baseline reads these files)."""

import json

RANK_FIELD = "{rank}"


def path_for(path, rank):
    """This process's file: PATH with {rank} replaced by `rank`, or PATH.RANK when PATH has no
    {rank} (processes of one job never share a file)."""
    if RANK_FIELD in path:
        return path.replace(RANK_FIELD, str(rank))
    return f"{path}.{rank}"


class StepTimes:
    """Writes {"step": k (0-based, across epochs), "compute_s": the step's forward and
    backward as the loop times them (the batch moved to the device, zero_grad, the loss read
    back; ddp: with the all-reduce inside backward; ddp and single: with their
    --emulate_ms_per_sample sleep, which under r2sp the worker takes outside them),
    "interval_s": from the previous step's end (or its epoch's start) to this step's end}, one
    line per step, to path_for(path, rank) (created anew); with path "" it writes nothing.
    Not thread-safe: the training loop writes it."""

    def __init__(self, path, rank):
        self.file = open(path_for(path, rank), "w") if path else None

    def step(self, step, compute_s, interval_s):
        if self.file is not None:
            self.file.write(json.dumps({"step": step, "compute_s": round(compute_s, 9),
                                        "interval_s": round(interval_s, 9)}) + "\n")

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None
