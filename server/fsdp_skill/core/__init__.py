"""core: what every stage shares — errors (one root class), paths, atomic writes, the catalog models, the
shared vocabulary (document kinds, example statuses) and the installed torch's version.

Imports: the stdlib and pydantic only; no other `fsdp_skill` subpackage. Kept free of eager imports so
that `fsdp_skill.verify` (stdlib + torch) can use the stdlib-only modules (`atomic`, `errors`,
`vocabulary`) without pulling in pydantic.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["atomic", "catalog", "errors", "paths", "torch_version", "vocabulary"]
