#!/usr/bin/env python3
"""How far a gradient delay shrinks momentum SGD's stable range, and how much compensation wins back.

Iterates the per-push recurrence of one direction of curvature h (the loss h/2 * w^2) for each
scheme the servers can run, and bisects for the largest stable lr * h, reported in units of
lr * h / (1 - mu) (the effective rate the direction sees):

  bsp           all W gradients at the same fresh weights, one whole step per round
  r2sp          W pushes of 1/W of a step each (server/sgd.h StepForFraction); each gradient is
                computed on the weights after its worker's previous push, so it lands after the
                other W - 1 pushes
  r2sp+linear   the worker extrapolates x = p + (W-1)/W * (p - p_prev) (our first compensation)
  r2sp+momentum the servers predict the W - 1 pushes from the momentum buffer only
  r2sp+predict  ... from the momentum buffer and the latest gradient (server/sgd.h PredictionFor,
                the default)

docs/MODES.md quotes its output. Usage: tools/bench/delay_stability.py [--workers=4] [--momentum=0.9]
"""

import argparse


def bsp(eta_h, mu, workers, rounds):
    w, m = 1.0, 0.0
    for _ in range(rounds):
        m = mu * m + eta_h * w
        w -= m
        yield w


def r2sp(eta_h, mu, workers, rounds, scheme):
    f = 1.0 / workers
    a = mu ** f
    c = (1 - a) / (1 - mu) if mu > 0 else 1.0
    n = workers - 1
    momentum_sum = sum(a ** j for j in range(1, n + 1))
    step_sum = sum(sum(a ** k for k in range(j)) for j in range(1, n + 1))
    w, m = 1.0, 0.0
    # Gradients in flight, oldest first: (point it was computed at, weights pulled, previous pull).
    in_flight = [(1.0, 1.0, 1.0)] * workers
    for _ in range(rounds * workers):
        x, pulled, _ = in_flight.pop(0)
        u = eta_h * x  # lr * gradient; the recurrence keeps lr folded into h
        m = a * m + c * u
        w -= f * m
        point = w
        if scheme == "linear":
            point = w + (n / workers) * (w - pulled)
        elif scheme == "momentum":
            point = w - f * momentum_sum * m
        elif scheme == "predict":
            point = w - f * (momentum_sum * m + c * step_sum * u)
        in_flight.append((point, w, pulled))
        yield w


def stable(trajectory):
    values = []
    for v in trajectory:
        if not abs(v) < 1e12:
            return False
        values.append(abs(v))
    q = len(values) // 4
    return max(values[3 * q:]) < max(values[q:2 * q])


def threshold(run, mu):
    lo, hi = 1e-5, 10.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if stable(run(mid)) else (lo, mid)
    return lo / (1 - mu) if mu > 0 else lo


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--rounds", type=int, default=1500)
    a = p.parse_args()
    mu, workers, rounds = a.momentum, a.workers, a.rounds
    print(f"largest stable lr*h/(1-mu), momentum {mu}, {workers} workers")
    print(f"  bsp            {threshold(lambda e: bsp(e, mu, workers, rounds), mu):6.2f}")
    for scheme in ["none", "linear", "momentum", "predict"]:
        t = threshold(lambda e: r2sp(e, mu, workers, rounds, scheme), mu)
        name = "r2sp" if scheme == "none" else "r2sp+" + scheme
        print(f"  {name:14s} {t:6.2f}")


if __name__ == "__main__":
    main()
