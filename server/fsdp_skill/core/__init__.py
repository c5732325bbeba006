"""core: what every stage shares — errors (one root class), paths, atomic writes, the catalog models.

Imports: the stdlib and pydantic only; no other `fsdp_skill` subpackage. Kept free of eager imports so
that `fsdp_skill.verify` (stdlib + torch) can use `core.atomic`, `core.paths` and `core.errors` (all stdlib
only) without pulling in pydantic.
"""
