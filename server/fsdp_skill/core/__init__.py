"""core: what every stage shares — errors (one root class), paths, atomic writes, the catalog models, and
plain CommonMark (`core.markdown`: the one parser configuration and fence sizing, which `search` needs too).

Imports: the stdlib, pydantic and markdown-it-py (loaded only when a parser is asked for); no other
`fsdp_skill` subpackage. Kept free of eager imports so that `fsdp_skill.verify` (stdlib + torch) can use
`core.atomic`, `core.paths` and `core.errors` (all stdlib only) without pulling in pydantic.
"""
