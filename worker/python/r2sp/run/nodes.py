"""Runs r2sp-run's part of the job on this node, with the launcher's library (tools/pylib, which
the wheel carries in r2sp/_launch/tools/): node 0 runs the scheduler (on MASTER_PORT), the
servers and its workers as tools/launch runs a job (the same run directory, logs, metrics and
summary.json; its exit status 0 if and only if the job completed); every other node runs its
workers alone, pointed at node 0's scheduler, and restarts those that fail while
--max_restarts lasts (its status 0 if and only if each worker's last process exited 0)."""

import os
import shlex
import socket
import sys
import time

from .. import _install
from .options import UsageError

# What the launcher's processes are called here, in messages (the library says "launch").
NAME = "r2sp-run"


def pylib():
    """The launcher's library (imported from the wheel or the checkout)."""
    tools = _install.tools_dir()
    if tools not in sys.path:
        sys.path.insert(0, tools)
    from pylib.job import errors, launcher, local_commands, options, processes, supervisor
    return errors, launcher, local_commands, options, processes, supervisor


def local_address(plan):
    """The address this node's processes listen on: 127.0.0.1 for one node on loopback, else
    the one this node reaches node 0 from (UsageError when MASTER_ADDR does not resolve)."""
    if plan.standalone or (plan.nnodes == 1 and plan.master_addr in ("127.0.0.1", "localhost")):
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((plan.master_addr, plan.master_port))  # a route lookup; sends nothing
            return probe.getsockname()[0]
    except OSError as e:
        raise UsageError(f"--master_addr={plan.master_addr}: cannot reach it ({e})") from None


def check_port_free(address, port):
    """UsageError when the scheduler could not listen on address:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError as e:
            raise UsageError(f"--master_port={port}: cannot listen on {address}:{port} "
                             f"({e.strerror}); give another port") from None


def launch_args(plan, options):
    """tools/launch's options for this node's share of the job."""
    argv = [f"--servers={plan.servers}", f"--workers={plan.world_size}", f"--sync={plan.sync}",
            f"--run_dir={plan.run_dir}", f"--bin_dir={_install.bin_dir()}",
            "--worker_cmd=" + shlex.join(plan.command), f"--worker_flags={plan.worker_flags}",
            f"--server_flags={plan.server_flags}", f"--scheduler_flags={plan.scheduler_flags}",
            f"--max_restarts={plan.max_restarts}", f"--timeout={plan.timeout}",
            f"--auth={plan.auth}"] + ([f"--keys_dir={plan.keys_dir}"] if plan.keys_dir else [])
    args = options.parse_args(argv, NAME)
    args.local_workers = plan.local_ranks
    args.local_world_size = plan.nproc_per_node
    return args


def run_master(plan):
    """Node 0: the whole job through the launcher; the exit status."""
    errors, launcher, _, options, _, _ = pylib()
    address = local_address(plan)
    port = "*" if plan.standalone else str(plan.master_port)
    if not plan.standalone:
        check_port_free(address, plan.master_port)

    def bind(name):
        return [f"--bind=tcp://{address}:{port if name == 'scheduler' else '*'}"]
    try:
        launcher.run_job(launch_args(plan, options), bind_flags=bind)
    except errors.JobError as e:
        print(f"{NAME}: error: {e}", file=sys.stderr)
        return 1
    return 0


def run_workers(plan):
    """Another node: its workers, restarted while --max_restarts lasts; the exit status."""
    _, _, local_commands, options, processes, supervisor = pylib()
    address = local_address(plan)
    args = launch_args(plan, options)
    args.servers = 0  # node 0's
    os.makedirs(plan.run_dir, exist_ok=True)
    job = processes.Job(args)
    endpoint = f"tcp://{plan.master_addr}:{plan.master_port}"
    for name, argv, echo in local_commands.node_commands(
            args, {}, lambda name: [f"--bind=tcp://{address}:*"], endpoint):
        job.start(name, argv, echo)
    print(f"{NAME}: node {plan.node_rank}: workers {plan.local_ranks.start}.."
          f"{plan.local_ranks.stop - 1} of {plan.world_size}, scheduler {endpoint}; logs in "
          f"{plan.run_dir}", flush=True)
    try:
        return supervise(job, plan, supervisor)
    except BaseException:
        job.stop_all()
        raise


def supervise(job, plan, supervisor):
    """Waits for the node's workers, starting a replacement (worker3.r1) for one that fails
    while restarts are left; stops them all past --timeout. 0 if each one's last process
    exited 0, else 1."""
    latest = {name: name for name, _ in job.procs()}  # slot -> its latest process
    replaced = dict.fromkeys(latest, 0)  # slot -> its replacements
    deadline = time.time() + plan.timeout
    while True:
        procs = dict(job.procs())
        running = False
        for slot, name in list(latest.items()):
            status = procs[name].poll()
            if status is None:
                running = True
            elif status != 0 and sum(replaced.values()) < plan.max_restarts:
                replaced[slot] += 1
                new = f"{slot}.r{replaced[slot]}"
                print(f"{NAME}: {name} died (status {status}); starting replacement {new}",
                      flush=True)
                argv, echo = job.command(name)
                job.start(new, supervisor.replacement_argv(argv, plan.run_dir, new), echo)
                latest[slot], running = new, True
        if not running:
            break
        if time.time() > deadline:
            print(f"{NAME}: --timeout={plan.timeout:g}s passed: stopping the workers",
                  file=sys.stderr)
            job.stop_all()
            return 1
        time.sleep(0.1)
    failed = {name: procs[name].returncode for name in latest.values()
              if procs[name].returncode != 0}
    for name, status in sorted(failed.items()):
        print(f"{NAME}: {name} failed (status {status}); see {plan.run_dir}/{name}.log",
              file=sys.stderr)
    return 1 if failed else 0
