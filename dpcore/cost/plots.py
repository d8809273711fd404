"""`--plot FILE.png` for `python -m dpcore.cost memory | scaling | fit`: the pictures people look
at instead of reading tables.

- memory: bytes per rank, stage by stage, stacked by kind (parameters, gradients, optimizer
  state), beside the device's memory: the ZeRO paper's figure 1.
- scaling: efficiency (compute / step time) against ranks, one line per setting asked for.
- fit: each measured time beside the fitted model's, against size, per algorithm and collective.

matplotlib is optional (the `plot` extra); dpcore.bench.plot's check_matplotlib says how to
get it, before anything runs, and pyplot() draws to files.
"""
from ..bench.plot import pyplot
from .memory import zero_memory
from .units import fmt_bytes

STAGE_NAMES = ("0: nothing", "1: optimizer", "2: + gradients", "3: + parameters")
KINDS = (("params", "parameters"), ("grads", "gradients"), ("optimizer", "optimizer state"))


def memory(path, num_params, ranks, stages, precision, gpu_gb):
    """Stacked bars of model-state bytes per rank for each stage."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = [STAGE_NAMES[s] for s in stages]
    bottom = [0.0] * len(stages)
    for kind, name in KINDS:
        gb = [zero_memory(num_params, ranks, s, precision)[kind] / 1e9 for s in stages]
        bars = ax.bar(labels, gb, bottom=bottom, label=name)
        bottom = [b + g for b, g in zip(bottom, gb)]
    for bar, total in zip(bars, bottom):
        ax.annotate(f"{total:.1f} GB", (bar.get_x() + bar.get_width() / 2, total),
                    ha="center", va="bottom", fontsize=9)
    ax.axhline(gpu_gb, color="black", linestyle="--", linewidth=1)
    ax.annotate(f"{gpu_gb:g} GB device", (len(stages) - 0.5, gpu_gb), ha="right", va="bottom",
                fontsize=9)
    ax.set_ylabel("model states per rank (GB)")
    ax.set_xlabel("ZeRO stage: what is sharded")
    ax.set_title(f"{num_params / 1e9:g} B parameters on {ranks} ranks, {precision} precision")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def scaling(path, rows, title):
    """Efficiency and speedup against ranks (scaling.predict_scaling's rows)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ranks = [r.ranks for r in rows]
    ax.plot(ranks, [r.efficiency for r in rows], marker="o", label="efficiency")
    ax.plot(ranks, [r.share for r in rows], marker="s", label="exposed communication / step")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("ranks")
    ax.set_ylabel("fraction")
    for r in rows:  # the speed-up over one rank
        ax.annotate(f"{r.speedup:.1f}x", (r.ranks, r.efficiency), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=8)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fit(path, samples, predict):
    """Measured seconds against size beside predict(sample) -> the model's, one panel per
    collective, a colour per algorithm."""
    plt = pyplot()
    colls = sorted({s.coll for s in samples})
    fig, axes = plt.subplots(1, len(colls), figsize=(6 * len(colls), 4.5), squeeze=False)
    for ax, coll in zip(axes[0], colls):
        for algo in sorted({s.algo for s in samples if s.coll == coll}):
            mine = sorted((s for s in samples if s.coll == coll and s.algo == algo),
                          key=lambda s: s.nbytes)
            sizes = [s.nbytes for s in mine]
            line, = ax.plot(sizes, [s.seconds * 1e6 for s in mine], "o", label=f"{algo} measured")
            ax.plot(sizes, [predict(s) * 1e6 for s in mine], "-", color=line.get_color(),
                    label=f"{algo} model")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = sorted({s.nbytes for s in samples if s.coll == coll})[::2]
        ax.set_xticks(ticks, [fmt_bytes(t, binary=True) for t in ticks], rotation=45, fontsize=8)
        ax.set_xlabel("size")
        ax.set_ylabel("time (us)")
        ax.set_title(f"{coll} on {samples[0].n} ranks: measured and fitted")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
