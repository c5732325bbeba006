"""Helpers the claim checks share: process-group setup and teardown, and a small block model.

Not a check itself (the runner skips `_*.py`). A check imports it as `from _dist import ...`: torchrun
runs the check as a script, so this folder is first on sys.path.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn as nn


def init(backend: str | None = None) -> torch.device:
    """nccl + cuda:LOCAL_RANK when DIST_BACKEND=nccl (or CUDA is there and none is set), else gloo + cpu."""
    backend = backend or os.environ.get("DIST_BACKEND") or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def shutdown(code: int = 0) -> None:
    """Destroy the group; on gloo leave with os._exit (pitfall 18: the abort at interpreter exit).

    os._exit skips atexit handlers, so first do what they would: flush logging's handlers (a buffered
    record is lost otherwise) and stdout/stderr (block-buffered when piped, as under a launcher)."""
    gloo = dist.is_initialized() and dist.get_backend() == "gloo"
    if dist.is_initialized():
        dist.destroy_process_group()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    if gloo:
        os._exit(code)
    sys.exit(code)


# The runner (fsdp_skill.verify.patterns.SKIP_MARKER) reads this line: the row is skipped, with the reason.
SKIP_MARKER = "SKIP-ON-THIS-TORCH:"


def torch_release() -> tuple[int, int]:
    """(major, minor) of the running torch: 2.15.0+cu132 -> (2, 15)."""
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def skip_unless(condition: bool, reason: str) -> None:
    """End the check as skipped when `condition` is false: this torch lacks what the claim is about (a name
    that does not exist there yet). Call it before init(); every rank prints the marker and exits 0."""
    if not condition:
        print(f"{SKIP_MARKER} {reason} (torch {torch.__version__})", flush=True)
        sys.exit(0)


def say(message: str) -> None:
    """Print once (rank 0), so the runner's output shows what was measured."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(message, flush=True)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.lin = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.lin(self.norm(x))


class Stack(nn.Module):
    """inp -> blocks -> head: the shape of a transformer, small enough for a few CPU steps."""

    def __init__(self, dim: int = 16, blocks: int = 2) -> None:
        super().__init__()
        self.inp = nn.Linear(dim, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(blocks))
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batches(rank: int, dim: int = 16, n: int = 8, seed: int = 100) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Endless per-rank (x, y) batches from a fixed teacher: each rank is one data-parallel replica."""
    teacher = torch.randn(dim, dim, generator=torch.Generator().manual_seed(1)) / dim**0.5
    gen = torch.Generator().manual_seed(seed + rank)
    while True:
        x = torch.randn(n, dim, generator=gen)
        yield x, torch.tanh(x @ teacher)
