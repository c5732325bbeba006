"""Is a torch API deprecated, and what replaces it? Three independent signals, first one wins:

1. `typing_extensions.deprecated` / `warnings.deprecated` set `__deprecated__` on the object
   (2.13's `reduce_scatter_tensor` carries it, with category=FutureWarning);
2. the source calls `warnings.warn(...)` with a FutureWarning/DeprecationWarning whose message
   says "deprecat" — read from `inspect.getsource` text, never by calling the function;
3. the docstring has a `.. deprecated::` directive, or a note/warning saying "is deprecated";
4. for a class member: a sibling's deprecation message names it (`FSDP.set_state_dict_type` warns
   "FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated", and
   `state_dict_type` itself says nothing), recorded with the sibling it comes from.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from typing import Any

from fsdp_skill.apidoc.deprecation_source import clean_message, deprecations_in_source, replacement_in, subjects
from fsdp_skill.core.catalog import Deprecation

__all__ = [
    "deprecations_in_source",
    "detect",
    "from_attribute",
    "from_docstring",
    "from_source",
    "from_summary",
    "replacement_in",
    "subjects",
]

_clean = clean_message


def from_attribute(obj: Any) -> Deprecation | None:
    target = obj.fget if isinstance(obj, property) else obj
    message = getattr(target, "__deprecated__", None)
    if isinstance(message, str) and message:
        return Deprecation(message=_clean(message), replacement=replacement_in(message))
    return None


def _string_value(node: ast.AST) -> str | None:
    """The text of a string literal, an implicit concatenation, or an f-string's literal parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{…}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string_value(node.left), _string_value(node.right)
        return left + right if left is not None and right is not None else None
    return None


def from_source(obj: Any) -> Deprecation | None:
    """A warn(..., FutureWarning/DeprecationWarning) that is a top-level statement of the function
    (or of a class's __init__). Warnings nested under an `if` concern one argument or one code
    path, not the API itself, so they are not counted."""
    target = obj.fget if isinstance(obj, property) else obj
    if isinstance(target, type):
        target = target.__dict__.get("__init__")
    if not inspect.isfunction(target):
        return None
    try:
        source = inspect.getsource(target)
    except (TypeError, OSError):
        return None
    if "warn" not in source or "Warning" not in source:
        return None
    try:
        tree = ast.parse(inspect.cleandoc("\n" + source) if source[:1].isspace() else source)
    except SyntaxError:
        return None
    function = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None:
        return None
    for statement in function.body:
        node = statement.value if isinstance(statement, ast.Expr) else None
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in ("warn", "_warn", "warn_deprecated"):
            continue
        category = ast.unparse(node.args[1]) if len(node.args) > 1 else next(
            (ast.unparse(k.value) for k in node.keywords if k.arg == "category"), "")
        message = _string_value(node.args[0]) if node.args else None
        if (
            message
            and "deprecat" in message.lower()
            and ("FutureWarning" in category or "DeprecationWarning" in category)
        ):
            return Deprecation(message=_clean(message), replacement=replacement_in(message))
    return None


def from_docstring(deprecated_directive: tuple[str, str] | None, notes: list[tuple[str, str]]) -> Deprecation | None:
    if deprecated_directive is not None:
        version, body = deprecated_directive
        message = _clean(f"Deprecated since version {version}. {body}".strip()) if version else _clean(body)
        return Deprecation(message=message, replacement=replacement_in(body))
    for label, body in notes:
        if label.lower().startswith("warning") and re.search(r"\bis deprecated\b|\bhas been deprecated\b", body):
            return Deprecation(message=_clean(body), replacement=replacement_in(body))
    return None


def from_summary(summary: str) -> Deprecation | None:
    """"Deprecated enum-like class ..." — the docstring's first words say it."""
    if re.match(
        r"^\s*(?:\(?deprecated\)?[\s:.,]|this (?:function|class|method|api) is deprecated)", summary, re.IGNORECASE
    ):
        first = _clean(summary.strip().split("\n\n")[0])
        return Deprecation(message=first, replacement=replacement_in(summary))
    return None


def _names_member(message: str, member: str) -> bool:
    """`Class.member()`, `member()` or `` `member` `` in the message, not as part of a longer name."""
    return re.search(rf"(?<![\w])(?:\w+\.)?{re.escape(member)}(?:\(\)|`)|`{re.escape(member)}`", message) is not None


@functools.lru_cache(maxsize=256)
def _class_deprecations(cls: type) -> tuple[tuple[str, Deprecation], ...]:
    """(member name, its own deprecation) for every function of the class that states one."""
    found: list[tuple[str, Deprecation]] = []
    for name, raw in vars(cls).items():
        value = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
        if not (inspect.isfunction(value) or isinstance(value, property)):
            continue
        dep = from_attribute(value) or from_source(value)
        if dep is not None:
            found.append((name, dep))
    return tuple(found)


def from_siblings(parent: Any, member: str) -> Deprecation | None:
    """A deprecation another member of the same class states for this one (signal 4)."""
    if not isinstance(parent, type) or not member:
        return None
    for cls in parent.__mro__:
        if cls is object:
            continue
        for name, dep in _class_deprecations(cls):
            if name != member and _names_member(dep.message, member):
                return Deprecation(
                    message=f"Stated in the deprecation warning of {parent.__name__}.{name}: {dep.message}",
                    replacement=dep.replacement,
                )
    return None


def detect(obj: Any, deprecated_directive: tuple[str, str] | None = None,
           notes: list[tuple[str, str]] | None = None, summary: str = "",
           parent: Any = None, member: str = "") -> Deprecation | None:
    return (from_attribute(obj) or from_source(obj) or from_docstring(deprecated_directive, notes or [])
            or from_summary(summary) or from_siblings(parent, member))
