"""launch_start's training script: a small MLP on random data, 3 steps of 32 samples a worker,
under DDP (--backend=ddp, torchrun's variables) or R2SP (--backend=r2sp, r2sp.torch). Rank 0
writes {"imported": ..., "first_step": ...} (Unix seconds: after its imports, after its first
step) to --out."""

import argparse
import json
import time

import torch
from torch import nn

IMPORTED = time.time()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["ddp", "r2sp"], required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    sgd = torch.optim.SGD(model.parameters(), lr=0.01)
    if args.backend == "ddp":
        torch.distributed.init_process_group("gloo")
        rank, model, optimizer = torch.distributed.get_rank(), nn.parallel.DistributedDataParallel(
            model), sgd
    else:
        import r2sp.torch as r2t
        r2t.init(batch_size=32, max_steps=3)
        optimizer = r2t.DistributedOptimizer(sgd, model.named_parameters(), train_samples=192)
        rank = r2t.rank()
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    first = None
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        first = first or time.time()
    if args.backend == "r2sp":
        r2t.finish()
    else:
        torch.distributed.destroy_process_group()
    if rank == 0:
        with open(args.out, "w") as f:
            json.dump({"imported": IMPORTED, "first_step": first}, f)


if __name__ == "__main__":
    main()
