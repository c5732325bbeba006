"""search: the FTS5 index over the catalog — query parsing, the indexed documents, building and opening
the index, ranking and snippets.

Imports: `core` only; never torch (the server serves from it).
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["freshness", "identifiers", "index", "query", "ranking", "semantic", "snippets", "vocabulary"]
