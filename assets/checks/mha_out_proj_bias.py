"""
name: mha-out-proj-bias
claim: nn.MultiheadAttention's init zeroes out_proj.bias, but a loop over model.modules() that runs MultiheadAttention._reset_parameters and then every reset_parameters redraws it (out_proj, a Linear, comes after its parent); init_weights (children first) leaves it zero, as the eager module does.
backs: pitfalls
world_size: 2
mutant: children-first-loop: `for m in model.modules():  # parents first` -> `for m in reversed(list(model.modules())):  # parents first`
mutant: pre-order: `for child in [m.layers[0], *list(m.children())[1:]] if clones else m.children():` -> `for child in ():`; `    visit(model, None)` -> `    [visit(m, None) for m in model.modules()]`

An eager `nn.MultiheadAttention` has `out_proj.bias == 0` (`_reset_parameters` zeroes it
after `out_proj`, a Linear, was built with Linear's init). After meta + fully_shard +
to_empty, the loop SKILL.md's recipe used before (`_reset_parameters` for
MultiheadAttention, else `reset_parameters`, over `model.modules()`: parents first) visits
`out_proj` after its parent and redraws the bias with Linear's init: non-zero. SKILL.md's
`init_weights` (verbatim) visits children first, as `__init__` builds them: zero.
"""

import torch
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor

DIM, HEADS = 16, 2


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


class Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(DIM, HEADS, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x, x, x, need_weights=False)[0]


def sharded() -> nn.Module:
    with torch.device("meta"):
        model = Attn()
    fully_shard(model)
    model.to_empty(device=device)
    return model


device = init()
assert torch.count_nonzero(Attn().attn.out_proj.bias) == 0, "eager out_proj.bias is not zero"

model = sharded()
torch.manual_seed(0)
for m in model.modules():  # parents first
    if isinstance(m, nn.MultiheadAttention):
        m._reset_parameters()
    elif hasattr(m, "reset_parameters"):
        m.reset_parameters()
bias = model.attn.out_proj.bias.full_tensor()
assert torch.count_nonzero(bias) == bias.numel(), f"the parents-first loop left out_proj.bias {bias}"
say(f"parents-first loop: out_proj.bias redrawn by Linear's init (max |b| {bias.abs().max():.3f})")

model = sharded()
init_weights(model)
bias = model.attn.out_proj.bias.full_tensor()
assert torch.count_nonzero(bias) == 0, f"init_weights left out_proj.bias {bias}"
say("init_weights (children first): out_proj.bias zero, as in the eager module")
shutdown()
