#!/usr/bin/env python3
"""A modern training recipe: a small Vision Transformer on Fashion-MNIST with AdamW (no weight
decay on biases, norms and embeddings), linear warm-up then cosine decay, bfloat16 autocast,
gradient clipping, gradient accumulation over micro-batches, DataLoader worker processes and
a checkpoint. The same script runs three ways:
  tools/launch --workers=2 --servers=1 --sync=bsp \\
      --worker_cmd="/usr/bin/python3 examples/pytorch/vit_recipe.py"                 # R2SP
  /usr/bin/python3 examples/pytorch/ddp_launch.py --nproc=2 -- \\
      examples/pytorch/vit_recipe.py --backend=ddp                                   # DDP
  /usr/bin/python3 examples/pytorch/vit_recipe.py --backend=single                   # alone
The lines that differ under R2SP are marked "# r2sp". Under R2SP the servers apply the AdamW
(each group's settings, the schedule's rate at every step) and keep its moments; the epochs,
batch, seed and step limit given here become the job's. --emulate_ms_per_sample=MS0,MS1,...
(ddp and single) makes rank r's steps last MS_r per sample, as slower machines' would (under
R2SP the job's worker flag of that name paces each worker). Data: --data_dir, else
$R2SP_DATA_DIR, else Debian's /usr/share/datasets/fashion-mnist. Prints each epoch's test
accuracy and ends with a JSON line: {"test_accuracy", "evals" ([seconds, accuracy] after each
epoch), "steps", "seconds", "samples_per_s"}."""

import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
from torch import nn

from r2sp_examples import backends
from r2sp_examples import datasets
from r2sp_examples import pacing


class Block(nn.Module):
    """A pre-norm Transformer encoder layer: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, dim, heads, mlp):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def attention(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // self.heads), dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(b, n, d))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    """Patches of 7x7 pixels (16 of them) embedded to `dim`, a class token and learned
    positions, `depth` Blocks, a linear head on the class token."""

    def __init__(self, dim=64, depth=4, heads=4, mlp=128, classes=10, patch=7, image=28):
        super().__init__()
        self.embed = nn.Conv2d(1, dim, patch, stride=patch)
        tokens = (image // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads, mlp) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x)[:, 0]))


def parameter_groups(model, weight_decay):
    """Weight decay on the matrices only: not on biases, norms, the class token, positions."""
    decay, plain = [], []
    for name, p in model.named_parameters():
        (decay if p.ndim >= 2 and name not in ("cls", "pos") else plain).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": plain, "weight_decay": 0.0}]


def warmup_cosine(total_steps, warmup):
    """The rate's factor at a step: linear warm-up over `warmup` steps, then cosine to 0."""
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, total_steps - warmup)))
    return factor


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("r2sp", "ddp", "single"), default="r2sp")
    p.add_argument("--data_dir", default="")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch_size", type=int, default=64, help="samples per step and process")
    p.add_argument("--micro_batches", type=int, default=2, help="backward passes per step")
    p.add_argument("--max_steps", type=int, default=0, help="stop after this many (0: none)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--weight_decay", type=float, default=0.05)
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of the steps")
    p.add_argument("--clip", type=float, default=1.0, help="gradient norm (0: none)")
    p.add_argument("--autocast", choices=("bf16", "none"), default="bf16")
    p.add_argument("--loader_workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--data_order", choices=("r2sp", "torch"), default="r2sp",
                   help="ddp and single: train R2SP's batches (r2sp) or torch's sampler's")
    p.add_argument("--checkpoint", default="", help="where to save the final state")
    p.add_argument("--emulate_ms_per_sample", default="",
                   help="ddp, single: MS or MS0,MS1,... by rank: each step lasts MS per sample")
    args = p.parse_args(argv)
    try:
        args.paces = [float(v) for v in args.emulate_ms_per_sample.split(",") if v]
    except ValueError:
        p.error(f"--emulate_ms_per_sample={args.emulate_ms_per_sample}: numbers, by rank")
    if args.paces and args.backend == "r2sp":
        p.error("--emulate_ms_per_sample is for ddp and single; under R2SP give the job's "
                "worker flag --emulate_ms_per_sample (tools/launch --worker_flags_for)")
    if any(v < 0 for v in args.paces):
        p.error("--emulate_ms_per_sample must not be negative")
    if args.micro_batches < 1 or args.batch_size < args.micro_batches:
        p.error("--micro_batches must be at least 1 and at most --batch_size")
    return args


class Run:
    """The backend's few differences: joining, the batches, accumulation, evaluation."""

    def __init__(self, args):
        self.args, self.rank, self.world = args, 0, 1
        if args.backend == "r2sp":
            import r2sp.torch as r2t  # r2sp
            self.r2t = r2t
            r2t.init(epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,  # r2sp
                     max_steps=args.max_steps)
        elif args.backend == "ddp":
            torch.distributed.init_process_group("gloo")
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()
        paces = args.paces or [0.0]
        self.pacer = pacing.Pacer(paces[min(self.rank, len(paces) - 1)])

    def wrap(self, model, optimizer):
        if self.args.backend == "r2sp":  # r2sp: the servers apply the optimizer
            return model, self.r2t.DistributedOptimizer(
                optimizer, model.named_parameters(), edits_gradients=self.args.clip > 0)
        if self.args.backend == "ddp":
            return nn.parallel.DistributedDataParallel(model), optimizer
        return model, optimizer

    def batch_sampler(self, train_set):
        a = self.args
        if a.backend == "r2sp":
            return self.r2t.DistributedSampler(train_set)  # r2sp: the job's plan and batches
        if a.data_order == "r2sp":
            return backends.R2SPOrderBatches(len(train_set), self.world, self.rank,
                                             a.batch_size, a.seed)
        sampler = torch.utils.data.DistributedSampler(train_set, self.world, self.rank,
                                                      seed=a.seed)
        return torch.utils.data.BatchSampler(sampler, a.batch_size, drop_last=True)

    def no_sync(self, model, optimizer):
        if self.args.backend == "r2sp":
            return optimizer.no_sync()  # r2sp: on the optimizer
        if self.args.backend == "ddp":
            return model.no_sync()
        return contextlib.nullcontext()

    def step(self, optimizer, loss):
        if self.args.backend == "r2sp":
            optimizer.step(loss=loss)  # r2sp: the loss goes to the job's metrics
        else:
            optimizer.step()

    def first_step(self):
        """Where training starts: a job resumed from the servers' checkpoints goes on there."""
        return self.r2t.first_step() if self.args.backend == "r2sp" else 0  # r2sp

    def evaluates(self):
        return self.r2t.evaluates() if self.args.backend == "r2sp" else self.rank == 0

    def report(self, accuracy, loss):
        if self.args.backend == "r2sp":
            self.r2t.report_eval(accuracy, loss)  # r2sp: to the job's metrics

    def finish(self):
        if self.args.backend == "r2sp":
            self.r2t.finish()  # r2sp: the final pull; the model holds the servers' parameters
        elif self.args.backend == "ddp":
            torch.distributed.destroy_process_group()


def autocast(args):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")


def evaluate(model, test_set, args):
    model.eval()
    loader = torch.utils.data.DataLoader(test_set, batch_size=1000)
    correct, loss = 0, 0.0
    with torch.no_grad(), autocast(args):
        for x, y in loader:
            out = model(x).float()
            loss += nn.functional.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
    model.train()
    return correct / len(test_set), loss / len(test_set)


def train_step(run, model, optimizer, x, y, args):
    """One optimizer step over --micro_batches backward passes; the batch's mean loss."""
    total = 0.0
    run.pacer.begin(len(y))  # ddp, single: an emulated slower machine's step
    chunks = list(zip(x.chunk(args.micro_batches), y.chunk(args.micro_batches)))
    for i, (xc, yc) in enumerate(chunks):
        last = i == len(chunks) - 1
        with contextlib.nullcontext() if last else run.no_sync(model, optimizer):
            with autocast(args):
                loss = nn.functional.cross_entropy(model(xc).float(), yc)
            (loss * len(yc) / len(y)).backward()
        total += loss.item() * len(yc) / len(y)
    run.pacer.after_backward()
    if args.clip > 0:
        nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    run.step(optimizer, total)
    optimizer.zero_grad()
    return total


def train(run, args, train_set, test_set):
    torch.manual_seed(args.seed)
    model = ViT()
    optimizer = torch.optim.AdamW(parameter_groups(model, args.weight_decay), lr=args.lr,
                                  betas=(0.9, 0.999))
    model, optimizer = run.wrap(model, optimizer)
    sampler = run.batch_sampler(train_set)
    total = args.epochs * len(sampler)
    if args.max_steps:
        total = min(total, args.max_steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(total, max(1, int(args.warmup * total))))
    for _ in range(run.first_step()):
        schedule.step()
    ahead = {"prefetch_factor": 2, "persistent_workers": True} if args.loader_workers else {}
    loader = torch.utils.data.DataLoader(train_set, batch_sampler=sampler,
                                         num_workers=args.loader_workers, **ahead)
    start, steps, samples, evals = time.monotonic(), run.first_step(), 0, []
    for epoch in range(args.epochs):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for x, y in loader:
            train_step(run, model, optimizer, x, y, args)
            schedule.step()
            steps, samples = steps + 1, samples + len(y)
            if args.max_steps and steps >= args.max_steps and args.backend != "r2sp":
                break  # under R2SP the job's --max_steps ends the sampler
        if run.evaluates():
            accuracy, loss = evaluate(model, test_set, args)
            run.report(accuracy, loss)
            evals.append([round(time.monotonic() - start, 3), accuracy])
            print(f"epoch {epoch + 1}: test accuracy {accuracy:.4f}", flush=True)
        if args.max_steps and steps >= args.max_steps:
            break
    if args.checkpoint and run.evaluates():  # the evaluating worker saves the checkpoint,
        save(args.checkpoint, model, optimizer, schedule, steps)  # before the job ends
    run.finish()
    return model, steps, samples, evals, time.monotonic() - start


def save(path, model, optimizer, schedule, steps):
    state = {"model": getattr(model, "module", model).state_dict(),
             "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
             "steps": steps}
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def main(argv=None):
    args = parse(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data_dir = datasets.data_dir_for(args.data_dir, datasets.DEBIAN_FASHION_MNIST)
    train_set, test_set = datasets.fashion_mnist(data_dir)
    run = Run(args)
    model, steps, samples, evals, seconds = train(run, args, train_set, test_set)
    print(json.dumps({"test_accuracy": evals[-1][1] if evals else None, "evals": evals,
                      "steps": steps, "seconds": round(seconds, 3),
                      "samples_per_s": round(samples / seconds, 1) if seconds else 0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
