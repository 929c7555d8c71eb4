#!/usr/bin/env python3
"""PyTorch's side of compare_pytorch: the same models and training step as train_benchmark
(forward, cross-entropy, backward, SGD with momentum 0.9) on random data; prints the median
samples/s over timing windows after warm-up. Threads: --threads intra-op threads (OpenBLAS
threads come from OPENBLAS_NUM_THREADS).

On a GPU, --mode picks what surrounds backward (compare_pytorch_gpu runs all four):
  gpu       the optimizer on the GPU (PyTorch's own way);
  host_sgd  the same job as a parameter-server worker plus its server: gradients copied into a
            pinned host buffer, SGD with momentum on the host (--host_threads), parameters
            copied back from pinned memory (train_benchmark --device=cuda);
  copies    only the copies, no update (train_benchmark --device=cuda --nohost_sgd);
  copies_fp16  the same, the gradients rounded to fp16 on the GPU before the copy, as a worker
            pushing fp16 (train_benchmark --device=cuda --nohost_sgd --fp16_grads)."""
import argparse
import sys
import time


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="cnn", help="mlp, cnn or resnet20")
    p.add_argument("--batch", type=int, default=64, help="batch size")
    p.add_argument("--threads", type=int, default=1, help="PyTorch intra-op threads")
    p.add_argument("--window_seconds", type=float, default=1.5, help="length of a timing window")
    p.add_argument("--windows", type=int, default=3, help="timing windows (the median is printed)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--lr", type=float, default=0.001, help="as train_benchmark's --lr")
    p.add_argument("--mode", default="gpu", choices=["gpu", "host_sgd", "copies", "copies_fp16"],
                   help="what surrounds backward on a GPU (above)")
    p.add_argument("--host_threads", type=int, default=4, help="host SGD threads (host_sgd)")
    return p.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse_args(sys.argv[1:])  # before importing torch: --help needs no torch

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


class Block(nn.Module):
    """ResNet basic block with the projection shortcut our resnet20 uses."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        layers, cin = [], 16
        for stage, cout in enumerate([16, 32, 64]):
            for block in range(3):
                layers.append(Block(cin, cout, 2 if stage > 0 and block == 0 else 1))
                cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = self.layers(torch.relu(self.bn(self.conv(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build(name):
    if name == "resnet20":
        return ResNet20()
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(3136, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
                             nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    raise SystemExit(f"unknown model {name}")


def gpu_update(model, lr):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    return opt.step


def host_update(model, a):
    """Gradients to one flat pinned host buffer; with host_sgd, SGD with momentum there; the
    parameters back from a flat pinned buffer (the copies a parameter-server worker makes)."""
    params = list(model.parameters())
    sizes = [p.numel() for p in params]
    total = sum(sizes)
    fp16 = a.mode == "copies_fp16"  # gradients rounded to fp16 on the GPU, half the bytes out
    grads_host = torch.empty(total, dtype=torch.float16 if fp16 else torch.float32,
                             pin_memory=True)
    params_host = torch.empty(total, pin_memory=True)
    momentum = torch.zeros(total)
    offset = 0
    views = []
    for p, n in zip(params, sizes):
        params_host[offset:offset + n].copy_(p.detach().reshape(-1))
        views.append((p, offset, n))
        offset += n
    torch.set_num_threads(a.host_threads)

    def update():
        for p, off, n in views:
            g = p.grad.reshape(-1)
            grads_host[off:off + n].copy_(g.half() if fp16 else g, non_blocking=True)
        torch.cuda.synchronize()
        if a.mode == "host_sgd":
            momentum.mul_(0.9).add_(grads_host)
            params_host.add_(momentum, alpha=-a.lr)
        with torch.no_grad():
            for p, off, n in views:
                p.copy_(params_host[off:off + n].view_as(p), non_blocking=True)

    return update


def main(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.mode != "gpu" and a.device != "cuda":
        raise SystemExit(f"--mode={a.mode} needs --device=cuda")
    model = build(a.model).to(a.device)
    loss_fn = nn.CrossEntropyLoss()
    shape = (3, 32, 32) if a.model == "resnet20" else (1, 28, 28)
    x = torch.randn(a.batch, *shape, device=a.device)
    y = torch.randint(0, 10, (a.batch,), device=a.device)
    update = gpu_update(model, a.lr) if a.mode == "gpu" else host_update(model, a)

    def step():
        for p in model.parameters():
            p.grad = None
        loss = loss_fn(model(x), y)
        loss.backward()
        update()
        return loss.item()  # synchronises with the GPU every step, as our backend does

    first = step()  # at the initial parameters
    for _ in range(2):
        step()
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
    if a.mode.startswith("copies"):  # fixed parameters: the loss must stay where it began
        assert abs(last - first) <= 1e-3 * abs(first), f"loss moved: {first} -> {last}"
    else:
        assert last < first, f"loss did not decrease: {first} -> {last}"
    rates.sort()
    print(f"{rates[len(rates) // 2]:.1f}")


if __name__ == "__main__":
    main(ARGS)
