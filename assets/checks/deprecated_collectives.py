"""
name: deprecated-collectives
claim: dist.all_gather_single and dist.reduce_scatter_single (new in 2.13) give the same results as dist.all_gather_into_tensor and dist.reduce_scatter_tensor; the old names warn FutureWarning on 2.13-2.14 only: on 2.15 they are plain aliases again, no warning.
backs: what-changed
world_size: 2
mutant: warns-on-215-too: `WARNS = (2, 13) <= torch_release() < (2, 15)` -> `WARNS = (2, 13) <= torch_release() < (2, 16)`
mutant: old-name-warns: `old_warned = run(dist.all_gather_into_tensor, old_gather, x)` -> `old_warned = run(dist._all_gather_base, old_gather, x)`
mutant: other-result: `old_warned = run(dist.reduce_scatter_tensor, old_rs, x.clone())` -> `old_warned = run(dist.reduce_scatter_tensor, old_rs, x + 1)`

The two collectives most training code calls by their pre-2.13 names. torch 2.13 renamed them
(`*_single`) and made each old call warn (a `-W error` run or a warnings-as-errors test suite dies
on it); torch 2.15 turned the old names back into plain aliases ("kept for backward
compatibility", no `@deprecated`). On every release that has the new names, both spellings take
the same (output, input) arguments and fill the same output. Before 2.13 the `*_single` names do
not exist: the check skips there, and code that must run on older torch keeps the old names.
"""

import warnings

import torch
import torch.distributed as dist
from _dist import init, say, shutdown, skip_unless, torch_release

skip_unless(hasattr(dist, "all_gather_single"), "dist.all_gather_single and dist.reduce_scatter_single are new in 2.13")
WARNS = (2, 13) <= torch_release() < (2, 15)  # 2.13-2.14 warn; 2.15 made the old names plain aliases
init()
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.arange(4.0) + 10 * rank


def run(call: object, out: torch.Tensor, inp: torch.Tensor) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(out, inp)  # type: ignore[operator]
    return [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))]


def expect(old_warned: list[str], new_warned: list[str], new_name: str) -> None:
    assert not new_warned, new_warned
    if WARNS:
        assert old_warned and new_name in old_warned[0], old_warned
    else:
        assert not old_warned, f"the old name warned on torch {torch.__version__}: {old_warned}"


old_gather, new_gather = torch.empty(4 * world), torch.empty(4 * world)
old_warned = run(dist.all_gather_into_tensor, old_gather, x)
new_warned = run(dist.all_gather_single, new_gather, x)
expect(old_warned, new_warned, "all_gather_single")
assert torch.equal(old_gather, new_gather)

old_rs, new_rs = torch.empty(4 // world), torch.empty(4 // world)
old_warned = run(dist.reduce_scatter_tensor, old_rs, x.clone())
new_warned = run(dist.reduce_scatter_single, new_rs, x.clone())
expect(old_warned, new_warned, "reduce_scatter_single")
assert torch.equal(old_rs, new_rs)
say(f"torch {torch.__version__}: the old names {'warn' if WARNS else 'do not warn'}; the *_single names give equal "
    "tensors, no warning")
shutdown()
