"""
name: tied-weights
claim: With tied embeddings a plain reset_parameters loop re-initialises the shared weight with Linear's init and leaves the padding row non-zero (init_weights keeps Embedding's); an embedding sharded as its own FSDP unit is untied by fully_shard, and from 2.12 the first forward raises ValueError (before 2.12 it trains two separate weights, silently); the tied modules in one unit (the root, or fully_shard([embed, head])) keep the tie.
backs: pitfalls
world_size: 2
mutant: silent-on-215: `RAISES_SHARED = torch_release() >= (2, 12)` -> `RAISES_SHARED = torch_release() >= (2, 16)`
mutant: untied: `self.head.weight = self.embed.weight  # tie` -> `pass  # tie`
mutant: tie-in-root: `fully_shard(model.embed)  # its own unit` -> `pass  # its own unit`
mutant: tie-overwritten: `if id(p) not in done:` -> `if True:`

A model with `embed = nn.Embedding(VOCAB, DIM, padding_idx=0)` and `head = nn.Linear(DIM,
VOCAB, bias=False)` sharing one weight (`head.weight = embed.weight`), on 2 gloo ranks:
- A plain `for m in model.modules(): m.reset_parameters()` loop (here on the eager,
  unsharded model, so only the tie is at work) visits `head` after `embed`: the shared
  weight ends with Linear's kaiming-uniform values (every |w| <= 1/sqrt(DIM)) and a
  non-zero padding row, not Embedding's N(0, 1) with row 0 zero.
- SKILL.md's `init_weights` (verbatim) on the meta-built, sharded model keeps the first
  owner's init: the shared weight equals the eager Embedding init, padding row zero.
- `fully_shard(model.embed)` as its own unit, then the root: `head.weight is embed.weight`
  is already False after fully_shard, and the first forward raises ValueError "... shared
  with a parameter already managed by another FSDP group ..." (from 2.12; 2.11.0 ran on with
  two weights, no error: the release matrix).
- `fully_shard([model.embed, model.head])` (one unit for both) keeps the tie and trains.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown, torch_release
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor

VOCAB, DIM = 32, 16
RAISES_SHARED = torch_release() >= (2, 12)  # earlier FSDP2 does not check for a parameter another group holds


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


class TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.body = nn.Linear(DIM, DIM)
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tie

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(self.embed(tokens))))


device = init()
tokens = torch.randint(1, VOCAB, (4, 6), generator=torch.Generator().manual_seed(dist.get_rank())).to(device)
torch.manual_seed(0)
eager = TiedLM()

plain = TiedLM()
for m in plain.modules():
    if hasattr(m, "reset_parameters"):
        m.reset_parameters()
w = plain.embed.weight.detach()
assert torch.count_nonzero(w[0]) > 0, "the plain loop left the padding row zero"
assert w.abs().max() <= 1 / DIM**0.5, f"max |w| {w.abs().max():.3f}: not Linear's init"
say(f"plain reset_parameters loop on a tied model: padding row non-zero, max |w| {w.abs().max():.3f} "
    f"<= 1/sqrt({DIM}) (Linear's init; Embedding's N(0, 1) has max {eager.embed.weight.abs().max():.2f})")

with torch.device("meta"):
    model = TiedLM()
fully_shard(model)
model.to_empty(device=device)
init_weights(model)
shared = model.embed.weight.full_tensor()
assert model.head.weight is model.embed.weight
assert torch.equal(shared.cpu(), eager.embed.weight.detach()), "init_weights: not Embedding's init"
assert torch.count_nonzero(shared[0]) == 0
say("init_weights on the sharded tied model: the shared weight is Embedding's init, padding row zero")

with torch.device("meta"):
    model = TiedLM()
fully_shard(model.embed)  # its own unit
fully_shard(model)
tie_after_shard = model.head.weight is model.embed.weight
model.to_empty(device=device)
init_weights(model)
try:
    model(tokens)
    raised = ""
except ValueError as exc:
    raised = str(exc)
if RAISES_SHARED:
    assert not tie_after_shard and "shared with a parameter already managed by another FSDP group" in raised, (
        tie_after_shard, raised)
else:
    assert not tie_after_shard and not raised, (tie_after_shard, raised)
say(f"torch {torch.__version__}: embedding as its own unit: untied by fully_shard, the first forward "
    + ("raises ValueError" if RAISES_SHARED else "runs, the two weights apart"))

with torch.device("meta"):
    model = TiedLM()
fully_shard([model.embed, model.head])
fully_shard(model)
model.to_empty(device=device)
init_weights(model)
optim = torch.optim.AdamW(model.parameters(), lr=1e-2)
for _ in range(3):
    nn.functional.cross_entropy(model(tokens).reshape(-1, VOCAB), tokens.reshape(-1)).backward()
    optim.step()
    optim.zero_grad()
assert model.head.weight is model.embed.weight
say("fully_shard([embed, head]): the tie holds through to_empty, init and 3 AdamW steps")
shutdown()
