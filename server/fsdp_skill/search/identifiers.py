"""Identifiers in text: what counts as code-like, and its parts (all_reduce → all, reduce, allreduce).

Shared by the index build (which stores identifier parts in their own columns) and by query parsing
(which expands the user's words the same way), so both sides always agree on what a "part" is.
"""

from __future__ import annotations

import re

from fsdp_skill.search.vocabulary import vocabulary

# Words and dotted paths as users write them: `dist.all_reduce`, `MixedPrecisionPolicy`, `fsdp2`.
WORD = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*")
# One camelCase hump, an acronym run (before a hump or at the end), or digits.
_HUMP = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def is_identifier(word: str) -> bool:
    """True for code-like words: snake_case, dotted paths, CamelCase, SCREAMING_CASE, DTensor."""
    if "_" in word or "." in word:
        return True
    # An uppercase letter after the first character (MixedPrecisionPolicy, DTensor, FSDPModule).
    return any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)


def identifier_parts(word: str) -> list[str]:
    """Lowercase parts of an identifier plus its glued form: all_reduce → all, reduce, allreduce.

    Dots separate path components; each component is split on `_` and camelCase humps. The glued
    form lets `allreduce` (how people type it) meet `all_reduce` (how the API spells it).
    """
    out: list[str] = []
    for component in word.split("."):
        if not is_identifier(component):
            continue
        humps = [m.group(0).lower() for piece in component.split("_") for m in _HUMP.finditer(piece)]
        out.extend(humps)
        if len(humps) > 1:
            out.append("".join(humps))
    return out


def name_words(name: str) -> list[str]:
    """The words of an identifier without the glued form: get_world_size → get, world, size."""
    parts = identifier_parts(name)
    return parts[:-1] if len(parts) > 1 else parts


def body_identifier_parts(text: str) -> str:
    """The identifier parts of every code-like word in a text, space-joined (for the *_parts columns)."""
    parts: list[str] = []
    for match in WORD.finditer(text):
        word = match.group(0)
        if is_identifier(word):
            parts.extend(identifier_parts(word))
    return " ".join(parts)


def resolve_prefix(word: str) -> str:
    """`dist.all_reduce` → `torch.distributed.all_reduce`; other words unchanged."""
    lower = word.lower()
    for prefix, full in vocabulary().prefixes.items():
        if lower.startswith(prefix) and len(word) > len(prefix):
            return full + word[len(prefix) :]
    return word
