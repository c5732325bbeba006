"""
name: deprecated-collectives
claim: dist.all_gather_into_tensor and dist.reduce_scatter_tensor warn FutureWarning since torch 2.13; dist.all_gather_single and dist.reduce_scatter_single (new in 2.13) give the same results without a warning.
backs: what-changed
world_size: 2
mutant: old-gather-name: `run(dist.all_gather_single, new_gather, x)` -> `run(dist.all_gather_into_tensor, new_gather, x)`
mutant: old-scatter-name: `run(dist.reduce_scatter_single, new_rs, x.clone())` -> `run(dist.reduce_scatter_tensor, new_rs, x.clone())`

The two collectives most training code calls by their pre-2.13 names. Each old call
warns (a `-W error` run or a warnings-as-errors test suite dies on it); the replacement
takes the same (output, input) arguments and fills the same output. Both are new in 2.13: torch
2.12.1's distributed_c10d.py has neither the `*_single` functions nor the warnings (read from its
wheel's source); code that must run on older torch keeps the old names there.
"""

import warnings

import torch
import torch.distributed as dist
from _dist import init, say, shutdown

init()
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.arange(4.0) + 10 * rank


def run(call: object, out: torch.Tensor, inp: torch.Tensor) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(out, inp)  # type: ignore[operator]
    return [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]


old_gather, new_gather = torch.empty(4 * world), torch.empty(4 * world)
old_warned = run(dist.all_gather_into_tensor, old_gather, x)
new_warned = run(dist.all_gather_single, new_gather, x)
assert old_warned and "all_gather_single" in old_warned[0] and not new_warned, (old_warned, new_warned)
assert torch.equal(old_gather, new_gather)

old_rs, new_rs = torch.empty(4 // world), torch.empty(4 // world)
old_warned = run(dist.reduce_scatter_tensor, old_rs, x.clone())
new_warned = run(dist.reduce_scatter_single, new_rs, x.clone())
assert old_warned and "reduce_scatter_single" in old_warned[0] and not new_warned, (old_warned, new_warned)
assert torch.equal(old_rs, new_rs)
say(f"all_gather_into_tensor / reduce_scatter_tensor warn ({old_warned[0][:60]}...); the *_single replacements "
    "give equal tensors, no warning")
shutdown()
