"""Mixed precision: float16 or bfloat16 parameters and gradients, float32 master weights.

The model computes with, and the collectives move, 2-byte parameters and gradients. The
optimizer never sees them: it updates float32 master copies of exactly the ranges this rank
owns (all of the model at stage 0, its shard at stages 1-3) with float32 moments, from the
owned gradients upcast and unscaled, and the result is rounded back into the 2-byte parameters.
Per parameter: 2 (weights) + 2 (gradients) + 4 + 4 + 4 (master, Adam's m and v), the ZeRO
paper's 2 + 2 + 12.

float16's range is narrow: small gradients underflow to zero. The loss is multiplied by a
scale before backward (engine.scale_loss) and the gradients divided by it here. A scale too
large makes some gradient inf or nan: then every rank skips the step (they agree through one
tiny all-reduce) and halves the scale; after `growth_interval` clean steps it doubles
(PyTorch's GradScaler rule). bfloat16 has float32's range and needs no scale.
"""
import numpy as np

from ..tensor import Tensor, array_module
from .ledger import held_bytes


def low_dtype(name):
    if name == "float16":
        return np.dtype(np.float16)
    if name == "bfloat16":
        import ml_dtypes  # NumPy's bfloat16 comes from ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    raise ValueError(f"mixed_precision must be None, 'float16' or 'bfloat16', not {name!r}")


class MixedPrecision:
    def __init__(self, pieces, name, loss_scale=None, growth_interval=2000):
        """pieces: the tensors over the owned 2-byte parameters and their gradients."""
        self.name, self.pieces = name, pieces
        self.master = [Tensor(p.data.astype(np.float32)) for p in pieces]
        self.dynamic = name == "float16" and loss_scale is None
        self.scale = float(2.0 ** 16 if self.dynamic else (loss_scale or 1.0))
        self.growth_interval, self._clean_steps = growth_interval, 0
        self.skipped = 0  # steps skipped for an overflow, since the start

    @property
    def nbytes(self):
        return held_bytes([t.data for t in self.master])

    def step(self, optimizer, comm):
        """Update the masters and round them into the parameters; False if skipped."""
        finite = self._unscale()
        if self.dynamic:  # one rank's overflow skips the step on every rank
            flag = (~finite).astype(np.float32).reshape(1)
            finite = comm.all_reduce(flag, op="max")[0] == 0
        finite = bool(finite)  # the step's one wait for the device
        if finite:
            optimizer.step()
            for low, master in zip(self.pieces, self.master):
                low.data[...] = master.data.astype(low.data.dtype)
        for master in self.master:
            master.grad = None  # the float32 gradients live only during the update
        self._adjust(finite)
        return finite

    def _unscale(self):
        """The masters' float32 gradients, unscaled; whether all are finite, as a 0-d array
        where they live (read once by step, not once per piece)."""
        xp, inv = array_module(self.master[0].data), np.float32(1.0 / self.scale)
        finite = xp.asarray(True)
        for low, master in zip(self.pieces, self.master):
            g = low.grad.astype(np.float32)
            g *= inv
            master.grad = g
            finite &= xp.isfinite(g).all()
        return finite

    def _adjust(self, finite):
        if not self.dynamic:
            return
        if not finite:
            self.scale, self._clean_steps = self.scale / 2, 0
            self.skipped += 1
            return
        self._clean_steps += 1
        if self._clean_steps % self.growth_interval == 0:
            self.scale *= 2
