"""tools/netcluster's options: its own (links, delay, time dilation, CPU quotas, placement,
self-check, cleanup) and tools/launch's, each of which it either passes to the job it runs in
the emulated cluster (ACCEPTED) or refuses with the reason (REFUSED). No launch option is
silently ignored: a new one must be put in one of the two tables
(tests/tools/pylib/emulation/netcluster_options_test fails until it is)."""

import argparse
import math

from ..job import options
from . import layout
from .netcluster import parse_rate

# tools/launch's options that netcluster's job takes as tools/launch would (launcher.run_job, or
# ddp_job.run with --ddp_cmd), with what changes in the emulated cluster.
ACCEPTED = {
    "servers": "one machine each (or worker i's with --colocate)",
    "workers": "one machine each",
    "sync": "",
    "run_dir": "also gets hosts.json and link_bytes.jsonl",
    "bin_dir": "",
    "timeout": "",
    "scheduler_flags": "",
    "server_flags": "",
    "worker_flags": "",
    "quiet": "",
    "worker_flags_for": "",
    "worker_cmd": "",
    "worker_cmd_for": "",
    "ddp_cmd": "one process per worker machine, gloo over the shaped links",
    "auth": "",
    "keys_dir": "",
    "max_restarts": "a replacement runs in the dead process's namespace, with its CPU quota",
    "checkpoint_every": "",
}

# tools/launch's options netcluster refuses (given any value but their default), and why:
# options.parse_args puts the reason in their help and in the error.
REFUSED = {
    "cluster": "a cluster file names real hosts (tools/launch --cluster); netcluster makes its "
               "own machines from --servers and --workers",
    "backend": "netcluster runs every process on this machine, each in a namespace of its own; "
               "the remote backends are tools/launch --cluster's",
    "bundle": "only tools/launch's remote backends ship a bundle; netcluster runs the binaries "
              "of --bin_dir",
    "dry_run": "the commands run in namespaces netcluster makes only when it runs; "
               "tools/launch --dry_run with the same job options prints the job's commands",
    "resume": "the emulated cluster is not saved with the job (launch.json keeps no links, "
              "quotas or placement), so its run directory cannot be resumed",
    "workers_per_process": "each worker is a machine of its own (a namespace with its link and "
                           "CPU quota); threads of one process would share them",
    "write_data_manifest": "it writes a cluster file's [data] manifest and starts no job: "
                           "run tools/launch --write_data_manifest=DIR",
}


def add_netcluster_options(p):
    """The emulated cluster's own options."""
    p.add_argument("--server_link", default="", help="rate of each server's link, e.g. 100mbit")
    p.add_argument("--worker_link", default="", help="rate of each worker's link")
    p.add_argument("--delay_ms", type=float, default=0.0, help="one-way delay on every shaped link")
    p.add_argument("--time_dilation", type=float, default=1.0, metavar="K",
                   help="run the links K times slower than given (rate / K; bucket, queue and "
                        "delay K times as long), for a job whose compute pacing is also K times "
                        "slower: times scale by K, ratios between configurations are kept")
    p.add_argument("--colocate", action="store_true",
                   help="server i runs on worker i's machine: same namespace, address and link "
                        "(--worker_link); default: every server on a machine of its own")
    p.add_argument("--cpu_quota", action="append", default=[], metavar="RANK:FRACTION",
                   help="limit the RANK-th worker started to FRACTION of one CPU, 0.1 or more "
                        "(cgroup cpu.max over a 10 ms period; repeatable; a DDP job's too)")
    p.add_argument("--self_check", action="store_true",
                   help="first measure a bulk transfer into server 0's link (a DDP job: worker "
                        "0's) against its configured rate")
    p.add_argument("--cleanup", action="store_true", help="only delete leftover r2sp namespaces")


def parse_args(argv, description):
    """tools/netcluster's options, checked: a refused launch option, a bad rate, layout or
    quota is argparse's error (usage, exit status 2). Adds `layout` (layout.plan) and `quotas`
    (layout.parse_quotas) to the result."""
    p = argparse.ArgumentParser(prog="netcluster", description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_netcluster_options(p)
    args = options.parse_args(argv, description, parser=p, refused=REFUSED)
    if not (math.isfinite(args.time_dilation) and args.time_dilation >= 1):
        p.error(f"--time_dilation must be a number of at least 1 (got {args.time_dilation:g})")
    try:
        for text in (args.server_link, args.worker_link):
            if text:
                parse_rate(text)
        args.layout = layout.plan(args.servers, args.workers, args.server_link, args.worker_link,
                                  args.colocate, ddp=bool(args.ddp_cmd))
        args.quotas = layout.parse_quotas(args.cpu_quota, args.workers)
    except ValueError as e:
        p.error(str(e))
    return args
