"""r2sp.torch: trains a PyTorch model through an R2SP job (docs/PYTORCH.md). A script written
for DDP, Horovod or BytePS changes its optimizer line (and sampler):

    import r2sp.torch as r2t
    r2t.init()
    optimizer = r2t.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         model.named_parameters())
    loader = DataLoader(train_set, batch_sampler=r2t.DistributedSampler(train_set))
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward()
            optimizer.step(loss=loss)
        if r2t.evaluates(): r2t.report_eval(test_accuracy(model))
    r2t.finish()
"""

try:
    import torch as _torch  # noqa: F401  (the check that PyTorch is there)
except ImportError as _e:
    raise ImportError("r2sp.torch needs PyTorch, which this Python does not have "
                      f"({_e}); run the script with a Python that has it (here: /usr/bin/python3)"
                      ) from _e

from .. import JobLost, R2SPError
from .job import (batch_size, evaluates, finish, first_step, init, local_rank, mode, rank,
                  report_eval, seed, size)
from .optimizer import DistributedOptimizer
from .sampler import DistributedSampler, epoch_batches

__all__ = ["init", "rank", "size", "local_rank", "seed", "mode", "first_step",
           "DistributedOptimizer",
           "DistributedSampler", "epoch_batches", "batch_size", "evaluates", "report_eval",
           "finish", "R2SPError", "JobLost"]
