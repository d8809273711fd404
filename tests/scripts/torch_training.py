"""PyTorch's own data parallelism on the dpcore group against the same run on gloo, bit for bit:
DistributedDataParallel (several buckets; find_unused_parameters, no_sync, a comm hook,
static_graph) compared on every step's gradients and the final parameters; FSDP2 (fully_shard)
and FSDP1 on the final parameters. Used by torch_backend.py.

Two ranks train on random float32 data: a sum of two terms is the same in either order, so any
correct reduction gives gloo's bits. From three ranks the order counts (dpcore's one_shot adds
in rank order, gloo's ring a neighbour's term first), so those runs use float64 and values whose
every sum is exact: inputs integers, weights on a grid of 1/8 (put back on it after every step:
the bits of a product grow layer by layer and step by step), a loss scaled by the world size
(so DDP's and FSDP's division by it is exact), plain SGD with a step of 1/16. Every step's
gradients are compared (FSDP's: each rank's shard), so the rounding hides nothing.
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from torch_kit import same

STEPS = 3


class Net(nn.Module):
    """A small MLP of several layers (several DDP buckets at a small bucket_cap_mb), and a side
    branch used only on even steps (unused parameters on the others)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                  nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 6)
        self.side = nn.Linear(32, 6)

    def forward(self, x, use_side=False):
        h = self.body(x)
        return self.head(h) + (self.side(h) if use_side else 0)


class Setup:
    """The data and model of one rank count: random float32 at 2 ranks, exact float64 beyond."""

    def __init__(self, rank, size):
        self.rank, self.size = rank, size
        self.exact = size > 2
        self.dtype = torch.float64 if self.exact else torch.float32

    def model(self):
        torch.manual_seed(1234)  # the same start on every rank and for both backends
        net = Net().to(self.dtype)
        if self.exact:
            with torch.no_grad():
                for p in net.parameters():
                    p.copy_(torch.randint(-4, 5, p.shape).to(self.dtype) / 8)
        return net

    def batch(self, step):
        g = torch.Generator().manual_seed(100 * step + self.rank)  # each rank its own data
        if self.exact:
            return torch.randint(-3, 4, (4, 12), generator=g).to(self.dtype)
        return torch.randn(4, 12, generator=g, dtype=self.dtype)

    def loss(self, out):
        if self.exact:  # linear in the output: gradients on the grid, sums exact
            weights = torch.arange(1, 7, dtype=self.dtype) - 3
            return self.size * (out * weights).sum() / 4
        return out.square().mean()

    def optimizer(self, params):
        return torch.optim.SGD(params, lr=1 / 16 if self.exact else 0.05)

    def settle(self, params):
        """After a step: the exact runs' weights back on their grid (see the docstring)."""
        if self.exact:
            with torch.no_grad():
                for p in params:
                    local = p.to_local() if hasattr(p, "to_local") else p
                    local.copy_(torch.round(local * 8) / 8)


def local_grads(params):
    """This rank's gradients (its shard where they are DTensors), copied."""
    return [None if p.grad is None else
            (p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad).clone()
            for p in params]


def ddp_run(setup, group, find_unused=False, accumulate=False, hook=None, static=False):
    """STEPS steps of DDP on `group`; (gradients after every synchronised step, final
    parameters, buckets of the last step)."""
    net = setup.model()
    ddp = DDP(net, process_group=group, bucket_cap_mb=0.004, find_unused_parameters=find_unused,
              static_graph=static)
    if hook is not None:
        ddp.register_comm_hook(group, hook)
    opt = setup.optimizer(ddp.parameters())
    grads = []
    for step in range(STEPS):
        use_side = not find_unused or step % 2 == 0
        if accumulate:  # one micro-batch without communication, then one with
            with ddp.no_sync():
                setup.loss(ddp(setup.batch(step + 50), use_side)).backward()
        setup.loss(ddp(setup.batch(step), use_side)).backward()
        grads.append(local_grads(net.parameters()))
        opt.step()
        opt.zero_grad(set_to_none=False)
        setup.settle(net.parameters())
    buckets = ddp._get_ddp_logging_data()["num_buckets_reduced"]
    return grads, [p.detach().clone() for p in net.parameters()], buckets


def check_ddp(check, rank, size, gloo):
    setup = Setup(rank, size)
    variants = {"plain": {}, "find_unused_parameters": {"find_unused": True},
                "no_sync": {"accumulate": True},
                # fp16's rounding makes the 3-rank sums inexact: there, the plain hook
                "comm hook": {"hook": default_hooks.allreduce_hook if setup.exact else
                              default_hooks.fp16_compress_hook},
                "static_graph": {"static": True}}
    for name, kwargs in variants.items():
        got = ddp_run(setup, dist.group.WORLD, **kwargs)
        want = ddp_run(setup, gloo, **kwargs)
        compare_runs(check, f"DDP {name}", got[:2], want[:2])
        # (with static_graph, torch 2.13 keeps the one bucket it starts with)
        check.true(got[2] >= (1 if name == "static_graph" else 3),
                   f"DDP {name}: {got[2]} buckets in the last step")


def compare_runs(check, name, got, want):
    """(gradients of every step, final parameters) of the dpcore run and of the gloo run."""
    (got_grads, got_params), (want_grads, want_params) = got, want
    check.true(len(got_params) == len(want_params) == 10 and len(got_grads) == STEPS,
               f"{name}: {len(got_params)} parameters, {len(got_grads)} steps")
    for step, (g, w) in enumerate(zip(got_grads, want_grads)):
        for i, (a, b) in enumerate(zip(g, w)):
            if a is None or b is None:
                check.true(a is None and b is None, f"{name} step {step}: gradient {i} set")
            else:
                same(check, a, b, f"{name} step {step} gradient {i}")
    for i, (a, b) in enumerate(zip(got_params, want_params)):
        same(check, a, b, f"{name} final parameter {i}")


def train(setup, net):
    """STEPS steps of a sharded `net` (FSDP2 or FSDP1); each step's local gradients."""
    opt, grads = setup.optimizer(net.parameters()), []
    for step in range(STEPS):
        setup.loss(net(setup.batch(step))).backward()
        grads.append(local_grads(net.parameters()))
        opt.step()
        opt.zero_grad()
        setup.settle(net.parameters())
    return grads


def fsdp2_run(setup, group):
    net = setup.model()
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in net.body:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(net, mesh=mesh)
    return train(setup, net), [p.full_tensor() for p in net.parameters()]  # an all_gather


def fsdp1_run(setup, group):
    net = FSDP(setup.model(), process_group=group, use_orig_params=True,
               device_id=torch.device("cpu"),
               auto_wrap_policy=lambda module, recurse, nonwrapped_numel:
               recurse or isinstance(module, nn.Linear))
    grads = train(setup, net)
    with FSDP.summon_full_params(net):
        return grads, [p.detach().clone() for p in net.parameters()]


def check_fsdp(check, rank, size, gloo):
    setup = Setup(rank, size)
    for name, run in (("FSDP2", fsdp2_run), ("FSDP1", fsdp1_run)):
        try:
            got, want = run(setup, dist.group.WORLD), run(setup, gloo)
        except Exception as e:
            check.true(False, f"{name}: {type(e).__name__}: {e}")
            continue
        compare_runs(check, name, got, want)
