"""convert: PyTorch's doc sources to CommonMark — MyST pages (markdown-it-py) and RST (`convert.rst`),
with the shared markdown helpers (the one parser, fences, admonitions, heading shifts).

Imports: `core` only. Knows nothing of torch, topics or the catalog's assembly.
"""
