"""build: the `regenerate` pipeline — the topic map, assembly of converted pages into topic references,
rendering, markdown checks, the catalog's patterns, and writing references/ (with the search index).

Imports: `apidoc`, `convert`, `search`, `upstream`, `core`, and `verify.patterns` (the stdlib header
parser the runner shares).
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["pattern_torch", "pipeline", "render"]
