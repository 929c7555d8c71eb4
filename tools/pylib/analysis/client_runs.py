"""The runs of tools/bench/pytorch_client (figures: client_bench.py): the command lines of each
kind of job, built from the options alone, and running them into their run directories.
  cpp_job     tools/launch with the worker binary (model cnn on Fashion-MNIST)
  python_job  the same job with every worker the example script (tools/launch --worker_cmd)
  ddp_job     the same script under DDP (examples/pytorch/ddp_launch.py: gloo on loopback)
(--measure=baseline's jobs, python_job with another build's binaries and package:
client_baseline.py)."""

import glob
import os
import shlex
import subprocess

from . import client_bench
from . import mode_jobs
from . import run_files
from ..job.errors import JobError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "examples", "pytorch", "fashion_mnist_cnn.py")
DDP_LAUNCH = os.path.join(ROOT, "examples", "pytorch", "ddp_launch.py")


def worker_flags(args):
    """The flags every worker of a job gets, C++ or Python (the Python client reads them from
    R2SP_WORKER_FLAGS and ignores --model, --data and --threads: the script owns those)."""
    flags = ["--model=cnn", "--data=fashion-mnist", f"--batch_size={args.batch_size}",
             "--epochs=1", f"--max_steps={args.steps}", f"--threads={args.threads}",
             f"--push_codec={args.push_codec}", "--log_every=100000"]
    if args.emulate_ms_per_sample:
        flags.append(f"--emulate_ms_per_sample={args.emulate_ms_per_sample}")
    return flags + shlex.split(args.worker_flags)


def script_command(args, step_times="", environment=()):
    """The example script as a worker runs it: its own flags only what the job cannot give;
    `step_times`: its --step_times PATH; `environment`: NAME=VALUE settings it runs with, through
    env(1), over those tools/launch gives it."""
    command = [args.python, SCRIPT, f"--threads={args.threads}", f"--lr={lr(args)}"]
    if step_times:
        command.append(f"--step_times={step_times}")
    return (["env", *environment] if environment else []) + command


def launch_command(args, mode, workers, run_dir, python, script=None, bin_dir=None):
    """tools/launch's argv for one R2SP job; `python`: the workers run the example script
    (`script`, default script_command(args)). `mode`: MODE or MODE@VARIANT, whose flags
    (args.variants) the workers also get, and whose scheduler flags (args.scheduler_variants)
    the scheduler, after --scheduler_flags. `bin_dir`: the binaries (default args.bin_dir)."""
    sync, variant = client_bench.split_mode(mode)
    flags = worker_flags(args) + shlex.split(args.variants.get(variant, ""))
    cmd = [os.path.join(ROOT, "tools", "launch"), f"--sync={sync}", f"--run_dir={run_dir}",
           f"--servers={args.servers}", f"--workers={workers}",
           f"--server_flags={args.server_flags}",
           f"--worker_flags={shlex.join(flags)}",
           f"--timeout={args.timeout}", "--quiet"]
    scheduler = " ".join(f for f in (args.scheduler_flags,
                                     args.scheduler_variants.get(variant, "")) if f)
    if scheduler:
        cmd.append(f"--scheduler_flags={scheduler}")
    bin_dir = bin_dir or args.bin_dir
    if bin_dir:
        cmd.append(f"--bin_dir={bin_dir}")
    if python:
        cmd.append(f"--worker_cmd={shlex.join(script or script_command(args))}")
    return cmd


def ddp_command(args, processes):
    """ddp_launch.py's argv: the script under DDP, flags as the R2SP workers get them."""
    flags = [f"--batch_size={args.batch_size}", "--epochs=1", f"--max_steps={args.steps}",
             f"--threads={args.threads}", f"--lr={lr(args)}"]
    if args.emulate_ms_per_sample:
        flags.append(f"--emulate_ms_per_sample={args.emulate_ms_per_sample}")
    return [args.python, DDP_LAUNCH, f"--nproc={processes}", "--", SCRIPT, "--backend=ddp"] + flags


def lr(args):
    """The rate both the R2SP script (whose SGD the servers apply) and DDP take: the
    --server_flags' --lr, 0.01 when not given."""
    for flag in shlex.split(args.server_flags):
        if flag.startswith("--lr="):
            return flag.split("=", 1)[1]
    return "0.01"


def run_launch(args, mode, workers, run_dir, python, script=None, bin_dir=None):
    """Runs one R2SP job (launch_command's); JobError (mode_jobs.check_job) unless it completed
    with no death."""
    r = subprocess.run(launch_command(args, mode, workers, run_dir, python, script, bin_dir),
                       cwd=ROOT, capture_output=True, text=True, timeout=args.timeout + 60)
    what = f"{'Python' if python else 'C++'} workers, {mode}, {workers} workers"
    mode_jobs.check_job(r, what, run_dir)


def overhead_run(args, python, run_dir):
    """Push + pull seconds per step of one job (C++ or Python workers)."""
    run_launch(args, args.overhead_mode, args.overhead_workers, run_dir, python)
    return client_bench.run_comm_seconds(run_files.worker_metrics(run_dir), args.skip)


def r2sp_throughput_run(args, mode, workers, run_dir):
    """samples/s of the script through R2SP, from its workers' result lines (their
    logs, RUN_DIR/workerN.log)."""
    run_launch(args, mode, workers, run_dir, python=True)
    lines = []
    for path in sorted(glob.glob(os.path.join(run_dir, "worker*.log"))):
        with open(path) as f:
            try:
                lines.append(client_bench.result_line(f.read()))
            except ValueError as e:
                raise JobError(f"{path}: {e}") from None
    if len(lines) != workers:
        raise JobError(f"{run_dir}: {len(lines)} worker logs, {workers} workers")
    return job_rate(lines, run_dir)


def ddp_throughput_run(args, processes, run_dir):
    """samples/s of the script under DDP, from its processes' result lines (their output,
    RUN_DIR/ddp.log)."""
    os.makedirs(run_dir, exist_ok=True)
    r = subprocess.run(ddp_command(args, processes), cwd=ROOT, capture_output=True, text=True,
                       timeout=args.timeout)
    with open(os.path.join(run_dir, "ddp.log"), "w") as f:
        f.write(r.stdout + r.stderr)
    if r.returncode != 0:
        raise JobError(f"DDP, {processes} processes, failed (status {r.returncode}); see "
                       f"{run_dir}/ddp.log")
    lines = client_bench.result_lines(r.stdout)
    if len(lines) != processes:
        raise JobError(f"DDP, {processes} processes: {len(lines)} result lines; see "
                       f"{run_dir}/ddp.log")
    return job_rate(lines, run_dir)


def job_rate(lines, run_dir):
    """client_bench.job_samples_per_s, its ValueError a JobError naming the run."""
    try:
        return client_bench.job_samples_per_s(lines)
    except ValueError as e:
        raise JobError(f"{run_dir}: {e}") from None


def measure_overhead(args, out, report):
    """Interleaved C++ and Python jobs; {"cpp": [s/step per repeat], "python": [...]}.
    `report(text)` hears each run."""
    runs = {"cpp": [], "python": []}
    for r in range(args.repeats):
        for kind in client_bench.interleaved(["cpp", "python"], r):
            run_dir = os.path.join(out, f"overhead_{kind}_{r}")
            runs[kind].append(overhead_run(args, kind == "python", run_dir))
            report(f"repeat {r} overhead {kind:6s} {runs[kind][-1] * 1e3:8.2f} ms push+pull/step"
                   f"  {run_dir}")
    return runs


def measure_throughput(args, out, report):
    """Interleaved DDP and R2SP jobs of the script; {(backend, processes): [samples/s per
    repeat]}, backend "ddp" or an R2SP mode."""
    variants = [(backend, n) for n in args.processes for backend in ["ddp"] + args.modes]
    runs = {v: [] for v in variants}
    for r in range(args.repeats):
        for backend, n in client_bench.interleaved(variants, r):
            run_dir = os.path.join(out, f"throughput_{backend}_{n}_{r}")
            rate = ddp_throughput_run(args, n, run_dir) if backend == "ddp" else \
                r2sp_throughput_run(args, backend, n, run_dir)
            runs[(backend, n)].append(rate)
            report(f"repeat {r} throughput {backend:4s} x{n} {rate:9.1f} samples/s  {run_dir}")
    return runs
