"""all_reduce of a sparse COO tensor, as torch's gloo backend does it: every rank's indices and
values gathered on every rank (all_gather with shards of each rank's own length), added up by
coalescing, and the sum copied into the tensor. Only SUM, as gloo.

Every rank first gathers every rank's (nnz, sparse dims, dims) and then its shape, so that
tensors of different shapes are a CommError on every rank alike (each rank checks the same
gathered data) before any index travels, the communicator still usable; values of different
dtypes are dpcore's own mismatch (CommError).
"""
import numpy as np
import torch

import dpcore
from .tensors import as_moved


def all_reduce(comm, t, op):
    """Sum sparse COO tensor t over every rank of comm, in place (t's indices and values are
    replaced by the sum's, coalesced)."""
    if op != "sum":
        raise ValueError(f"dpcore: sparse all_reduce sums only (as gloo's); got ReduceOp {op}")
    if t.layout is not torch.sparse_coo:
        raise TypeError(f"dpcore: {t.layout} tensors are not supported, only dense and "
                        f"sparse COO ones")
    if not t.is_cpu:
        raise ValueError(f"dpcore: sparse all_reduce takes CPU tensors (as gloo's); this one is "
                         f"on {t.device}")
    own = t.detach().coalesce()
    indices, values = own.indices().contiguous(), own.values().contiguous()
    n = comm.size
    meta = comm.all_gather(np.array([values.shape[0], own.sparse_dim(), own.dim()], np.int64))
    nnz, sparse_dims, dims = meta.reshape(n, 3).T
    shapes = comm.all_gather(np.array(own.shape, np.int64)) if len(set(dims)) == 1 else None
    if shapes is None or len(set(sparse_dims)) != 1 \
            or (shapes.reshape(n, -1) != np.array(own.shape)).any():
        described = shapes.reshape(n, -1).tolist() if shapes is not None else dims.tolist()
        raise dpcore.CommError(f"dpcore sparse all_reduce on rank {comm.rank}: the ranks' "
                               f"tensors differ: shapes (or dimensions) by rank {described}, "
                               f"sparse dimensions {sparse_dims.tolist()}")

    total = int(nnz.sum())
    gathered_indices = torch.empty(own.sparse_dim() * total, dtype=torch.int64)
    comm.all_gather(indices.view(-1).numpy(), out=gathered_indices.numpy())
    gathered_values = torch.empty((total,) + tuple(values.shape[1:]), dtype=values.dtype)
    comm.all_gather(as_moved(values, "values"), out=as_moved(gathered_values))
    # each rank's indices arrived as its own (sparse dims, nnz) block, flat
    blocks = gathered_indices.split([own.sparse_dim() * int(k) for k in nnz])
    all_indices = torch.cat([b.view(own.sparse_dim(), -1) for b in blocks], dim=1)
    summed = torch.sparse_coo_tensor(all_indices, gathered_values, own.shape).coalesce()
    with torch.no_grad():
        t.copy_(summed)
    return t
