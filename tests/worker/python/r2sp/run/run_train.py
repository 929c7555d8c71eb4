"""A training script for run_job_test.py, launched by r2sp-run: a linear model on 64 known
samples through r2sp.torch. Writes the torchrun variables it was given, its argv and the steps
it trained to $RUN_OUT/worker<RANK>.json (with $DUMP_FLAGS, its R2SP_WORKER_FLAGS too). With
$DIE_RANK=R and $DIE_MARK (a file), worker R's first life exits with status 9 after 2 steps,
leaving the mark; its replacement trains on. $STEP_SLEEP: seconds after each step."""

import json
import os
import sys
import time

import torch

import r2sp.torch as r2t

VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def main():
    r2t.init()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = r2t.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         model.named_parameters())
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(1))
    y = (x.sum(dim=1) > 0).long()
    dies = os.environ.get("DIE_RANK") == os.environ["RANK"] and \
        not os.path.exists(os.environ.get("DIE_MARK", "/"))
    steps, epoch_steps = 0, None
    sampler = r2t.DistributedSampler(64)
    while epoch_steps != 0:  # the job's epochs, until one yields no step
        epoch_steps = 0
        for batch in sampler:
            epoch_steps += 1
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
            steps += 1
            time.sleep(float(os.environ.get("STEP_SLEEP", "0")))
            if dies and steps == 2:
                open(os.environ["DIE_MARK"], "w").close()
                os._exit(9)
    r2t.finish()
    out = {name: os.environ.get(name) for name in VARIABLES}
    out.update(argv=sys.argv[1:], steps=steps)
    if os.environ.get("DUMP_FLAGS"):
        out["flags"] = os.environ["R2SP_WORKER_FLAGS"]
    with open(os.path.join(os.environ["RUN_OUT"], f"worker{os.environ['RANK']}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
