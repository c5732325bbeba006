"""Introspection of the installed torch: name resolution, kinds, signatures, docstrings, aliases.

Build-time only (imports whatever it resolves, so torch). Everything it returns is a plain string
made deterministic: default values never show memory addresses, types drop module paths.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import textwrap
import types
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# The covered public modules (the coverage list): an object exported from one of them is
# named by its shortest path there, whatever module defines it or spelling a page documents it under.
PUBLIC_MODULES = [
    "torch.distributed",
    "torch.distributed.fsdp",
    "torch.distributed.device_mesh",
    "torch.distributed.tensor",
    "torch.distributed.tensor.parallel",
    "torch.distributed.checkpoint",
    "torch.distributed.checkpoint.state_dict",
    "torch.distributed.algorithms.join",
    "torch.distributed.optim",
    "torch.nn.parallel",
    "torch.distributed.pipelining",
]
# Modules whose attributes count as spellings of a documented object (for aliases).
ALIAS_MODULES = PUBLIC_MODULES + ["torch.distributed.algorithms", "torch.distributed.distributed_c10d"]
# Conventional import abbreviations used throughout the upstream docs and examples.
MODULE_ABBREVIATIONS = {"torch.distributed": "dist", "torch.distributed.checkpoint": "dcp"}
CLASS_ABBREVIATIONS = {
    "torch.distributed.fsdp.FullyShardedDataParallel": "FSDP",
    "torch.nn.parallel.DistributedDataParallel": "DDP",
}


@dataclass
class Resolved:
    qualified_name: str
    obj: Any
    parent: Any  # the module or class it was found on
    module: str  # the module part of qualified_name


def import_module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means "not a module here"
        return None


def _lookup(path: str) -> Resolved | None:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        module = import_module(module_name)
        if module is None:
            continue
        obj: Any = module
        parent: Any = None
        try:
            for part in parts[cut:]:
                parent, obj = obj, inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
        except AttributeError:
            return None
        if isinstance(parent, type):  # unwrap descriptors found statically, keep properties
            raw = obj
            obj = raw if isinstance(raw, property) else getattr(parent, parts[-1], raw)
            if isinstance(raw, (classmethod, staticmethod)):
                obj = raw.__func__
        return Resolved(path, obj, parent if parent is not None else module, module_name)
    return None


def resolve(name: str, current_module: str | None) -> Resolved | None:
    """Sphinx's lookup: a name relative to the current module first, then as an absolute path."""
    name = name.strip().lstrip("~")
    relative = [f"{current_module}.{name}"] if current_module else []
    # A name spelled from a top-level package ("torch.x.y") is absolute; trying it relative first
    # could walk through a module's imported `torch` attribute.
    absolute_first = name.split(".", 1)[0] in ("torch",) and "." in name
    candidates = [name] + relative if absolute_first else relative + [name]
    for candidate in candidates:
        resolved = _lookup(candidate)
        if resolved is not None:
            return resolved
    return None


def import_failure(name: str, current_module: str | None) -> str | None:
    """Why a name `resolve` could not find does not import, when a module on its path raises on import
    (an optional dependency missing: `...etcd_rendezvous_backend` needs urllib3); None when the module
    imports and simply lacks the name (the name was removed or renamed)."""
    name = name.strip().lstrip("~")
    candidates = [f"{current_module}.{name}", name] if current_module else [name]
    for candidate in candidates:
        parts = candidate.split(".")
        for cut in range(1, len(parts) + 1):  # shortest prefix first: the first module that raises
            module_name = ".".join(parts[:cut])
            try:
                importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name == module_name:
                    break  # no such module: the rest of the path is attributes
                return f"importing {module_name} fails: {type(exc).__name__}: {exc}"
            except Exception as exc:  # noqa: BLE001 - any import failure is the reason we report
                first = str(exc).splitlines()[0] if str(exc) else ""
                return f"importing {module_name} fails: {type(exc).__name__}: {first}"
    return None


def public_path(qualified_name: str, obj: Any, parent: Any) -> str:
    """The canonical name of a module-level object: the shortest `module.name` among PUBLIC_MODULES
    whose attribute `name` is this very object (users import `torch.distributed.destroy_process_group`,
    not `torch.distributed.distributed_c10d.destroy_process_group`); qualified_name if none exports it."""
    if obj is None or not inspect.ismodule(parent):
        return qualified_name
    short = qualified_name.rsplit(".", 1)[-1]
    exported = [
        f"{module_name}.{short}"
        for module_name in PUBLIC_MODULES
        if (module := import_module(module_name)) is not None and _quiet_getattr(module, short) is obj
    ]
    return min(exported, key=lambda path: (path.count("."), path)) if exported else qualified_name


def _quiet_getattr(obj: Any, name: str) -> Any:
    with warnings.catch_warnings():  # some deprecated module attributes warn when touched
        warnings.simplefilter("ignore")
        return getattr(obj, name, None)


def kind_of(obj: Any, parent: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if isinstance(obj, type):
        return "class"
    if isinstance(obj, property) or type(obj).__name__ in ("cached_property", "getset_descriptor"):
        return "property"
    if isinstance(parent, type):
        return "method" if callable(obj) else "attribute"
    if callable(obj):
        return "function"
    return "data"


_MODULE_PREFIX = re.compile(r"\b(?:[a-z_][\w]*\.)+(?=[A-Za-z_]\w*)")


def format_annotation(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty or annotation is inspect.Signature.empty:
        return None
    if isinstance(annotation, (types.FunctionType, types.BuiltinFunctionType)):
        return annotation.__name__  # `hook: callable` annotates with the builtin, not a type
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    text = re.sub(r"<(?:built-in )?function ([\w.]+)(?: at 0x[0-9a-fA-F]+)?>", r"\1", text)
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    text = re.sub(r"~(?=[A-Za-z_])", "", text)  # a TypeVar's repr is "~T"; the source says T
    return _MODULE_PREFIX.sub("", text).replace("NoneType", "None")


def format_default(value: Any) -> str:
    """A default value as a stable, compact string (never an address)."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    value_type = type(value)
    if hasattr(value_type, "__members__") and hasattr(value, "name") and not isinstance(value, type):
        owner = value_type.__qualname__.split(".")[0] if "." in value_type.__qualname__ else value_type.__name__
        return f"{owner}.{value.name}"
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
        return value.__qualname__
    if type(value) in (tuple, list):  # each item by these rules: a class inside is not "<class '...'>"
        items = [format_default(item) for item in value]
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    text = repr(value)
    text = re.sub(r"^datetime\.", "", text)
    if re.search(r" at 0x[0-9a-fA-F]+", text):
        return f"<{type(value).__name__}>"
    return _MODULE_PREFIX.sub("", text) if text.startswith("<") else text


def signature_from_inspect(
    obj: Any, drop_first: bool
) -> tuple[list[tuple[str, str | None, str | None]], str | None] | None:
    """[(param text name, type, default)], return type — or None if inspect cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params: list[tuple[str, str | None, str | None]] = []
    seen_kw_only = False
    items = list(sig.parameters.values())
    if drop_first and items and items[0].name in ("self", "cls"):
        items = items[1:]
    for k, p in enumerate(items):
        if p.kind is p.KEYWORD_ONLY and not seen_kw_only:
            params.append(("*", None, None))
            seen_kw_only = True
        stars = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        name = stars + p.name
        if p.kind is p.VAR_POSITIONAL:
            seen_kw_only = True
        default = None if p.default is p.empty else format_default(p.default)
        params.append((name, format_annotation(p.annotation), default))
        if p.kind is p.POSITIONAL_ONLY and (k + 1 == len(items) or items[k + 1].kind is not p.POSITIONAL_ONLY):
            params.append(("/", None, None))
    return params, format_annotation(sig.return_annotation)


_PYBIND_SIG = re.compile(r"^(?:\d+\.\s+)?(?P<name>[\w.]+)\((?P<params>.*)\)(?:\s*->\s*(?P<ret>.+))?$")


def split_pybind_doc(doc: str, short_name: str) -> tuple[list[str], str]:
    """A pybind11 docstring starts with "name(arg: type, ...) -> ret" (several when overloaded):
    return those signature lines and the rest of the docstring, cleaned."""
    signatures: list[str] = []
    rest: list[str] = []
    for line in doc.split("\n"):
        match = _PYBIND_SIG.match(line.strip())
        if match and match.group("name").split(".")[-1] == short_name and not rest:
            signatures.append(line.strip())
            continue
        if line.strip() == "Overloaded function." and not rest:
            continue
        if match and match.group("name").split(".")[-1] == short_name and re.match(r"^\d+\.", line.strip()):
            signatures.append(line.strip())
            continue
        if rest or line.strip():
            rest.append(line)
    return signatures, inspect.cleandoc("\n".join(rest)) if rest else ""


def parse_pybind_signature(line: str) -> tuple[list[tuple[str, str | None, str | None]], str | None]:
    match = _PYBIND_SIG.match(line)
    assert match is not None
    params: list[tuple[str, str | None, str | None]] = []
    for part in _split_top_level(match.group("params")):
        name, _, rest = part.partition(":")
        type_text, _, default = rest.partition("=")
        name = name.strip()
        if name == "self":
            continue
        params.append(
            (
                name,
                _MODULE_PREFIX.sub("", type_text.strip()) or None,
                re.sub(r"^datetime\.", "", default.strip()) or None,
            )
        )
    ret = match.group("ret")
    return params, _MODULE_PREFIX.sub("", ret.strip()) if ret else None


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def format_signature(name: str, params: list[tuple[str, str | None, str | None]], ret: str | None) -> str:
    rendered = []
    for pname, ptype, default in params:
        text = pname + (f": {ptype}" if ptype else "")
        if default is not None:
            text += f" = {default}" if ptype else f"={default}"
        rendered.append(text)
    tail = f" -> {ret}" if ret else ""
    one_line = f"{name}({', '.join(rendered)}){tail}"
    if len(one_line) <= 100 or not rendered:
        return one_line
    # Long signatures one parameter per line, the way black would lay them out.
    return f"{name}(\n" + "".join(f"    {r},\n" for r in rendered) + f"){tail}"


def raw_docstring(obj: Any) -> str:
    doc = inspect.getdoc(obj)
    if doc is None and isinstance(obj, property) and obj.fget is not None:
        doc = inspect.getdoc(obj.fget)
    return textwrap.dedent(doc or "").strip("\n")


def definition_path(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        return f"{module}.{qualname}"
    return None


def aliases(qualified_name: str, obj: Any, kind: str, also: Iterable[str] = ()) -> list[str]:
    """Other spellings of a documented object: public re-export paths (public first, then
    shorter), its definition path, the spellings in `also` (the page's), dist./dcp. forms, the
    short name and FSDP/DDP."""
    found: set[str] = set(also)
    if kind in ("function", "class", "data"):
        short = qualified_name.rsplit(".", 1)[-1]
        for module_name in ALIAS_MODULES:
            module = import_module(module_name)
            if module is not None and getattr(module, short, None) is obj and obj is not None:
                found.add(f"{module_name}.{short}")
        path = definition_path(obj)
        if path and _lookup(path) is not None and _lookup(path).obj is obj:  # type: ignore[union-attr]
            found.add(path)
    base = qualified_name
    member = ""
    if kind in ("method", "property", "attribute"):
        base, member = qualified_name.rsplit(".", 1)
        member = "." + member
    for path in list(found) + [base]:
        module_name, _, short = path.rpartition(".")
        if module_name in MODULE_ABBREVIATIONS:
            found.add(f"{MODULE_ABBREVIATIONS[module_name]}.{short}{member}")
        if path in CLASS_ABBREVIATIONS:
            found.add(CLASS_ABBREVIATIONS[path] + member)
    if member:
        found.add(base.rsplit(".", 1)[-1] + member)
    else:
        found.add(qualified_name.rsplit(".", 1)[-1])
    found.discard(qualified_name)

    def order(alias: str) -> tuple[bool, bool, int, str]:
        parts = alias.split(".")
        private = any(part.startswith("_") and not part.startswith("__") for part in parts)
        return (private, len(parts) == 1, len(parts), alias)

    return sorted(found, key=order)
