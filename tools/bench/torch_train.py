#!/usr/bin/env python3
"""PyTorch's side of compare_pytorch: the same models and training step as train_benchmark
(forward, cross-entropy, backward, SGD with momentum 0.9) on random data; prints the median
samples/s over timing windows after warm-up. Threads: --threads intra-op threads (OpenBLAS
threads come from OPENBLAS_NUM_THREADS)."""
import argparse
import time

import torch
import torch.nn as nn


def build(name):
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    raise SystemExit(f"unknown model {name}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--window_seconds", type=float, default=1.5)
    p.add_argument("--windows", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = build(a.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(3):
        first = step()
    rates = []
    for _ in range(a.windows):
        t0 = time.perf_counter()
        steps = 0
        while True:
            last = step()
            steps += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= a.window_seconds:
                break
        rates.append(steps * a.batch / elapsed)
    assert last < first, f"loss did not decrease: {first} -> {last}"
    rates.sort()
    print(f"{rates[len(rates) // 2]:.1f}")


if __name__ == "__main__":
    main()
