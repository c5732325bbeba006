"""The Sphinx directive vocabulary, one table for both dialects: what each directive name means to us.

An RST `.. name::` block and a MyST ```` ```{name} ```` / `:::{name}` fence name the same Sphinx
directives, so `convert.rst.directives` and `convert.myst` classify them here and differ only in how
they convert a body. Every name falls in one class: rendered (admonitions, version notes, code,
math, images, tables, containers, Python-domain descriptions), handed to the autodoc hook (autodoc
and module-tracking directives), dropped silently (no meaning offline: toctree, raw, only,
include, role…), or unknown (the converter warns). The docutils test oracle registers exactly
these names, so the table is also what "a directive we know" means in the tests.
"""

from __future__ import annotations

import enum

__all__ = [
    "ADMONITION_TITLES", "AUTODOC", "CODE_LANGUAGES", "MODULE_TRACKING", "VERSION_NOTE_TITLES", "Kind", "kind_of",
    "known_directives", "short_name",
]


class Kind(enum.Enum):
    ADMONITION = "admonition"  # quoted under a label
    VERSION_NOTE = "version note"  # quoted under "New in version X"
    CODE = "code"  # a fenced block
    MATH = "math"  # a ```math block
    IMAGE = "image"  # an image (figure: with its caption)
    TABLE = "table"  # list-table, csv-table: a pipe table
    AUTODOC = "autodoc"  # the docstrings of the installed torch, through the hook
    MODULE = "module"  # sets the current module for autodoc names; renders nothing
    EVAL_RST = "eval-rst"  # MyST's RST island
    CONTAINER = "container"  # its body, as if the directive were not there
    TITLED_CONTAINER = "titled container"  # its argument in bold, then its body
    DESCRIPTION = "description"  # a Python-domain description: the name in bold code, then its body
    DROPPED = "dropped"  # nothing


ADMONITION_TITLES = {
    "note": "Note", "warning": "Warning", "tip": "Tip", "important": "Important", "seealso": "See also",
    "attention": "Attention", "danger": "Danger", "hint": "Hint", "caution": "Caution", "error": "Error",
}
VERSION_NOTE_TITLES = {
    "versionadded": "New in version", "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
}
# The fence language of each code directive; None: the directive's argument names it.
CODE_LANGUAGES: dict[str, str | None] = {
    "code-block": None, "code": None, "sourcecode": None, "testcode": "python", "doctest": "python",
    "testoutput": "text", "parsed-literal": "text", "code-cell": "python", "ipython": "python",
}
AUTODOC = frozenset({
    "automodule", "autoclass", "autofunction", "automethod", "autoattribute", "autodata", "autosummary",
    "autoexception", "autoproperty", "autodecorator",
})
# Sphinx directives that set the current module; the autodoc hook sees them all as "currentmodule".
MODULE_TRACKING = frozenset({"currentmodule", "py:currentmodule", "module", "py:module"})
_DROPPED = frozenset({
    "toctree", "raw", "role", "only", "include", "meta", "highlight", "contents", "index", "sectionauthor",
    "codeauthor", "moduleauthor", "testsetup", "testcleanup", "tabularcolumns", "default-role",
    "default-domain", "cssclass", "rst-class", "galleryitem", "customcarditem", "customcalloutitem",
    "footbibliography", "minigallery", "todo", "spelling:word-list", "literalinclude", "program",
    "tags", "jupyter-execute", "tableofcontents",
})
_CONTAINERS = frozenset({
    "container", "grid", "grid-item", "tab-set", "compound", "hlist", "glossary", "class-card", "card-carousel", "div",
})
_TITLED_CONTAINERS = frozenset({
    "grid-item-card", "card", "tab-item", "tab", "topic", "sidebar", "rubric", "dropdown", "table",
    "centered",
})
_DESCRIPTIONS = frozenset({
    "class", "function", "method", "attribute", "data", "exception", "decorator", "staticmethod", "classmethod",
    "property", "attr", "module-attribute", "envvar", "option", "describe", "object",
})

_KINDS: dict[str, Kind] = {
    **dict.fromkeys(ADMONITION_TITLES, Kind.ADMONITION),
    "admonition": Kind.ADMONITION,  # the generic one: its argument is the label
    **dict.fromkeys(VERSION_NOTE_TITLES, Kind.VERSION_NOTE),
    **dict.fromkeys(CODE_LANGUAGES, Kind.CODE),
    "math": Kind.MATH, "image": Kind.IMAGE, "figure": Kind.IMAGE, "list-table": Kind.TABLE, "csv-table": Kind.TABLE,
    **dict.fromkeys(AUTODOC, Kind.AUTODOC),
    **dict.fromkeys(MODULE_TRACKING, Kind.MODULE),
    "eval-rst": Kind.EVAL_RST,
    **dict.fromkeys(_DROPPED, Kind.DROPPED),
    **dict.fromkeys(_CONTAINERS, Kind.CONTAINER),
    **dict.fromkeys(_TITLED_CONTAINERS, Kind.TITLED_CONTAINER),
    **dict.fromkeys(_DESCRIPTIONS, Kind.DESCRIPTION),
}


def short_name(name: str) -> str:
    """The directive without its Sphinx domain (`py:function` → `function`); the module-tracking
    names keep theirs (they are listed with it)."""
    name = name.lower()
    if name in MODULE_TRACKING:
        return name
    return name.split(":", 1)[1] if name.startswith(("py:", "std:", "rst:")) else name


def kind_of(name: str) -> Kind | None:
    """What the directive `name` (any domain prefix, any case) is to us; None if unknown."""
    return _KINDS.get(short_name(name))


def known_directives() -> frozenset[str]:
    """Every directive name the converters handle (without domain prefixes)."""
    return frozenset(_KINDS)
