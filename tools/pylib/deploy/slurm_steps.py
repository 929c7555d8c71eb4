"""The Slurm backend's processes: each one job step the launcher starts from this machine (the
login node) inside the batch job's allocation, `srun --jobid=JOB --relative=NODE --overlap bash
-c COMMAND`, so that job.processes.Job and job.supervisor.Supervisor run them as they run local
processes and ssh commands (a dead step recorded, a replacement started as a new step on the
same node). The batch script only stages the data set, writes the allocation's node names to
OUT_DIR/nodes and holds the allocation until the launcher writes OUT_DIR/release; each step's
command reads the names back (a host's scheduler endpoint or advertised address may be a node
name, ${nodes[i]}) on the shared storage."""

import os
import time

from ..job.errors import JobError

NODES = "nodes"  # in OUT_DIR: the allocation's node names, one a line, once allocated
RELEASE = "release"  # in OUT_DIR: the launcher's word that the batch job may end


def hold_lines():
    """The batch script's end: publish the node names, hold the allocation until released."""
    return [
        "# The launcher starts every process as a step of this job (srun --jobid) once the",
        "# node names are here; the job holds its allocation until the launcher releases it.",
        'printf "%s\\n" "${nodes[@]}" > "$R2SP_OUT/' + NODES + '.tmp" && '
        'mv "$R2SP_OUT/' + NODES + '.tmp" "$R2SP_OUT/' + NODES + '"',
        'while [ ! -e "$R2SP_OUT/' + RELEASE + '" ]; do sleep 1; done',
    ]


def step_command(run_role, out_dir, args, shell_word):
    """The bash command of a step: the node names, OUT_DIR, then run_role with `args` (each
    quoted by `shell_word`, which leaves ${nodes[i]}, $R2SP_OUT and $HOME to bash)."""
    return (f"mapfile -t nodes < {shell_word(os.path.join(out_dir, NODES))} && "
            f"R2SP_OUT={shell_word(out_dir)} && exec {shell_word(run_role)} "
            + " ".join(shell_word(a) for a in args))


def step_argv(job_id, node, command):
    """srun's command line for `command` on the allocation's `node`-th node (its stdin closed:
    the launcher's terminal is not the step's)."""
    return ["srun", f"--jobid={job_id}", "--nodes=1", "--ntasks=1", f"--relative={node}",
            "--overlap", "--input=none", "bash", "-c", command]


def wait_for_nodes(out_dir, sbatch, deadline, failed):
    """The allocation's node names once the batch script has written them. `sbatch` (its
    Popen) ending first is the batch job's failure: failed() raises its JobError. `deadline`:
    job.deadline.Deadline (JobError past --timeout, a queued job included)."""
    path = os.path.join(out_dir, NODES)
    while not os.path.exists(path):
        if sbatch.poll() is not None:
            failed()
            raise JobError(f"the batch job ended before its steps started (sbatch status "
                           f"{sbatch.returncode})")
        deadline.check()
        time.sleep(0.2)
    with open(path) as f:
        return f.read().split()


def release(out_dir):
    """Lets the batch job end (its script exits 0)."""
    with open(os.path.join(out_dir, RELEASE), "w"):
        pass

