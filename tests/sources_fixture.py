"""The repository tables of a small assets/sources.toml, shared by the fetch and sources tests."""

REPOS_TOML = """
[repos."pytorch/pytorch"]
dir = "pytorch"
pinned_to_torch = true
licence = "BSD-3-Clause"
docs_root = "docs/source"
docs_url = "https://docs.pytorch.org/docs/{version}/{page}.html"

[repos."pytorch/tutorials"]
dir = "pytorch-tutorials"
default_ref = "main"
licence = "BSD-3-Clause"
docs_url = "https://docs.pytorch.org/tutorials/{page}.html"
"""
