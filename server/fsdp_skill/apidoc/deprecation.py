"""Is a torch API deprecated, and what replaces it? The signals, first one wins:

1. `typing_extensions.deprecated` / `warnings.deprecated` set `__deprecated__` on the object
   (2.13's `reduce_scatter_tensor` carries it, with category=FutureWarning);
2. its module's source, read with `ast` by `deprecations_in_source` (never by calling anything):
   `@deprecated`, a FutureWarning/DeprecationWarning saying "deprecat" anywhere in the body (directly
   or through a warning helper), a sibling the message says is deprecated (`FSDP.set_state_dict_type`
   warns "FSDP.state_dict_type() and FSDP.set_state_dict_type() are being deprecated"), an enum member a
   warning's condition tests (`ShardingStrategy.NO_SHARD`), a module that warns on import;
3. the docstring has a `.. deprecated::` directive, or a note/warning saying "is deprecated";
4. the docstring's first words say it ("Deprecated enum-like class").

A name a deprecation message only names as the replacement is never marked (see deprecation_source).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import re
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

from fsdp_skill.apidoc.deprecation_source import (
    argument_deprecations_in_source,
    clean_message,
    deprecations_in_source,
    replacement_in,
    subjects,
)
from fsdp_skill.core.catalog import Deprecation

__all__ = [
    "argument_deprecations_in_source",
    "deprecations_in_source",
    "detect",
    "from_attribute",
    "from_docstring",
    "from_source",
    "from_summary",
    "installed_argument_deprecations",
    "installed_deprecations",
    "module_deprecations",
    "replacement_in",
    "subjects",
]

_clean = clean_message


def from_attribute(obj: Any) -> Deprecation | None:
    target = obj.fget if isinstance(obj, property) else obj
    # A class's own marker only: a subclass of a deprecated class inherits the attribute, not the deprecation.
    owner = vars(target) if isinstance(target, type) else None
    message = owner.get("__deprecated__") if owner is not None else getattr(target, "__deprecated__", None)
    if isinstance(message, str) and message:
        return Deprecation(message=_clean(message), replacement=replacement_in(message))
    return None


def _module_file(module_name: str) -> tuple[str, bool] | None:
    """(path of the module's .py file, whether it is a package), without importing it."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None) if module is not None else None
    if path is None:
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            return None
        path = spec.origin if spec is not None else None
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    return path, Path(path).name == "__init__.py"


@functools.lru_cache(maxsize=512)
def module_deprecations(module_name: str) -> dict[str, Deprecation]:
    """deprecations_in_source over the installed module's file ({} if it has none or it does not parse)."""
    found = _module_file(module_name)
    if found is None:
        return {}
    path, is_package = found
    try:
        return deprecations_in_source(Path(path).read_text(encoding="utf-8"), module_name, is_package=is_package)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return {}


# Packages whose sources can deprecate a name defined elsewhere (fsdp._init_utils warns about
# ShardingStrategy.NO_SHARD, defined in fsdp.api): scanned whole when such a name is asked about.
SCANNED_PACKAGES = ("torch.distributed", "torch.nn.parallel")


def _scanned_modules() -> list[str]:
    """Every module of SCANNED_PACKAGES in the installed torch, by its .py files (nothing imported)."""
    modules = []
    for package in SCANNED_PACKAGES:
        located = _module_file(package)
        if located is None:
            continue
        root = Path(located[0]).parent
        for path in sorted(root.rglob("*.py")):
            parts = [*package.split("."), *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            if all(part.isidentifier() for part in parts):
                modules.append(".".join(parts))
    return modules


@functools.lru_cache(maxsize=1)
def installed_deprecations() -> dict[str, Deprecation]:
    """What every module of SCANNED_PACKAGES in the installed torch deprecates, by dotted path."""
    found: dict[str, Deprecation] = {}
    for module in _scanned_modules():
        for name, dep in module_deprecations(module).items():
            found.setdefault(name, dep)
    return found


@functools.lru_cache(maxsize=1)
def installed_argument_deprecations() -> dict[str, dict[str, Deprecation]]:
    """argument_deprecations_in_source over SCANNED_PACKAGES: {function path: {argument: Deprecation}}."""
    found: dict[str, dict[str, Deprecation]] = {}
    for module in _scanned_modules():
        located = _module_file(module)
        if located is None:
            continue
        try:
            source = Path(located[0]).read_text(encoding="utf-8")
            found.update(argument_deprecations_in_source(source, module, is_package=located[1]))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
    return found


def _definition_paths(obj: Any, parent: Any, member: str) -> list[str]:
    """Where the source defines obj: its module.qualname when it has one (a function, a class: an
    override is its own definition, whatever its base class's says), else (a dataclass field, a
    module-level instance) the class of parent's MRO that defines the member, or the module, plus
    the member name."""
    target = obj.fget if isinstance(obj, property) else obj
    target = getattr(target, "__func__", target)
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", None)
    defined = inspect.isroutine(target) or isinstance(target, type)
    if isinstance(module, str) and isinstance(qualname, str) and defined:
        return [f"{module}.{qualname}"]
    if isinstance(parent, type) and member:
        owner = next((cls for cls in parent.__mro__
                      if member in vars(cls) or member in vars(cls).get("__annotations__", {})), parent)
        return [f"{owner.__module__}.{owner.__qualname__}.{member}"]
    if inspect.ismodule(parent) and member:
        return [f"{parent.__name__}.{member}"]
    return []


def _resolved(path: str) -> Any:
    from fsdp_skill.apidoc import introspect  # introspect imports what it resolves; only needed here

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = introspect.resolve(path, None)
    return found.obj if found is not None else None


def from_source(obj: Any, parent: Any = None, member: str = "") -> Deprecation | None:
    """What the installed sources say (signal 2): looked up by where obj is defined, or, for an
    object with no definition of its own (an enum member, a module-level instance), by identity with
    the deprecated names the scanned packages state."""
    for path in _definition_paths(obj, parent, member):
        module = path
        while "." in module:
            module = module.rsplit(".", 1)[0]
            found = module_deprecations(module).get(path)
            if found is not None:
                return found
    if inspect.isfunction(obj) and "<locals>" in getattr(obj, "__qualname__", ""):
        return _from_own_source(obj)
    if inspect.isroutine(obj) or isinstance(obj, (type, property)) or inspect.ismodule(obj):
        return None
    name = member or str(getattr(obj, "name", ""))
    for path, dep in installed_deprecations().items():
        if name and path.rsplit(".", 1)[-1] == name and _resolved(path) is obj:
            return dep
    return None


def _from_own_source(function: Any) -> Deprecation | None:
    """A function defined inside another (no module-level path): its own source, read the same way."""
    try:
        source = textwrap.dedent(inspect.getsource(function))
        found = deprecations_in_source(source, "<local>")
    except (OSError, TypeError, SyntaxError):
        return None
    return found.get(f"<local>.{function.__name__}")


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


def detect(obj: Any, deprecated_directive: tuple[str, str] | None = None,
           notes: list[tuple[str, str]] | None = None, summary: str = "",
           parent: Any = None, member: str = "") -> Deprecation | None:
    return (from_attribute(obj) or from_source(obj, parent, member)
            or from_docstring(deprecated_directive, notes or []) or from_summary(summary))
