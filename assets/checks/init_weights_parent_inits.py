"""
name: init-weights-parent-inits
claim: The core recipe's init_weights gives every parameter torch.manual_seed(0); Model()'s value, with no shard repeated across ranks, on models whose parents initialise their children (stock nn.Transformer with 2 + 2 deep-copied layers, a Hugging Face style parent that ends __init__ with apply(self._init_weights) and ties its head) and under activation-checkpoint wrappers (the activation-checkpointing pattern's model, plus a wrapped Linear); a parameter no init writes raises a TypeError naming its module.
backs: core-recipe
world_size: 2
mutant: no-hold: `bool(init or hf or clones)` -> `bool(clones)`
mutant: forwarded-init: `if hasattr(cls, n)), None)` -> `if hasattr(m, n)), None)`
mutant: no-hf-init: `hf = hasattr(cls, "_init_weights")` -> `hf = False`
mutant: clones-redrawn: `clones = isinstance(m, (nn.TransformerEncoder, nn.TransformerDecoder))` -> `clones = False`
mutant: tie-after-parent: `m._parameters[n] = first.get(id(p), m._parameters[n])` -> `pass`
mutant: unwritten-kept: `if full.isnan().any():` -> `if False:`

Before this round the recipe's init ran a parent's init (nn.Transformer._reset_parameters:
xavier over every descendant; an HF `apply(self._init_weights)`) on the children's
shards after they were copied: on CPU every rank drew the same local values (shards
repeated) and the RNG stream left eager's; `getattr(wrapper, "reset_parameters")` reached
the wrapped module's init through `CheckpointWrapper.__getattr__` and ran it twice. Now a
module whose class has an init and whose children have parameters keeps its whole subtree
full until its own init has run; the layers nn.TransformerEncoder/Decoder deep-copy get
layer 0's values (deepcopy draws nothing); tied weights are re-tied before the parent's
init (HF ties in __init__, before post_init); and a parameter still NaN after every init
(no init wrote it) raises, naming the module.

Each model is built eagerly after `torch.manual_seed(0)` and on meta; the meta one is
sharded per layer/block then root, `to_empty`, `init_weights`. Asserted: every
parameter's `full_tensor()` is bitwise the eager value; rank 0's and rank 1's shards of
a randomly initialised parameter differ; a module with a raw `nn.Parameter` and
no init raises TypeError naming it. Each model's failure (an exception included) is
collected and asserted at the end, so every mutant fails on the AssertionError.
"""

import torch
import torch.distributed as dist
import torch.nn as nn
from _dist import init, say, shutdown
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import distribute_tensor

DIM, VOCAB = 16, 32


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


class Block(nn.Module):  # the activation-checkpointing pattern's Block and Model (its DIM 32, 3 blocks)
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 4 * 32), nn.GELU(), nn.Linear(4 * 32, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class ACModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(3))
        self.head = nn.Linear(32, 32)


class RMSNorm(nn.Module):  # HF style: a raw parameter, no reset_parameters: the parent's _init_weights sets it
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(DIM))


class HFLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = RMSNorm()
        self.q, self.o = nn.Linear(DIM, DIM), nn.Linear(DIM, DIM, bias=False)
        self.up, self.down = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)


class HFStyle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM, padding_idx=0)
        self.layers = nn.ModuleList(HFLayer() for _ in range(2))
        self.norm = RMSNorm()
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.embed.weight  # tied
        self.apply(self._init_weights)  # what PreTrainedModel.post_init() does

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.02)
            module.weight.data[module.padding_idx].zero_()
        elif isinstance(module, RMSNorm):
            module.weight.data.fill_(1.0)


class Scale(nn.Module):  # a raw parameter that no init writes
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(DIM, DIM)
        self.gain = nn.Parameter(torch.ones(DIM))


def transformer() -> nn.Module:
    return nn.Transformer(d_model=DIM, nhead=2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
                          batch_first=True)


def wrap_ac(model: nn.Module) -> nn.Module:
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))  # as the pattern, before sharding
    model.head = checkpoint_wrapper(model.head)  # a wrapped module with its own reset_parameters
    return model


def units(model: nn.Module) -> list[nn.Module]:
    """The per-layer FSDP units, as a training script shards them."""
    if isinstance(model, nn.Transformer):
        return [*model.encoder.layers, *model.decoder.layers]
    return list(getattr(model, "blocks", None) or getattr(model, "layers", None) or [])


def build(make, wrap=lambda m: m) -> nn.Module:  # type: ignore[no-untyped-def]
    with torch.device("meta"):
        model = wrap(make())
    for unit in units(model):
        fully_shard(unit)
    fully_shard(model)
    model.to_empty(device=device)
    init_weights(model)
    return model


def problems(model: nn.Module, eager: nn.Module) -> list[str]:
    out = []
    eager_params = dict(eager.named_parameters())
    mine = {}
    for name, p in model.named_parameters():
        name = name.replace("_checkpoint_wrapped_module.", "")  # the wrapper's prefix; eager has no wrapper
        full = p.full_tensor().cpu()
        if not torch.equal(full, eager_params[name]):
            out.append(f"{name} differs from the eager init")
        mine[name] = p.to_local().detach().cpu()
    rows: list[dict[str, torch.Tensor]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(rows, mine)
    for name in mine:
        # Duplicated shards: two ranks hold the same local values (each rank drew its shard alike).
        if eager_params[name].unique().numel() > 2 and torch.equal(rows[0][name], rows[1][name]):
            out.append(f"{name}: rank 0 and rank 1 hold the same shard")
    return out


device = init()
failures = []
for label, make, wrap in [("nn.Transformer", transformer, lambda m: m), ("HF-style parent", HFStyle, lambda m: m),
                          ("activation-checkpointing model", ACModel, wrap_ac)]:
    torch.manual_seed(0)
    eager = make()
    try:
        found = problems(build(make, wrap), eager)
    except Exception as e:  # every rank takes this path alike: the init is the same everywhere
        found = [f"raised {type(e).__name__}: {e}"]
    failures += [f"{label}: {p}" for p in found]
    say(f"{label}: " + ("; ".join(found) if found else "every parameter equals the eager init, no shard repeated"))
try:
    build(Scale)
    failures.append("Scale.gain, written by no init, did not raise")
except TypeError as e:
    if "Scale.gain" not in str(e):
        failures.append(f"the TypeError does not name Scale.gain: {e}")
    say(f"a parameter no init writes: TypeError {e}")
assert not failures, "\n".join(failures)
shutdown()
