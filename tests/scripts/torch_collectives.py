"""torch.distributed's collectives on the dpcore group, each compared bit for bit with the same
call on a gloo group of the same ranks: every dtype both reduce, every ReduceOp dpcore has,
sync, async with wait() and with get_future(), in place where torch writes in place, uneven and
one-element sizes. Used by torch_backend.py."""
import threading

import torch
import torch.distributed as dist


from checks import reference
from torch_kit import MOVE_DTYPES, OPS, REDUCE_DTYPES, same, tensor

COUNTS = [1, 13, 70001]  # one element; odd; past one_shot's slot (ring or direct)


def gloo_reduce(t, op, gloo):
    """gloo's all_reduce of t (a copy); gloo has no AVG: its SUM, divided as torch divides."""
    y = t.clone()
    dist.all_reduce(y, op=OPS["sum" if op == "avg" else op], group=gloo)
    return y.div_(gloo.size()) if op == "avg" else y


def check_all_reduce(check, rank, size, gloo):
    for dtype in REDUCE_DTYPES:
        for op in ["sum", "prod", "min", "max"] + (["avg"] if dtype.is_floating_point else []):
            for count in COUNTS:
                label = f"all_reduce {op} {dtype} x{count}"
                x = tensor(dtype, count, rank, size, op)
                want = gloo_reduce(x, op, gloo)
                t, ptr = x.clone(), None
                ptr = t.data_ptr()
                dist.all_reduce(t, op=OPS[op])
                same(check, t, want, label)
                check.true(t.data_ptr() == ptr, f"{label}: in place")
                t = x.clone()
                work = dist.all_reduce(t, op=OPS[op], async_op=True)
                check.true(work.wait() is True, f"{label}: async wait() returns True")
                same(check, t, want, f"{label}, async wait")
                t = x.clone()
                value = dist.all_reduce(t, op=OPS[op], async_op=True).get_future().wait()
                check.true(value[0] is t, f"{label}: the future holds the tensor")
                same(check, t, want, f"{label}, async future")


def check_unsigned(check, rank, size, gloo):
    """uint32 and uint64, which gloo does not reduce: against NumPy's wrapping reduction."""
    for dtype in (torch.uint32, torch.uint64):
        for op in ("sum", "prod", "min", "max"):
            label = f"all_reduce {op} {dtype}"
            t = tensor(dtype, 1009, rank, size, op)
            want = reference(op, [tensor(dtype, 1009, r, size, op).numpy() for r in range(size)])
            dist.all_reduce(t, op=OPS[op])
            same(check, t, torch.from_numpy(want), label)


def check_moves(check, rank, size, gloo):
    """broadcast from every root, all_gather (list and into a tensor, also in place, as FSDP2
    does), in every dtype: data moves as bytes."""
    for dtype in MOVE_DTYPES:
        for count in (1, 4099):
            try:
                check_moves_of(check, rank, size, gloo, dtype, count)
            except Exception as e:
                check.true(False, f"moving {dtype} x{count}: {type(e).__name__}: {e}")


def check_moves_of(check, rank, size, gloo, dtype, count):
    x = tensor(dtype, count, rank, size)
    everyone = [tensor(dtype, count, r, size) for r in range(size)]
    for root in range(size):
        t, want = x.clone(), x.clone()
        if dtype is torch.int16:  # gloo has not got it: every rank knows the root's data
            want = everyone[root]
        else:
            dist.broadcast(want, src=root, group=gloo)
        dist.broadcast(t, src=root)
        same(check, t, want, f"broadcast {dtype} x{count} from {root}")
    wants = [torch.empty_like(x) for _ in range(size)]
    if dtype is torch.int16:
        wants = everyone
    else:
        dist.all_gather(wants, x, group=gloo)
    gots = [torch.zeros_like(x) for _ in range(size)]
    dist.all_gather(gots, x)
    for r in range(size):
        same(check, gots[r], wants[r], f"all_gather {dtype} x{count}, rank {r}'s")
    want = torch.cat(wants)
    out = torch.zeros(size * count, dtype=dtype)
    dist.all_gather_into_tensor(out, x)
    same(check, out, want, f"all_gather_into_tensor {dtype} x{count}")
    out = torch.zeros(size * count, dtype=dtype)
    shard = out[rank * count:(rank + 1) * count]
    shard.copy_(x)
    dist.all_gather_into_tensor(out, shard, async_op=True).wait()
    same(check, out, want, f"all_gather_into_tensor in place, async, {dtype} x{count}")


def check_reduce_scatter(check, rank, size, gloo):
    for dtype in REDUCE_DTYPES:
        for op in ["sum", "max"] + (["avg"] if dtype.is_floating_point else []):
            for count in (1, 4099):
                label = f"reduce_scatter {op} {dtype} x{count} per rank"
                x = tensor(dtype, size * count, rank, size, op)
                want = gloo_reduce(x, op, gloo)[rank * count:(rank + 1) * count]
                out = torch.zeros(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, x, op=OPS[op])
                same(check, out, want, label)
                out = torch.zeros(count, dtype=dtype)
                dist.reduce_scatter_tensor(out, x, op=OPS[op], async_op=True).get_future().wait()
                same(check, out, want, f"{label}, async future")
                out = torch.zeros(count, dtype=dtype)
                dist.reduce_scatter(out, list(x.chunk(size)), op=OPS[op])
                same(check, out, want, f"{label}, list form")


def check_coalesced(check, rank, size, gloo):
    """torch's coalescing manager routes to the coalesced forms."""
    xs = [tensor(torch.float32, n, rank, size) for n in (5, 4099)]
    wants = [gloo_reduce(x, "sum", gloo) for x in xs]
    ts = [x.clone() for x in xs]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for t, want in zip(ts, wants):
        same(check, t, want, f"all_reduce coalesced x{t.numel()}")
    outs = [torch.zeros(size * x.numel()) for x in xs]
    with dist._coalescing_manager():
        for out, x in zip(outs, xs):
            dist.all_gather_into_tensor(out, x)
    for out, x in zip(outs, xs):
        want = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(want, x, group=gloo)
        same(check, out, torch.cat(want), f"all_gather_into_tensor coalesced x{x.numel()}")
    xs = [tensor(torch.float32, size * n, rank, size) for n in (3, 5)]
    outs = [torch.zeros(x.numel() // size) for x in xs]
    with dist._coalescing_manager():
        for out, x in zip(outs, xs):
            dist.reduce_scatter_tensor(out, x, op=dist.ReduceOp.AVG)
    for out, x in zip(outs, xs):
        n = out.numel()
        same(check, out, gloo_reduce(x, "avg", gloo)[rank * n:(rank + 1) * n],
             f"reduce_scatter_tensor coalesced x{n}")


def check_groups(check, rank, size, gloo):
    """new_group: every rank calls it; its members get a dpcore group of their own, ranked as
    torch ranks them."""
    members = [0, size - 1]
    sub = dist.new_group(members, backend="dpcore")
    sub_gloo = dist.new_group(members, backend="gloo")
    if rank in members:
        x = tensor(torch.float32, 4099, rank, size)
        want = x.clone()
        dist.all_reduce(want, group=sub_gloo)
        dist.all_reduce(x, group=sub)
        same(check, x, want, "all_reduce on a new_group of ranks 0 and n-1")
        b = tensor(torch.int64, 7, rank, size)
        want = b.clone()
        dist.broadcast(want, src=size - 1, group=sub_gloo)
        dist.broadcast(b, src=size - 1, group=sub)
        same(check, b, want, "broadcast from global rank n-1 on the new group")
        check.true(sub.rank() == members.index(rank) and
                   sub.communicator.rank == members.index(rank), "the new group's ranks")
    dist.barrier()


def check_objects(check, rank, size, gloo):
    """The object collectives, which torch builds on all_gather and broadcast of bytes."""
    got = [None] * size
    dist.all_gather_object(got, {"rank": rank, "text": "x" * rank})
    check.true(got == [{"rank": r, "text": "x" * r} for r in range(size)],
               f"all_gather_object: {got}")
    got = [{"from": rank}] if rank == size - 1 else [None]
    dist.broadcast_object_list(got, src=size - 1)
    check.true(got == [{"from": size - 1}], f"broadcast_object_list: {got}")


def check_refusals(check, rank, size, gloo):
    """Bad local input raises on its rank before anything is sent; the group stays usable."""
    t = torch.ones(4)
    for call, error, what in [
            (lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND), ValueError, "ReduceOp.BAND"),
            (lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), TypeError, "int16 sum"),
            (lambda: dist.all_reduce(torch.ones(8)[::2]), ValueError, "a strided tensor"),
            (lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                     op=dist.ReduceOp.AVG), TypeError, "avg of int32"),
            (lambda: dist.gather(t, [t] * (size + 1), dst=rank), ValueError,
             "gather into a list of n + 1"),
            (lambda: dist.all_to_all_single(torch.ones(5), torch.ones(5)), ValueError,
             "all_to_all_single of 5 elements between 2 or 3 ranks")]:
        try:
            call()
            check.true(False, f"{what} was accepted")
        except error as e:
            check.true("dpcore" in str(e), f"{what}: the error says dpcore: {e}")
    caught = []
    thread = threading.Thread(target=lambda: _try(lambda: dist.all_reduce(t), caught))
    thread.start()
    thread.join()
    check.true(caught and isinstance(caught[0], RuntimeError) and "thread" in str(caught[0]),
               f"a call from another thread is refused: {caught}")
    t = torch.ones(4)
    dist.all_reduce(t)
    same(check, t, torch.full((4,), float(size)), "usable after the refusals")


def check_backward_thread(check, rank, size, gloo):
    """A call from a thread inside a backward pass is taken while the owner waits for it: torch's
    autograd runs a CUDA backward, and DDP's hooks in it, on a thread of its own. A CPU backward
    on a second thread stands in for it here (the hook sums the gradient over the ranks)."""
    w = torch.ones(4, requires_grad=True)
    w.register_hook(lambda g: dist.all_reduce(g) or g)
    caught = []
    thread = threading.Thread(target=lambda: _try(lambda: (w * (rank + 1)).sum().backward(),
                                                  caught))
    thread.start()
    thread.join()
    check.true(not caught, f"a hook's all_reduce on backward's thread is taken: {caught}")
    same(check, w.grad, torch.full((4,), float(size * (size + 1) // 2)),
         "the hook's sum over the ranks")
    t = torch.ones(4)
    dist.all_reduce(t)  # the owner's again, after the backward
    same(check, t, torch.full((4,), float(size)), "the owner's call after the backward")


def _try(call, caught):
    try:
        call()
    except Exception as e:
        caught.append(e)
