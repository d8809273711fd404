"""`--plot FILE.png`: bus bandwidth against size, measured (dpcore, MPI) beside the model.

One line per source, in-place times (the ones the MPI and model columns use). Both axes are
logarithmic: sizes span many powers of two, and small messages sit orders of magnitude below
the link's bandwidth (latency-bound), which a linear y axis would flatten into the floor.
A dotted vertical line marks where the algorithm changes (e.g. --algo auto: one_shot -> ring).
matplotlib is optional: check_matplotlib() says how to get it.
"""
import math


def check_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("--plot needs matplotlib, which is not installed: "
                          "pip install matplotlib") from None


def pyplot():
    """matplotlib.pyplot, drawing to files (the Agg backend: no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _size_text(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:g}{unit}" if value < 1000 else f"{value:.0f}{unit}"
    return f"{nbytes:g}"


def plot(path, rows, coll, transport, compare):
    """Write the figure for the bench's rows (as in --json) to path; compare: the library timed
    beside dpcore (compare.py), or None."""
    plt = pyplot()
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    n = rows[0]["nranks"] if rows else 1
    # on 1 rank busbw is 0 by definition (nothing crosses a link): show algbw instead
    metric = "busbw" if n > 1 else "algbw"
    factor = coll.bus_factor(n) if n > 1 else 1.0
    groups = {}
    for r in rows:
        groups.setdefault((r["type"], r["redop"]), []).append(r)
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    positive, drawn_models = [], []
    for i, ((dtype, op), group) in enumerate(groups.items()):
        # one group: a color per source; several: a color per group, a style per source
        many = len(groups) > 1
        name = (f" {dtype}" + (f" {op}" if op != "none" else "")) if many else ""
        sizes = [r["size"] for r in group]
        lines = [(f"dpcore{name}", [r[f"ip_{metric}"] for r in group], "-", "o", 0)]
        if compare and any(r.get(f"ip_{compare.name}_{metric}") for r in group):
            theirs = [r.get(f"ip_{compare.name}_{metric}") for r in group]
            lines.append((f"{compare.label}{name}", theirs, "-." if many else "-", "s", 1))
        if any(r.get("pred_us") for r in group):
            model = [r["size"] / (r["pred_us"] * 1e3) * factor if r.get("pred_us") else None
                     for r in group]
            if (sizes, model) not in drawn_models:  # the model ignores dtype and op
                drawn_models.append((sizes, model))
                lines.append(("model (alpha-beta, fitted)", model, "--", None, 2))
                lines[-1] += ("black",) if many else ()
        for label, values, style, marker, k, *fixed in lines:
            xs = [s for s, v in zip(sizes, values) if v]
            ys = [v for v in values if v]
            positive += ys
            ax.plot(xs, ys, style, marker=marker, markersize=4, label=label,
                    color=fixed[0] if fixed else colors[(i if many else k) % len(colors)],
                    linewidth=2 if label.startswith("dpcore") else 1.5)
        _mark_switches(ax, group)
    ax.set_xscale("log", base=2)
    if positive and max(positive) / min(positive) > 20:
        ax.set_yscale("log")
        if max(positive) / min(positive) < 1e3:  # few decades: label 1, 2, 5 of each
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_minor_locator(NullLocator())
    sizes = sorted({r["size"] for r in rows})
    if sizes:  # a tick at every power of 2 (or of 4, 16, ...) the sweep covers, labelled 64K
        lo, hi = (round(math.log2(max(s, 1))) for s in (sizes[0], sizes[-1]))
        step = max(1, -(-(hi - lo) // 10))
        ticks = [2.0 ** k for k in range(lo, hi + 1) if k % step == 0] or [2.0 ** lo]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _size_text(x)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xlabel("size S (bytes: nccl-tests' size column)")
    ax.set_ylabel(f"{metric} (GB/s, in place)")
    dtypes = sorted({d for d, _ in groups})
    ops = sorted({o for _, o in groups} - {"none"})
    what = ", ".join(dtypes) + (" " + ", ".join(ops) if ops else "")
    ax.set_title(f"{coll.name}: {n} rank{'s' * (n != 1)}, {what}, transport {transport}",
                 fontsize=11 if len(what) < 40 else 9)
    ax.grid(True, which="major", alpha=0.3)
    if len(ax.get_lines()) > 4:  # many lines: the legend beside the plot, not over it
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    else:
        ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _mark_switches(ax, group):
    """A dotted line between two sizes run with different algorithms, labelled with both."""
    for a, b in zip(group, group[1:]):
        if a.get("algo_used") and b.get("algo_used") and a["algo_used"] != b["algo_used"]:
            x = (a["size"] * b["size"]) ** 0.5
            ax.axvline(x, color="gray", linestyle=":", linewidth=1)
            ax.annotate(f"{a['algo_used']} | {b['algo_used']}", (x, 0.03),
                        xycoords=("data", "axes fraction"), ha="center", va="bottom",
                        fontsize=8, color="dimgray",
                        bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none"))
