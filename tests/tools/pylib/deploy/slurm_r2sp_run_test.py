"""examples/launch/slurm_r2sp_run.sbatch on a real Slurm (slurm_fixture.sh: 2 slurmd nodes on
this machine): sbatch runs it, its `srun r2sp-run` starts one r2sp-run per node, each reads
SLURM_NNODES and SLURM_NODEID, and the two nodes train 4 workers together, each with torchrun's
variables (the script's --epochs=2 of one step: 16 samples a worker, batch 64). The nodes'
names do not resolve here (every slurmd is this host), so the submitter
gives the master as PET_MASTER_ADDR=127.0.0.1, which r2sp-run reads before Slurm's node list
(the list's first host is the master on a real cluster: options_test checks it). Skipped
without root, Slurm, munge or /usr/bin/python3's torch."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import junit_main
from slurm_backend_test import FIXTURE, ROOT, cannot_run, free_run  # noqa: F401

PYTHON = "/usr/bin/python3"  # with torch
SBATCH_NAME = os.path.join("examples", "launch", "slurm_r2sp_run.sbatch")
# The runfiles under Bazel (this module's ROOT may be the source tree, where sys.path found it).
RUNFILES = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "r2sp")) \
    if "TEST_SRCDIR" in os.environ else ROOT
BIN_DIR = os.environ.get("R2SP_BIN_DIR", RUNFILES)
SCRIPT = """import json, os, sys, torch
import r2sp.torch as r2t
r2t.init()
model = torch.nn.Linear(4, 2)
optimizer = r2t.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     model.named_parameters())
x = torch.randn(64, 4)
y = (x.sum(dim=1) > 0).long()
sampler, steps, epoch_steps = r2t.DistributedSampler(64), 0, None
while epoch_steps != 0:  # the job's epochs, until one yields no step
    epoch_steps = 0
    for batch in sampler:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
        optimizer.step()
        steps, epoch_steps = steps + 1, epoch_steps + 1
r2t.finish()
names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR")
out = dict({n: os.environ[n] for n in names}, steps=steps, argv=sys.argv[1:])
with open(os.path.join(os.environ["RUN_OUT"], "worker%s.json" % os.environ["RANK"]), "w") as f:
    json.dump(out, f)
"""


def why_not():
    return cannot_run() or (None if subprocess.run([PYTHON, "-c", "import torch"],
                                                   capture_output=True).returncode == 0
                            else f"needs torch in {PYTHON}")


@unittest.skipIf(why_not(), why_not() or "")
class SlurmR2spRunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="r2sp-srun.", dir="/tmp")  # short: unix sockets
        os.chmod(self.dir, 0o755)
        self.slurm = os.path.join(self.dir, "slurm")
        ctld = free_run(3)
        up = subprocess.run([FIXTURE, "up", self.slurm], capture_output=True, text=True,
                            env=dict(os.environ, SLURM_FIXTURE_NODES="2",
                                     SLURM_FIXTURE_CTLD_PORT=str(ctld),
                                     SLURM_FIXTURE_SLURMD_PORT=str(ctld + 1)))
        self.assertEqual(up.returncode, 0, up.stderr)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.addCleanup(subprocess.run, [FIXTURE, "down", self.slurm], capture_output=True)

    def test_srun_starts_one_r2sp_run_per_node_and_they_train_together(self):
        shims = os.path.join(self.dir, "bin")  # r2sp-run on PATH, as a wheel installs it
        os.makedirs(shims)
        with open(os.path.join(shims, "r2sp-run"), "w") as f:
            f.write(f"#!/bin/sh\nexec {PYTHON} {RUNFILES}/tools/r2sp-run \"$@\"\n")
        os.chmod(os.path.join(shims, "r2sp-run"), 0o755)
        script = os.path.join(self.dir, "train.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        env = dict(os.environ, SLURM_CONF=os.path.join(self.slurm, "slurm.conf"),
                   PATH=shims + ":" + os.environ["PATH"], RUN_OUT=self.dir,
                   R2SP_BIN_DIR=BIN_DIR, R2SP_EXAMPLE=script, R2SP_DATA_DIR="/nowhere",
                   PET_MASTER_ADDR="127.0.0.1", R2SP_MASTER_PORT=str(free_run(1)))
        r = subprocess.run(["sbatch", "--wait", "--cpus-per-task=1", f"--chdir={self.dir}",
                            f"--output={self.dir}/job.out", os.path.join(RUNFILES, SBATCH_NAME)],
                           env=env,
                           capture_output=True, text=True, timeout=240)
        with open(os.path.join(self.dir, "job.out")) as f:
            out = f.read()
        logs = ""
        for root, _, names in os.walk(os.path.join(self.dir, "runs")):
            for name in sorted(n for n in names if n.startswith("worker") and n.endswith(".log")):
                with open(os.path.join(root, name)) as f:
                    logs += f"{name}:\n{f.read()[-2000:]}\n"
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + out + logs)
        for rank in range(4):
            with open(os.path.join(self.dir, f"worker{rank}.json")) as f:
                self.assertEqual(json.load(f), {
                    "RANK": str(rank), "LOCAL_RANK": str(rank % 2), "WORLD_SIZE": "4",
                    "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "steps": 2,
                    "argv": ["--data_dir=/nowhere"]}, out)
        runs = sorted(os.listdir(os.path.join(self.dir, "runs")))
        self.assertEqual([r[-6:] for r in runs], ["-node0", "-node1"])
        with open(os.path.join(self.dir, "runs", runs[0], "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["completed"], summary["workers"]), (True, 4))


if __name__ == "__main__":
    junit_main.main()
