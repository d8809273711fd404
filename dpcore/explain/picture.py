"""`python -m dpcore.explain ... --plot FILE.png`: the simulation as a picture, one panel per
step. In a panel, a row is a rank and a column a piece of the buffer. A cell's colour is how
many ranks' inputs it holds (white: nothing yet, darkest: every rank's), and its label is the
same as in the text ("013", "all"). A red frame marks what the step changed, and an arrow in
the margin goes from each sender to its receiver. The ring's two phases show at a glance: the
reduce-scatter darkens one cell per rank per step, and the all-gather copies the dark cells
round. matplotlib is optional (the `plot` extra)."""
from ..bench.plot import pyplot
from .render import cell


def draw(sim, path):
    from matplotlib.patches import FancyArrowPatch, Rectangle

    plt = pyplot()
    n, m = sim.n, len(sim.piece_bytes)
    frames = [("start", sim.initial, None, None)] + [
        (f"step {i + 1}: {step.phase}", sim.states[i], sim.initial if i == 0 else
         sim.states[i - 1], step) for i, step in enumerate(sim.steps)]
    cols = min(len(frames), 4)
    rows = -(-len(frames) // cols)
    size = 0.45  # inches per cell
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(cols * (m + 2) * size + 1, rows * (n + 1.6) * size + 0.8))
    empty = [None] * m
    for ax, (title, state, prev, step) in zip(axes.flat, frames):
        filled = [[len(state.get(r, empty)[p] or ()) / n for p in range(m)] for r in range(n)]
        ax.imshow(filled, cmap="Blues", vmin=0, vmax=1.6, aspect="equal")
        for r in range(n):
            for p in range(m):
                value = state.get(r, empty)[p]
                ax.text(p, r, cell(value, n), ha="center", va="center", fontsize=7,
                        color="white" if len(value or ()) > n / 2 else "black")
                if prev is not None and value != prev.get(r, empty)[p]:
                    ax.add_patch(Rectangle((p - 0.5, r - 0.5), 1, 1, fill=False,
                                           edgecolor="red", linewidth=1.5))
        for t in step.transfers if step is not None else []:
            if isinstance(t.src, int) and isinstance(t.dst, int):
                ax.add_patch(FancyArrowPatch((-0.9, t.src), (-0.9, t.dst), clip_on=False,
                                             connectionstyle="arc3,rad=0.5", arrowstyle="-|>",
                                             mutation_scale=7, color="gray", linewidth=0.8))
        ax.set_xticks(range(m), [f"{sim.piece_kind[0]}{p}" for p in range(m)], fontsize=7)
        ax.set_yticks(range(n), [f"r{r}" for r in range(n)], fontsize=7)
        ax.tick_params(length=0)
        ax.set_title(title, fontsize=8)
    for ax in list(axes.flat)[len(frames):]:
        ax.axis("off")
    fig.suptitle(f"{sim.coll}, {sim.algo}, {n} ranks: whose input each rank holds, step by step",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
