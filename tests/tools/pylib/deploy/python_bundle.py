"""For the remote backends' tests of Python workers (worker_cmd): a release bundle of the built
binaries that carries the r2sp package (a stand-in extension: these jobs do not import it) and,
in worker_files/, EXEC_WORKER, a Python worker that records its working directory and
environment and then becomes the bundle's worker binary with the flags R2SP_WORKER_FLAGS gives
it, no others: the job completes only if those are exactly the binary's flags."""

import os
import shlex
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
# exec_worker.py WORKER RECORDS: records into RECORDS/RANK.json, then execs WORKER.
EXEC_WORKER = r'''
import json, os, shlex, sys
worker, records = sys.argv[1:3]
keys = ("R2SP_SCHEDULER", "R2SP_WORKER_FLAGS", "R2SP_DATA_DIR", "R2SP_CORE", "RANK", "WORLD_SIZE",
        "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "PYTHONPATH")
with open(os.path.join(records, os.environ["RANK"] + ".json"), "w") as f:
    json.dump({"cwd": os.getcwd(), "env": {k: os.environ[k] for k in keys if k in os.environ}}, f)
os.execv(worker, [worker] + shlex.split(os.environ["R2SP_WORKER_FLAGS"]))
'''
# The command that runs it from the bundle's worker_files/ (its working directory remotely).
COMMAND = "python3 exec_worker.py ../bin/worker {records}"


def make(directory, bin_dir):
    """Makes the bundle under `directory` (from the binaries of `bin_dir`); its tarball's path."""
    links, source = os.path.join(directory, "python_bin"), os.path.join(directory, "python_src")
    for role in ("scheduler", "server", "worker"):
        os.makedirs(os.path.join(links, role))
        os.symlink(os.path.abspath(os.path.join(bin_dir, role, role)), os.path.join(links, role, role))
    os.makedirs(os.path.join(links, "worker", "python"))
    os.makedirs(os.path.join(source, "r2sp"))
    for path, text in ((os.path.join(links, "worker", "python", "_core.so"), "stand-in"),
                       (os.path.join(source, "r2sp", "__init__.py"), ""),
                       (os.path.join(source, "exec_worker.py"), EXEC_WORKER)):
        with open(path, "w") as f:
            f.write(text)
    out = subprocess.run([os.path.join(ROOT, "tools", "package"), "--bin_dir=" + links,
                          "--out=" + os.path.join(directory, "python_dist"),
                          "--package_dir=" + os.path.join(source, "r2sp"),
                          "--worker_files=" + os.path.join(source, "exec_worker.py")],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"tools/package failed: {out.stderr}")
    return out.stdout.split()[1]


def expected(bundle_dir, scheduler_host, scheduler_port, rank, world_size, local_rank, flags,
             inherited=None):
    """What EXEC_WORKER records for a worker run from the unpacked bundle `bundle_dir` with the
    worker flags `flags` (a list); `inherited`: the PYTHONPATH its host gave it, if any."""
    return {"cwd": os.path.join(bundle_dir, "worker_files"),
            "env": {"R2SP_SCHEDULER": f"tcp://{scheduler_host}:{scheduler_port}",
                    "R2SP_WORKER_FLAGS": shlex.join(flags), "RANK": str(rank),
                    "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(local_rank),
                    "MASTER_ADDR": scheduler_host, "MASTER_PORT": str(scheduler_port),
                    "PYTHONPATH": os.path.join(bundle_dir, "python") +
                    (":" + inherited if inherited else "")}}
