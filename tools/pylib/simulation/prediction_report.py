"""The predictions' tables (Markdown) and plot (PNG, with matplotlib where there is one)."""

from pylib.simulation.predictions import best_by_job

ORDER = ["bsp", "asp", "r2sp", "r2sp_wide", "eawild", "r2sp_hetero", "r2sp_hetero_wide"]


def ec2_table(points, setting="ec2"):
    """Per job (workers, link, codec): each mode's best iterations/s over the server counts
    with the fewest servers reaching 95% of it, and r2sp / bsp."""
    best = best_by_job(points)
    jobs = sorted({(w, link, codec) for (s, _, w, link, codec) in best if s == setting},
                  key=lambda k: (k[2], k[1], k[0]))
    modes = [m for m in ORDER if any(k[0] == setting and k[1] == m for k in best)]
    head = ("| workers | link | codec | " + " | ".join(f"{m} it/s (servers)" for m in modes)
            + " | r2sp / bsp | best R2SP / bsp |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for w, link, codec in jobs:
        cells = []
        for m in modes:
            rate, servers = best.get((setting, m, w, link, codec), (None, None))
            cells.append("" if rate is None else f"{rate:,.1f} ({servers})")
        bsp = best[(setting, "bsp", w, link, codec)][0]
        r2 = best[(setting, "r2sp", w, link, codec)][0]
        wide = best.get((setting, "r2sp_wide", w, link, codec), (r2, 0))[0]
        lines.append(f"| {w:,} | {link:g} Gbit/s | {codec} | " + " | ".join(cells)
                     + f" | {r2 / bsp:.2f} | {max(r2, wide) / bsp:.2f} |")
    return "\n".join(lines)


def points_table(points, setting):
    """Every point of one setting: mode, workers, servers, iterations/s, utilisation."""
    lines = ["| mode | workers | servers | it/s | samples/s | iteration (s) | server link in | "
             "server CPU |", "|---|---|---|---|---|---|---|---|"]
    for p in sorted((p for p in points if p.setting == setting),
                    key=lambda p: (p.workers, p.servers, ORDER.index(p.mode))):
        lines.append(f"| {p.mode} | {p.workers} | {p.servers} | {p.iterations_per_s:,.2f} | "
                     f"{p.samples_per_s:,.0f} | {p.mean_iteration_s:.3f} | "
                     f"{p.server_in_utilisation:.0%} | {p.server_cpu_utilisation:.0%} |")
    return "\n".join(lines)


def plot(points, path):
    """Per worker iterations/s against workers, best server count, one panel per link rate
    (fp32 and fp16 lines). Returns False where matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    best = best_by_job(points)
    links = sorted({k[3] for k in best if k[0] == "ec2"})
    fig, axes = plt.subplots(1, len(links), figsize=(5 * len(links), 4), sharey=True)
    for ax, link in zip(axes if len(links) > 1 else [axes], links):
        for mode in ORDER:
            for codec, style in (("fp32", "-"), ("fp16", "--")):
                xs = sorted(k[2] for k in best if k[0] == "ec2" and k[1] == mode
                            and k[3] == link and k[4] == codec)
                if xs:
                    ys = [best[("ec2", mode, x, link, codec)][0] / x for x in xs]
                    ax.plot(xs, ys, style, marker="o", label=f"{mode} {codec}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{link:g} Gbit/s, ResNet-50, 0.2 s compute")
        ax.set_xlabel("workers")
        ax.grid(True, which="both", alpha=0.3)
    (axes[0] if len(links) > 1 else axes).set_ylabel("iterations/s per worker (best servers)")
    (axes[-1] if len(links) > 1 else axes).legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
