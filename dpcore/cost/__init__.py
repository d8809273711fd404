"""dpcore.cost: what communication costs, and why.

The alpha-beta(-gamma) model: a collective is a few steps; each step costs alpha (latency per
message) plus its bytes times beta (seconds per byte of link bandwidth) plus the bytes it
reduces times gamma. formulas.py and trees.py derive the steps and bytes of every collective
under every algorithm; choose.py turns them into predicted times, crossovers and a choice; fit.py
measures alpha, beta and gamma on this machine; memory.py and scaling.py answer "what does ZeRO
save" and "where do 20-30 % go at 1024 GPUs". Command line: python -m dpcore.cost --help.
"""
from .._lazy import exports

# loaded on first use: the call path needs only .auto (and what it imports)
__getattr__ = exports(__name__, {
    "best_algorithm": ".choose:best_algorithm", "crossover": ".choose:crossover",
    "predict": ".choose:predict", "fit": ".fit:fit", "fit_line": ".fit:fit_line",
    "ALGORITHMS": ".formulas:ALGORITHMS", "COLLECTIVES": ".formulas:COLLECTIVES",
    "SEGMENT_BYTES": ".formulas:SEGMENT_BYTES", "cost": ".formulas:cost",
    "zero_memory": ".memory:zero_memory", "DEFAULT": ".params:DEFAULT", "Cost": ".params:Cost",
    "Params": ".params:Params", "default_path": ".params:default_path", "load": ".params:load",
    "save": ".params:save", "predict_scaling": ".scaling:predict_scaling"})

__all__ = ["ALGORITHMS", "COLLECTIVES", "Cost", "DEFAULT", "Params", "SEGMENT_BYTES",
           "best_algorithm", "cost", "crossover", "default_path", "fit", "fit_line", "load",
           "predict", "predict_scaling", "save", "zero_memory"]
