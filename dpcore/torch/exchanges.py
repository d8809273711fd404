"""torch's reduce, gather, scatter and all_to_all on dpcore's verbs, as methods the process
group takes on (process_group.ProcessGroup derives from Exchanges).

Results go straight into torch's tensors where torch's layout is dpcore's: reduce in place on
the root, scatter into the output tensor, all_to_all_single between the input and output
tensors. Scatter's list of CPU tensors goes as it is (each piece read where it lies). The other
list layouts (gather's and all_gather's outputs, all_to_all's lists, scatter's on CUDA) go
through one contiguous buffer: concatenated before the call, copied out after it (in the Work's
`then`, so an async call copies when it is done).
"""
import torch

from .tensors import as_array, as_moved, one, op_name


class Exchanges:
    """reduce, gather, scatter, alltoall and all_to_all_single (alltoall_base) of a process group
    with self._comm, self._issue and self.rank()/size() (see process_group.py)."""

    def reduce(self, tensors, opts=None):
        """The reduction of every rank's tensor into the root's, in place; others unchanged."""
        op = op_name(opts.reduceOp) if opts is not None else "sum"
        root = opts.rootRank if opts is not None else 0
        a = as_array(tensors[opts.rootTensor] if opts is not None else one(tensors, "reduce"))
        out = a if self.rank() == root else None
        return self._issue(opts, tensors, [lambda async_op: self._comm.reduce(
            a, root=root, op=op, out=out, async_op=async_op)])

    def gather(self, output_lists, inputs, opts=None):
        """Every rank's tensor into the root's list, output_lists[0][r] = rank r's."""
        root = opts.rootRank if opts is not None else 0
        t = one(inputs, "gather")
        i = as_moved(t, "input")
        if self.rank() != root:
            return self._issue(opts, output_lists, [lambda async_op: self._comm.gather(
                i, root=root, async_op=async_op)])
        flat, copy_out = rows(one(output_lists, "gather"), t, self.size(), "gather")
        f = as_moved(flat)
        return self._issue(opts, output_lists, [lambda async_op: self._comm.gather(
            i, root=root, out=f, async_op=async_op)], copy_out)

    def scatter(self, outputs, input_lists, opts=None):
        """The root's input_lists[0][r] into rank r's tensor, in place."""
        root = opts.rootRank if opts is not None else 0
        t = one(outputs, "scatter")
        o = as_moved(t, "output")
        x = None
        if self.rank() == root:
            inputs = checked(one(input_lists, "scatter"), t, self.size(), "scatter")
            if t.is_cuda or not all(i.is_contiguous() for i in inputs):
                x = as_moved(joined(inputs), "input")
            else:  # taken where they lie (dpcore/comm/pieces.py)
                x = [as_moved(i, "input") for i in inputs]
        return self._issue(opts, outputs, [lambda async_op: self._comm.scatter(
            x, o, root=root, async_op=async_op)])

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        """Slices of input along dim 0 (input_splits rows to each rank; none: equal) into
        output's (output_splits rows from each rank; none: equal), tensor to tensor."""
        i, o = as_moved(input, "input"), as_moved(output, "output")
        splits = in_elements(input_splits, input, i, self.size(), "input")
        out_splits = in_elements(output_splits, output, o, self.size(), "output")
        if splits is not None and out_splits is None:  # torch: an output without splits
            out_splits = equal(o.size, self.size(), "output")  # is split equally
        return self._issue(opts, [output], [lambda async_op: self._comm.all_to_all(
            i, out=o, splits=splits, out_splits=out_splits, async_op=async_op)])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        """inputs[q] to rank q, into outputs[p] from rank p: the lists through one buffer."""
        if len(inputs) != self.size() or len(outputs) != self.size():
            raise ValueError(f"dpcore: all_to_all needs {self.size()} input and output tensors, "
                             f"got {len(inputs)} and {len(outputs)}")
        like = inputs[0]
        x = as_moved(concatenated(inputs, like, self.size(), "all_to_all", same_size=False),
                     "input")
        out = torch.empty(sum(o.numel() for o in outputs), dtype=like.dtype, device=like.device)
        o = as_moved(out)
        scale = like.element_size() // o.itemsize  # dpcore's elements per tensor element
        splits = [t.numel() * scale for t in inputs]
        out_splits = [t.numel() * scale for t in outputs]

        def copy_out():
            for t, piece in zip(outputs, out.split([t.numel() for t in outputs])):
                t.copy_(piece.view(t.shape))

        return self._issue(opts, outputs, [lambda async_op: self._comm.all_to_all(
            x, out=o, splits=splits, out_splits=out_splits, async_op=async_op)], copy_out)


def rows(outputs, like, size, what):
    """A (size, like.numel()) buffer for a list of `size` outputs shaped like `like`, and the
    function that copies its rows out into them."""
    if len(outputs) != size or any(o.numel() != like.numel() or o.dtype != like.dtype
                                   for o in outputs):
        raise ValueError(f"dpcore: {what} needs {size} output tensors of the input's "
                         f"{like.numel()} elements and dtype {like.dtype}")
    flat = torch.empty((size, like.numel()), dtype=like.dtype, device=like.device)

    def copy_out():
        for o, row in zip(outputs, flat):
            o.copy_(row.view(o.shape))

    return flat, copy_out


def checked(inputs, like, size, what, same_size=True):
    """The list `inputs`, once checked: size tensors of like's dtype, and numel if same_size."""
    if len(inputs) != size or any(t.dtype != like.dtype or (same_size and
                                                           t.numel() != like.numel())
                                  for t in inputs):
        raise ValueError(f"dpcore: {what} needs {size} input tensors of the output's "
                         f"{like.numel()} elements and dtype {like.dtype}")
    return inputs


def concatenated(inputs, like, size, what, same_size=True):
    """The list `inputs` (checked) as one flat tensor."""
    return joined(checked(inputs, like, size, what, same_size))


def joined(tensors):
    """The tensors, read flat, one after another in one new tensor."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def in_elements(split_rows, t, a, size, what):
    """torch's split sizes (rows of t along dim 0) as dpcore's (elements of a, t's memory as
    dpcore sees it); None where torch gave none (equal splits)."""
    if not split_rows:
        return None
    if len(split_rows) != size:
        raise ValueError(f"dpcore: all_to_all_single needs {size} {what} split sizes, got "
                         f"{len(split_rows)}")
    row = a.size // t.shape[0] if t.dim() and t.shape[0] else 0
    return [int(s) * row for s in split_rows]


def equal(count, size, what):
    if count % size:
        raise ValueError(f"dpcore: all_to_all_single's {what} of {count} elements does not "
                         f"split equally between {size} ranks")
    return [count // size] * size
