"""
name: per-rank-seed
claim: A reset_parameters loop on sharded DTensors on CPU draws the same shard on every rank with one seed, and with `seed + rank` HSDP replicas and TP + FSDP's tp-replicated biases differ after init and still after training.
backs: pitfalls
world_size: 4
requires: stated-ranks
mutant: one-seed-hsdp: `SEED + rank)  # per-rank, HSDP` -> `SEED)  # per-rank, HSDP`
mutant: one-seed-tp: `SEED + rank)  # per-rank, TP` -> `SEED)  # per-rank, TP`
mutant: per-rank-seed-on-1d: `plain_init(model, SEED)  # one seed` -> `plain_init(model, SEED + rank)  # one seed`

The init that SKILL.md's `init_weights` replaces, on 4 gloo ranks: build on meta, shard,
`to_empty`, `torch.manual_seed(...)`, then `reset_parameters()` on every module, so each
random op runs on this rank's local shard (on CPU DTensor has no RNG tracker: "DTensor
random operators may not have complete support on cpu device mesh").
- 1-D FSDP over 4 ranks, one seed: the 4 shards of a weight are equal (repeated values).
- HSDP 2 x 2, `seed + rank`: the two replicas of every randomly initialised parameter
  differ, and still differ after 5 AdamW steps (gradients are all-reduced across replicas,
  the weights are never re-synchronised).
- TP + FSDP ("dp", "tp") 2 x 2, `seed + rank`: RowwiseParallel's bias (Replicate on "tp")
  differs between the two tp ranks of a pair, after init and after 5 steps.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

DIM, STEPS, SEED = 16, 5, 0


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(DIM, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.head = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def plain_init(model: nn.Module, seed: int) -> None:
    torch.manual_seed(seed)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()


def build(kind: str, device: torch.device) -> nn.Module:
    with torch.device("meta"):
        model = Net()
    if kind == "TP + FSDP":
        mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))
        dp = mesh["dp"]
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    elif kind == "HSDP":
        dp = init_device_mesh(device.type, (2, 2), mesh_dim_names=("replicate", "shard"))
    else:
        dp = init_device_mesh(device.type, (4,), mesh_dim_names=("dp",))
    for block in model.blocks:
        fully_shard(block, mesh=dp)
    fully_shard(model, mesh=dp)
    model.to_empty(device=device)
    return model


def locals_of(p: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's local shard of `p`, indexed by rank."""
    rows: list[torch.Tensor] = [torch.empty(0)] * dist.get_world_size()
    dist.all_gather_object(rows, p.to_local().detach().cpu())
    return rows


def train(model: nn.Module, replica: int, device: torch.device) -> None:
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(100 + replica)
    for _ in range(STEPS):
        model(torch.randn(8, DIM, generator=gen).to(device)).square().mean().backward()
        optim.step()
        optim.zero_grad()


def random_params(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [(n, p) for n, p in model.named_parameters() if "norm" not in n]  # LayerNorm's init is constant


device = init()
rank = dist.get_rank()

model = build("1-D FSDP", device)
plain_init(model, SEED)  # one seed
shards = locals_of(model.blocks[0].up.weight)
assert all(torch.equal(shards[0], s) for s in shards), "one seed: the shards differ"
say("1-D FSDP, one seed: all 4 shards of blocks.0.up.weight are equal")

# HSDP: ranks 0 and 2 hold shard 0 of the two replicas, 1 and 3 shard 1.
model = build("HSDP", device)
plain_init(model, SEED + rank)  # per-rank, HSDP
for when in ("init", f"{STEPS} steps"):
    same = [n for n, p in random_params(model) if torch.equal(*locals_of(p)[0::2])]
    assert not same, f"HSDP, seed + rank, after {when}: replicas equal for {same}"
    say(f"HSDP, seed + rank, after {when}: the replicas of every random parameter differ")
    if when == "init":
        train(model, rank, device)

# TP + FSDP: ranks 0 and 1 are the tp pair of dp index 0; down.bias is Replicate on "tp".
model = build("TP + FSDP", device)
plain_init(model, SEED + rank)  # per-rank, TP
for when in ("init", f"{STEPS} steps"):
    biases = [locals_of(block.down.bias) for block in model.blocks]
    assert all(not torch.equal(b[0], b[1]) for b in biases), f"TP + FSDP after {when}: tp ranks share the bias"
    say(f"TP + FSDP, seed + rank, after {when}: down.bias (Replicate on tp) differs between tp ranks 0 and 1")
    if when == "init":
        train(model, rank // 2, device)  # both ranks of a tp pair see the same batch
shutdown()
