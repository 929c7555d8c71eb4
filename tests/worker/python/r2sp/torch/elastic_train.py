"""A Python worker for elastic_job_test.py (easgd, eawild), writing what the test checks to
$ELASTIC_OUT ("{rank}" in it stands for $RANK) as JSON. Two uses (argv[1]):

known: one tensor "w" of 8 floats (rank 0's initial values 0.5 * (i % 3) start the job), each
  step's gradient the small integers rank + 1 + step + i % 4 (the loss sum(w * g)), the local
  step torch.optim.SGD(lr=0.25, momentum=0.5) (Adam, RMSprop with $ELASTIC_LOCAL=adam,
  rmsprop), so every value
  stays a short binary fraction and the test's reference is exact. Writes the step count, this worker's copy after its last step
  ("local"), the centre pulled then ("centre", centre_state_dict()) and the parameters after
  finish() ("final", the final pull's centre); a join refused (r2sp.R2SPError) or an
  optimizer the mode does not take (TypeError): {"error": [type, code, message]}, status 3.
train OPTIMIZER EPOCHS: a 2-layer classifier of a synthetic data set (512 training and 256 test
  points of 8 features, the label whether their sum is positive), the local step
  torch.optim.OPTIMIZER (adam: Adam(lr=0.03); sgd: SGD(lr=0.1, momentum=0.9)); after each epoch
  the evaluating worker evaluates the centre (optimizer.centre()) and reports it. Writes its
  evaluations and finish()'s totals."""

import json
import os
import sys

import torch
import torch.nn.functional as F

import r2sp.torch as r2t

KNOWN_SIZE = 8


def output():
    return os.environ["ELASTIC_OUT"].replace("{rank}", os.environ.get("RANK", "0"))


def known():
    r2t.init()
    w = torch.nn.Parameter(torch.tensor([0.5 * (i % 3) for i in range(KNOWN_SIZE)]))
    local = {"adam": lambda: torch.optim.Adam([w]),
             "rmsprop": lambda: torch.optim.RMSprop([w])}.get(
                 os.environ.get("ELASTIC_LOCAL"), lambda: torch.optim.SGD([w], lr=0.25,
                                                                           momentum=0.5))()
    try:
        optimizer = r2t.DistributedOptimizer(local, [("w", w)])
    except (r2t.R2SPError, TypeError) as e:  # a refused setting: the test checks the message
        with open(output(), "w") as f:
            json.dump({"error": [type(e).__name__, getattr(e, "code", None), str(e)]}, f)
        sys.exit(3)
    steps = 0
    for _ in r2t.DistributedSampler(int(os.environ.get("ELASTIC_SAMPLES", "4"))):
        g = torch.tensor([float(r2t.rank() + 1 + steps + i % 4) for i in range(KNOWN_SIZE)])
        optimizer.zero_grad()
        loss = (w * g).sum()
        loss.backward()
        optimizer.step(loss=loss)
        steps += 1
    out = {"rank": r2t.rank(), "mode": r2t.mode(), "steps": steps, "local": w.tolist(),
           "centre": optimizer.centre_state_dict()["w"].tolist()}
    r2t.finish()
    out["final"] = w.tolist()
    return out


def data(samples, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 8, generator=g)
    return torch.utils.data.TensorDataset(x, (x.sum(dim=1) > 0).long())


def train(name, epochs):
    r2t.init()
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    local = (torch.optim.Adam(model.parameters(), lr=0.03) if name == "adam"
             else torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    optimizer = r2t.DistributedOptimizer(local, model.named_parameters())
    train_set, test_set = data(512, 7), data(256, 8)
    loader = torch.utils.data.DataLoader(train_set,
                                         batch_sampler=r2t.DistributedSampler(train_set))
    out = {"rank": r2t.rank(), "mode": r2t.mode(), "evals": []}
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step(loss=loss)
        if r2t.evaluates():
            x, y = test_set.tensors
            with optimizer.centre(), torch.no_grad():
                accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
            out["evals"].append([accuracy, r2t.report_eval(accuracy)])
    out["finish"] = r2t.finish()
    return out


def main():
    out = known() if sys.argv[1] == "known" else train(sys.argv[2], int(sys.argv[3]))
    with open(output(), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
