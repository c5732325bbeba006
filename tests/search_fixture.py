"""A small but realistic repository tree for index/server/CLI tests: references, catalog, a pattern.

`make_tree(root)` writes references/*.md, references/catalog.json (sections derived from the files'
headings, so line numbers are real), a pattern script, references/verification.json and the index.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fsdp_skill.core.catalog import (
    ApiEntry,
    Catalog,
    Deprecation,
    DoctestStep,
    Example,
    Parameter,
    Pattern,
    Reference,
    Section,
    save_catalog,
)
from fsdp_skill.search.index import build_index

FSDP2_MD = """\
# FSDP2: fully_shard

Torch 2.13.0. Sources: pytorch/pytorch docs/source/distributed.fsdp.fully_shard.md (BSD-3-Clause).

## Overview

PyTorch FSDP2 provides a fully sharded data parallelism implementation with per-parameter sharding.
Parameters become DTensor objects sharded on dim-0 across the data parallel workers.

## Mixed precision

Pass a `MixedPrecisionPolicy` as `mp_policy` to run forward and backward in bfloat16 while keeping
float32 sharded parameters for the optimizer step.

```python
policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
for layer in model.layers:
    fully_shard(layer, mp_policy=policy)
fully_shard(model, mp_policy=policy)
```

### Reduce dtype

Gradients are reduced in `reduce_dtype`; keep it float32 for numerically sensitive models.

## Gradient accumulation

Call `set_requires_gradient_sync(False)` on the root module for the micro-batches that should
skip the reduce-scatter, then turn it back on for the last one.

## torch.distributed.fsdp.fully_shard

Apply fully sharded data parallelism to a module.

## torch.distributed.fsdp.MixedPrecisionPolicy

Mixed precision settings for fully_shard.
"""

COLLECTIVES_MD = """\
# Collective communication

## Overview

Collectives run on every rank of a process group; every rank must call them in the same order,
otherwise the job hangs.

## Asynchronous work

With `async_op=True` a collective returns a `Work` handle; call `wait()` before reading the result.

```python
work = dist.all_reduce(t, async_op=True)
work.wait()
```

## torch.distributed.all_reduce

Reduces the tensor data across all machines.

## torch.distributed.reduce

Reduces the tensor data across all machines, only the destination rank gets the result.
"""

DEBUGGING_MD = """\
# Debugging distributed jobs

## Environment variables

Set `TORCH_DISTRIBUTED_DEBUG=DETAIL` to check that collectives match across ranks, and
`NCCL_DEBUG=INFO` to see what NCCL is doing.

## Hangs and timeouts

A hang usually means one rank skipped a collective. `monitored_barrier` names the rank that
did not arrive. The flight recorder dumps the last collectives of every rank.

## Watchdog log lines

""" + "\n".join(f"Line {i}: filler text about timeouts and watchdogs for paging tests." for i in range(200)) + """

```python
# a long code block that straddles a page boundary
""" + "\n".join(f"x_{i} = {i}" for i in range(300)) + """
```

## After the code

The end.
"""

PATTERN_PY = '''\
"""FSDP2 training loop on gloo: meta-device init, reset_parameters, loss goes down."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

# Build on the meta device so no rank ever holds the full model.
'''


def _sections(reference: str, text: str) -> list[Section]:
    sections: list[Section] = []
    lines = text.splitlines()
    heads = [(i, m) for i, line in enumerate(lines) if (m := re.match(r"^(#{1,6}) (.+)$", line))]
    in_fence = False
    fence_lines = set()
    for i, line in enumerate(lines):
        if line.startswith("```"):
            in_fence = not in_fence
            fence_lines.add(i)
        elif in_fence:
            fence_lines.add(i)
    heads = [(i, m) for i, m in heads if i not in fence_lines]
    trail: list[tuple[int, str]] = []
    for n, (i, m) in enumerate(heads):
        level, title = len(m.group(1)), m.group(2).strip()
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        trail = [(lv, t) for lv, t in trail if lv < level]
        anchor = title if title.startswith("torch.") else re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        sections.append(Section(
            id=f"{reference}#{anchor}", reference=reference, anchor=anchor, title=title, level=level,
            breadcrumb=[t for _, t in trail], markdown="\n".join(lines[i:end]).strip() + "\n",
            line=i + 1, url=f"https://docs.pytorch.org/docs/2.13/{reference.removesuffix('.md')}.html#{anchor}",
        ))
        trail.append((level, title))
    return sections


def _api() -> list[ApiEntry]:
    return [
        ApiEntry(
            qualified_name="torch.distributed.all_reduce", kind="function", module="torch.distributed",
            signature="torch.distributed.all_reduce(tensor, op=<RedOpType.SUM: 0>, group=None, async_op=False)",
            summary="Reduces the tensor data across all machines in a way that all get the final result.",
            description="After the call `tensor` is going to be bitwise identical in all processes.",
            parameters=[Parameter(name="tensor", type="Tensor", description="Input and output of the collective."),
                        Parameter(name="op", type="optional", description="One of the values from ReduceOp.")],
            returns="Async work handle, if async_op is set to True.",
            examples=["torch.distributed.all_reduce#1", "torch.distributed.all_reduce#2"],
            reference="collectives.md", anchor="torch.distributed.all_reduce",
            url="https://docs.pytorch.org/docs/2.13/distributed.html#torch.distributed.all_reduce",
        ),
        ApiEntry(
            qualified_name="torch.distributed.reduce", kind="function", module="torch.distributed",
            signature="torch.distributed.reduce(tensor, dst=None, op=<RedOpType.SUM: 0>, group=None)",
            summary="Reduces the tensor data across all machines.",
            reference="collectives.md", anchor="torch.distributed.reduce",
            url="https://docs.pytorch.org/docs/2.13/distributed.html#torch.distributed.reduce",
        ),
        ApiEntry(
            qualified_name="torch.distributed.nn.functional.all_reduce", kind="function",
            module="torch.distributed.nn.functional",
            signature="torch.distributed.nn.functional.all_reduce(tensor, op=ReduceOp.SUM, group=None)",
            summary="Reduces the tensor data across all machines, with autograd support.",
            reference="collectives.md", anchor="torch.distributed.nn.functional.all_reduce",
        ),
        ApiEntry(
            qualified_name="torch.distributed.reduce_scatter_tensor", kind="function", module="torch.distributed",
            signature="torch.distributed.reduce_scatter_tensor(output, input, op=<RedOpType.SUM: 0>, group=None)",
            summary="Reduces, then scatters a tensor to all ranks in a group.",
            deprecation=Deprecation(message="reduce_scatter_tensor warns with a FutureWarning in 2.13",
                                    replacement="torch.distributed.reduce_scatter_single"),
            reference="collectives.md", anchor="torch.distributed.reduce_scatter_tensor",
        ),
        ApiEntry(
            qualified_name="torch.distributed.fsdp.fully_shard", kind="function", module="torch.distributed.fsdp",
            signature="torch.distributed.fsdp.fully_shard(module, *, mesh=None, reshard_after_forward=True, "
                      "mp_policy=MixedPrecisionPolicy(), offload_policy=OffloadPolicy())",
            summary="Apply fully sharded data parallelism (FSDP) to module, sharding parameters across ranks.",
            description="Call it on submodules bottom-up, then on the root module.\n\n```python\n"
                        "for layer in model.layers:\n    fully_shard(layer)\nfully_shard(model)\n```",
            parameters=[Parameter(name="reshard_after_forward", type="bool | int", default="True",
                                  description="Free the unsharded parameters after forward.")],
            reference="fsdp2.md", anchor="torch.distributed.fsdp.fully_shard",
            url="https://docs.pytorch.org/docs/2.13/distributed.fsdp.fully_shard.html#torch.distributed.fsdp.fully_shard",
            aliases=["torch.distributed._composable.fsdp.fully_shard"],
        ),
        ApiEntry(
            qualified_name="torch.distributed.fsdp.MixedPrecisionPolicy", kind="class", module="torch.distributed.fsdp",
            signature="torch.distributed.fsdp.MixedPrecisionPolicy(param_dtype=None, reduce_dtype=None, "
                      "output_dtype=None, cast_forward_inputs=True)",
            summary="Configures mixed precision for fully_shard: parameter, reduction and output dtypes.",
            reference="fsdp2.md", anchor="torch.distributed.fsdp.MixedPrecisionPolicy",
        ),
        ApiEntry(
            qualified_name="torch.distributed.fsdp.FullyShardedDataParallel", kind="class",
            module="torch.distributed.fsdp",
            signature="torch.distributed.fsdp.FullyShardedDataParallel(module, process_group=None, ...)",
            summary="A wrapper for sharding module parameters across data parallel workers (FSDP1).",
            reference="fsdp2.md", anchor="fsdp1",
        ),
        ApiEntry(
            qualified_name="torch.distributed.init_process_group", kind="function", module="torch.distributed",
            signature="torch.distributed.init_process_group(backend=None, init_method=None, timeout=None, "
                      "world_size=-1, rank=-1)",
            summary="Initialize the default distributed process group.",
            reference="collectives.md", anchor="init",
        ),
    ]


def _examples() -> list[Example]:
    code1 = (
        "tensor = torch.arange(2, dtype=torch.int64) + 1 + 2 * rank\ndist.all_reduce(tensor, op=ReduceOp.SUM)\ntensor"
    )
    return [
        Example(
            id="torch.distributed.all_reduce#1",
            symbol="torch.distributed.all_reduce",
            reference="collectives.md",
            anchor="torch.distributed.all_reduce",
            code=code1,
            world_size=2,
            steps=[
                DoctestStep(source="tensor = torch.arange(2, dtype=torch.int64) + 1 + 2 * rank"),
                DoctestStep(source="dist.all_reduce(tensor, op=ReduceOp.SUM)"),
                DoctestStep(source="tensor", expected_by_rank={0: "tensor([4, 6])", 1: "tensor([4, 6])"}),
            ],
        ),
        Example(
            id="torch.distributed.all_reduce#2",
            symbol="torch.distributed.all_reduce",
            reference="collectives.md",
            anchor="torch.distributed.all_reduce",
            code="tensor = torch.tensor([1+1j, 2+2j])\ndist.all_reduce(tensor)",
            world_size=2,
            steps=[DoctestStep(source="dist.all_reduce(tensor)")],
        ),
    ]


def make_catalog(root: Path) -> Catalog:
    refs_dir = root / "references"
    refs_dir.mkdir(parents=True, exist_ok=True)
    files = {"fsdp2.md": FSDP2_MD, "collectives.md": COLLECTIVES_MD, "debugging.md": DEBUGGING_MD}
    references, sections = [], []
    for name, text in files.items():
        (refs_dir / name).write_text(text, encoding="utf-8")
        title = text.splitlines()[0].lstrip("# ")
        references.append(Reference(name=name, title=title, description=f"{title}: what and when.",
                                    lines=text.count("\n"), tokens=len(text) // 4))
        sections.extend(_sections(name, text))
    pattern_file = root / "assets" / "patterns" / "fsdp2_train.py"
    pattern_file.parent.mkdir(parents=True, exist_ok=True)
    pattern_file.write_text(PATTERN_PY, encoding="utf-8")
    return Catalog(
        torch_version="2.13.0",
        ref="v2.13.0",
        references=references,
        sections=sections,
        api=_api(),
        examples=_examples(),
        patterns=[
            Pattern(
                name="fsdp2-train",
                title="FSDP2 training loop with meta-device init",
                summary="Shard a model with fully_shard, initialise it on the meta device, train; loss goes down.",
                file="assets/patterns/fsdp2_train.py",
                tags=["fsdp2", "meta-device", "training"],
                launch="torchrun --nproc-per-node 2 assets/patterns/fsdp2_train.py",
            )
        ],
    )


def make_tree(root: Path) -> Catalog:
    """Write the whole fixture tree under root and build its index; returns the catalog."""
    catalog = make_catalog(root)
    save_catalog(catalog, root / "references" / "catalog.json")
    (root / "SKILL.md").write_text("---\nname: pytorch-fsdp\ndescription: test skill\n---\n# Skill\n", encoding="utf-8")
    (root / "references" / "verification.json").write_text(json.dumps({
        "torch_version": "2.13.0", "date": "2026-11-01",
        "results": [{"name": "torch.distributed.all_reduce#1", "backend": "gloo", "world_size": 2, "status": "passed",
                     "reason": None, "seconds": 0.4, "warnings": []}],
    }), encoding="utf-8")
    build_index(catalog, root / "references" / "index.sqlite", root=root)
    return catalog
