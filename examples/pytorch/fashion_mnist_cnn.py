#!/usr/bin/env python3
"""Trains R2SP's built-in cnn, written in PyTorch, on Fashion-MNIST read from its idx files.

The same script runs three ways, so they can be compared:
  tools/launch --workers=2 --servers=1 --sync=bsp \\
      --worker_cmd="/usr/bin/python3 examples/pytorch/fashion_mnist_cnn.py"     # R2SP
  torchrun --nproc_per_node=2 examples/pytorch/fashion_mnist_cnn.py --backend=ddp
  /usr/bin/python3 examples/pytorch/fashion_mnist_cnn.py --backend=single
Data: --data_dir, else $R2SP_DATA_DIR, else Debian's /usr/share/datasets/fashion-mnist
(train-images-idx3-ubyte[.gz] and the three others). Prints the test accuracy after each
epoch and ends with a JSON line: {"samples_per_s": ..., "steady_samples_per_s": ... (after
the first 5 steps), "test_accuracy": ..., "seconds": ...}.
docs/PYTORCH.md explains the R2SP lines (r2sp_examples/backends.py, class R2SP)."""

import sys

import torch
from torch import nn

from r2sp_examples import datasets
from r2sp_examples import training


class Cnn(nn.Module):
    """models/graph.cc's cnn: conv 5x5 32 + ReLU + max-pool 2, conv 5x5 64 + ReLU + max-pool
    2, fc 3136->1024 + ReLU, fc 1024->10. Its parameters carry the built-in cnn's names and
    shapes (conv1.weight [32, 1, 5, 5], ..., fc2.bias [10]), so Python and C++ workers can
    train it in one job."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.fc2 = nn.Linear(1024, num_classes)
        # The built-in initialisation: convolution weights He-normal (fan in, ReLU gain);
        # biases and linear weights U(-1/sqrt(fan_in), +), which is PyTorch's own default.
        for conv in (self.conv1, self.conv2):
            nn.init.kaiming_normal_(conv.weight, mode="fan_in", nonlinearity="relu")

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def main(argv=None):
    return training.run(
        description=__doc__, default_lr=0.01,
        default_data_dir=datasets.DEBIAN_FASHION_MNIST,
        build_model=Cnn, load_data=datasets.fashion_mnist, argv=argv,
        builtin=("cnn", (1, 28, 28), 10))


if __name__ == "__main__":
    sys.exit(main())
