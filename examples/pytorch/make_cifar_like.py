#!/usr/bin/env python3
"""Writes SMALL CIFAR-10-FORMAT FILES, NOT CIFAR-10: data_batch_1.bin ... data_batch_5.bin
and test_batch.bin in DIR, each a run of 3073-byte records (1 label byte 0..9, then 3072
pixel bytes: 1024 red, 1024 green, 1024 blue, row by row), as CIFAR-10's binary version is.
Pixels and labels are random from --seed (the same seed, the same bytes): a model learns
nothing from them beyond chance. They are for tests and for machines without CIFAR-10 (the
real data set: cifar-10-binary.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html).
  /usr/bin/python3 examples/pytorch/make_cifar_like.py /tmp/cifar --train_per_batch=200"""

import argparse
import os
import random
import sys

RECORD_PIXELS = 3 * 32 * 32


def records(count, rng):
    """`count` random CIFAR-10 records, as bytes."""
    out = bytearray()
    for _ in range(count):
        out.append(rng.randrange(10))
        out += rng.randbytes(RECORD_PIXELS)
    return bytes(out)


def write(out_dir, train_per_batch, test_records, seed):
    """Writes the six files into `out_dir` (created if missing); returns their paths."""
    if train_per_batch < 1 or test_records < 1:
        raise ValueError("--train_per_batch and --test_records must be at least 1")
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(seed)
    paths = []
    for name, count in [(f"data_batch_{i}.bin", train_per_batch) for i in range(1, 6)] + \
            [("test_batch.bin", test_records)]:
        path = os.path.join(out_dir, name)
        with open(path, "wb") as f:
            f.write(records(count, rng))
        paths.append(path)
    return paths


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir", help="directory to write the six .bin files into")
    p.add_argument("--train_per_batch", type=int, default=100,
                   help="records in each data_batch_K.bin (default 100; CIFAR-10 has 10000)")
    p.add_argument("--test_records", type=int, default=100,
                   help="records in test_batch.bin (default 100; CIFAR-10 has 10000)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    args = p.parse_args(argv)
    try:
        paths = write(args.out_dir, args.train_per_batch, args.test_records, args.seed)
    except (ValueError, OSError) as e:
        p.error(str(e))
    print(f"wrote {len(paths)} CIFAR-10-format files of random data (not CIFAR-10) into "
          f"{args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
