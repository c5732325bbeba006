"""
name: debug-env-read-at-import
claim: TORCH_DISTRIBUTED_DEBUG is read at import torch; set afterwards (even before init_process_group) it stays OFF unless dist.set_debug_level_from_env() is called.
backs: pitfalls
world_size: 1

`torch/distributed/__init__.py` calls `set_debug_level_from_env()` once, at import. A
script that sets the variable after `import torch` gets DebugLevel.OFF, also after
init_process_group; calling `dist.set_debug_level_from_env()` applies it. Set it (and
NCCL_DEBUG, TORCH_FR_BUFFER_SIZE) in the launch environment.
"""

import os

import torch.distributed as dist
from _dist import say, shutdown

assert "TORCH_DISTRIBUTED_DEBUG" not in os.environ or os.environ["TORCH_DISTRIBUTED_DEBUG"] == "OFF"
os.environ["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"  # too late: torch is imported
assert dist.get_debug_level() == dist.DebugLevel.OFF
dist.init_process_group("gloo")
assert dist.get_debug_level() == dist.DebugLevel.OFF, "init_process_group read TORCH_DISTRIBUTED_DEBUG"
dist.set_debug_level_from_env()
assert dist.get_debug_level() == dist.DebugLevel.DETAIL
say("set after import: OFF, still OFF after init_process_group; DETAIL after set_debug_level_from_env()")
shutdown()
