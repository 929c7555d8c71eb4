"""Running one compared configuration's job (tools/compare_modes): its tools/launch or
tools/netcluster command line, the run and its check. R2SP configurations run the C++ worker,
--worker_cmd's command, or --script through the r2sp client; ddp configurations run --script
under PyTorch DDP (--ddp_cmd) with the same settings (script_flags). worker_label says which
ran, for the table."""

import json
import os
import shlex
import subprocess
import sys

from . import script_flags
from .configurations import ELASTIC, MODES, is_ddp, result_key, split_mode, split_variant
from ..job.errors import JobError

# The servers' SGD flags that elastic modes' workers take for their local step.
ELASTIC_SGD = ("lr", "momentum", "weight_decay")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def worker_label(args, mode):
    """Who trained in `mode`'s runs: "DDP (script)", "r2sp client (script)", "C++ worker",
    "r2sp client (--worker_cmd)" or "mixed (--worker_cmd_for)"."""
    if is_ddp(mode):
        return "DDP (script)"
    if getattr(args, "script", ""):
        return "r2sp client (script)"
    if getattr(args, "worker_cmd", ""):
        return "r2sp client (--worker_cmd)"
    if getattr(args, "worker_cmd_for", []):
        return "mixed (--worker_cmd_for)"
    return "C++ worker"


def _common(args, run_dir):
    tool = ["tools/netcluster"] + shlex.split(args.net) if args.net else ["tools/launch"]
    return [sys.executable, os.path.join(ROOT, tool[0])] + tool[1:] + [
        f"--run_dir={run_dir}", f"--servers={args.servers}", f"--workers={args.workers}",
        f"--timeout={args.timeout}", "--quiet"]


def _variant_flags(args, kind, variant):
    """The flags `variant` (None: none) gives one role: args' `kind` (variants: the workers',
    scheduler_variants, server_variants), "" where it names none for that role."""
    return getattr(args, kind, {}).get(variant, "") if variant else ""


def _joined(*flags):
    return " ".join(f for f in flags if f)


def ddp_command(args, mode, run_dir):
    """The command line of a ddp configuration: --script under DDP (--ddp_cmd), its settings
    from the job's worker and server flags (and a variant's worker flags), per-worker pacing
    from --worker_flags_for, the samples' order from --ddp_data_order. ValueError without
    --script."""
    if not getattr(args, "script", ""):
        raise ValueError(f"{mode}: a DDP configuration runs a PyTorch script: give --script")
    configuration, variant = split_variant(mode)
    codec = split_mode(configuration)[1]
    worker_flags = _joined(args.worker_flags, _variant_flags(args, "variants", variant))
    cmd = _common(args, run_dir) + [
        "--ddp_cmd=" + script_flags.script_command(
            args.python, args.script, args.script_flags, ddp_hook=codec or "none",
            data_order=getattr(args, "ddp_data_order", "torch")),
        "--worker_flags=" + script_flags.ddp_flags(worker_flags, args.server_flags)]
    cmd += [f"--worker_flags_for={item}"
            for item in script_flags.ddp_flags_for(args.worker_flags_for)]
    if args.bin_dir:  # the r2sp package's extension (--data_order=r2sp)
        cmd.append(f"--bin_dir={args.bin_dir}")
    return cmd


def job_command(args, mode, run_dir):
    """The tools/launch or tools/netcluster command line that runs `mode` into `run_dir`, from
    tools/compare_modes' options `args`."""
    if is_ddp(mode):
        return ddp_command(args, mode, run_dir)
    configuration, variant = split_variant(mode)
    base, codec = split_mode(configuration)
    sync, mode_flags = MODES[base]
    sched = _joined(args.scheduler_flags, mode_flags.format(global_batch=args.global_batch),
                    _variant_flags(args, "scheduler_variants", variant))
    server_flags = _joined(args.server_flags, _variant_flags(args, "server_variants", variant))
    worker_flags = args.worker_flags
    if sync in ELASTIC:  # the local step runs the servers' SGD settings (worker --lr, ...)
        worker_flags = " ".join([worker_flags] + script_flags.settings(server_flags,
                                                                       ELASTIC_SGD))
    if codec:  # by default training pulls in fp16 only with fp16 pushes (sparse codecs push)
        pull = args.pull_codec if args.pull_codec != "auto" else (
            "fp16" if codec == "fp16" else "fp32")
        worker_flags += f" --push_codec={codec} --pull_codec={pull}"
    worker_flags = _joined(worker_flags, _variant_flags(args, "variants", variant))
    cmd = _common(args, run_dir) + [f"--sync={sync}", f"--server_flags={server_flags}",
                                    f"--worker_flags={worker_flags}"]
    if sched:
        cmd.append(f"--scheduler_flags={sched}")
    for item in args.worker_flags_for:
        cmd.append(f"--worker_flags_for={item}")
    if getattr(args, "script", ""):  # the script through the r2sp client, every worker
        cmd.append("--worker_cmd=" + script_flags.script_command(
            args.python, args.script, script_flags.r2sp_flags(args.script_flags, server_flags)))
    if getattr(args, "worker_cmd", ""):  # Python workers (tools/launch --worker_cmd)
        cmd.append(f"--worker_cmd={args.worker_cmd}")
    for item in getattr(args, "worker_cmd_for", []):
        cmd.append(f"--worker_cmd_for={item}")
    if args.bin_dir:
        cmd.append(f"--bin_dir={args.bin_dir}")
    if getattr(args, "auth", "none") != "none":
        cmd.append(f"--auth={args.auth}")
    return cmd


def check_job(r, what, run_dir):
    """JobError unless the finished job command `r` (subprocess.run's result) succeeded with no
    process lost: a job the launcher completed after a worker or server died (its summary.json
    "events") measured something else than the other runs."""
    if r.returncode != 0:
        raise JobError(f"{what} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            events = json.load(f).get("events", [])
    except (OSError, ValueError):
        return  # load() says what is missing
    died = [f"{e['process']} (status {e['status']})" for e in events if e.get("event") == "died"]
    if died:
        raise JobError(f"{what}: {', '.join(died)} died during the run, so its figures do not "
                       f"compare with the other runs'; see {run_dir}")


def run_mode(args, mode, suffix=""):
    """Runs `mode` into OUT/KEY+SUFFIX (KEY: result_key(mode)); returns that directory.
    JobError if the job failed or lost a process (check_job)."""
    run_dir = os.path.join(args.out, result_key(mode) + suffix)
    print(f"compare_modes: {mode}{suffix} ...", flush=True)
    r = subprocess.run(job_command(args, mode, run_dir), cwd=ROOT, capture_output=True, text=True)
    check_job(r, mode, run_dir)
    return run_dir
