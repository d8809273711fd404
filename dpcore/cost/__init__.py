"""dpcore.cost: what communication costs, and why.

The alpha-beta(-gamma) model: a collective is a few steps; each step costs alpha (latency per
message) plus its bytes times beta (seconds per byte of link bandwidth) plus the bytes it
reduces times gamma. formulas.py and trees.py derive the steps and bytes of every collective
under every algorithm; choose.py turns them into predicted times, crossovers and a choice; fit.py
measures alpha, beta and gamma on this machine; memory.py and scaling.py answer "what does ZeRO
save" and "where do 20-30 % go at 1024 GPUs". Command line: python -m dpcore.cost --help.
"""
from .choose import best_algorithm, crossover, predict
from .fit import fit, fit_line
from .formulas import ALGORITHMS, COLLECTIVES, SEGMENT_BYTES, cost
from .memory import zero_memory
from .params import DEFAULT, Cost, Params, default_path, load, save
from .scaling import predict_scaling

__all__ = ["ALGORITHMS", "COLLECTIVES", "Cost", "DEFAULT", "Params", "SEGMENT_BYTES",
           "best_algorithm", "cost", "crossover", "default_path", "fit", "fit_line", "load",
           "predict", "predict_scaling", "save", "zero_memory"]
