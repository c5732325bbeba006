"""references/api-drift.md: where the installed torch and the pinned documentation pages disagree.

Three lists: public names of the covered modules that no page documents (each with a reason and
its docstring summary), documented names that are deprecated in the installed torch, and names the
pages document that the installed torch no longer has. "Documented" is decided by object identity,
so a function documented under one spelling (torch.distributed.checkpoint.state_dict_saver.save)
covers its re-exports (torch.distributed.checkpoint.save). Build time only (imports torch).
"""

from __future__ import annotations

import inspect
import re
import types
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fsdp_skill.apidoc import deprecation, introspect
from fsdp_skill.apidoc.docstring_sections import split_docstring
from fsdp_skill.convert.rst.inline import convert as convert_inline
from fsdp_skill.core.catalog import Deprecation
from fsdp_skill.core.quoting import table_cell

__all__ = [
    "COVERED_EXTRA",
    "COVERED_MODULES",
    "build_drift",
    "coverage",
    "covered_public_names",
    "deprecation_of",
    "listed_names",
    "public_names",
]

# Whole modules whose public names must be covered (torch.nn.parallel only for DDP, below).
COVERED_MODULES = [m for m in introspect.PUBLIC_MODULES if m.startswith("torch.distributed")]
COVERED_EXTRA = ["torch.nn.parallel.DistributedDataParallel"]

PUBLIC_RULE = (
    "A module's public names are its `__all__`. `torch.distributed` and `torch.distributed.checkpoint` "
    "define none, so for them a public name is an attribute not starting with `_` that is a class, a "
    "function, or an instance of a class, defined in that package (its `__module__`, or its type's, starts "
    "with the package name, or with `torch._C._distributed` for the C++ bindings); submodules and "
    "names imported from elsewhere (`timedelta`, `log`, typing aliases) are not API."
)


def _quiet_getattr(obj: Any, name: str) -> Any:
    with warnings.catch_warnings():  # touching deprecated module attributes warns (reduce_op)
        warnings.simplefilter("ignore")
        return getattr(obj, name, None)


def _defined_in_package(value: Any, package: str) -> bool:
    module = getattr(value, "__module__", None) if isinstance(value, type) or callable(value) else None
    if not isinstance(module, str):
        module = str(getattr(type(value), "__module__", ""))
    return module.startswith(package) or (package == "torch.distributed" and module.startswith("torch._C._distributed"))


def public_names(module_name: str) -> list[str]:
    """Sorted public names of a module (see PUBLIC_RULE); [] if it does not import."""
    with warnings.catch_warnings():  # deprecated module attributes warn when inspected (reduce_op)
        warnings.simplefilter("ignore")
        return _public_names(module_name)


def _public_names(module_name: str) -> list[str]:
    module = introspect.import_module(module_name)
    if module is None:
        return []
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return sorted(set(exported))
    names = []
    for name in dir(module):
        value = _quiet_getattr(module, name)
        if name.startswith("_") or value is None or inspect.ismodule(value):
            continue
        if isinstance(value, (int, float, str, bool)) or type(value).__module__ in ("typing", "types"):
            continue
        if _defined_in_package(value, module_name):
            names.append(name)
    return sorted(names)


def covered_public_names() -> list[str]:
    names = [f"{module}.{name}" for module in COVERED_MODULES for name in public_names(module)]
    return sorted(set(names + COVERED_EXTRA))


_LISTED_NAME = re.compile(r"^\| `([\w.]+)` \|", re.M)


def listed_names(drift_text: str) -> list[str]:
    """The names api-drift.md lists, one per table row (undocumented, deprecated, missing)."""
    return _LISTED_NAME.findall(drift_text)


def coverage(catalog_names: set[str], drift_text: str) -> tuple[int, int, int, list[str]]:
    """How the covered public names are accounted for: (public names, API entries, listed only in
    api-drift.md, names in neither). catalog_names holds the entries' qualified names and aliases."""
    listed = set(listed_names(drift_text))
    names = covered_public_names()
    entries = [name for name in names if name in catalog_names]
    drift_only = [name for name in names if name not in catalog_names and name in listed]
    uncovered = [name for name in names if name not in catalog_names and name not in listed]
    return len(names), len(entries), len(drift_only), uncovered


def _resolve(qualified_name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resolved = introspect.resolve(qualified_name, None)
    return resolved.obj if resolved is not None else None


def _summary(obj: Any) -> str:
    text = _own_docstring(obj)
    if not text:
        return ""
    _, rest = introspect.split_pybind_doc(text, getattr(obj, "__name__", ""))
    first = (rest or text).strip().split("\n\n")[0]
    line = " ".join(first.split())
    if len(line) > 160:
        cut = line.rfind(" ", 0, 157)
        line = line[: cut if cut > 80 else 157].rstrip(" ,;:") + " ..."
    return convert_inline(line, escape_html=True)


def deprecation_of(obj: Any, name: str = "") -> Deprecation | None:
    """Every signal `deprecation.detect` reads; with the qualified name, a class member also gets the
    deprecations its siblings state for it."""
    raw = split_docstring(_own_docstring(obj))
    parent = _resolve(name.rsplit(".", 1)[0]) if "." in name else None
    return deprecation.detect(obj, raw.deprecated, raw.notes, "\n".join(raw.body),
                              parent=parent, member=name.rsplit(".", 1)[-1])


def _is_type_alias(obj: Any) -> bool:
    """`DictValueType = dict[str, ValueType]`, unions, `FQNS_T = set[str]`: names for types, whose
    docstring (if any) is the builtin's."""
    return (
        isinstance(obj, (types.UnionType, types.GenericAlias))
        or type(obj).__module__ == "typing"
        or (isinstance(obj, type) and obj.__module__ == "builtins")
    )


def _own_docstring(obj: Any) -> str:
    """The docstring, minus the ones Python writes itself (dataclass "Name(field: type, ...)",
    a builtin type's, a type alias's)."""
    if _is_type_alias(obj):
        return ""
    text = introspect.raw_docstring(obj)
    name = getattr(obj, "__name__", None)
    if name and text.startswith(f"{name}(") and "\n" not in text.strip():
        return ""
    return text


def _alias_text(obj: Any) -> str:
    text = obj.__name__ if isinstance(obj, type) else repr(obj)
    return re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Za-z_])", "", text)


def _reason(name: str, obj: Any, dep: Deprecation | None) -> str:
    if dep is not None:
        return "deprecated in this torch (see below); the pages no longer document it"
    if _is_type_alias(obj):
        text = _alias_text(obj)
        return f"type alias (`{text if len(text) <= 60 else text[:57] + '...'}`), not a callable API"
    if not _own_docstring(obj):
        return "no page documents it, and it has no docstring"
    if isinstance(obj, type) and name.endswith("Options"):
        return "options struct of the C++ process-group API; no page documents it"
    return "public in the installed torch, but no autodoc directive on the pinned pages covers it"


def _missing_reason(import_failure: str | None, torch_version: str) -> str:
    if import_failure is None:
        return f"not in torch {torch_version}: its module imports, but has no such name"
    if re.search(r"No module named '[\w.]+'", import_failure):
        return f"{import_failure} (an optional dependency that torch does not install and this environment lacks)"
    return import_failure


def build_drift(documented: set[str], *, torch_version: str, ref: str | None = None,
                missing: Iterable[tuple[str, str]] = (), import_failures: dict[str, str] | None = None,
                entries: Iterable[str] = ()) -> str:
    """entries: qualified names of the API entries this project adds from docstrings (no page documents
    them): listed when deprecated, like the documented names, but never counted as documented."""
    with warnings.catch_warnings():  # deprecated objects warn when merely inspected
        warnings.simplefilter("ignore")
        return _build_drift(documented, torch_version=torch_version, ref=ref, missing=missing,
                            import_failures=import_failures or {}, entries=set(entries))


@dataclass
class _Findings:
    """What the installed torch and the pages disagree on."""

    undocumented: list[tuple[str, str, str]] = field(default_factory=list)  # (name, reason, summary)
    deprecated: dict[str, Deprecation] = field(default_factory=dict)
    unresolved: dict[str, str] = field(default_factory=dict)  # documented name -> where it is documented
    import_failures: dict[str, str] = field(default_factory=dict)  # documented name -> why its module does not import
    arguments: dict[tuple[str, str], Deprecation] = field(default_factory=dict)  # (API, argument) -> deprecation


def _build_drift(documented: set[str], *, torch_version: str, ref: str | None,
                 missing: Iterable[tuple[str, str]], import_failures: dict[str, str], entries: set[str]) -> str:
    """The api-drift.md text. documented: qualified names and aliases the references document;
    missing: (name, where) of directives whose name did not import (the autodoc registry's MissingName
    events), added to the names in `documented` that do not resolve."""
    findings = _Findings(unresolved=dict(missing), import_failures=import_failures)
    documented_objects = _check_documented(documented, findings)
    _find_undocumented(documented, documented_objects, findings)
    _check_entries(entries, documented_objects, findings)
    _find_deprecated_members(documented | entries, findings)
    _find_deprecated_arguments(documented | entries, findings)
    return _render(findings, torch_version, ref)


def _check_documented(documented: set[str], findings: _Findings) -> dict[int, str]:
    """Each documented object under its best spelling (by id); records the unresolved and deprecated ones."""
    documented_objects: dict[int, str] = {}
    # Public, shortest spellings first, so each object is reported under its best name.
    for name in sorted(documented, key=lambda n: ("._" in n, n.count("."), n)):
        obj = _resolve(name)
        if obj is None:
            if "." in name and name.startswith("torch."):
                findings.unresolved.setdefault(name, "the references")
            continue
        documented_objects.setdefault(id(obj), name)
        if not name.startswith("torch."):
            continue  # an alias (dist.X, FSDP): reported under its qualified name
        if documented_objects[id(obj)] != name:
            continue  # already considered under a better spelling
        dep = deprecation_of(obj, name)
        if dep is not None:
            findings.deprecated[name] = dep
    return documented_objects


def _check_entries(entries: set[str], documented_objects: dict[int, str], findings: _Findings) -> None:
    """The project's own API entries (nn.functional, functional collectives): deprecated ones are listed."""
    reported = {id(_resolve(name)) for name in findings.deprecated}
    for name in sorted(entries):
        obj = _resolve(name)
        if obj is None or not name.startswith("torch.") or id(obj) in documented_objects or id(obj) in reported:
            continue
        dep = deprecation_of(obj, name)
        if dep is not None:
            findings.deprecated.setdefault(name, dep)
            reported.add(id(obj))


def _find_deprecated_members(names: set[str], findings: _Findings) -> None:
    """Deprecated members no entry of their own covers (`ShardingStrategy.NO_SHARD`, whose warning is in
    another module than the enum): each under its documented class's name."""
    classes: dict[int, str] = {}
    for name in sorted(names, key=lambda n: ("._" in n, n.count("."), n)):
        obj = _resolve(name) if name.startswith("torch.") else None
        if isinstance(obj, type):
            classes.setdefault(id(obj), name)
    reported = {id(_resolve(name)) for name in findings.deprecated}
    for path in deprecation.installed_deprecations():
        parent_path, _, member = path.rpartition(".")
        parent = _resolve(parent_path)
        if parent is None or id(parent) not in classes:
            continue
        name = f"{classes[id(parent)]}.{member}"
        obj = _resolve(name)
        dep = deprecation_of(obj, name) if obj is not None and id(obj) not in reported else None
        if dep is not None:
            findings.deprecated.setdefault(name, dep)
            reported.add(id(obj))


def _find_deprecated_arguments(names: set[str], findings: _Findings) -> None:
    """Arguments the installed sources warn are deprecated, of the documented APIs and our entries."""
    apis: dict[int, str] = {}
    for name in sorted(names, key=lambda n: ("._" in n, n.count("."), n)):
        obj = _resolve(name) if name.startswith("torch.") else None
        if obj is not None:
            apis.setdefault(id(obj), name)
    for path, arguments in deprecation.installed_argument_deprecations().items():
        obj = _resolve(path)
        if obj is None or id(obj) not in apis:
            continue
        for argument, dep in arguments.items():
            findings.arguments.setdefault((apis[id(obj)], argument), dep)


def _find_undocumented(documented: set[str], documented_objects: dict[int, str], findings: _Findings) -> None:
    for name in covered_public_names():
        obj = _resolve(name)
        if obj is None or id(obj) in documented_objects or name in documented:
            continue
        dep = deprecation_of(obj, name)
        if dep is not None:
            findings.deprecated.setdefault(name, dep)
        findings.undocumented.append((name, _reason(name, obj, dep), _summary(obj)))


def _render(findings: _Findings, torch_version: str, ref: str | None) -> str:
    lines = [
        f"# API drift: torch {torch_version} vs the documentation pages",
        "",
        f"Generated by `fsdp-skill regenerate` from the installed torch {torch_version}"
        + (f" and the upstream pages at `{ref}`" if ref else "") + ". Covered modules: "
        + ", ".join(f"`{m}`" for m in COVERED_MODULES + COVERED_EXTRA) + ".",
        "",
        PUBLIC_RULE,
        "",
        f"## Public names no page documents ({len(findings.undocumented)})",
        "",
        "Their docstrings are still the authority: `help(name)` in Python.",
        "",
        "| name | reason | summary (from the docstring) |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{name}` | {table_cell(reason, fold_whitespace=True)} | {table_cell(summary, fold_whitespace=True)} |"
        for name, reason, summary in findings.undocumented
    ]
    lines += [
        "",
        f"## Deprecated in torch {torch_version} ({len(findings.deprecated)})",
        "",
        "Documented names, the project's own API entries and their members that the installed sources "
        "deprecate: a `@deprecated` marker, or a `warnings.warn(..., FutureWarning | DeprecationWarning)` "
        "saying so anywhere in the function (directly or through a warning helper; one under a condition "
        "only when it names the function, or the value its condition tests), or at import for a module; "
        "a `.. deprecated::` in the docstring. A name a message names as the replacement is never listed.",
        "",
        "| name | replacement | message |",
        "|---|---|---|",
    ]
    for name in sorted(findings.deprecated):
        dep = findings.deprecated[name]
        replacement = f"`{dep.replacement}`" if dep.replacement else ""
        lines.append(f"| `{name}` | {replacement} | {table_cell(dep.message, fold_whitespace=True)} |")
    lines += [
        "",
        f"## Deprecated arguments in torch {torch_version} ({len(findings.arguments)})",
        "",
        "Arguments of the documented APIs whose use warns (a deprecation warning, read from the installed "
        "sources like the names above, whose subject is the function's own parameter): the API itself stays.",
        "",
        "| API | argument | replacement | message |",
        "|---|---|---|---|",
    ]
    for (name, argument), dep in sorted(findings.arguments.items()):
        replacement = f"`{dep.replacement}`" if dep.replacement else ""
        lines.append(f"| `{name}` | `{argument}` | {replacement} | {table_cell(dep.message, fold_whitespace=True)} |")
    lines += [
        "",
        f"## Documented but missing from torch {torch_version} ({len(findings.unresolved)})",
        "",
        ("The pages name these, but they do not import from the installed torch: either the name is not in it "
         "(removed or renamed), or its module fails to import here (an optional dependency is not installed)."),
        "",
        "| name | documented in | why |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{name}` | {table_cell(where, fold_whitespace=True)} | "
        f"{table_cell(_missing_reason(findings.import_failures.get(name), torch_version), fold_whitespace=True)} |"
        for name, where in sorted(findings.unresolved.items())
    ]
    return "\n".join(lines) + "\n"
