"""convert: PyTorch's doc sources to CommonMark — MyST pages (`myst`, read as markdown-it-py tokens with
the MyST plugins by `myst_tokens`) and RST (`convert.rst`), classified by one Sphinx directive table
(`sphinx_directives`), with the markdown both emit and later stages reshape (`markdown`: admonitions,
block quotes, heading shifts). The plain parser and fence sizing are `core.markdown`.

Imports: `core` only. Knows nothing of torch, topics or the catalog's assembly.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["markdown", "myst", "myst_tokens", "rst"]
