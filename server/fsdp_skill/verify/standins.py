"""Declared stand-ins and stated outcomes for page code: the one visible file of them.

**Stand-ins.** A tutorial block may use names its page never defines (the MNIST dataset, the `Net`
its GitHub repository holds, an import the page forgot). A block that lacks only names declared here
runs with these in their place and is reported "passed with stand-ins: NAME, ..." — never plain
"passed". Each stand-in says what it replaces. Nothing downloads: a dataset becomes a small random
one of the same shape.

**Stated outcomes.** Where a page states what its code does in prose ("both end up with 1.0") and
prints no output block, the statement is checked: `STATED[id]` quotes the page and gives the output
each rank prints when the statement holds, or a driver (code run after the block, on every rank, that
calls the page's helper and asserts the quoted statement). A helper no rank function of the page calls
(the ring all-reduce) is exercised only through its driver, which the row names.

Stdlib + torch only (the runner's rule); torch is imported when a stand-in is made, in a rank.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any


def _torch_optim() -> Any:
    import torch.optim

    return torch.optim


def _functional() -> Any:
    import torch.nn.functional

    return torch.nn.functional


class _Compose:
    def __init__(self, transforms: list[Any]) -> None:
        self.transforms = transforms

    def __call__(self, x: Any) -> Any:
        return x


class _Transforms:
    """torchvision.transforms stand-in: the random dataset below is already normalized tensors."""

    Compose = _Compose

    @staticmethod
    def ToTensor() -> None:
        return None

    @staticmethod
    def Normalize(mean: Any, std: Any) -> None:
        return None


class _Datasets:
    """torchvision.datasets stand-in: MNIST(...) is 256 random 1x28x28 images with labels 0-9, no download."""

    @staticmethod
    def MNIST(root: str, train: bool = True, download: bool = False, transform: Any = None) -> Any:
        import torch

        generator = torch.Generator().manual_seed(0)
        images = torch.randn(256, 1, 28, 28, generator=generator)
        labels = torch.randint(0, 10, (256,), generator=generator)
        return torch.utils.data.TensorDataset(images, labels)


def _mnist_net() -> Any:
    """The `Net` of the tutorial's repository (seba-1511/dist_tuto.pth, train_dist.py): the page uses it undefined."""
    import torch.nn.functional as F
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
            self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
            self.conv2_drop = nn.Dropout2d()
            self.fc1 = nn.Linear(320, 50)
            self.fc2 = nn.Linear(50, 10)

        def forward(self, x: Any) -> Any:
            x = F.relu(F.max_pool2d(self.conv1(x), 2))
            x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
            x = x.view(-1, 320)
            x = F.relu(self.fc1(x))
            x = F.dropout(x, training=self.training)
            return F.log_softmax(self.fc2(x), dim=1)

    return Net


@dataclass(frozen=True)
class StandIn:
    replaces: str
    make: Any


STANDINS: dict[str, StandIn] = {
    "datasets": StandIn(
        "torchvision.datasets (MNIST -> 256 random 1x28x28 samples, nothing downloaded)", lambda: _Datasets
    ),
    "transforms": StandIn(
        "torchvision.transforms (identity: the stand-in dataset is already tensors)", lambda: _Transforms
    ),
    "Net": StandIn("the tutorial repository's MNIST Net (not on the page)", _mnist_net),
    "Random": StandIn("random.Random (the page omits `from random import Random`)", lambda: random.Random),
    "ceil": StandIn("math.ceil (the page omits `from math import ceil`)", lambda: math.ceil),
    "optim": StandIn("torch.optim (the page omits `import torch.optim as optim`)", _torch_optim),
    "F": StandIn("torch.nn.functional (the page omits `import torch.nn.functional as F`)", _functional),
}


def make(name: str) -> Any:
    return STANDINS[name].make()


@dataclass(frozen=True)
class Stated:
    """What a page states about a block, and how it is checked."""

    quote: str  # the page's own words
    output_by_rank: dict[int, str] = field(default_factory=dict)  # what each rank prints when it holds
    driver: str | None = None  # code run after the block on every rank; raises when the statement is false
    world_size: int | None = None


_P2P_OUTPUT = {r: f"Rank  {r}  has data  tensor(1.)" for r in (0, 1)}

STATED: dict[str, Stated] = {
    "getting-started.md#point-to-point-communication:1": Stated(
        "process 0 increments the tensor and sends it to process 1 so that they both end up with 1.0", _P2P_OUTPUT
    ),
    "getting-started.md#point-to-point-communication:2": Stated(
        "after req.wait() has been executed we are guaranteed that the communication took place, and that the value "
        "stored in tensor[0] is 1.0",
        {
            0: "Rank 0 started sending\nRank  0  has data  tensor(1.)",
            1: "Rank 1 started receiving\nRank  1  has data  tensor(1.)",
        },
    ),
    "getting-started.md#collective-communication:1": Stated(
        "in order to obtain the sum of all tensors on all processes, we can use the dist.all_reduce(tensor, op, group) "
        "collective",
        {r: f"Rank  {r}  has data  tensor(2.)" for r in (0, 1)},
    ),
    "getting-started.md#our-own-ring-allreduce:1": Stated(
        "It takes a recv tensor and will store the sum of all send tensors in it",
        driver=(
            "import torch as _t\n"
            "_send = _t.tensor([float(dist.get_rank() + 1), 10.0])\n"
            "_recv = _t.zeros(2)\n"
            "allreduce(_send, _recv)\n"
            "_n = dist.get_world_size()\n"
            "_want = _t.tensor([_n * (_n + 1) / 2, 10.0 * _n])\n"
            "assert _t.equal(_recv, _want), "
            "f'recv holds {_recv.tolist()}, the sum of all send tensors is {_want.tolist()}'\n"
        ),
        world_size=3,
    ),
    "getting-started.md#distributed-training:4": Stated(
        "simply takes in a model and averages its gradients across the whole world",
        driver=(
            "import torch as _t\n"
            "_m = _t.nn.Linear(2, 1)\n"
            "for _p in _m.parameters():\n"
            "    _p.grad = _t.full_like(_p, float(dist.get_rank()))\n"
            "average_gradients(_m)\n"
            "_mean = sum(range(dist.get_world_size())) / dist.get_world_size()\n"
            "for _p in _m.parameters():\n"
            "    assert _t.allclose(_p.grad, _t.full_like(_p, _mean)), "
            "f'grad {_p.grad.tolist()} is not the mean {_mean}'\n"
        ),
    ),
}
