"""build: the `regenerate` pipeline — the topic map, assembling converted pages into topics, rendering the
reference files, markdown checks, the patterns' catalog rows, and `pipeline` (build in memory, check, swap in).

Imports: `apidoc`, `convert`, `search`, `upstream`, `core`, and `verify.patterns` (the pattern header parser).
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["pipeline", "render"]
