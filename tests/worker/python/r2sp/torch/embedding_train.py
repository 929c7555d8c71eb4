"""A Python worker for embedding_job_test.py: a bag-of-tokens classifier whose embedding
(64 rows of 64) has sparse gradients ($SPARSE=1: nn.Embedding(sparse=True)) or dense ones,
then a linear layer (64 to 4). 32 known samples of two tokens each, out of the first 16 rows;
the script's SGD (lr 0.1, momentum 0.9), which the servers apply. $ZERO_TO_NONE=1 clears the
gradients to None each step (model.zero_grad(set_to_none=True)), so the embedding's .grad
arrives as a sparse tensor. Writes {'finish': r2sp.torch.finish()'s totals, 'rows': the rows
each step's batch touched, 'final': the parameters} as JSON to argv[1]."""

import json
import os
import sys

import torch
import torch.nn.functional as F

import r2sp.torch as r2t

SAMPLES = 32


def sample(i):
    """Sample i: its two tokens and its label."""
    return [i % 16, (5 * i + 3) % 16], i % 4


class BagOfTokens(torch.nn.Module):
    def __init__(self, sparse):
        super().__init__()
        self.embedding = torch.nn.Embedding(64, 64, sparse=sparse)
        self.out = torch.nn.Linear(64, 4)

    def forward(self, tokens):
        return self.out(self.embedding(tokens).sum(dim=1))


def main():
    r2t.init()
    torch.manual_seed(0)
    model = BagOfTokens(os.environ.get("SPARSE") == "1")
    optimizer = r2t.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model.named_parameters())
    to_none = os.environ.get("ZERO_TO_NONE") == "1"
    rows = []
    sampler = r2t.DistributedSampler(SAMPLES)
    for _ in range(2):  # the job's epochs (--epochs=2)
        for batch in sampler:
            tokens = torch.tensor([sample(i)[0] for i in batch])
            labels = torch.tensor([sample(i)[1] for i in batch])
            if to_none:
                model.zero_grad(set_to_none=True)
            else:
                optimizer.zero_grad()
            loss = F.cross_entropy(model(tokens), labels)
            loss.backward()
            optimizer.step(loss=loss)
            rows.append(sorted(set(tokens.reshape(-1).tolist())))
    finish = r2t.finish()
    final = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()
    with open(sys.argv[1], "w") as f:
        json.dump({"finish": finish, "rows": rows, "final": final}, f)


if __name__ == "__main__":
    main()
