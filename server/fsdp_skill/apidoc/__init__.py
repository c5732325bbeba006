"""apidoc: the installed torch's public API as catalog entries — introspection, docstring sections,
doctests and what their examples need, deprecations, autodoc directives, API rendering and drift
(what the docs and the installed torch disagree on).

Imports: `convert` and `core`; imports torch lazily (only `regenerate` needs it).
"""
