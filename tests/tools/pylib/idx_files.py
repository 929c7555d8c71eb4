"""Tiny Fashion-MNIST-shaped data sets for tests: random 28x28 images with labels 0..9 in the
idx format the worker and the PyTorch examples read (the images gzipped, the labels not)."""

import gzip
import os
import random
import struct


def write_idx(directory, prefix, count, seed):
    """Writes DIRECTORY/PREFIX-images-idx3-ubyte.gz and PREFIX-labels-idx1-ubyte with `count`
    samples drawn from random.Random(seed)."""
    rng = random.Random(seed)
    images = struct.pack(">IIII", 0x803, count, 28, 28) + rng.randbytes(count * 784)
    labels = struct.pack(">II", 0x801, count) + bytes(rng.randrange(10) for _ in range(count))
    with open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), "wb") as f:
        f.write(gzip.compress(images))
    with open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(labels)
