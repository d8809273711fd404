"""torch.distributed's reduce, gather, scatter, all_to_all, point to point and sparse all_reduce
on the dpcore group, each compared bit for bit with the same call on a gloo group of the same
ranks: from every root, sync and async, uneven splits, any-source receives. Used by
torch_backend.py."""
import torch
import torch.distributed as dist

from torch_kit import OPS, same, tensor

DTYPES = [torch.float32, torch.int64, torch.float16]


def check_sparse(check, rank, size, gloo):
    """A sparse COO sum, each rank's indices overlapping the others', as gloo's."""
    for dense in ((), (3,)):
        indices = torch.tensor([[i % size for i in range(rank + 2)],
                                [(i * 7 + rank) % 5 for i in range(rank + 2)]])
        values = tensor(torch.float32, (rank + 2) * (dense[0] if dense else 1), rank, size)
        x = torch.sparse_coo_tensor(indices, values.view((rank + 2,) + dense), (size, 5) + dense)
        want, got = x.clone(), x.clone()
        dist.all_reduce(want, group=gloo)
        dist.all_reduce(got)
        same(check, got.to_dense(), want.to_dense(), f"sparse all_reduce, dense dims {dense}")


def check_all_gather_coalesced(check, rank, size, gloo):
    # (an empty tensor of stride 1: gloo refuses the stride 0 that view() gives one)
    xs = [tensor(torch.float32, 6, rank, size).view(2, 3), torch.zeros(0),
          tensor(torch.float32, 5, rank, size)]
    wants = [[torch.zeros_like(x) for x in xs] for _ in range(size)]
    gots = [[torch.zeros_like(x) for x in xs] for _ in range(size)]
    dist.all_gather_coalesced(wants, xs, group=gloo)
    dist.all_gather_coalesced(gots, xs, async_op=True).wait()
    for r in range(size):
        for got, want in zip(gots[r], wants[r]):
            same(check, got, want, f"all_gather_coalesced, rank {r}'s x{want.numel()}")


def check_reduce(check, rank, size, gloo):
    for dtype in DTYPES:
        for op in ("sum", "max", "prod"):
            for root in range(size):
                label = f"reduce {op} {dtype} to {root}"
                x = tensor(dtype, 4099, rank, size, op)
                want, got = x.clone(), x.clone()
                dist.reduce(want, dst=root, op=OPS[op], group=gloo)
                work = dist.reduce(got, dst=root, op=OPS[op], async_op=root % 2 == 1)
                if work is not None:
                    work.wait()
                if rank == root:
                    same(check, got, want, label)
                else:
                    same(check, got, x, f"{label}: a non-root's tensor is left alone")


def check_gather_scatter(check, rank, size, gloo):
    for dtype in DTYPES + [torch.bool]:
        for root in range(size):
            x = tensor(dtype, 13, rank, size).view(13)
            wants = [torch.zeros_like(x) for _ in range(size)] if rank == root else None
            gots = [torch.zeros_like(x) for _ in range(size)] if rank == root else None
            dist.gather(x, wants, dst=root, group=gloo)
            dist.gather(x, gots, dst=root, async_op=True).wait()
            for r in range(size if rank == root else 0):
                same(check, gots[r], wants[r], f"gather {dtype} to {root}, rank {r}'s")
            pieces = [tensor(dtype, 13, r + size, size) for r in range(size)]
            want, got = torch.zeros_like(x), torch.zeros_like(x)
            dist.scatter(want, pieces if rank == root else None, src=root, group=gloo)
            dist.scatter(got, pieces if rank == root else None, src=root)
            same(check, got, want, f"scatter {dtype} from {root}")
            if dtype is torch.float32:  # pieces dpcore cannot take where they lie: copied first
                strided = [tensor(dtype, 26, r + size, size)[::2] for r in range(size)]
                dist.scatter(got, strided if rank == root else None, src=root)
                same(check, got, strided[rank], f"scatter {dtype} from {root}, strided pieces")


def check_all_to_all(check, rank, size, gloo):
    for dtype in DTYPES + [torch.complex64]:
        x = tensor(dtype, size * 6, rank, size).view(size * 2, 3)
        want, got = torch.zeros_like(x), torch.zeros_like(x)
        dist.all_to_all_single(want, x, group=gloo)
        dist.all_to_all_single(got, x)
        same(check, got, want, f"all_to_all_single {dtype}, equal splits")
        # rank p sends rank q (p + q) % 3 + 1 rows of 3
        splits = [(rank + q) % 3 + 1 for q in range(size)]
        out_splits = [(p + rank) % 3 + 1 for p in range(size)]
        x = tensor(dtype, 3 * sum(splits), rank, size).view(-1, 3)
        want = torch.zeros(sum(out_splits), 3, dtype=dtype)
        got = torch.zeros_like(want)
        dist.all_to_all_single(want, x, out_splits, splits, group=gloo)
        dist.all_to_all_single(got, x, out_splits, splits, async_op=True).wait()
        same(check, got, want, f"all_to_all_single {dtype}, uneven splits, async")
        # the list form: uneven, against the single form's rows (gloo's lists must be even)
        ins = list(x.split(splits))
        gots = [torch.zeros(s, 3, dtype=dtype) for s in out_splits]
        dist.all_to_all(gots, ins)
        same(check, torch.cat(gots), want, f"all_to_all {dtype} (lists), uneven")
        ins = [tensor(dtype, 5, rank * size + q, size * size) for q in range(size)]
        wants = [torch.zeros(5, dtype=dtype) for _ in range(size)]
        gots = [torch.zeros(5, dtype=dtype) for _ in range(size)]
        dist.all_to_all(wants, ins, group=gloo)
        dist.all_to_all(gots, ins, async_op=True).wait()
        for p in range(size):
            same(check, gots[p], wants[p], f"all_to_all {dtype} (lists), async, from rank {p}")


def check_p2p(check, rank, size, gloo):
    """send/recv around the ring, any source, isend/irecv and batch_isend_irecv, each message
    unique to its sender and tag."""
    nxt, prev = (rank + 1) % size, (rank - 1) % size
    for count in (1, 70001):
        x = tensor(torch.float32, count, rank, size)
        expected = tensor(torch.float32, count, prev, size)
        got = torch.zeros_like(x)
        if rank % 2 == 0:  # blocking: even ranks send first
            dist.send(x, nxt)
            dist.recv(got, prev)
        else:
            dist.recv(got, prev)
            dist.send(x, nxt)
        same(check, got, expected, f"send/recv around the ring x{count}")
        got = torch.zeros_like(x)
        works = [dist.irecv(got, prev, tag=7), dist.isend(x, nxt, tag=7)]
        for w in works:
            w.wait()
        same(check, got, expected, f"isend/irecv x{count}, tag 7")
        got = torch.zeros_like(x)
        ops = [dist.P2POp(dist.irecv, got, prev), dist.P2POp(dist.isend, x, nxt)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        same(check, got, expected, f"batch_isend_irecv ring x{count}")
    if rank == 0:  # any source: rank 0 hears from every other rank, and learns who sent
        heard = set()
        for _ in range(size - 1):
            got = torch.zeros(3, dtype=torch.int64)
            source = dist.recv(got)
            heard.add(source)
            same(check, got, torch.full((3,), source * 10), f"recv from any source ({source})")
        check.true(heard == set(range(1, size)), f"any-source receives heard {sorted(heard)}")
    else:
        dist.send(torch.full((3,), rank * 10), 0)
