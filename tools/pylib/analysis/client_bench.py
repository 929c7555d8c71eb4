"""tools/bench/pytorch_client's options and figures (the runs themselves: client_runs.py), and
tools/bench/pytorch_gpu's R2SP configurations (gpu_configuration).
Three measurements of the Python client (r2sp.torch), each over interleaved repeats:
  overhead    push + pull seconds per step of the cnn, C++ workers against Python workers in
              otherwise identical jobs, from each worker's --metrics file (the same JSON lines);
  throughput  samples/s of examples/pytorch/fashion_mnist_cnn.py through R2SP (each mode) and
              under DDP (gloo), with 2 and 4 processes, from the script's final JSON lines;
  baseline    seconds per step outside the script's compute (push, pull and bookkeeping: the
              step's interval less its forward and backward, from the script's --step_times
              lines) of the overhead job's Python workers, this checkout's binaries and r2sp
              package against another checkout's (--baseline), the same script from here
              (runs and figures: client_baseline.py).
A figure is the median over the repeats, quoted with its spread (min and max)."""

import argparse
import dataclasses
import json
import os
import re
import shlex

from pylib.analysis.run_files import worker_metrics

MEASUREMENTS = ("overhead", "throughput", "baseline")
MODES = ("bsp", "ssp", "asp", "r2sp")


def parse_args(argv):
    """The benchmark's options; argparse's error (status 2) for bad ones."""
    p = argparse.ArgumentParser(
        prog="tools/bench/pytorch_client",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--measure", default="overhead,throughput",
                   help="overhead, throughput, baseline, or several (comma-separated)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs of each (>= 3)")
    p.add_argument("--batch_size", type=int, default=64, help="per worker and process")
    p.add_argument("--steps", type=int, default=60, help="steps per worker in each run")
    p.add_argument("--skip", type=int, default=5,
                   help="overhead, baseline: steps left out at the start of each worker's "
                   "metrics and step times")
    p.add_argument("--overhead_workers", type=int, default=2)
    p.add_argument("--overhead_mode", default="asp", choices=MODES)
    p.add_argument("--push_codec", default="fp32", help="the workers' --push_codec (both kinds)")
    p.add_argument("--modes", default="asp,r2sp,bsp",
                   help="throughput: the R2SP modes, each MODE or MODE@VARIANT (--variant)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=FLAGS",
                   help="throughput: MODE@NAME's workers also get FLAGS, e.g. "
                   "--variant=pulls_after='--nooverlap_pulls' (repeatable), so one run "
                   "interleaves an A/B of worker flags")
    p.add_argument("--scheduler_variant", action="append", default=[], metavar="NAME=FLAGS",
                   help="throughput: MODE@NAME's scheduler also gets FLAGS, e.g. "
                   "--scheduler_variant=fc='--r2sp_order=first_come' (repeatable; a NAME may "
                   "also be a --variant's, its workers then getting that one's flags)")
    p.add_argument("--processes", default="2,4", help="throughput: process counts")
    p.add_argument("--threads", type=int, default=1, help="torch/worker threads per process")
    p.add_argument("--emulate_ms_per_sample", type=float, default=0.0,
                   help="pace compute as an accelerator's (both backends)")
    p.add_argument("--worker_flags", default="",
                   help="more flags for every worker, C++ or Python (e.g. '--overlap', or "
                   "'--overlap --nooverlap_pulls' for the A/B of overlapped pulls)")
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--server_flags", default="--lr=0.01 --momentum=0.9")
    p.add_argument("--scheduler_flags", default="", help="more flags for every R2SP job's "
                   "scheduler")
    p.add_argument("--python", default="/usr/bin/python3", help="the Python with torch")
    p.add_argument("--bin_dir", default="", help="built binaries (default: bazel -c opt's)")
    p.add_argument("--baseline", default="", metavar="DIR",
                   help="baseline: another checkout of R2SP whose opt binaries (scheduler, "
                   "server, worker, worker/python/_core.so) are built; its binaries and its "
                   "r2sp package (DIR/worker/python) run the same job as this checkout's")
    p.add_argument("--baseline_bin_dir", default="", metavar="DIR",
                   help="baseline: where --baseline's binaries are (default: its bazel-bin, "
                   "which must point at an opt build)")
    p.add_argument("--out", default="", help="directory for the runs and result.json "
                   "(default runs/pytorch_client_TIMESTAMP)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    args = p.parse_args(argv)
    try:
        check(args)
    except ValueError as e:
        p.error(str(e))
    return args


def check(args):
    """Splits the list options; ValueError for a value the benchmark cannot run."""
    args.measure = split(args.measure)
    args.modes = split(args.modes)
    try:
        args.processes = [int(x) for x in split(args.processes)]
    except ValueError:
        args.processes = []
    unknown = [m for m in args.measure if m not in MEASUREMENTS]
    if unknown or not args.measure:
        raise ValueError(f"--measure: {','.join(unknown) or 'nothing'} is not one of "
                         f"{', '.join(MEASUREMENTS)}")
    args.variants = parse_variants(args.variant, "--variant")
    args.scheduler_variants = parse_variants(args.scheduler_variant, "--scheduler_variant")
    named = set(args.variants) | set(args.scheduler_variants)
    bad = [m for m in args.modes if split_mode(m)[0] not in MODES
           or ("@" in m and split_mode(m)[1] not in named)]
    if not args.modes or bad:
        raise ValueError(f"--modes must be a list of {', '.join(MODES)}, each optionally "
                         f"@VARIANT of a --variant or --scheduler_variant; not "
                         f"{', '.join(bad) or 'nothing'}")
    if not args.processes or min(args.processes) < 1:
        raise ValueError("--processes must be a list of counts >= 1, e.g. 2,4")
    if args.repeats < 3:
        raise ValueError("--repeats must be at least 3 (a median of at least 3 runs)")
    if min(args.batch_size, args.steps, args.overhead_workers, args.threads, args.servers) < 1:
        raise ValueError("--batch_size, --steps, --overhead_workers, --threads and --servers "
                         "must be at least 1")
    if not 0 <= args.skip < args.steps:
        raise ValueError("--skip must be in [0, --steps)")
    if "baseline" in args.measure and not args.baseline:
        raise ValueError("--measure=baseline needs --baseline=DIR (another checkout, built)")
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    if args.baseline_bin_dir:
        args.baseline_bin_dir = os.path.abspath(args.baseline_bin_dir)


def parse_variants(items, option="--variant"):
    """{name: flags} of `option` NAME=FLAGS items; ValueError for one without a name."""
    variants = {}
    for item in items:
        name, eq, flags = item.partition("=")
        if not eq or not name.isidentifier():
            raise ValueError(f"{option}={item}: write NAME=FLAGS, NAME a word, e.g. "
                             f"{option}=pulls_after=--nooverlap_pulls")
        variants[name] = flags
    return variants


def split_mode(entry):
    """(mode, variant name or "") of a --modes entry MODE or MODE@VARIANT."""
    mode, _, variant = entry.partition("@")
    return mode, variant


def split(text):
    return [x.strip() for x in text.split(",") if x.strip()]


@dataclasses.dataclass
class Spread:
    """A figure over repeated runs: the median, the smallest and largest value, the runs."""
    median: float
    low: float
    high: float
    runs: list

    @classmethod
    def of(cls, values):
        if not values:
            raise ValueError("no runs to summarise")
        v = sorted(values)
        mid = len(v) // 2
        median = v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2
        return cls(median, v[0], v[-1], list(values))

    def text(self, scale=1.0, digits=1):
        return (f"{self.median * scale:.{digits}f} ({self.low * scale:.{digits}f}-"
                f"{self.high * scale:.{digits}f})")


def median(values):
    return Spread.of(values).median


def comm_seconds_per_step(rows, skip):
    """Median push_s + pull_s over one worker's iteration rows (metrics lines without an
    "event"), after the first `skip`; ValueError when none is left."""
    steps = [r["push_s"] + r["pull_s"] for r in rows if "event" not in r][skip:]
    if not steps:
        raise ValueError(f"no iterations after the first {skip}")
    return median(steps)


PHASES = ("compute", "wait", "push", "pull")  # a metrics row's times, as NAME_s


def phase_medians_ms(runs, skip):
    """Where one worker's steps went over several runs ([iteration rows] per run, metrics
    lines without an "event"): {phase: median ms} over every run's steps after its first
    `skip`; ValueError when none is left."""
    steps = []
    for rows in runs:
        steps += [r for r in rows if "event" not in r][skip:]
    if not steps:
        raise ValueError(f"no iterations after the first {skip}")
    return {p: 1e3 * median([r[f"{p}_s"] for r in steps]) for p in PHASES}


def split_text(split_ms):
    """phase_medians_ms's figures as the line the GPU benchmarks print under a configuration."""
    return "  worker 0 per step, median ms: " + ", ".join(
        f"{p} {v:.1f}" for p, v in split_ms.items())


def run_comm_seconds(by_worker, skip):
    """A run's push + pull seconds per step: the median over its workers of each worker's
    median ({rank: rows}, run_files.worker_metrics)."""
    if not by_worker:
        raise ValueError("no worker metrics")
    return median([comm_seconds_per_step(rows, skip) for rows in by_worker.values()])


def result_lines(text):
    """Every line of a script's output that is a JSON object with "samples_per_s" (the
    examples' final line), in order."""
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "samples_per_s" in row:
            rows.append(row)
    return rows


def result_line(text):
    """The last result line of one process's output; ValueError when there is none."""
    rows = result_lines(text)
    if not rows:
        raise ValueError("no result line (a JSON object with samples_per_s)")
    return rows[-1]


def rates(line):
    """{"steady": ..., "whole": ...}: the samples/s of a script's result line after its first
    steps (start-up left out) and over its whole run; ValueError without a steady rate (too
    few steps)."""
    if line.get("steady_samples_per_s") is None:
        raise ValueError("the result line has no steady rate (too few steps)")
    return {"steady": line["steady_samples_per_s"], "whole": line["samples_per_s"]}


def compared_rates(ours, alone):
    """Runs through R2SP (`ours`) against the script alone's, each a list of rates(): the
    steady rates' spreads and the ratio of their medians (r2sp, single, ratio), and the same of
    the whole runs (r2sp_whole_run, single_whole_run, whole_run_ratio)."""
    steady = [Spread.of([r["steady"] for r in runs]) for runs in (ours, alone)]
    whole = [Spread.of([r["whole"] for r in runs]) for runs in (ours, alone)]
    return {"r2sp": dataclasses.asdict(steady[0]), "single": dataclasses.asdict(steady[1]),
            "ratio": steady[0].median / steady[1].median,
            "r2sp_whole_run": dataclasses.asdict(whole[0]),
            "single_whole_run": dataclasses.asdict(whole[1]),
            "whole_run_ratio": whole[0].median / whole[1].median}


GPU_CODEC_FLAGS = {"fp32": "", "fp16": " --push_codec=fp16 --pull_codec=fp16"}


@dataclasses.dataclass(frozen=True)
class GpuConfiguration:
    """tools/bench/pytorch_gpu's R2SP configuration: flags appended to the workers' and the
    servers' flags, the number of servers, and `key`, the name in run directories and figures."""
    key: str
    worker_flags: str
    server_flags: str
    servers: int


def gpu_configuration(name):
    """The configuration NAME = CODEC[+ioN][+sN][+ep[N]]: CODEC fp32 or fp16 (fp16 pushes and
    pulls); +ioN: N ZeroMQ I/O threads and N connections per peer at the worker and at the
    servers (--io_threads, --connections_per_peer); +sN: N servers (default 1); +ep: each
    partition pulled as soon as its push is acknowledged, during backward (--early_pulls);
    +epN: so, with at most N pulls in flight until the pushes are all acknowledged
    (--early_pulls_in_flight=N). ValueError for others."""
    codec, *modifiers = name.split("+")
    if codec not in GPU_CODEC_FLAGS:
        raise ValueError(f"{name}: a configuration starts with {' or '.join(GPU_CODEC_FLAGS)}")
    transport, early, servers, seen = "", "", 1, set()
    for m in modifiers:
        match = re.fullmatch(r"(io|s|ep)(\d+)|ep", m)
        kind, count = (match.group(1) or "ep", match.group(2)) if match else (None, None)
        if kind is None or kind in seen or (count is not None and not 1 <= int(count) <= 64):
            raise ValueError(f"{name}: after the codec come +ioN (I/O threads and connections), "
                             "+sN (servers) and +ep or +epN (early pulls, N in flight), each at "
                             "most once, N in [1, 64]")
        seen.add(kind)
        if kind == "io":
            transport = f" --io_threads={int(count)} --connections_per_peer={int(count)}"
        elif kind == "s":
            servers = int(count)
        else:
            early = " --early_pulls" + (f" --early_pulls_in_flight={int(count)}" if count else "")
    return GpuConfiguration(key=name.replace("+", "_"),
                            worker_flags=GPU_CODEC_FLAGS[codec] + transport + early,
                            server_flags=transport, servers=servers)


def gpu_job_command(launch, bin_dir, run_dir, configuration, worker_cmd, job_flags,
                    workers=1, sync="asp", timeout_s=1800):
    """tools/launch's command line (after the Python) for a GPU benchmark's job of Python
    workers running `worker_cmd` (a list) in `configuration` (a GpuConfiguration): servers with
    --lr=0.01 --momentum=0.9, workers with --overlap, `job_flags` (e.g. "--batch_size=64
    --max_steps=100") and the configuration's flags."""
    return [launch, f"--bin_dir={bin_dir}", "--quiet", f"--run_dir={run_dir}", f"--sync={sync}",
            f"--servers={configuration.servers}", f"--workers={workers}",
            f"--server_flags=--lr=0.01 --momentum=0.9{configuration.server_flags}",
            f"--worker_flags=--overlap {job_flags}{configuration.worker_flags}",
            f"--worker_cmd={shlex.join(worker_cmd)}", f"--timeout={timeout_s}"]


def worker0_rates(run_dir):
    """rates() of a job's worker 0, from the result line in its log."""
    with open(os.path.join(run_dir, "worker0.log")) as f:
        return rates(result_line(f.read()))


def rounds_against_alone(repeats, configurations, run_alone, run_job):
    """A GPU benchmark's interleaved rounds: each runs the script alone (run_alone() ->
    rates()), then each configuration's job (run_job(configuration, round) -> its run
    directory). Returns {configuration key: compared_rates() of worker 0's rates, with codec
    (the key) and split_ms (worker 0's phase medians over every round's steps after the first
    five)}."""
    alone = []
    ours = {c.key: [] for c in configurations}
    steps = {c.key: [] for c in configurations}
    for i in range(repeats):
        alone.append(run_alone())
        for c in configurations:
            run_dir = run_job(c, i)
            ours[c.key].append(worker0_rates(run_dir))
            steps[c.key].append(worker_metrics(run_dir).get(0, []))
    return {c.key: dict(compared_rates(ours[c.key], alone), codec=c.key,
                        split_ms=phase_medians_ms(steps[c.key], 5)) for c in configurations}


def job_samples_per_s(lines):
    """A job's training samples/s: all its processes' samples over the span from the first
    process's first step to the last one's last step (a process that ends early does not count
    as training on at its own rate); ValueError without lines or their times."""
    if not lines:
        raise ValueError("no processes' results")
    if any(line.get("started") is None or line.get("ended") is None for line in lines):
        raise ValueError("a result line has no started/ended times")
    span = max(line["ended"] for line in lines) - min(line["started"] for line in lines)
    if span <= 0:
        raise ValueError("the processes trained for no time")
    return sum(line["samples"] for line in lines) / span


def interleaved(variants, repeat):
    """The order of `variants` in repeat `repeat`: rotated by one each repeat, so no variant
    always runs first (on a warm or a cold machine)."""
    k = repeat % len(variants)
    return list(variants[k:]) + list(variants[:k])


def ratios(numerators, denominators):
    """Per-repeat ratios of two variants run in the same repeats."""
    return [a / b for a, b in zip(numerators, denominators)]


def overhead_report(runs):
    """(table lines, JSON dict, RESULT items) of measure_overhead's runs: seconds per step of
    push + pull, C++ and Python workers, and Python / C++ per repeat (check: <= 1.10)."""
    cpp, python = Spread.of(runs["cpp"]), Spread.of(runs["python"])
    ratio = Spread.of(ratios(runs["python"], runs["cpp"]))
    lines = ["push+pull per step (ms): median (min-max) over repeats",
             f"  C++ workers     {cpp.text(1e3, 2)}",
             f"  Python workers  {python.text(1e3, 2)}",
             f"  Python / C++    {ratio.text(1, 3)}   (check: <= 1.10)"]
    data = {"cpp_seconds": dataclasses.asdict(cpp), "python_seconds": dataclasses.asdict(python),
            "python_over_cpp": dataclasses.asdict(ratio)}
    return lines, data, [f"client_comm_overhead_ratio={ratio.median:.3f}"]


def throughput_report(runs, modes, processes):
    """(table lines, JSON dict, RESULT items) of measure_throughput's runs: samples/s of each
    backend and process count, and each R2SP mode / DDP per repeat (check: >= 1.0 in asp, r2sp)."""
    lines = ["samples/s: median (min-max) over repeats; R2SP mode / DDP per repeat"]
    data, result = {}, []
    for n in processes:
        ddp = Spread.of(runs[("ddp", n)])
        lines.append(f"  {n} processes  DDP (gloo)  {ddp.text()}")
        data[f"ddp_{n}"] = dataclasses.asdict(ddp)
        for mode in modes:
            rate = Spread.of(runs[(mode, n)])
            ratio = Spread.of(ratios(runs[(mode, n)], runs[("ddp", n)]))
            lines.append(f"  {n} processes  R2SP {mode:5s}  {rate.text()}   / DDP "
                         f"{ratio.text(1, 3)}")
            data[f"{mode}_{n}"] = dataclasses.asdict(rate)
            data[f"{mode}_{n}_over_ddp"] = dataclasses.asdict(ratio)
            result.append(f"{mode.replace('@', '_')}_{n}_over_ddp={ratio.median:.3f}")
    return lines, data, result
