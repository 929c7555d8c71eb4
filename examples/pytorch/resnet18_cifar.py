#!/usr/bin/env python3
"""Trains torchvision's ResNet-18 (a model written outside R2SP; num_classes=10) on CIFAR-10's
binary batches: data_batch_1.bin ... data_batch_5.bin and test_batch.bin (records of 1 label
byte + 3072 pixel bytes) in --data_dir or $R2SP_DATA_DIR. No CIFAR-10 here? make_cifar_like.py
writes small files in the same format (random pixels: nothing to learn, only to run).

The same script runs three ways, as fashion_mnist_cnn.py does:
  tools/launch --workers=2 --servers=1 --sync=r2sp --worker_cmd="/usr/bin/python3 \\
      examples/pytorch/resnet18_cifar.py --data_dir=DIR"                       # R2SP
  /usr/bin/python3 examples/pytorch/ddp_launch.py --nproc=2 -- \\
      examples/pytorch/resnet18_cifar.py --backend=ddp --data_dir=DIR          # DDP
  /usr/bin/python3 examples/pytorch/resnet18_cifar.py --backend=single --data_dir=DIR
Batch-norm running statistics stay in each process (R2SP and DDP alike exchange only
gradients of parameters; DDP also broadcasts rank 0's buffers once). Prints the test accuracy
after each epoch and ends with the JSON line {"samples_per_s", "steady_samples_per_s" (after
the first 5 steps), "test_accuracy", "seconds"}."""

import sys

import torchvision

from r2sp_examples import datasets
from r2sp_examples import training


def load_data(data_dir, augment=True):
    """CIFAR-10's (train, test) sets, the training set with random crops and flips."""
    train, test = datasets.cifar10(data_dir)
    return (datasets.RandomCropFlip(train) if augment else train), test


def build_model():
    return torchvision.models.resnet18(num_classes=10)


def main(argv=None):
    return training.run(description=__doc__, default_lr=0.05, default_data_dir="",
                        build_model=build_model, load_data=load_data, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
