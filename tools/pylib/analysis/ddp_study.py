"""The R2SP-against-DDP study (tools/bench/vs_ddp): its four settings as tools/compare_modes
command lines, and what each setting's results say against its threshold.

  hetero      the CPU quotas of docs/RESULTS.md#heterogeneous-workers (0.4/0.4/0.4/0.2), bsp and
              r2sp_hetero against ddp; check: r2sp_hetero >= 1.5x ddp in job samples/s and in time
              to the target, final accuracy within 0.5 point
  links_R     4 machines, each a worker and a colocated server, every link R (1gbit, 419mbit),
              compute paced as an accelerator's; bsp, r2sp, r2sp+fp16 with overlap (also with
              the slot's width tuned, and bsp) against ddp and ddp+fp16; check: the best R2SP
              configuration >= 1.0x the best DDP one in samples/s and in time to the target
  servers_N   the placement of docs/RESULTS.md#modes-on-a-contended-server-link: N dedicated servers
              behind 419 Mbit/s links, workers on 1 Gbit/s; r2sp and r2sp+fp16 with overlap against
              ddp, for each N: where the best R2SP configuration matches DDP
  straggler   one worker 2x slower (its pacing doubled), no hetero batching; ssp and asp
              against ddp
Every setting runs the same PyTorch script in every configuration, --repeats times,
interleaved."""

import dataclasses
import shlex
from typing import List

from .run_files import median

# Setting 2's configurations: bsp, r2sp, r2sp+fp16 with overlap, ddp and ddp+fp16, and the two
# that stepped fastest where the links bind (docs/RESULTS.md#r2sp-against-pytorch-ddp): with
# servers on the workers' machines every worker's push uses its own link, so one slot holder at
# a time leaves three links idle; r2sp_auto widens the slot, bsp has none.
LINKS_MODES = ("bsp,r2sp,r2sp+fp16@overlap,r2sp_auto+fp16@overlap,bsp+fp16@overlap,ddp,"
               "ddp+fp16")
QUOTAS = ["--cpu_quota=0:0.4", "--cpu_quota=1:0.4", "--cpu_quota=2:0.4", "--cpu_quota=3:0.2"]


@dataclasses.dataclass
class Options:
    """What the study's command line sets (tools/bench/vs_ddp)."""
    script: str = "examples/pytorch/fashion_mnist_cnn.py"
    python: str = "/usr/bin/python3"
    repeats: int = 3
    epochs: int = 3
    max_steps: int = 0  # 0: every epoch (--quick sets a few steps)
    batch_size: int = 64
    ms_per_sample: float = 4.0  # the accelerator's pace in the links_R settings
    target_accuracy: float = 0.88
    link_rates: tuple = ("1gbit", "419mbit")
    server_counts: tuple = (1, 2, 4)
    data_dir: str = ""
    bin_dir: str = ""
    # The paced settings run this many times slower (pacing x K, links / K: netcluster's
    # --time_dilation), for a machine too slow for the pace; 'hetero' (real compute) is not.
    time_dilation: float = 1.0


@dataclasses.dataclass
class Setting:
    """One table of the study: its name (the output directory), what it measures, and the
    compare_modes arguments that produce it."""
    name: str
    title: str
    argv: List[str]


def _common(o, workers=4):
    worker_flags = f"--batch_size={o.batch_size} --epochs={o.epochs}"
    if o.max_steps:
        worker_flags += f" --max_steps={o.max_steps}"
    if o.data_dir:
        worker_flags += f" --data_dir={o.data_dir}"
    argv = [f"--workers={workers}", f"--repeats={o.repeats}", f"--script={o.script}",
            "--script_flags=--threads=1 --ddp_timing", f"--python={o.python}",
            f"--target_accuracy={o.target_accuracy}", "--server_flags=--lr=0.01 --momentum=0.9",
            f"--worker_flags={worker_flags}"]
    return argv + ([f"--bin_dir={o.bin_dir}"] if o.bin_dir else [])


def _with_pace(argv, ms):
    """`argv` with every worker paced at `ms` per sample (added to --worker_flags)."""
    return [a + f" --emulate_ms_per_sample={ms:g}" if a.startswith("--worker_flags=") else a
            for a in argv]


def _net(o, flags):
    """compare_modes' --net for netcluster flags `flags`, time-dilated as `o` asks."""
    if o.time_dilation != 1:
        flags += f" --time_dilation={o.time_dilation:g}"
    return "--net=" + flags


def settings(o):
    """The study's Settings for Options `o`, in the order of docs/RESULTS.md."""
    result = [Setting("hetero", "1. Heterogeneous workers (CPU quotas 0.4/0.4/0.4/0.2)",
                      _common(o) + ["--servers=1", "--modes=bsp,r2sp_hetero,ddp",
                                    "--global_batch=" + str(4 * o.batch_size),
                                    "--net=" + " ".join(QUOTAS)])]
    ms = o.ms_per_sample * o.time_dilation
    dilated = f", time dilated {o.time_dilation:g}x" if o.time_dilation != 1 else ""
    for rate in o.link_rates:
        result.append(Setting(
            f"links_{rate}", f"2. Equal machines, colocated servers, every link {rate}{dilated}",
            _with_pace(_common(o), ms) + [
                "--servers=4", "--modes=" + LINKS_MODES,
                "--variant=overlap=--overlap", _net(o, f"--colocate --worker_link={rate}")]))
    for n in o.server_counts:
        result.append(Setting(
            f"servers_{n}",
            f"3. Dedicated servers: {n} behind 419 Mbit/s, workers on 1 Gbit/s{dilated}",
            _with_pace(_common(o), ms) + [
                f"--servers={n}", "--modes=r2sp,r2sp+fp16@overlap,ddp",
                "--variant=overlap=--overlap",
                _net(o, "--server_link=419mbit --worker_link=1gbit")]))
    result.append(Setting(
        "straggler", f"4. One worker 2x slower, no hetero batching{dilated}",
        _with_pace(_common(o), ms) + [
            "--servers=1", "--modes=ssp,asp,ddp",
            f"--worker_flags_for=3:--emulate_ms_per_sample={2 * ms:g}"]))
    return result


def command_line(setting, out):
    """The setting's compare_modes command, as a shell line (docs/RESULTS.md quotes these)."""
    return shlex.join(["tools/compare_modes", f"--out={out}/{setting.name}"] + setting.argv)


def median_ratio(runs, mode, base, key, lower=False):
    """The median over the runs of mode's `key` over base's (lower: base's over mode's, for a
    time); None where no run has both."""
    values = []
    for r in runs:
        a, b = r[mode].get(key), r[base].get(key)
        if a and b:
            values.append(b / a if lower else a / b)
    return median(values)


def _fmt(value, spec="{:.2f}"):
    return "n/a" if value is None else spec.format(value)


def _best(runs, modes, key, lower=False):
    """The configuration of `modes` with the best median `key` over the runs (None if none
    has it)."""
    scored = [(median([r[m].get(key) for r in runs]), m) for m in modes]
    scored = [(v, m) for v, m in scored if v is not None]
    if not scored:
        return None
    return (min(scored) if lower else max(scored))[1]


def check_lines(name, runs):
    """What setting `name`'s runs (results.json's "runs") say against its threshold, as lines;
    and RESULT items (key=value)."""
    modes = list(runs[0])
    if name == "hetero":
        job = median_ratio(runs, "r2sp_hetero", "ddp", "job_samples_per_s")
        tta = median_ratio(runs, "r2sp_hetero", "ddp", "time_to_target_s", lower=True)
        gap = median([100 * (r["r2sp_hetero"]["final_accuracy"] - r["ddp"]["final_accuracy"])
                      for r in runs if r["r2sp_hetero"].get("final_accuracy") is not None
                      and r["ddp"].get("final_accuracy") is not None])
        met = job is not None and tta is not None and gap is not None and \
            job >= 1.5 and tta >= 1.5 and abs(gap) <= 0.5
        return ([f"r2sp_hetero / ddp: job samples/s {_fmt(job)}, time to target {_fmt(tta)} "
                 f"(ddp's time over r2sp_hetero's), accuracy gap {_fmt(gap, '{:+.2f}')} points; "
                 f"check (>= 1.5, >= 1.5, within 0.5): {'met' if met else 'not met'}"],
                [f"hetero_vs_ddp_job={_fmt(job)}", f"hetero_vs_ddp_time={_fmt(tta)}"])
    if name.startswith("links_"):
        r2sp = [m for m in modes if not m.startswith("ddp")]
        ddp = [m for m in modes if m.startswith("ddp")]
        lines, items = [], []
        for key, what, lower in (("samples_per_s", "samples/s", False),
                                 ("time_to_target_s", "time to target", True)):
            a, b = _best(runs, r2sp, key, lower), _best(runs, ddp, key, lower)
            ratio = median_ratio(runs, a, b, key, lower) if a and b else None
            lines.append(f"{what}: best R2SP {a}, best DDP {b}, ratio {_fmt(ratio)}; check >= "
                         f"1.0: {'met' if ratio is not None and ratio >= 1.0 else 'not met'}")
            items.append(f"{name}_best_r2sp_vs_best_ddp_{key.split('_')[0]}={_fmt(ratio)}")
        return lines, items
    if name.startswith("servers_"):
        best, ratio = best_r2sp_vs_ddp(runs)
        # Three places: a median of 0.995 is below DDP and must not print as 1.00.
        return ([f"best R2SP ({best}) / ddp samples/s {_fmt(ratio, '{:.3f}')} with "
                 f"{name.split('_')[1]} servers "
                 f"({'matches' if ratio is not None and ratio >= 1.0 else 'below'} DDP)"],
                [f"{name}_r2sp_vs_ddp={_fmt(ratio, '{:.3f}')}"])
    lines, items = [], []
    for mode in (m for m in modes if m != "ddp"):
        ratio = median_ratio(runs, mode, "ddp", "job_samples_per_s")
        tta = median_ratio(runs, mode, "ddp", "time_to_target_s", lower=True)
        lines.append(f"{mode} / ddp: job samples/s {_fmt(ratio)}, time to target {_fmt(tta)}")
        items.append(f"{name}_{mode}_vs_ddp_job={_fmt(ratio)}")
    return lines, items


def best_r2sp_vs_ddp(runs):
    """The R2SP configuration with the best median samples/s over the runs, and the median of
    its samples/s over ddp's ((None, None) if none has figures)."""
    best = _best(runs, [m for m in runs[0] if not m.startswith("ddp")], "samples_per_s")
    return best, (median_ratio(runs, best, "ddp", "samples_per_s") if best else None)


def servers_to_match(ratios):
    """The fewest servers at which r2sp's samples/s reach ddp's ({servers: ratio or None});
    None if no count does."""
    return min((n for n, r in ratios.items() if r is not None and r >= 1.0), default=None)
