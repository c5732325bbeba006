"""convert.rst: reStructuredText (docstrings, tutorials) to CommonMark — the converter, inline roles,
blocks, tables and directives.

Imports: `convert` siblings and `core` only.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["blocks", "converter", "inline"]
