"""One torch release's public distributed API, read statically: the facts the API timeline is built from.

    files = {"torch/distributed/fsdp/__init__.py": "...", ...}     # a wheel's .py sources
    facts = read_release(files)                                    # {qualified name: fact}

A fact is a small dict: `kind` (module, function, class, method, property, classmethod, staticmethod,
data, external), `params` (for callables: [name, kind, default] with kind '' positional-or-keyword,
'/' positional-only, '*' *args, 'kw' keyword-only, '**' **kwargs, default the source text or null),
`doc` (the docstring's first line), `deprecated` ([message, replacement or null], from
`apidoc.deprecation_source.deprecations_in_source`) and `origin`
('module:qualname' where the object is defined: two names with one origin are one object, which is how
a move such as `_composable.fsdp.fully_shard` -> `fsdp.fully_shard` is recognised).

Scope: every module under torch.distributed whose path has no private part (plus the private packages
users import: `_composable`, `_tensor`, `_functional_collectives`, `_symmetric_memory`) and
torch.utils.checkpoint; in each, the names it exports (`release_source.ReleaseSource.exports`), and the
public members (methods, properties) defined in the body of each exported class, under the class's
shortest public name.
"""

from __future__ import annotations

import ast
from typing import Any

from fsdp_skill.apidoc.deprecation import deprecations_in_source
from fsdp_skill.apidoc.release_source import Binding, ReleaseSource
from fsdp_skill.core.catalog import Deprecation

ROOTS = ("torch.distributed", "torch.utils.checkpoint")
# Private packages of torch.distributed that users import by that path (and that moved: `_composable.fsdp`
# became `fsdp` in 2.6, `_tensor` became `tensor` in 2.5).
PRIVATE_PACKAGES_READ = ("_composable", "_tensor", "_functional_collectives", "_symmetric_memory")
SKIPPED_PARTS = ("tests", "benchmarks", "examples")
# Implementation modules under a read private package: 2.4's `_tensor.ops` holds ~440 op rules, no user API.
SKIPPED_MODULES = ("torch.distributed._tensor.ops",)
DOC_CHARS = 160
DEFAULT_CHARS = 80
MESSAGE_CHARS = 400

Fact = dict[str, Any]


def wanted_path(path: str) -> bool:
    """Is this wheel member one of the sources read? (torch/distributed/**.py, torch/utils/checkpoint.py, and
    the `.pyi` stubs of the C++ distributed modules, torch/_C/_distributed*.pyi, for their classes' members)"""
    return (path.endswith(".py") and (path.startswith("torch/distributed/") or path == "torch/utils/checkpoint.py")) \
        or (path.startswith("torch/_C/_distributed") and path.endswith(".pyi") and path.count("/") == 2)


def public_module(name: str) -> bool:
    """Is `name` a module whose names are part of the scope?"""
    if name == "torch.utils.checkpoint":
        return True
    if name != "torch.distributed" and not name.startswith("torch.distributed."):
        return False
    parts = name.split(".")[2:]
    if any(part in SKIPPED_PARTS for part in parts) or any(
            name == skipped or name.startswith(skipped + ".") for skipped in SKIPPED_MODULES):
        return False
    return all(not part.startswith("_") or (i == 0 and part in PRIVATE_PACKAGES_READ) for i, part in enumerate(parts))


# --- small readers -----------------------------------------------------------------------------------


def _first_line(node: ast.AST) -> str:
    doc = ast.get_docstring(node, clean=True) if isinstance(
        node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)) else None
    for line in (doc or "").splitlines():
        if line.strip():
            text = " ".join(line.split())
            return text if len(text) <= DOC_CHARS else text[: DOC_CHARS - 1] + "…"
    return ""


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def params_of(function: ast.FunctionDef | ast.AsyncFunctionDef, drop_first: bool) -> list[list[Any]]:
    """[name, kind, default source or None] for every parameter, in signature order."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out: list[list[Any]] = []
    for index, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        kind = "/" if index < len(args.posonlyargs) else ""
        out.append([arg.arg, kind, None if default is None else _short(ast.unparse(default), DEFAULT_CHARS)])
    if args.vararg:
        out.append([args.vararg.arg, "*", None])
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append([arg.arg, "kw", None if kw_default is None else _short(ast.unparse(kw_default), DEFAULT_CHARS)])
    if args.kwarg:
        out.append([args.kwarg.arg, "**", None])
    return out[1:] if drop_first and out and out[0][1] in ("", "/") else out


def _decorator_names(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[str]:
    names = []
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.append(ast.unparse(target).rsplit(".", 1)[-1])
    return names


# --- deprecations -------------------------------------------------------------------------------------


def _as_fact(deprecation: Deprecation) -> list[Any]:
    return [_short(deprecation.message, MESSAGE_CHARS), deprecation.replacement]


def release_deprecations(source: ReleaseSource) -> dict[str, Deprecation]:
    """Every deprecation the release's sources state, keyed by dotted path (`module.qualname` where the
    name is defined, or the path it is imported from): `apidoc.deprecation_source` over each module."""
    found: dict[str, Deprecation] = {}
    for name, module in sorted(source.modules.items()):
        try:
            found.update(deprecations_in_source(module.text, name, is_package=module.is_package))
        except (SyntaxError, RecursionError):
            continue  # ReleaseSource parsed it, so this cannot happen short of a pathological file
    return found


def _is_dataclass(node: ast.ClassDef) -> bool:
    return "dataclass" in _decorator_names(node)


def _field_flag(value: ast.expr | None, flag: str) -> bool:
    """Does a dataclass `field(...)` call pass `flag=True`?"""
    return isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "field" and any(
        k.arg == flag and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords)


def _kw_only(node: ast.ClassDef) -> bool:
    """@dataclass(kw_only=True): every field is keyword-only (2.15's PipelineStageInfo)."""
    return any(isinstance(d, ast.Call) and ast.unparse(d.func).rsplit(".", 1)[-1] == "dataclass" and any(
        k.arg == "kw_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in d.keywords)
        for d in node.decorator_list)


def _in_init(value: ast.expr | None) -> bool:
    """False for a dataclass `field(init=False)`, which the generated __init__ leaves out."""
    if isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "field":
        return not any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                       for k in value.keywords)
    return True


# --- facts ---------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, source: ReleaseSource) -> None:
        self.source = source
        self.deprecations = release_deprecations(source)

    def deprecate(self, fact: Fact, *paths: str) -> Fact:
        """Record the first deprecation stated for any of `paths` (the public name, where it is defined)."""
        found = next((self.deprecations[p] for p in paths if p in self.deprecations), None)
        if found is not None:
            fact["deprecated"] = _as_fact(found)
        return fact

    def callable_fact(self, node: ast.FunctionDef | ast.AsyncFunctionDef, kind: str, drop_first: bool) -> Fact:
        return {"kind": kind, "params": params_of(node, drop_first), "doc": _first_line(node)}

    def class_init(self, node: ast.ClassDef, module: str, depth: int = 0) -> list[list[Any]] | None:
        """The constructor's parameters: `__init__` in the body, dataclass / NamedTuple fields, or the
        first base class's (followed within the release's sources); None when it cannot be told."""
        init = next((n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and n.name == "__init__"), None)
        if init is not None:
            return params_of(init, drop_first=True)
        bases = [ast.unparse(b) for b in node.bases]
        base = self._first_base(node, module) if depth < 4 else None
        if "dataclass" in _decorator_names(node) or any(b.endswith("NamedTuple") for b in bases):
            inherited = self.class_init(base[0], base[1], depth + 1) if base and _is_dataclass(base[0]) else None
            fields = {p[0]: p for p in inherited or []}
            keyword_only = _kw_only(node)  # @dataclass(kw_only=True); a `_: KW_ONLY` line turns it on
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                        and ast.unparse(statement.annotation).rsplit(".", 1)[-1] == "KW_ONLY":
                    keyword_only = True
                elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                        and "ClassVar" not in ast.unparse(statement.annotation) and _in_init(statement.value):
                    default = None if statement.value is None else _short(ast.unparse(statement.value), DEFAULT_CHARS)
                    kind = "kw" if keyword_only or _field_flag(statement.value, "kw_only") else ""
                    fields[statement.target.id] = [statement.target.id, kind, default]
            # the generated __init__ puts keyword-only fields after the others (MixedPrecisionPolicy, 2.15)
            return sorted(fields.values(), key=lambda p: p[1] == "kw")
        if base is not None:
            return self.class_init(base[0], base[1], depth + 1)
        return None

    def _first_base(self, node: ast.ClassDef, module: str) -> tuple[ast.ClassDef, str] | None:
        """The first base class, when it is defined in the release's sources."""
        if not node.bases or not isinstance(node.bases[0], ast.Name):
            return None
        found = self.source.resolve(module, node.bases[0].id)
        if found and found[2].kind == "class" and isinstance(found[2].node, ast.ClassDef):
            return found[2].node, found[0]
        return None

    def fact(self, defining: str, name: str, binding: Binding) -> Fact:
        origin = f"{defining}:{name}"
        node = binding.node
        if binding.kind == "def" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fact = self.callable_fact(node, "function", drop_first=False)
        elif binding.kind == "class" and isinstance(node, ast.ClassDef):
            fact = {"kind": "class", "doc": _first_line(node)}
            init = self.class_init(node, defining)
            if init is not None:
                fact["params"] = init
        elif binding.kind == "module":
            module = self.source.modules.get(self.source.real(binding.source))
            fact = {"kind": "module", "doc": _first_line(module.tree) if module else ""}
            origin = self.source.real(binding.source)
        elif binding.kind == "import":  # from torch._C (or a module not in the sources)
            fact = {"kind": "external"}
            if binding.conditional:  # `try: from torch._C._distributed_c10d import ProcessGroupNCCL`: not every build
                fact["conditional"] = True
        else:
            fact = {"kind": "data"}
        fact["origin"] = origin
        return self.deprecate(fact, origin.replace(":", "."))

    def base_classes(self, node: ast.ClassDef, module: str) -> list[tuple[ast.ClassDef, str]]:
        """The base classes the release's sources (or its C++ stubs) define, in order: `Shard(Placement)`
        and 2.15's `Shard(torch._C._distributed.Shard)` alike."""
        found = []
        for base in node.bases:
            dotted = ast.unparse(base)
            owner, _, name = dotted.rpartition(".")
            resolved = self.source.resolve(module, name) if not owner else self._dotted_class(module, owner, name)
            if resolved and isinstance(resolved[2].node, ast.ClassDef):
                found.append((resolved[2].node, resolved[0]))
            elif resolved and resolved[2].kind == "import":  # a C++ class: its stub, when the wheel has one
                stub = self.stub_class(resolved[0], resolved[1])
                if stub is not None:
                    found.append(stub)
        return found

    def _dotted_class(self, module: str, owner: str, name: str) -> tuple[str, str, Binding] | None:
        """`torch._C._distributed.Shard` or `alias.Name` as a base class."""
        binding = self.source.lookup(module, owner.split(".")[0])
        path = owner if binding is None or binding.kind != "module" else binding.source + owner[
            len(owner.split(".")[0]):]
        stub = self.stub_class(path, name)
        if stub is not None:
            return stub[1], name, Binding("class", stub[0])
        return self.source.resolve(path, name) if path in self.source.modules else None

    def stub_class(self, module: str, name: str) -> tuple[ast.ClassDef, str] | None:
        """The class `name` of a C++ module's `.pyi` stub (torch/_C/_distributed_c10d.pyi's ProcessGroup)."""
        stub = self.source.modules.get(module)
        binding = stub.bindings.get(name) if stub is not None and stub.path.endswith(".pyi") else None
        return (binding.node, module) if binding and isinstance(binding.node, ast.ClassDef) else None

    def members(self, node: ast.ClassDef, module: str, depth: int = 0) -> dict[str, Fact]:
        """The public methods and properties of a class: its body's, then its bases' (inherited, as
        attribute access finds them; the class's own win). Each carries the origin of the class that
        defines it, so two spellings of one class give members of one object."""
        found: dict[str, Fact] = {}
        stub = self.source.modules[module].path.endswith(".pyi") if module in self.source.modules else False
        for statement in node.body:
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) or statement.name.startswith("_"):
                continue
            decorators = _decorator_names(statement)
            if "setter" in decorators or "deleter" in decorators or statement.name in found:
                continue
            if "overload" in decorators and not stub:
                continue  # the implementation follows; a stub has only its overloads (their signatures differ)
            kind = next((k for k in ("property", "classmethod", "staticmethod") if k in decorators), "method")
            if kind == "property" or "cached_property" in decorators:
                fact: Fact = {"kind": "property", "doc": _first_line(statement)}
            elif stub:  # C++: the stub's parameters are not the runtime's (pybind gives no signature)
                fact = {"kind": kind, "doc": ""}
            else:
                fact = self.callable_fact(statement, kind, drop_first=kind != "staticmethod")
            fact["origin"] = f"{module}:{node.name}.{statement.name}"
            found[statement.name] = self.deprecate(fact, f"{module}.{node.name}.{statement.name}")
        if depth < 8:
            for base, base_module in self.base_classes(node, module):
                for name, fact in self.members(base, base_module, depth + 1).items():
                    found.setdefault(name, fact)
        return found


def _class_of(reader: _Reader, fact: Fact, binding: Binding) -> tuple[ast.ClassDef, str] | None:
    """The class node (and its module) an exported name is: a class of the sources, or a C++ class
    whose `.pyi` stub the wheel ships (ProcessGroup, Work, Store, Placement from 2.15)."""
    if binding.kind == "class" and isinstance(binding.node, ast.ClassDef):
        return binding.node, fact["origin"].split(":")[0]
    if fact["kind"] == "external":
        module, _, name = fact["origin"].partition(":")
        return reader.stub_class(module, name)
    return None


def _hidden_names(source: ReleaseSource, module_name: str, exported: list[str]) -> list[str]:
    """Public names a module binds but does not export (a name that left `__all__` still imports:
    torch.distributed.autograd.backward): its own definitions and what it imports from torch.distributed
    or elsewhere in torch (2.15's `from torch.compiler import is_dynamo_compiling as is_torchdynamo_compiling`).
    The build keeps them only for names some release exports."""
    module = source.modules[source.real(module_name)]
    return [name for name, b in module.bindings.items()
            if not name.startswith("_") and name not in exported and b.kind != "module"
            and (b.kind != "import" or b.source.startswith("torch."))]


def read_release(files: dict[str, str]) -> dict[str, Fact]:
    """{qualified name: fact} for the release whose sources are `files` ({wheel path: text}). A name
    `hidden` resolves (import + attribute access) without being exported."""
    source = ReleaseSource({p: t for p, t in files.items() if wanted_path(p)})
    reader = _Reader(source)
    facts: dict[str, Fact] = {}
    classes: list[tuple[str, ast.ClassDef, str, bool]] = []  # (public name, node, module, hidden)
    names = sorted(set(source.modules) | set(source.redirects))
    for module_name in names:
        if not public_module(module_name):
            continue
        real = source.real(module_name)
        module = source.modules[real]
        # `from .fully_shard import fully_shard` in a package rebinds the submodule's name to the function:
        # an export read earlier (the package sorts first) wins over the submodule of the same name.
        if module_name not in facts:
            facts[module_name] = reader.deprecate(
                {"kind": "module", "doc": _first_line(module.tree), "origin": real}, real)
        exported = source.exports(module_name)
        for name, hidden in [(n, False) for n in exported] + [(n, True) for n in _hidden_names(
                source, module_name, exported)]:
            resolved = source.resolve(module_name, name)
            if resolved is None or f"{module_name}.{name}" in facts:
                continue  # listed in __all__ but never bound (a stale entry): `from m import *` fails on it
            defining, real_name, binding = resolved
            if binding.kind == "module" and source.real(binding.source) == source.real(f"{module_name}.{name}"):
                continue  # a submodule: it has its own entry
            fact = reader.deprecate(reader.fact(defining, real_name, binding), f"{module_name}.{name}")
            if hidden:
                fact["hidden"] = True
            facts[f"{module_name}.{name}"] = fact
            found = _class_of(reader, fact, binding)
            if found is not None:
                classes.append((f"{module_name}.{name}", found[0], found[1], hidden))
    for public, node, defining, hidden in classes:
        # Members of a class some builds lack (ProcessGroupMPI: only where torch was built with MPI) share that.
        mark = {"hidden": True} if hidden else {}
        if facts[public].get("conditional"):
            mark["conditional"] = True
        for member, fact in reader.members(node, defining).items():
            facts[f"{public}.{member}"] = {**fact, **mark}
    return dict(sorted(facts.items()))
