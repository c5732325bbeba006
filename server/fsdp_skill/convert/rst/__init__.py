"""convert.rst: reStructuredText (docstrings, tutorials) to CommonMark — the converter, inline roles,
blocks, tables and directives.

Imports: `convert` siblings and `core` only.
"""
