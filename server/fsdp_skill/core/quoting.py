"""Quoting what a caller passed, so an error message never echoes an argument of any size.

Every error that names the caller's input goes through `quote`: an agent's context is the scarce
resource, and a 100 KB argument echoed back whole costs it ~25K tokens for nothing.
"""

from __future__ import annotations

QUOTE_LIMIT = 200


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """repr() of value, cut to about `limit` characters, saying how long it was when cut.

    >>> quote("all_reduce")
    "'all_reduce'"
    >>> quote("x" * 1000, limit=10)
    "'xxxxxxxxxx…' (1000 characters)"
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    cut = repr(text[:limit])
    return f"{cut[:-1]}…{cut[-1]} ({len(text)} characters)"


def clip(text: str, limit: int) -> str:
    """text on one line, cut after a whole word to at most `limit` characters and marked with '…'.

    >>> clip("uses MyModule, defined in the globals of torch.distributed", 45)
    'uses MyModule, defined in the globals of…'
    """
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    cut = head.rsplit(" ", 1)[0] if " " in head else text[:limit]
    return cut + "…"


def table_cell(text: str | None, fold_whitespace: bool = False) -> str:
    r"""text for one cell of a markdown table: pipes escaped, on one line (newlines become spaces; with
    `fold_whitespace` every run of whitespace becomes one space, as API tables want).

    >>> table_cell("a|b\nc")
    'a\\|b c'
    >>> table_cell("a   b\n c", fold_whitespace=True)
    'a b c'
    """
    text = text or ""
    if fold_whitespace:
        return " ".join(text.split()).replace("|", "\\|")
    return text.replace("|", "\\|").replace("\n", " ")
