"""
name: init-any-mesh
claim: The core recipe's init_weights (one seed on every rank, each module's init on full tensors, this rank's shard kept) equals a plain single-process init on 1-D FSDP, HSDP and TP + FSDP meshes: replicas equal, shards different, replicas still equal after training.
backs: core-recipe
world_size: 4
requires: stated-ranks
mutant: per-rank-seed: `torch.manual_seed(seed)  #` -> `torch.manual_seed(seed + dist.get_rank())  #`
mutant: per-rank-seed-replicas-only: `torch.manual_seed(seed)  #` -> `torch.manual_seed(seed + dist.get_rank())  #`; `everyones(unlike_eager(model, eager))` -> `[]`
mutant: in-place-on-shards: `m._parameters[n] = full  # init full` -> `pass  # init full`; `if full.isnan().any():` -> `if False:`; `p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))` -> `pass`
mutant: in-place-shards-only: `m._parameters[n] = full  # init full` -> `pass  # init full`; `if full.isnan().any():` -> `if False:`; `p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))` -> `pass`; `everyones(unlike_eager(model, eager))` -> `[]`
mutant: pre-order: `for child in [m.layers[0], *list(m.children())[1:]] if clones else m.children():` -> `for child in ():`; `    visit(model, None)` -> `    [visit(m, None) for m in model.modules()]`
mutant: tie-overwritten: `if id(p) not in done:` -> `if True:`

Three meshes over the same 4 gloo ranks: 1-D FSDP (4), HSDP ("replicate", "shard") 2 x 2,
TP + FSDP ("dp", "tp") 2 x 2 (ColwiseParallel up, RowwiseParallel down: its bias is
Replicate on "tp"). On each, a model with a tied Embedding(padding_idx=0) / head,
MultiheadAttention, LayerNorm and a non-persistent buffer is built on meta, sharded,
`to_empty`, then initialised by `init_weights` (SKILL.md's function, verbatim: a test
compares them). Asserted on every rank: each parameter's `full_tensor()` equals the same
parameter of `torch.manual_seed(0); LM()` built eagerly on one process (so every replica
holds the same values, every shard its own slice); the local shards, gathered from all
ranks, are equal between ranks that hold the same shard (same coordinate on the mesh dims
where the parameter is not Replicate) and share no value between different shards of a
randomly initialised parameter; after 4 AdamW steps on per-replica data the replicas are
still equal and the tie holds.

Every mesh is checked (each rank agrees on the verdict, so no collective is skipped) and the
failures are listed per mesh. The mutants: `per-rank-seed` (the recipe before: `seed + rank`),
and the same with the eager comparison off (`-replicas-only`: HSDP's replicas and TP's
Replicate biases differ); `in-place-on-shards` (the plain reset_parameters loop on the sharded
DTensors: on CPU every rank draws the same local values) and with the eager comparison off
(`-shards-only`: shards repeat values); `pre-order` (a parent's init before its children's:
MultiheadAttention's zeroed out_proj.bias is redrawn by Linear's init); `tie-overwritten` (the
head's Linear init overwrites the shared embedding weight: padding row non-zero).
"""

import math

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

VOCAB, DIM, HEADS, SEQ, STEPS = 32, 16, 2, 8, 4


def init_weights(model: nn.Module, seed: int = 0) -> None:
    """After fully_shard + to_empty: __init__'s inits replayed on full tensors, one seed; each rank keeps its slice."""
    torch.manual_seed(seed)  # the same seed on every rank
    done: set[int] = set()  # tied weights keep their first owner's init

    def visit(m: nn.Module, held: list | None) -> None:  # children first, as __init__ builds them
        cls = type(m)  # not an init a CheckpointWrapper forwards from its block (run twice)
        init = next((getattr(m, n) for n in ("reset_parameters", "_reset_parameters") if hasattr(cls, n)), None)
        hf = hasattr(cls, "_init_weights")  # Hugging Face style: __init__ ends with apply(self._init_weights)
        clones = isinstance(m, (nn.TransformerEncoder, nn.TransformerDecoder))  # deep copies of one layer
        # A parent's init may write its children (nn.Transformer, HF, MHA): hold them full until it ran.
        hold = held is None and bool(init or hf or clones) and any(True for c in m.children() for _ in c.parameters())
        inner = [] if hold else held
        for child in [m.layers[0], *list(m.children())[1:]] if clones else m.children():
            visit(child, inner)
        for layer in m.layers[1:] if clones else ():  # copies of layer 0's values: no draws, as deepcopy
            for a, b in zip(m.layers[0].modules(), layer.modules()):
                for n, p in b.named_parameters(recurse=False):
                    b._parameters[n] = a._parameters[n].clone()
                    inner.append((b, n, p, b._parameters[n]))
        mine = [(m, n, p, torch.full(p.shape, torch.nan, dtype=p.dtype, device=p.device))
                for n, p in m.named_parameters(recurse=False)]
        for _, n, _, full in mine:
            m._parameters[n] = full  # init full plain tensors, then put the shards back
        if init:
            init()
        elif hf:
            m.apply(m._init_weights)
        if hasattr(m, "init_buffers"):
            m.init_buffers()  # tables computed in __init__ (RoPE) were on meta
        if held is not None:  # an ancestor's init is to come: stay full, tied as __init__ ties them
            first = {id(p): full for _, _, p, full in reversed(held)}
            for _, n, p, _ in mine:
                m._parameters[n] = first.get(id(p), m._parameters[n])
            held += mine
            return
        with torch.no_grad():
            for sub, n, p, full in (inner or []) + mine:
                sub._parameters[n] = p
                if full.isnan().any():
                    raise TypeError(f"{type(sub).__name__}.{n}: no init writes it; give {type(sub).__name__} "
                                    "a reset_parameters() (or load the weights: pretrained-into-meta)")
                if id(p) not in done:
                    done.add(id(p))  # this rank's slice, no communication
                    p.copy_(distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None))

    visit(model, None)


class Positions(nn.Module):
    """A sinusoidal table computed in __init__: a non-persistent buffer, like a RoPE cache."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", self._table(), persistent=False)

    def _table(self) -> torch.Tensor:
        position = torch.arange(SEQ, dtype=torch.float32)[:, None]
        freq = torch.exp(torch.arange(0, DIM, 2, dtype=torch.float32) * (-math.log(10000.0) / DIM))
        table = torch.zeros(SEQ, DIM)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * freq), torch.cos(position * freq)
        return table

    def init_buffers(self) -> None:
        with torch.no_grad():
            self.table.copy_(self._table().to(self.table.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.shape[1]]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)
        self.up = nn.Linear(DIM, 4 * DIM)
        self.down = nn.Linear(4 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.down(torch.relu(self.up(x)))


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.pos = Positions()
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.pos(self.embed(tokens))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def shard_key(p: torch.Tensor) -> tuple[int, ...]:
    """Which shard this rank holds: its coordinates on the mesh dims where the parameter is not Replicate."""
    coordinate = p.device_mesh.get_coordinate()
    return tuple(c for c, placement in zip(coordinate, p.placements) if not placement.is_replicate())


def everyones(problems: list[str]) -> list[str]:
    """The problems any rank found, on every rank: all ranks then take the same path (no collective skipped)."""
    rows: list[list[str]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(rows, problems)
    return sorted({problem for row in rows for problem in row})


def unlike_eager(model: nn.Module, eager: nn.Module) -> list[str]:
    """Parameters whose full value (this rank's replica) is not the eager init's."""
    return [f"{name} differs from the eager init" for name, p in model.named_parameters()
            if not torch.equal(p.full_tensor().cpu(), eager.get_parameter(name))]


def shard_problems(model: nn.Module, eager: nn.Module | None) -> list[str]:
    """Ranks with the same shard key must hold equal locals; with `eager`, different shards of a randomly
    initialised parameter must share no value."""
    mine = {name: (shard_key(p), p.to_local().detach().cpu()) for name, p in model.named_parameters()}
    rows: list[dict[str, tuple[tuple[int, ...], torch.Tensor]]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(rows, mine)  # one gather for all parameters
    problems = []
    for name in mine:
        by_key: dict[tuple[int, ...], torch.Tensor] = {}
        for key, local in (row[name] for row in rows):
            if key in by_key and not torch.equal(by_key[key], local):
                problems.append(f"{name}: the replicas of shard {key} differ")
            by_key.setdefault(key, local)
        if eager is None or eager.get_parameter(name).unique().numel() <= 2:  # constants (ones, zeros) repeat
            continue
        shards = [s for s in by_key.values() if s.numel()]
        if any(torch.isin(a, b).any() for i, a in enumerate(shards) for b in shards[i + 1:]):
            problems.append(f"{name}: two different shards repeat values")
    return sorted(set(problems))


def build(kind: str, device: torch.device) -> nn.Module:
    with torch.device("meta"):
        model = LM()
    if kind == "1-D FSDP":
        dp = init_device_mesh(device.type, (4,), mesh_dim_names=("dp",))
    elif kind == "HSDP":
        dp = init_device_mesh(device.type, (2, 2), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))
        dp = mesh["dp"]
        for block in model.blocks:
            parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    for block in model.blocks:
        fully_shard(block, mesh=dp)
    fully_shard(model, mesh=dp)
    model.to_empty(device=device)
    init_weights(model)
    return model


device = init()
rank = dist.get_rank()
torch.manual_seed(0)
eager = LM()  # the plain single-process init, with the same seed
failures = []
for kind in ("1-D FSDP", "HSDP", "TP + FSDP"):
    model = build(kind, device)
    problems = everyones(unlike_eager(model, eager))
    problems += shard_problems(model, eager)
    if not torch.equal(model.pos.table.cpu(), eager.pos.table) or model.head.weight is not model.embed.weight:
        problems.append("buffer not recomputed or tie lost")

    # Per-replica data: TP's two ranks of one dp index must see the same batch.
    replica = rank // 2 if kind == "TP + FSDP" else rank
    gen = torch.Generator().manual_seed(100 + replica)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(STEPS):
        tokens = torch.randint(1, VOCAB, (4, SEQ + 1), generator=gen).to(device)
        logits = model(tokens[:, :-1])
        nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens[:, 1:].reshape(-1)).backward()
        optim.step()
        optim.zero_grad()
    problems += [f"after {STEPS} steps: {p}" for p in shard_problems(model, None)]
    failures += [f"{kind}: {p}" for p in problems]
    say(f"{kind}: " + ("; ".join(problems) if problems else "every parameter equals the eager init; replicas "
                       f"equal, different shards share no value; replicas still equal after {STEPS} AdamW steps"))
assert not failures, "\n".join(failures)
shutdown()
