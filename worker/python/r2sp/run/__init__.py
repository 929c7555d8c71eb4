"""r2sp-run: launches a training script on R2SP as torchrun launches it on DDP, with torchrun's
command line and environment. Installed with the wheel (pip install r2sp-*.whl) as the console
script r2sp-run, also `python -m r2sp.run`.

  r2sp-run --standalone --nproc_per_node=2 train.py --epochs=2           # one machine
  r2sp-run --nnodes=2 --node_rank=0 --master_addr=10.0.0.1 --nproc_per_node=4 train.py
  r2sp-run --nnodes=2 --node_rank=1 --master_addr=10.0.0.1 --nproc_per_node=4 train.py

Node 0 (or --standalone) starts the job's scheduler on --master_port (any free port with
--standalone), its --servers parameter servers, and its workers; every node starts
--nproc_per_node workers, each running the script with torchrun's variables (RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) and R2SP's (R2SP_SCHEDULER,
R2SP_WORKER_FLAGS), which r2sp.torch.init() reads. The script is the one a DDP job runs, ported
to r2sp.torch (docs/PYTORCH.md).

Without the options, the environment says: torchrun's PET_NNODES, PET_NODE_RANK,
PET_NPROC_PER_NODE, PET_MASTER_ADDR, PET_MASTER_PORT, PET_MAX_RESTARTS (a Kubeflow PyTorchJob's
for torchrun); else a PyTorchJob pod's MASTER_ADDR, MASTER_PORT, WORLD_SIZE (the pods) and RANK
(this pod); else, under srun, Slurm's SLURM_NNODES, SLURM_NODEID and the first host of
SLURM_JOB_NODELIST. So `torchrun ARGS` in a Slurm batch script or a PyTorchJob becomes
`r2sp-run ARGS`.

Every process logs to the run directory (--log_dir; default runs/TIMESTAMP-nodeN here), the
workers' output echoed here. Node 0 writes summary.json there as tools/launch does and exits 0
if and only if the job completed; another node exits 0 if and only if each of its workers (or its
last replacement) exited 0. A worker that fails is restarted while --max_restarts lasts (its
replacement joins the running job); without restarts the job goes on without it, the others
training its samples from the next epoch. Ctrl-C or SIGTERM stops this node's processes.
Exit status 2 for a bad command line."""

import os
import signal
import sys

from .options import UsageError, parse

__all__ = ["main", "UsageError", "parse"]


def _interrupted(signum, _frame):
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt(signum)


def main(argv=None):
    """r2sp-run's entry point; returns the exit status."""
    from . import nodes
    try:
        plan = parse(sys.argv[1:] if argv is None else argv, os.environ)
    except UsageError as e:
        print(f"r2sp-run: error: {e}", file=sys.stderr)
        return 2
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _interrupted)
    try:
        return (nodes.run_master if plan.node_rank == 0 else nodes.run_workers)(plan)
    except UsageError as e:
        print(f"r2sp-run: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        signum = e.args[0] if e.args and isinstance(e.args[0], int) else signal.SIGINT
        print(f"r2sp-run: signal {signum}: stopped this node's processes", file=sys.stderr)
        return 128 + signum
