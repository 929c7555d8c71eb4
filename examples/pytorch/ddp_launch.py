#!/usr/bin/env python3
"""Runs a script as N DDP processes on this machine, as torchrun --nproc_per_node=N would
(Debian's torchrun of torch 1.13 fails under Python 3.11):
  /usr/bin/python3 examples/pytorch/ddp_launch.py --nproc=2 -- \\
      examples/pytorch/fashion_mnist_cnn.py --backend=ddp --epochs=1
The script runs under this Python with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and
MASTER_PORT set; the exit status is the first failing process's (0 when all succeed)."""

import argparse
import signal
import sys

from r2sp_examples import ddp_launch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc", type=int, default=2, help="processes (default 2)")
    p.add_argument("--port", type=int, default=0, help="MASTER_PORT (default: a free one)")
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = p.parse_args(argv)
    if args.nproc < 1:
        p.error("--nproc must be at least 1")
    # Ctrl-C reaches the processes from the terminal; this one only waits for them to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return ddp_launch.run([sys.executable, args.script] + args.args, args.nproc, args.port)


if __name__ == "__main__":
    sys.exit(main())
