"""convert: PyTorch's doc sources to CommonMark — MyST pages (markdown-it-py) and RST (`convert.rst`),
with the shared markdown helpers (the one parser, fences, admonitions, heading shifts).

Imports: `core` only. Knows nothing of torch, topics or the catalog's assembly.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["markdown", "myst", "rst"]
