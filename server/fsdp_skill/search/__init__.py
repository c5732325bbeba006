"""search: the FTS5 index over the catalog — query parsing, the indexed documents, building and opening
the index, ranking and snippets.

Imports: `core` only; never torch (the server serves from it).
"""
