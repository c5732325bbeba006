"""apidoc: the installed torch's public API as catalog entries — introspection, docstring sections,
doctests and what their examples need, deprecations, autodoc directives, API rendering and drift
(what the docs and the installed torch disagree on).

Imports: `convert` and `core`; imports torch lazily (only `regenerate` needs it).
"""

# The public face: the modules other stages may import (tests/test_layers.py holds them to it).
__all__ = ["api_model", "api_render", "autodoc", "drift", "introspect", "release_api"]
