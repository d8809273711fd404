"""The process group: torch.distributed's collectives, each as one (or a few) dpcore calls.

torch passes tensors and an options object (opts.asyncOp says whether the caller asked for
async_op=True). A blocking call runs the dpcore collective on the caller's thread and returns a
Work that is already done; an async one is submitted to dpcore's worker thread, and its Work's
future is completed by the group's completion thread (work.py). Results land where torch wants
them: in place for all_reduce and broadcast (`out=` the tensor's own memory), straight into the
output tensor for the `_single` (into_tensor) forms, through a copy only where torch's layout
is a list of tensors. reduce, gather, scatter and all_to_all are in exchanges.py, send and recv
in point_to_point.py, the sparse all_reduce in sparse.py: the group derives from their classes.
"""
from __future__ import annotations

import threading
from contextlib import nullcontext
from threading import get_ident
from typing import Any, Optional

import torch
import torch.distributed as dist

import dpcore

from . import connect, sparse
from .exchanges import Exchanges, rows
from .point_to_point import PointToPoint
from .tensors import as_array, as_moved, one, op_name
from .work import Completer, Done, Pending


def create(options: Any, backend_options: Any = None) -> ProcessGroup:
    """The backend creator torch calls for every group of this backend (extended API)."""
    connect.agree_on_members(options.store, options.global_ranks_in_group, options.group_rank,
                             options.timeout)
    comm = connect.communicator(options.store, options.group_rank, options.group_size,
                                options.timeout)
    return ProcessGroup(comm)


# torch's stub also gives reduce, gather and scatter the C++ group's convenience forms (a tensor,
# root, op, timeout), which torch never calls on a Python backend: it passes (tensors, opts)
class ProcessGroup(Exchanges, PointToPoint, dist.ProcessGroup):  # type: ignore[misc]
    """A torch process group whose collectives are dpcore's, on one dpcore communicator."""

    def __init__(self, comm: dpcore.Communicator) -> None:
        # torch binds ProcessGroup(rank, size) too; its stub lists (store, rank, size) alone
        super().__init__(comm.rank, comm.size)  # type: ignore[call-arg]
        self._comm = comm
        me = threading.current_thread()
        self._owner, self._owner_name = me.ident, me.name
        self._completer: Optional[Completer] = None  # started by the first async call
        self._group_name = self._group_desc = ""

    # -- what torch asks of any process group --------------------------------------------------

    def getBackendName(self) -> str:
        return "dpcore"

    # A Python group has no C++ backend to keep its name: DTensor, functional collectives and
    # FSDP2 look groups up by it ("ProcessGroup name not set" without these).
    def getGroupName(self) -> str:
        return self._group_name

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupDesc(self) -> str:
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    @property
    def communicator(self) -> dpcore.Communicator:
        """The dpcore communicator underneath (its rank is this group's rank)."""
        return self._comm

    def shutdown(self) -> None:
        """Called by dist.destroy_process_group: finish the async calls, close dpcore's."""
        if self._completer is not None:
            self._completer.stop()
            self._completer = None
        self._comm.close()

    # -- collectives -----------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        op = op_name(opts.reduceOp) if opts is not None else "sum"
        t = tensors[0] if len(tensors) == 1 else one(tensors, "all_reduce")
        if t.layout is not torch.strided:  # sparse: gathered and summed, on this thread
            with self._calling():
                return Done([sparse.all_reduce(self._comm, t, op)])
        a = as_array(t)
        if opts is not None and not opts.asyncOp and get_ident() == self._owner:
            self._comm.all_reduce(a, op=op, out=a)  # a user's loop: _issue's path, inlined
            return Done(tensors)
        return self._issue(opts, tensors, [lambda async_op: self._comm.all_reduce(
            a, op=op, out=a, async_op=async_op)])

    def allreduce_coalesced(self, tensors, opts=None):
        op = op_name(opts.reduceOp) if opts is not None else "sum"
        arrays = [as_array(t) for t in tensors]
        return self._issue(opts, tensors, [
            lambda async_op, a=a: self._comm.all_reduce(a, op=op, out=a, async_op=async_op)
            for a in arrays])

    def broadcast(self, tensors, opts=None):
        t = tensors[opts.rootTensor] if opts is not None else one(tensors, "broadcast")
        root = opts.rootRank if opts is not None else 0
        b = as_moved(t)
        return self._issue(opts, tensors, [lambda async_op: self._comm.broadcast(
            b, root=root, async_op=async_op)])

    def all_gather_single(self, output, input, opts=None):
        """all_gather_into_tensor: every rank's input, in rank order, into output (input may be
        this rank's slice of output: FSDP2 gathers in place)."""
        return self._issue(opts, [output], [self._gather_into(output, input)])

    def _gather_into(self, output, input):
        if output.numel() != input.numel() * self.size() or output.dtype != input.dtype:
            raise ValueError(f"dpcore: all_gather_into_tensor needs an output of {self.size()} "
                             f"times the input's {input.numel()} elements and its dtype; got "
                             f"{output.numel()} of {output.dtype}")
        i, o = as_moved(input, "input"), as_moved(output, "output")
        return lambda async_op: self._comm.all_gather(i, out=o, async_op=async_op)

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        """all_gather into a list of tensors: gathered into one buffer, then copied out."""
        t = one(inputs, "all_gather")
        flat, copy_out = rows(one(output_lists, "all_gather"), t, self.size(), "all_gather")
        i, f = as_moved(t, "input"), as_moved(flat)
        return self._issue(opts, output_lists, [lambda async_op: self._comm.all_gather(
            i, out=f, async_op=async_op)], copy_out)

    def reduce_scatter_single(self, output, input, opts=None):
        """reduce_scatter_tensor: rank r gets slice r of the reduction of every rank's input."""
        return self._issue(opts, [output], [self._scatter_into(output, input, opts)])

    def _scatter_into(self, output, input, opts):
        op = op_name(opts.reduceOp) if opts is not None else "sum"
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"dpcore: reduce_scatter_tensor needs an input of {self.size()} "
                             f"times the output's {output.numel()} elements, got "
                             f"{input.numel()}")
        i, o = as_array(input), as_array(output)
        return lambda async_op: self._comm.reduce_scatter(i, op=op, out=o, async_op=async_op)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        """reduce_scatter from a list of tensors, one per rank: concatenated, then scattered."""
        op = op_name(opts.reduceOp) if opts is not None else "sum"
        output, inputs = one(outputs, "reduce_scatter"), one(input_lists, "reduce_scatter")
        if len(inputs) != self.size() or any(t.numel() != output.numel() for t in inputs):
            raise ValueError(f"dpcore: reduce_scatter needs {self.size()} input tensors of the "
                             f"output's {output.numel()} elements")
        i = as_array(torch.cat([t.reshape(-1) for t in inputs]))
        o = as_array(output)
        return self._issue(opts, outputs, [lambda async_op: self._comm.reduce_scatter(
            i, op=op, out=o, async_op=async_op)])

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        """all_gather_coalesced: output_lists[r][j] gets rank r's inputs[j]. Every rank's inputs,
        flat and concatenated, travel in one all_gather; copied out once it is done. In their
        dtype where they share one (the call's header compares it between ranks), else as bytes."""
        sizes = [t.numel() for t in inputs]
        if len(output_lists) != self.size() or any(
                [(o.numel(), o.dtype) for o in outputs] != [(t.numel(), t.dtype) for t in inputs]
                for outputs in output_lists):
            raise ValueError(f"dpcore: all_gather_coalesced needs {self.size()} output lists, "
                             f"each of tensors of the inputs' sizes {sizes} and dtypes")
        typed = len({t.dtype for t in inputs}) == 1

        def flat(t):
            t = t.detach().reshape(-1)
            return t if typed else t.view(torch.uint8)

        send = torch.cat([flat(t) for t in inputs]) if inputs else torch.empty(0)
        gathered = torch.empty((self.size(), send.numel()), dtype=send.dtype, device=send.device)

        def copy_out():
            for outputs, row in zip(output_lists, gathered):
                for o, piece in zip(outputs, row.split(
                        [o.numel() * (1 if typed else o.element_size()) for o in outputs])):
                    o.copy_(piece.view(o.dtype).view(o.shape))

        i, g = as_moved(send, "input"), as_moved(gathered)
        return self._issue(opts, output_lists, [lambda async_op: self._comm.all_gather(
            i, out=g, async_op=async_op)], copy_out)

    # The coalesced forms: a dpcore call per pair, one Work for them all.
    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self._issue(opts, outputs, [self._gather_into(o, i)
                                           for o, i in _pairs(outputs, inputs)])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self._issue(opts, outputs, [self._scatter_into(o, i, opts)
                                           for o, i in _pairs(outputs, inputs)])

    allgather_into_tensor_coalesced = all_gather_single_coalesced
    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def barrier(self, opts=None):
        with self._calling():
            try:
                self._comm.barrier()  # queued after the async calls before it, as any collective
            except dpcore.CommError as e:
                raise torch_worded(e) from None
        return Done([])

    # -- plumbing --------------------------------------------------------------------------------

    def _issue(self, opts, value, calls, then=None):
        """Run `calls` (each takes async_op) as torch asked; `value` is what the Work's future
        holds; `then` runs once the calls are done (copies into place)."""
        with self._calling():
            if opts is not None and not opts.asyncOp:
                for call in calls:
                    call(False)
                if then is not None:
                    then()
                return Done(value)
            jobs = [call(True) for call in calls]
            return self._completer_thread().track(Pending(jobs, value, then))

    def _completer_thread(self):
        if self._completer is None:
            self._completer = Completer(f"dpcore-completion-{self._group_name or 'group'}")
        return self._completer

    def _calling(self):
        """The context a call runs in on this thread. dpcore pairs collectives by their order
        on each rank; two threads issuing them would order them differently on different ranks
        and mix their data. So, as dpcore's own communicators, a group takes calls from the
        thread that created it, and from a thread inside a backward pass while that thread
        waits in backward(): torch's autograd runs a CUDA backward, and so DDP's hooks, on a
        thread of its own (a CPU backward runs on backward()'s caller)."""
        if get_ident() == self._owner:
            return nullcontext()
        if torch._C._current_graph_task_id() != -1:
            return self._comm.lent_to_this_thread()
        me = threading.current_thread()
        raise RuntimeError(
            f"dpcore: process group {self._group_name!r} was created on thread "
            f"{self._owner_name!r} and takes collectives only from it (and from autograd's "
            f"backward); this call came from {me.name!r} (a future's .then() callback runs on "
            f"dpcore's completion thread: issue collectives from the thread that made the group)")


def torch_worded(error):
    """error, a timeout worded as gloo and NCCL word theirs ("Timed out"), which torch's
    tests and users' scripts look for: dpcore's message itself says "timed out after"."""
    message = str(error)
    if ": timed out after" not in message:
        return error
    return type(error)(message.replace(": timed out after", ": Timed out after", 1))


def _pairs(outputs, inputs):
    if len(outputs) != len(inputs):
        raise ValueError("dpcore: coalesced calls need as many outputs as inputs")
    return zip(outputs, inputs)
