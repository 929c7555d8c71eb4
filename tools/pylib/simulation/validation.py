"""The validation data set (tools/simulate_data/validation.json): measured settings and
figures, each simulated with one global calibration and compared with the measurement."""

from dataclasses import dataclass
import json
import os

from pylib.simulation.engine import Simulation
from pylib.simulation.scenario import Calibration, Scenario

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "simulate_data", "validation.json")


@dataclass
class Check:
    """One entry: what was measured, what the simulator gives, and the relative error."""
    name: str
    metric: str
    measured: float
    simulated: float
    matched: bool          # the entry is expected within the tolerance (false: documented why not)

    @property
    def error(self):
        return self.simulated / self.measured - 1.0


def load(path=DATA):
    """The data set's entries. Raises ValueError naming a malformed entry."""
    with open(path) as f:
        entries = json.load(f)["entries"]
    for e in entries:
        missing = {"name", "source", "command", "scenario", "measured"} - set(e)
        if missing:
            raise ValueError(f"{path}: entry {e.get('name', '?')} lacks {sorted(missing)}")
    return entries


def scenario_of(entry, calibration=None):
    # The entries were measured before the gap's cap at a multiple of the hold: the paper's gap,
    # unless an entry says otherwise.
    fields = {"gap_holds": 0, **entry["scenario"]}
    return Scenario(calibration=calibration or Calibration(), **fields)


def check(entry, calibration=None):
    """Simulates one entry and compares the metric it measured."""
    result = Simulation(scenario_of(entry, calibration)).run()
    metric, measured = next(iter(entry["measured"].items()))
    return Check(entry["name"], metric, measured, getattr(result, metric),
                 entry.get("matched", True))


def check_all(calibration=None, path=DATA):
    return [check(e, calibration) for e in load(path)]
