"""The simulator against real jobs on this machine (tools/bench/simulator_check;
docs/RESULTS.md#many-workers-the-simulator): the calibration of a job that shares one host, measured
by two small jobs at each worker count, and each measured job as a Scenario the simulator runs.

The calibration jobs (HostJob-like records with their figures), each with as many workers as
the jobs it calibrates, since what a byte and a message cost grows with the threads, processes
and heartbeats the host carries:
  saturate  asp with no compute: every worker pushes and pulls as fast as it can, so the job's
            CPU is busy moving bytes: host_cores is the cores it got (rounded, at least 1; the
            machine has 2, and other users) and host_cpu_s_per_byte those cores over the bytes
            per second it moved (both ends, every process, and what other users left it);
  ring      r2sp with short compute: the slot is release-bound, each grant waits for the
            holder's push, so pushes go one at a time and pulls mostly alone: the fixed cost of
            a push or pull (op_overhead_s) is their mean less the model's time for the same
            bytes on an idle host, and the grants' mean spacing is a push plus two scheduler
            messages (control_s each way)."""

import json
import math
import os
import statistics

from pylib.simulation.engine import Simulation
from pylib.simulation.scenario import Calibration, Scenario
from pylib.simulation.validation import Check

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "simulate_data", "host_runs.json")


def lone_op_s(cores, servers, share_bytes, cpu_s_per_byte):
    """The model's time for one push or pull of `servers` equal shares on an idle host of
    `cores` cores: the shares in rounds of `cores`."""
    return math.ceil(servers / cores) * share_bytes * cpu_s_per_byte


def calibrate(saturate, ring, servers, model_bytes):
    """The Calibration of this host from the calibration jobs' figures (job_cores,
    bytes_per_s, push_s, pull_s and gap_achieved_ms as host_jobs.JobFigures has them), for
    jobs on `servers` servers of a `model_bytes` model. ValueError if a figure is missing."""
    if saturate.bytes_per_s <= 0 or ring.gap_achieved_ms <= 0:
        raise ValueError("calibration jobs without a throughput or slot gap: rerun them")
    cores = max(1, round(saturate.job_cores))
    per_byte = cores / saturate.bytes_per_s
    lone_s = lone_op_s(cores, servers, model_bytes / servers, per_byte)
    overhead = max(0.0, (ring.push_s + ring.pull_s) / 2 - lone_s)
    control = max(0.0, (ring.gap_achieved_ms / 1000 - ring.push_s) / 2)
    return Calibration(link_efficiency=1.0, op_overhead_s=overhead, control_s=control,
                       server_cpu_s_per_byte=0.0, host_cores=cores,
                       host_cpu_s_per_byte=per_byte)


def scenario(job, calibration, compute_s, compute_cv):
    """The Scenario of a host job (host_jobs.HostJob's fields as a dict) whose workers computed
    `compute_s` on average with spread `compute_cv`: loopback links (unlimited, 10 µs a hop) and
    the host's calibration (the servers' own CPU is in its host_cpu_s_per_byte). The recorded
    jobs ran before the gap's cap at a multiple of the hold (--r2sp_gap_holds): the paper's gap,
    unless the job says otherwise."""
    return Scenario(mode=job["mode"], workers=job["workers"], servers=job["servers"],
                    model_bytes=job["model_mb"] * 2**20, partition_bytes=job["partition_bytes"],
                    compute_s=compute_s, compute_cv=compute_cv, gap_holds=job.get("gap_holds", 0),
                    latency_s=1e-5, iterations=job["iterations"], calibration=calibration)


TOLERANCE = 0.10  # |simulated / measured - 1| for the entries expected to match

# The calibration jobs (host_jobs.HostJob's fields), run at each worker count.
RING = dict(mode="r2sp", compute_ms=10)
SATURATE = dict(mode="asp", compute_ms=0)


def ring_iterations(workers):
    """The ring job's iterations: about 2,560 grants in all (a second or two at 64 workers),
    at least 8."""
    return max(8, 2560 // workers)


def saturate_iterations(workers):
    """The saturating job's iterations: about 3,840 pushes and pulls in all (a few seconds
    here, long enough for the CPU meter), at least 10: with 5 (2 steady after the first 3)
    1,024 threads on 2 cores ran so staggered that the steady window held little of the job."""
    return max(10, 3840 // workers)


class Figures:
    """A record's figures (a dict of host_jobs.JobFigures' fields) as attributes."""

    def __init__(self, values):
        self.__dict__.update(values)


def medians(runs):
    """{figure: median over the runs} of a list of JobFigures-like dicts."""
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def calibration_of(data, workers):
    """The Calibration a recorded data set (tools/simulate_data/host_runs.json) gives for jobs
    of `workers` workers. ValueError naming a missing calibration job."""
    jobs = data["calibration_jobs"]
    names = (f"ring_{workers}", f"saturate_{workers}")
    missing = [n for n in names if n not in jobs]
    if missing:
        raise ValueError(f"no calibration job {', '.join(missing)} in the data: rerun "
                         "tools/bench/simulator_check with that worker count")
    ring, sat = (Figures(jobs[n]["figures"]) for n in names)
    return calibrate(sat, ring, data["servers"], data["model_mb"] * 2**20)


def check_entry(data, entry):
    """Simulates one recorded job with its worker count's calibration: a validation.Check."""
    job, figures = entry["job"], entry["figures"]
    sc = scenario(job, calibration_of(data, job["workers"]), figures["compute_s"],
                  figures["compute_cv"])
    result = Simulation(sc).run()
    return Check(entry["name"], "iterations_per_s", figures["iterations_per_s"],
                 result.iterations_per_s, entry.get("matched", True))


def load(path=DATA):
    """The recorded data set. ValueError naming what is malformed."""
    with open(path) as f:
        data = json.load(f)
    for key in ("servers", "model_mb", "calibration_jobs", "entries"):
        if key not in data:
            raise ValueError(f"{path}: no {key!r}: rerun tools/bench/simulator_check")
    return data


def check_all(path=DATA):
    data = load(path)
    return [check_entry(data, e) for e in data["entries"]]
