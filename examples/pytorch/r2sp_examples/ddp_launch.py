"""Starts N processes of a script with torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT) on this machine: what --backend=ddp needs where torchrun is missing
or broken (Debian's torchrun of torch 1.13 fails under Python 3.11 before starting anything).
One process failing stops the others."""

import os
import socket
import subprocess
import time


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(base, rank, world, port, addr="127.0.0.1"):
    """`base` plus torchrun's variables for process `rank` of `world` on one host."""
    env = dict(base)
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": addr, "MASTER_PORT": str(port)})
    return env


def run(command, nproc, port=0, stdout_paths=None, timeout=None):
    """Runs `command` (an argv) as ranks 0..nproc-1 and waits for all. stdout_paths[r], when
    given, receives rank r's output (stdout and stderr). Returns the first non-zero exit status
    (0 when all succeed); once one fails, or after `timeout` seconds, the others are
    terminated."""
    if nproc < 1:
        raise ValueError("--nproc must be at least 1")
    port = port or free_port()
    procs, files = [], []
    try:
        for rank in range(nproc):
            out = open(stdout_paths[rank], "w") if stdout_paths else None
            files.append(out)
            procs.append(subprocess.Popen(command, env=rank_env(os.environ, rank, nproc, port),
                                          stdout=out, stderr=subprocess.STDOUT if out else None))
        return _wait(procs, timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()
        for f in files:
            if f:
                f.close()


def _wait(procs, timeout):
    """The first non-zero status among `procs`, or 0 once all exited 0; 124 after `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            return failed[0]
        if all(c == 0 for c in codes):
            return 0
        if deadline is not None and time.monotonic() > deadline:
            return 124
        time.sleep(0.05)
