"""A Python worker for the integration tests (training_test.py): trains a tiny classifier on a
synthetic data set through r2sp.torch, as a user's script would, and writes what the test
checks to $TINY_OUT (JSON; "{rank}" in it stands for $RANK): its rank and size as init() gave
them (before joining; null where RANK or WORLD_SIZE is unset) and once joined, the parameters
before and right after joining and at the end, each epoch's sample indices and each step's
batch (as yielded, and as batch_size() said), its evaluations and finish()'s totals; or, when
joining fails, the error (exit status 3). $TINY_OUT.steps holds the number of steps done so
far. Ctrl-C: prints "interrupted", status 130; the worker lost to the job: the error in
$TINY_OUT, status 4.

Each process starts from different random parameters (torch seed = 100 + $RANK, or
$TINY_SEED), so equal parameters after joining show worker 0's became everyone's. $TINY_HIDDEN:
the hidden layer's width (8); $TINY_STEP_SLEEP: seconds each sample adds to its step (0);
$TINY_MODULE=1: the optimizer gets module=model (overlapped pulls with --overlap);
$TINY_LOADER_WORKERS=N: the DataLoader has N worker processes (prefetch_factor 2, persistent);
$TINY_COMPILE=1: the steps' forward runs through torch.compile(model) (PyTorch 2);
$TINY_BATCH_NORM=1: a BatchNorm1d after the first layer, whose running statistics at each
evaluation (in eval mode), and the model's state_dict() after finish() (what a script saves),
the output holds too. Argument: epochs."""

import json
import os
import sys
import time

import torch
import torch.nn.functional as F

import r2sp.torch as r2t

SAMPLES = 64


def data():
    """SAMPLES points of 4 features, the label whether their sum is positive, and the index."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(SAMPLES, 4, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long(), torch.arange(SAMPLES))


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


def buffers(model):
    return {name: b.reshape(-1).tolist() for name, b in model.named_buffers()}


def join(model):
    module = model if os.environ.get("TINY_MODULE") == "1" else None
    try:
        sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return r2t.DistributedOptimizer(sgd, model.named_parameters(), module=module)
    except r2t.R2SPError as e:
        with open(output(), "w") as f:
            json.dump({"error": [type(e).__name__, e.code, str(e)]}, f)
        sys.exit(3)


def output():
    """$TINY_OUT, its {rank} replaced by $RANK (workers that share an environment)."""
    return os.environ["TINY_OUT"].replace("{rank}", os.environ.get("RANK", "0"))


def known(what):
    """what() (r2t.rank or r2t.size), or None where it is not known yet."""
    try:
        return what()
    except RuntimeError:
        return None


def main():
    r2t.init()
    before = [known(r2t.rank), known(r2t.size)]  # before the optimizer joins the job
    torch.manual_seed(int(os.environ.get("TINY_SEED") or 100 + int(os.environ.get("RANK", "0"))))
    hidden = int(os.environ.get("TINY_HIDDEN", "8"))
    pause = float(os.environ.get("TINY_STEP_SLEEP", "0"))
    norm = [torch.nn.BatchNorm1d(hidden)] if os.environ.get("TINY_BATCH_NORM") == "1" else []
    model = torch.nn.Sequential(torch.nn.Linear(4, hidden), *norm, torch.nn.ReLU(),
                                torch.nn.Linear(hidden, 2))
    initial = flat(model)
    optimizer = join(model)
    forward = torch.compile(model) if os.environ.get("TINY_COMPILE") == "1" else model
    out = {"before": before, "rank": r2t.rank(), "size": r2t.size(), "mode": r2t.mode(),
           "initial": initial, "joined": flat(model), "batches": [], "asked": [], "epochs": [],
           "evals": [], "overlaps_pulls": optimizer.overlaps_pulls}
    train = data()
    workers = int(os.environ.get("TINY_LOADER_WORKERS", "0"))
    ahead = {"prefetch_factor": 2, "persistent_workers": True} if workers else {}
    loader = torch.utils.data.DataLoader(train, batch_sampler=r2t.DistributedSampler(train),
                                         num_workers=workers, **ahead)
    for _ in range(int(sys.argv[1])):
        out["epochs"].append([])
        for x, y, index in loader:
            out["asked"].append(r2t.batch_size())
            optimizer.zero_grad()
            loss = F.cross_entropy(forward(x), y)
            loss.backward()
            time.sleep(pause * len(y))
            optimizer.step(loss=loss)
            out["batches"].append(len(y))
            out["epochs"][-1] += index.tolist()
            with open(output() + ".steps", "w") as f:
                f.write(str(len(out["batches"])))
        if r2t.evaluates():
            model.eval()
            with torch.no_grad():
                x, y, _ = train.tensors
                accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
            out.setdefault("evaluated_buffers", []).append(buffers(model))
            model.train()
            out["evals"].append([accuracy, r2t.report_eval(accuracy, 0.5)])
    out["finish"] = r2t.finish()
    out["final"] = flat(model)
    out["saved"] = {k: v.reshape(-1).tolist() for k, v in model.state_dict().items()}
    with open(output(), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    except r2t.JobLost as lost:
        with open(output(), "w") as f:
            json.dump({"lost": [type(lost).__name__, lost.code, str(lost)]}, f)
        sys.exit(4)
