"""How long each death kept a job below full strength (summary.json's "recovery"
"after_deaths"): for every worker or server the supervisor recorded as dead, the seconds from
the launcher seeing the death until every worker that trains after it (the survivors and the
dead worker's replacement, if one started) has finished an iteration it began after the death.

That covers what the death costs in each case: the survivors' wait until the scheduler declares
the worker dead (bsp and r2sp stall on a barrier or a slot, asp does not), a replacement's start
and join, and, for a server, the workers' requests to the lost shard waiting for its replacement
and restore. An iteration's start is its metrics line's end time `t` less its compute, push and
pull (and, in r2sp, its slot wait), as iteration_summary counts them; on remote backends the
hosts' clocks are compared with the launcher's, so they should be synchronised (NTP)."""

import re

from .run_files import iteration_seconds, metrics_records

METRICS = re.compile(r"metrics_(worker\d+(?:\.r\d+)?)\.jsonl")


def metrics_by_process(run_dir):
    """{process name ("worker1", "worker1.r1"): [(start, end) of each iteration, in order]} from
    RUN_DIR/metrics_*.jsonl; torn lines and evaluation records are skipped."""
    spans = {}
    for name, row in metrics_records(run_dir):
        m = METRICS.fullmatch(name)
        if m and "event" not in row and "t" in row:
            spans.setdefault(m.group(1), []).append(_span(row))
    return {process: sorted(s, key=lambda span: span[1]) for process, s in spans.items()}


def _span(row):
    return (row["t"] - iteration_seconds(row), row["t"])


def recoveries(events, started_at, spans):
    """[{"process", "died_s" (since the job started), "recovered_s" (seconds after the death, or
    None if the job never trained at full strength again), "replacement" (or None)}] for each
    "died" event of a worker or server in `events` (summary Events), given the job's start
    (Unix time) and metrics_by_process(). A survivor that begins no iteration after the death
    (it had finished) does not count; a worker's replacement must train."""
    found = []
    for e in events:
        if e.event != "died" or not e.process.startswith(("worker", "server")):
            continue
        died = started_at + e.t
        replacement = _replacement_after(events, e)
        needed = {p for p, s in spans.items()
                  if p != e.process and any(start >= died for start, _ in s)}
        if replacement and replacement.startswith("worker"):
            needed.add(replacement)
        ends = [next((end for start, end in spans.get(p, []) if start >= died), None)
                for p in sorted(needed)]
        recovered = None if not ends or None in ends else max(ends) - died
        found.append({"process": e.process, "died_s": e.t,
                      "recovered_s": None if recovered is None else round(recovered, 3),
                      "replacement": replacement})
    return found


def _replacement_after(events, death):
    """The replacement started for `death`'s process (the first "restarted" event of its slot
    after it), or None."""
    slot = death.process.partition(".")[0]
    for e in events:
        if e.event == "restarted" and e.t >= death.t and e.process.partition(".")[0] == slot:
            return e.process
    return None
