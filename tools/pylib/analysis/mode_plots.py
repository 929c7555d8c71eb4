"""tools/compare_modes' plots: accuracy.png (test accuracy against training time, every run),
pushes.png (each worker's push spans mid-run, bsp beside r2sp), link.png (traffic into the
servers over time), from mode_comparison.RunData, and time_to_target.png (each
configuration's time to the target accuracy over the runs) from the runs' figures. Needs
matplotlib (Debian's python3-matplotlib)."""

import os

from .mode_comparison import link_rate, watched_host
from .run_files import median


def plot_all(out, workers, modes, rounds, runs=None, target=None):
    """Writes the plots into `out`. `rounds`: one {mode: RunData} per round; the push and link
    plots show the first round's runs. With `runs` (one {mode: figures} per round) and the
    `target` accuracy, also time_to_target.png."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_accuracy(plt, os.path.join(out, "accuracy.png"), modes, rounds)
    plot_pushes(plt, os.path.join(out, "pushes.png"), workers, modes, rounds[0])
    plot_link(plt, os.path.join(out, "link.png"), modes, rounds[0])
    if runs is not None:
        plot_time_to_target(plt, os.path.join(out, "time_to_target.png"), modes, runs, target)


def finish(plt, fig, ax, path):
    """Grid, legend, layout; writes the figure to `path` and frees it."""
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_accuracy(plt, path, modes, rounds):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, mode in enumerate(modes):
        for k, data in enumerate(rounds):
            evals = sorted(data[mode].evaluations, key=lambda e: e["elapsed_s"])
            if evals:
                ax.plot([e["elapsed_s"] for e in evals], [e["test_accuracy"] for e in evals],
                        marker="o", color=f"C{i}", alpha=1.0 if k == 0 else 0.5,
                        label=mode if k == 0 else None)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title("Test accuracy against wall time")
    finish(plt, fig, ax, path)


def time_to_target_bars(modes, runs):
    """[(mode, median seconds or None, min, max, runs that reached it, runs)] over the runs."""
    bars = []
    for mode in modes:
        times = [r[mode]["time_to_target_s"] for r in runs if r[mode]["time_to_target_s"]]
        mid = median(times)
        bars.append((mode, mid, min(times, default=None), max(times, default=None), len(times),
                     len(runs)))
    return bars


def plot_time_to_target(plt, path, modes, runs, target):
    """A bar per configuration: the median time to `target` over the runs, the range as an
    error bar, and how many runs reached it; "not reached" where none did."""
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(modes) + 2), 4))
    for i, (mode, mid, low, high, reached, total) in enumerate(time_to_target_bars(modes, runs)):
        if mid is None:
            ax.text(i, 0, "not reached", ha="center", va="bottom", rotation=90, fontsize=8)
            continue
        ax.bar(i, mid, color=f"C{i}", yerr=[[mid - low], [high - mid]], capsize=4)
        ax.text(i, high, f"{mid:.0f} s" + (f"\n{reached}/{total}" if reached < total else ""),
                ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=20, ha="right")
    ax.set_ylabel(f"seconds to test accuracy {target:.2f}" if target else "seconds")
    ax.set_title("Time to target accuracy (median, min-max over the runs)")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_pushes(plt, path, workers, modes, data):
    shown = [m for m in ("bsp", "r2sp") if m in modes]
    fig, axes = plt.subplots(1, max(1, len(shown)), figsize=(6 * max(1, len(shown)), 3.5), squeeze=False)
    for ax, mode in zip(axes[0], shown):
        pushes = [e for e in data[mode].events if e.get("name") == "push"]
        if not pushes:
            continue
        t0 = min(e["ts"] for e in pushes)
        span = max(e["ts"] for e in pushes) - t0
        middle = t0 + span / 2
        # About 8 iterations' worth of time, from the middle of the run.
        per_worker = len(pushes) / max(1, len({e["tid"] for e in pushes}))
        length = 8 * span / max(1.0, per_worker - 1)
        window = [e for e in pushes if middle <= e["ts"] <= middle + length] or pushes[:50]
        for e in window:
            ax.broken_barh([((e["ts"] - middle) / 1e3, max(e["dur"], 200) / 1e3)], (e["tid"] - 0.4, 0.8),
                           color=f"C{e['tid'] % 10}")
        ax.set_title(f"{mode}: push spans, about 8 iterations mid-run")
        ax.set_xlabel("ms")
        ax.set_ylabel("worker")
        ax.set_yticks(range(workers))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_link(plt, path, modes, data):
    fig, ax = plt.subplots(figsize=(7, 4))
    for mode in modes:
        run = data[mode]
        if run.links:
            series = link_rate(run.links, watched_host(mode))
            ax.plot([t for t, _ in series], [r * 8 / 1e6 for _, r in series], label=mode, lw=0.8)
            ax.set_ylabel("Mbit/s into server 0 (ddp: worker 0; link counters)")
        else:  # loopback: what the workers pushed, in 100 ms bins
            events = [e for e in run.events if e.get("name") == "push"]
            if not events or not run.metrics:
                continue
            per_push = run.metrics[0]["push_bytes"]
            t0 = min(e["ts"] for e in events)
            bins = {}
            for e in events:
                b = int((e["ts"] - t0) / 1e5)
                bins[b] = bins.get(b, 0) + per_push
            xs = sorted(bins)
            ax.plot([x / 10 for x in xs], [bins[x] * 10 * 8 / 1e6 for x in xs], label=mode, lw=0.8)
            ax.set_ylabel("Mbit/s pushed (100 ms bins)")
    ax.set_xlabel("wall time (s)")
    ax.set_title("Traffic into the servers over time")
    finish(plt, fig, ax, path)
