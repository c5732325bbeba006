"""core: what every stage shares — errors (one root class), paths, atomic writes and scratch names, quoting
of user input in messages, the server's limits (`core.limits`: name length, verify runs, session idle
time), the catalog models, the shared vocabulary (document kinds, example statuses), the installed
torch's version, a closed stdout (`core.streams`: `| head` ends a command quietly), and plain CommonMark
(`core.markdown`: the one parser configuration and fence sizing, which `search` needs too).

Imports: the stdlib, pydantic and markdown-it-py (loaded only when a parser is asked for); no other
`fsdp_skill` subpackage. Kept free of eager imports so that `fsdp_skill.verify` (stdlib + torch) can use
`core.atomic`, `core.scratch`, `core.paths`, `core.errors`, `core.streams` and `core.vocabulary` (all stdlib
only) without pulling in pydantic.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = [
    "api_history", "atomic", "catalog", "errors", "files", "limits", "markdown", "paths", "quoting", "scratch",
    "streams", "torch_version", "vocabulary",
]
