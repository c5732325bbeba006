"""
name: forward-method-hooks
claim: A method other than forward (e.g. generate) skips FSDP2's unshard hooks and fails on the sharded root parameters until register_fsdp_forward_method registers it.
backs: pitfalls
world_size: 2
mutant: not-registered: `register_fsdp_forward_method(model, "generate")` -> `pass` => RuntimeError
mutant: forward-instead: `    sharded().generate(x)` -> `    sharded()(x)`

`generate` below uses the root's own `head` directly. Without registration the root's
parameters are still sharded DTensors when it runs and the call raises; registered with
`register_fsdp_forward_method(model, name)` it all-gathers them like forward does.
"""

import torch
from _dist import Stack, init, say, shutdown
from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method


class Generator(Stack):
    def generate(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x).argmax(-1)


def sharded() -> Generator:
    model = Generator()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


init()
x = torch.randn(4, 16)
try:
    sharded().generate(x)
    error = ""
except Exception as exc:  # noqa: BLE001 - DTensor mixing raises RuntimeError or AssertionError by version
    error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
assert error, "generate ran on sharded parameters without registration"
model = sharded()
register_fsdp_forward_method(model, "generate")
assert model.generate(x).shape == (4,)
say(f"unregistered generate raised {error}; registered, it ran")
shutdown()
