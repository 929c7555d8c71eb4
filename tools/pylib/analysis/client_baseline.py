"""tools/bench/pytorch_client --measure=baseline: one job of Python workers (the overhead job's:
the example script from this checkout through tools/launch --worker_cmd) run with this
checkout's binaries and r2sp package and with another checkout's (--baseline), interleaved per
repeat. The figure is the time per step outside the script's compute, from the script's
--step_times lines: each step's interval less its forward and backward, i.e. push, pull and
the loop's bookkeeping, whichever build of the client does them."""

import dataclasses
import json
import os
import subprocess

from . import client_bench
from . import client_runs
from . import run_files
from ..job import python_workers
from ..job.errors import JobError

BINARIES = (os.path.join("scheduler", "scheduler"), os.path.join("server", "server"),
            os.path.join("worker", "worker"), python_workers.CORE)
# The file each Python worker writes in its run directory (the script's --step_times).
STEP_TIMES = "step_times_{rank}.jsonl"


@dataclasses.dataclass(frozen=True)
class Build:
    """One side of the comparison: `name` (current or baseline), `checkout` (its source tree:
    the r2sp package is CHECKOUT/worker/python) and `bin_dir` (its built binaries)."""
    name: str
    checkout: str
    bin_dir: str

    @property
    def package_dir(self):
        return os.path.join(self.checkout, "worker", "python")

    @property
    def core(self):
        return os.path.join(self.bin_dir, python_workers.CORE)


def builds(args):
    """(current, baseline): this checkout with args.bin_dir, and --baseline with
    --baseline_bin_dir (default its bazel-bin)."""
    return (Build("current", client_runs.ROOT, args.bin_dir),
            Build("baseline", args.baseline,
                  args.baseline_bin_dir or os.path.join(args.baseline, "bazel-bin")))


def package_environment(build, environ=os.environ):
    """NAME=VALUE settings under which a Python worker imports `build`'s r2sp package and
    extension: its package first on PYTHONPATH (then the caller's, as tools/launch orders
    them), R2SP_CORE its _core.so."""
    path = build.package_dir
    if environ.get("PYTHONPATH"):
        path += os.pathsep + environ["PYTHONPATH"]
    return [f"PYTHONPATH={path}", f"R2SP_CORE={build.core}"]


def worker_command(args, build, run_dir, environ=os.environ):
    """The example script under `build`'s package, its step times into RUN_DIR/STEP_TIMES. Both
    sides run it so: over the PYTHONPATH and R2SP_CORE tools/launch gives (this checkout's
    package, --bin_dir's extension) the command's own settings win."""
    return client_runs.script_command(args, os.path.join(run_dir, STEP_TIMES),
                                      package_environment(build, environ))


def bazel_config(bin_dir):
    """The configuration (e.g. k8-opt) of a bazel-out/CONFIG/bin directory, links followed;
    None for a directory that is not one (a bundle's, a copy)."""
    real = os.path.realpath(bin_dir)
    parent = os.path.dirname(real)
    if os.path.basename(real) == "bin" and \
            os.path.basename(os.path.dirname(parent)) == "bazel-out":
        return os.path.basename(parent)
    return None


def check_build(build):
    """JobError unless `build`'s binaries are all there, built with -c opt where bazel-out
    says how they were built."""
    missing = [b for b in BINARIES if not os.path.isfile(os.path.join(build.bin_dir, b))]
    if missing:
        raise JobError(f"{build.name} build: no {', '.join(missing)} in {build.bin_dir}; build "
                       f"them in {build.checkout} with bazel build -c opt //scheduler //server "
                       "//worker //worker/python:_core.so")
    config = bazel_config(build.bin_dir)
    if config is not None and not config.endswith("-opt"):
        raise JobError(f"{build.name} build: {build.bin_dir} is bazel-out/{config}, not an opt "
                       "build; build with -c opt (or name the opt bin directory)")


IMPORT_CHECK = "import r2sp; print(r2sp.__file__); print(r2sp._core.__file__)"


def check_import(args, build, environ=os.environ):
    """Imports r2sp with args.python under package_environment(build), as the workers will;
    JobError unless the package and the extension come from `build`. Returns (package file,
    extension file)."""
    env = dict(environ)
    env.update(s.split("=", 1) for s in package_environment(build, environ))
    r = subprocess.run([args.python, "-c", IMPORT_CHECK], cwd=client_runs.ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    lines = r.stdout.split()
    if r.returncode != 0 or len(lines) != 2:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        raise JobError(f"{build.name} build: {args.python} cannot import r2sp from "
                       f"{build.package_dir}: {last}")
    package, core = lines
    inside = os.path.realpath(package).startswith(os.path.realpath(build.package_dir) + os.sep)
    if not inside or os.path.realpath(core) != os.path.realpath(build.core):
        raise JobError(f"{build.name} build: r2sp came from {package} with {core}, not from "
                       f"{build.package_dir} with {build.core}")
    return package, core


def step_times(run_dir):
    """{rank: [the script's step rows, in step order]} from RUN_DIR/step_times_RANK.jsonl (one
    JSON object a line: step, compute_s, interval_s); a torn line (a worker killed while
    writing it) is skipped; a missing directory gives {}."""
    prefix, suffix = STEP_TIMES.split("{rank}")
    names = sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else []
    by_rank = {}
    for name in names:
        rank = name[len(prefix):len(name) - len(suffix)]
        if not (name.startswith(prefix) and name.endswith(suffix) and rank.isdigit()):
            continue
        rows = []
        with open(os.path.join(run_dir, name)) as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict) and {"step", "compute_s", "interval_s"} <= set(row):
                    rows.append(row)
        by_rank[int(rank)] = sorted(rows, key=lambda r: r["step"])
    return by_rank


@dataclasses.dataclass
class StepSplit:
    """Seconds per step, each a median over steps: outside the script's compute (interval_s -
    compute_s) and the compute itself (compute_s)."""
    outside_s: float
    compute_s: float


def worker_step_split(rows, skip):
    """One worker's StepSplit over its step rows after the first `skip`; ValueError when none
    is left."""
    steps = rows[skip:]
    if not steps:
        raise ValueError(f"no steps after the first {skip}")
    return StepSplit(outside_s=client_bench.median([r["interval_s"] - r["compute_s"]
                                                    for r in steps]),
                     compute_s=client_bench.median([r["compute_s"] for r in steps]))


def run_step_split(by_rank, skip):
    """A run's StepSplit: each figure the median over its workers of each worker's
    worker_step_split ({rank: rows}, step_times)."""
    if not by_rank:
        raise ValueError("no step times")
    splits = [worker_step_split(rows, skip) for rows in by_rank.values()]
    return StepSplit(outside_s=client_bench.median([s.outside_s for s in splits]),
                     compute_s=client_bench.median([s.compute_s for s in splits]))


def run_figures(run_dir, workers, skip):
    """{"outside_s", "compute_s", "comm_s"} of one job: run_step_split of its workers' step
    times and the push + pull per step of their metrics (client_bench.run_comm_seconds); JobError
    naming the run when a worker's figures are missing."""
    by_rank = step_times(run_dir)
    if len(by_rank) != workers:
        raise JobError(f"{run_dir}: step times of {len(by_rank)} workers, {workers} workers")
    try:
        split = run_step_split(by_rank, skip)
        comm = client_bench.run_comm_seconds(run_files.worker_metrics(run_dir), skip)
    except ValueError as e:
        raise JobError(f"{run_dir}: {e}") from None
    return {"outside_s": split.outside_s, "compute_s": split.compute_s, "comm_s": comm}


def checkout_commit(checkout):
    """`git rev-parse --short HEAD` of `checkout`, with "+changes" when tracked files differ
    from it; "unknown" outside a git work tree."""
    def git(*argv):
        return subprocess.run(["git", "-C", checkout, *argv], capture_output=True, text=True)

    head = git("rev-parse", "--short", "HEAD")
    if head.returncode != 0:
        return "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("+changes" if changed else "")


def measure_baseline(args, out, report):
    """Both builds' jobs, interleaved per repeat, after checking each build's binaries and
    import (check_build, check_import). Returns (runs: {"current": [run_figures per repeat],
    "baseline": [...]}, builds: {name: what it ran}); `report(text)` hears each run."""
    sides = {b.name: b for b in builds(args)}
    described = {}
    for b in sides.values():
        check_build(b)
        package, core = check_import(args, b)
        described[b.name] = {"checkout": b.checkout, "commit": checkout_commit(b.checkout),
                             "bin_dir": b.bin_dir, "package": package, "core": core}
    runs = {name: [] for name in sides}
    for r in range(args.repeats):
        for name in client_bench.interleaved(list(sides), r):
            run_dir = os.path.join(out, f"baseline_{name}_{r}")
            b = sides[name]
            client_runs.run_launch(args, args.overhead_mode, args.overhead_workers, run_dir,
                                   python=True, script=worker_command(args, b, run_dir),
                                   bin_dir=b.bin_dir)
            runs[name].append(run_figures(run_dir, args.overhead_workers, args.skip))
            f = runs[name][-1]
            report(f"repeat {r} baseline {name:8s} {f['outside_s'] * 1e3:8.2f} ms outside "
                   f"compute/step (compute {f['compute_s'] * 1e3:.2f}, push+pull "
                   f"{f['comm_s'] * 1e3:.2f})  {run_dir}")
    return runs, described


def baseline_report(runs, described=None):
    """(table lines, JSON dict, RESULT items) of measure_baseline's runs: the time per step
    outside the script's compute of each build, current / baseline per repeat, and beside them
    the script's compute and the workers' push + pull; `described`: what each side ran, kept
    in the JSON."""
    def spread(build, key):
        return client_bench.Spread.of([run[key] for run in runs[build]])

    ratio = client_bench.Spread.of(client_bench.ratios(
        [run["outside_s"] for run in runs["current"]],
        [run["outside_s"] for run in runs["baseline"]]))
    lines = ["per step outside the script's compute (interval - forward and backward), ms: "
             "median (min-max) over repeats",
             f"  current build       {spread('current', 'outside_s').text(1e3, 2)}",
             f"  baseline build      {spread('baseline', 'outside_s').text(1e3, 2)}",
             f"  current / baseline  {ratio.text(1, 3)}",
             "  beside it, ms:      the script's compute    push+pull (workers' metrics)"]
    for build in ("current", "baseline"):
        lines.append(f"    {build:16s}  {spread(build, 'compute_s').text(1e3, 2):22s}  "
                     f"{spread(build, 'comm_s').text(1e3, 2)}")
    data = {f"{build}_{key}": dataclasses.asdict(spread(build, key))
            for build in ("current", "baseline") for key in ("outside_s", "compute_s", "comm_s")}
    data["current_over_baseline"] = dataclasses.asdict(ratio)
    if described is not None:
        data["builds"] = described
    return lines, data, [f"client_outside_compute_ratio={ratio.median:.3f}"]
