"""What a simulation runs: the cluster, the job and the mode (Scenario), and the constants
fitted to our measurements (Calibration); both validated with messages that say what to fix."""

from dataclasses import dataclass, field

from pylib.simulation import codecs

MODES = ("bsp", "ssp", "asp", "r2sp", "easgd", "eawild")


@dataclass
class Calibration:
    """Constants fitted once, globally, to the validation data (tools/simulate --fit over
    tools/simulate_data/validation.json; docs/RESULTS.md#many-workers-the-simulator), except the
    server's CPU, which is measured."""
    # Goodput of a shaped link where it meets a faster one, as a fraction of its rate (network.py).
    link_efficiency: float = 0.84
    # Fixed cost of each push and each pull (request, acks, copies, the server's handling).
    op_overhead_s: float = 0.03
    # One scheduler message (SLOT, grant, RELEASE), one way.
    control_s: float = 0.001
    # One pass of a server's CPU over a byte of fp32 parameters (an apply, or r2sp's predicted
    # weights): 7.4 ms of r2sp server CPU per iteration of the 13.1 MB cnn (two passes) on a
    # 16-core H200 machine, 2 servers and 4 CUDA workers (tools/compare_modes
    # --modes=bsp,r2sp,r2sp_auto, gpu_checks' job; docs/BENCHMARKS.md#gpu).
    server_cpu_s_per_byte: float = 0.28e-9
    # The machine's cores when the whole job shares one host (0: every server on a machine of
    # its own, one core each; host.py), and the CPU it takes to move a byte of a push or a pull
    # there, both ends' copies and ZeroMQ included (0: not modelled; the shaped-link studies
    # fold it into link_efficiency and op_overhead_s). Measured per host:
    # docs/RESULTS.md#many-workers-the-simulator.
    host_cores: int = 0
    host_cpu_s_per_byte: float = 0.0


@dataclass
class Scenario:
    """One job. Times in seconds, rates in bit/s, sizes in bytes."""
    mode: str = "bsp"
    workers: int = 4
    servers: int = 1
    model_bytes: float = 13.1e6
    partition_bytes: float = 1 << 20
    compute_s: float = 0.2           # one iteration's compute at `batch` (or ms_per_sample)
    ms_per_sample: float = 0.0       # > 0: compute = ms_per_sample * batch (hetero batching)
    compute_cv: float = 0.0          # spread of compute times (normal, this fraction of mean)
    slowdown: list = field(default_factory=list)  # per worker: compute stretched this many times
    batch: int = 64
    hetero: bool = False             # hetero batching: b_i equalises compute + communication
    server_link_bps: float = None    # each server's link, each direction; None: unlimited
    worker_link_bps: float = None
    latency_s: float = 0.0001        # per link, one way
    push_codec: str = "fp32"
    pull_codec: str = "fp32"
    staleness: int = 3               # ssp
    r2sp_order: str = "auto"         # ring, first_come, auto (first_come with hetero)
    slot_width: int = 1
    headroom: float = 1.2
    gap_holds: float = 2             # the gap at most this many smoothed holds (0: never)
    slot_covers_pull: bool = False   # --r2sp_slot=push_pull
    elastic_period: int = 4
    overlap: bool = False
    iterations: int = 10             # per worker
    skip: int = 2                    # each worker's first iterations left out of the rates
    seed: int = 1
    calibration: Calibration = field(default_factory=Calibration)

    def validate(self):
        """Raises ValueError saying which setting is wrong and what it may be."""
        checks = [
            (self.mode in MODES, f"mode {self.mode!r}: use one of {', '.join(MODES)}"),
            (self.workers >= 1, "workers must be >= 1"),
            (self.servers >= 1, "servers must be >= 1"),
            (self.model_bytes > 0, "model size must be > 0"),
            (self.partition_bytes > 0, "partition size must be > 0"),
            (self.compute_s > 0 or self.ms_per_sample > 0, "compute time must be > 0"),
            (0 <= self.compute_cv < 1, "compute spread must be in [0, 1)"),
            (not self.slowdown or len(self.slowdown) == self.workers,
             f"give one slowdown per worker ({self.workers}), or none"),
            (all(f > 0 for f in self.slowdown), "slowdowns must be > 0"),
            (self.batch >= 1, "batch must be >= 1"),
            (not self.hetero or self.ms_per_sample > 0,
             "hetero batching needs a per-sample compute time (ms_per_sample)"),
            (self.r2sp_order in ("ring", "first_come", "auto"),
             "r2sp order: ring, first_come or auto"),
            (self.slot_width >= 1, "slot width must be >= 1"),
            (self.headroom > 0, "headroom must be > 0"),
            (self.gap_holds >= 0, "gap holds must be >= 0"),
            (self.staleness >= 0, "staleness must be >= 0"),
            (self.elastic_period >= 1, "elastic period must be >= 1"),
            (self.iterations > self.skip + 1,
             f"iterations ({self.iterations}) must exceed skip + 1 ({self.skip + 1})"),
            (all(r is None or r > 0 for r in (self.server_link_bps, self.worker_link_bps)),
             "link rates must be > 0 (or unlimited)"),
            (not (self.overlap and self.mode in ("easgd", "eawild")),
             "overlap is not available in easgd and eawild"),
            (0 < self.calibration.link_efficiency <= 1, "link efficiency must be in (0, 1]"),
            (self.calibration.host_cores >= 0, "host cores must be >= 0 (0: a machine each)"),
            (self.calibration.host_cpu_s_per_byte >= 0, "host CPU per byte must be >= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        codecs.byte_ratio(self.push_codec)
        if self.pull_codec not in ("fp32", "fp16"):
            raise ValueError(f"pull codec {self.pull_codec!r}: use fp32 or fp16")

    def order(self):
        """The r2sp slot order in force (auto: first come with hetero batching)."""
        if self.r2sp_order == "auto":
            return "first_come" if self.hetero else "ring"
        return self.r2sp_order
