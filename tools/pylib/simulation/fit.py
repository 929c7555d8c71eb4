"""Fits the Calibration's link efficiency, per-operation overhead and scheduler message time
once, globally, to the validation entries expected to match: the grid point with the smallest
largest relative error (tools/simulate --fit)."""

import itertools

from pylib.simulation import validation
from pylib.simulation.scenario import Calibration

EFFICIENCIES = [0.70 + 0.02 * i for i in range(11)]
OVERHEADS = [0.0, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04]
CONTROLS = [0.001, 0.002, 0.004, 0.008]


def worst_error(calibration, entries):
    """The largest |simulated / measured - 1| over entries."""
    return max(abs(validation.check(e, calibration).error) for e in entries)


def fit(entries=None, grid=None):
    """(best Calibration, its worst error) over the grid (efficiency, overhead, control)."""
    entries = [e for e in (entries or validation.load()) if e.get("matched", True)]
    if not entries:
        raise ValueError("no validation entries expected to match: nothing to fit")
    best = None
    for eff, over, ctl in grid or itertools.product(EFFICIENCIES, OVERHEADS, CONTROLS):
        cal = Calibration(link_efficiency=round(eff, 4), op_overhead_s=over, control_s=ctl)
        err = worst_error(cal, entries)
        if best is None or err < best[1] - 1e-12:
            best = (cal, err)
    return best
