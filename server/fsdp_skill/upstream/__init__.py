"""upstream: the declared upstream sources (assets/sources.toml), their download (httpx) or seeding from a
snapshot folder, and the atomic update of the committed cache under upstream/ with its manifests.

Imports: `core` only.
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["fetch", "releases", "sources"]
