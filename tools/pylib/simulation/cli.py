"""tools/simulate's command line: flags into Scenarios, runs, and the table and JSON out."""

import argparse
from dataclasses import asdict
import json
import os
import re

from pylib.simulation import host_check, report, validation
from pylib.simulation.engine import Simulation
from pylib.simulation.scenario import MODES, Calibration, Scenario

TOLERANCE = 0.10  # the validation's: |simulated / measured - 1| for entries expected to match


def parse_rate(text):
    """'419mbit', '10gbit', '25Gbit', '1e9' (bit/s) or 'unlimited' (None)."""
    if text in ("", "unlimited", "none"):
        return None
    m = re.fullmatch(r"([0-9.]+(?:e[0-9]+)?)\s*([kmg]?)(?:bit)?", text.strip().lower())
    if not m:
        raise ValueError(f"link rate {text!r}: write e.g. 419mbit, 10gbit or unlimited")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def parser():
    p = argparse.ArgumentParser(prog="tools/simulate", description=__doc__)
    a = p.add_argument
    a("--modes", default="bsp,r2sp", help=f"comma-separated, of {', '.join(MODES)}")
    a("--workers", type=int, default=8)
    a("--servers", type=int, default=1)
    a("--model_mb", type=float, default=12.49, help="model size in MiB (fp32)")
    a("--partition_mb", type=float, default=1.0, help="partition size in MiB")
    a("--compute_ms", type=float, default=2000, help="compute per iteration (ms)")
    a("--ms_per_sample", type=float, default=0, help="> 0: compute = this * batch (ms)")
    a("--compute_cv", type=float, default=0, help="spread of compute times (fraction of mean)")
    a("--slowdown", default="", help="per worker, comma-separated factors (e.g. 1,1,1,2)")
    a("--batch", type=int, default=64)
    a("--hetero_batching", action="store_true", help="r2sp hetero batching (needs --ms_per_sample)")
    a("--server_link", default="unlimited", help="each server's link, e.g. 419mbit, 10gbit")
    a("--worker_link", default="unlimited", help="each worker's link")
    a("--latency_ms", type=float, default=0.1, help="per link, one way")
    a("--push_codec", default="fp32", help="fp32, fp16 or topk:K")
    a("--pull_codec", default="fp32", help="fp32 or fp16")
    a("--staleness", type=int, default=3, help="ssp's bound")
    a("--r2sp_order", default="auto", help="ring, first_come or auto")
    a("--r2sp_slot_width", type=int, default=1)
    a("--r2sp_headroom", type=float, default=1.2)
    a("--r2sp_gap_holds", type=float, default=2,
      help="the slot gap at most this many smoothed holds (0: T / (headroom * workers) alone)")
    a("--r2sp_slot", default="push", help="push or push_pull")
    a("--elastic_period", type=int, default=4)
    a("--overlap", action="store_true", help="push during backward, pull into the next forward")
    a("--iterations", type=int, default=10, help="per worker")
    a("--skip", type=int, default=2, help="each worker's first iterations left out of the rates")
    a("--seed", type=int, default=1)
    cal = Calibration()
    a("--link_efficiency", type=float, default=cal.link_efficiency,
      help="calibration: goodput of a shaped link that meets a faster one")
    a("--op_overhead_ms", type=float, default=cal.op_overhead_s * 1000,
      help="calibration: fixed cost of each push and pull")
    a("--control_ms", type=float, default=cal.control_s * 1000,
      help="calibration: one scheduler message, one way")
    a("--server_cpu_ns_per_byte", type=float, default=cal.server_cpu_s_per_byte * 1e9,
      help="calibration: a server's pass over a byte of parameters")
    a("--host_cores", type=int, default=cal.host_cores,
      help="calibration: the cores of the one machine the whole job shares (0: a machine each)")
    a("--host_cpu_ns_per_byte", type=float, default=cal.host_cpu_s_per_byte * 1e9,
      help="calibration: CPU to move a byte of a push or pull on that shared machine")
    a("--json", default="", help="also write the results here (JSON)")
    a("--validate", action="store_true",
      help="simulate the validation data set (tools/simulate_data) against its measurements")
    a("--fit", action="store_true", help="refit the calibration to the validation data set")
    return p


def scenarios(args):
    """One Scenario per mode in --modes. Raises ValueError for bad flags."""
    if args.r2sp_slot not in ("push", "push_pull"):
        raise ValueError("--r2sp_slot: push or push_pull")
    slowdown = [float(x) for x in args.slowdown.split(",")] if args.slowdown else []
    common = dict(
        workers=args.workers, servers=args.servers, model_bytes=args.model_mb * 2**20,
        partition_bytes=args.partition_mb * 2**20, compute_s=args.compute_ms / 1000.0,
        ms_per_sample=args.ms_per_sample, compute_cv=args.compute_cv, slowdown=slowdown,
        batch=args.batch, hetero=args.hetero_batching,
        server_link_bps=parse_rate(args.server_link), worker_link_bps=parse_rate(args.worker_link),
        latency_s=args.latency_ms / 1000.0, push_codec=args.push_codec,
        pull_codec=args.pull_codec, staleness=args.staleness, r2sp_order=args.r2sp_order,
        slot_width=args.r2sp_slot_width, headroom=args.r2sp_headroom,
        gap_holds=args.r2sp_gap_holds,
        slot_covers_pull=args.r2sp_slot == "push_pull", elastic_period=args.elastic_period,
        overlap=args.overlap, iterations=args.iterations, skip=args.skip, seed=args.seed,
        calibration=Calibration(
            link_efficiency=args.link_efficiency, op_overhead_s=args.op_overhead_ms / 1000.0,
            control_s=args.control_ms / 1000.0,
            server_cpu_s_per_byte=args.server_cpu_ns_per_byte * 1e-9,
            host_cores=args.host_cores, host_cpu_s_per_byte=args.host_cpu_ns_per_byte * 1e-9))
    out = [Scenario(mode=m.strip(), **common) for m in args.modes.split(",") if m.strip()]
    for sc in out:
        sc.validate()
    return out


def validate_lines():
    """The validation table, then the real jobs on this machine (host_check); returns (lines,
    entries expected to match but outside)."""
    lines = [f"{'entry':42} {'metric':17} {'measured':>9} {'simulated':>9} {'error':>7}"]
    bad = []
    checks = validation.check_all()
    if os.path.exists(host_check.DATA):
        checks += [None] + host_check.check_all()
    for c in checks:
        if c is None:
            lines.append("real jobs on one host (tools/simulate_data/host_runs.json):")
            continue
        flag = "" if c.matched else "  (not expected to match: see its note)"
        lines.append(f"{c.name:42} {c.metric:17} {c.measured:9.2f} {c.simulated:9.2f} "
                     f"{c.error:+7.1%}{flag}")
        if c.matched and abs(c.error) > TOLERANCE:
            bad.append(c.name)
    return lines, bad


def run(args):
    """Runs what the flags ask for; returns the exit status."""
    if args.fit:
        from pylib.simulation import fit
        cal, err = fit.fit()
        print(f"best calibration: {cal} (worst error {err:.1%})")
        return 0
    if args.validate:
        lines, bad = validate_lines()
        print("\n".join(lines))
        if bad:
            print(f"outside {TOLERANCE:.0%}: {', '.join(bad)}")
        return 1 if bad else 0
    runs = [(sc, Simulation(sc).run()) for sc in scenarios(args)]
    print(report.table([r for _, r in runs]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"scenario": asdict(sc), "result": asdict(r)} for sc, r in runs], f,
                      indent=1)
    return 0
