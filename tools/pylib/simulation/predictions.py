"""Predictions at scale (tools/bench/scale_predictions): the modes on EC2-like links (every
instance's link alike, 10/25/100 Gbit/s) for 64 to 10,000 workers and 1 to 64 servers, and a
stand-in for the R2SP paper's setting; which server count each job needs.

The workloads are assumptions, not measurements (docs/RESULTS.md#many-workers-the-simulator
says so)."""

from dataclasses import asdict, dataclass
import itertools

from pylib.simulation.engine import Simulation
from pylib.simulation.scenario import Scenario

RESNET50_BYTES = 25.6e6 * 4        # ResNet-50's 25.6 M fp32 parameters
# (label, mode, extra Scenario fields); r2sp_wide: slot width = servers, which on links all
# alike lets the holders fill every server's link (what --r2sp_slot_width=auto settles at).
MODES = [("bsp", "bsp", {}), ("asp", "asp", {}), ("r2sp", "r2sp", {}),
         ("r2sp_wide", "r2sp", {"slot_width": None}), ("eawild", "eawild", {})]
WORKERS = [64, 256, 1024, 10000]
SERVERS = [1, 4, 16, 64]
LINKS_GBIT = [10, 25, 100]
CODECS = ["fp32", "fp16"]


@dataclass
class Point:
    """One simulated configuration's figures."""
    setting: str
    mode: str
    workers: int
    servers: int
    link_gbit: float
    codec: str
    iterations_per_s: float
    samples_per_s: float
    mean_iteration_s: float
    server_in_utilisation: float
    server_cpu_utilisation: float


def scenario(mode, workers, servers, link_gbit, codec, compute_s=0.2, extra=None, **kw):
    """An EC2-like job: ResNet-50 (102 MB) at batch 64, compute_s a step (5% spread)."""
    extra = dict(extra or {})
    if extra.get("slot_width", 1) is None:
        extra["slot_width"] = servers
    big = workers >= 1024
    return Scenario(mode=mode, workers=workers, servers=servers, model_bytes=RESNET50_BYTES,
                    compute_s=compute_s, compute_cv=0.05, server_link_bps=link_gbit * 1e9,
                    worker_link_bps=link_gbit * 1e9, latency_s=50e-6, push_codec=codec,
                    pull_codec=codec, iterations=4 if big else 8, skip=1 if big else 2,
                    **extra, **kw)


def run_point(setting, label, sc, link_gbit, codec):
    r = Simulation(sc).run()
    return Point(setting, label, sc.workers, sc.servers, link_gbit, codec, r.iterations_per_s,
                 r.samples_per_s, r.mean_iteration_s, max(r.server_in_utilisation),
                 max(r.server_cpu_utilisation))


def ec2_grid(workers=WORKERS, servers=SERVERS, links=LINKS_GBIT, codecs=CODECS, modes=MODES,
             progress=None):
    """Every combination; progress(point) after each."""
    points = []
    for w, s, link, codec, (label, mode, extra) in itertools.product(
            workers, servers, links, codecs, modes):
        p = run_point("ec2", label, scenario(mode, w, s, link, codec, extra=extra), link, codec)
        points.append(p)
        if progress:
            progress(p)
    return points


def paper_grid(progress=None):
    """Our stand-in for the R2SP paper's EC2 setting (its abstract gives no sizes): 4 to 16
    workers on 10 Gbit/s, 1 or 2 servers, ResNet-50 with a K80-class step of 0.6 s."""
    points = []
    for w, s, (label, mode, extra) in itertools.product([4, 8, 16], [1, 2], MODES):
        p = run_point("paper", label, scenario(mode, w, s, 10, "fp32", compute_s=0.6,
                                               extra=extra), 10, "fp32")
        points.append(p)
        if progress:
            progress(p)
    return points


def hetero_grid(progress=None):
    """A quarter of the workers at half speed: bsp, r2sp with and without hetero batching (slot
    width 1 and = servers), eawild."""
    points = []
    for w, s in itertools.product([64, 256], [4, 16]):
        slow = [2.0 if r % 4 == 3 else 1.0 for r in range(w)]
        for label, mode, hetero, width in (
                ("bsp", "bsp", False, 1), ("r2sp", "r2sp", False, 1),
                ("r2sp_hetero", "r2sp", True, 1), ("r2sp_wide", "r2sp", False, s),
                ("r2sp_hetero_wide", "r2sp", True, s), ("eawild", "eawild", False, 1)):
            sc = scenario(mode, w, s, 25, "fp32", compute_s=0.0, slowdown=slow,
                          ms_per_sample=0.2 / 64 * 1000, hetero=hetero,
                          extra={"slot_width": width})
            p = run_point("hetero", label, sc, 25, "fp32")
            points.append(p)
            if progress:
                progress(p)
    return points


def best_by_job(points, within=0.95):
    """Per (setting, mode, workers, link, codec): the best rate over server counts and the
    fewest servers reaching `within` of it."""
    groups = {}
    for p in points:
        groups.setdefault((p.setting, p.mode, p.workers, p.link_gbit, p.codec), []).append(p)
    out = {}
    for key, ps in groups.items():
        best = max(p.iterations_per_s for p in ps)
        enough = min(p.servers for p in ps if p.iterations_per_s >= within * best)
        out[key] = (best, enough)
    return out


def as_dicts(points):
    return [asdict(p) for p in points]
