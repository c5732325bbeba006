"""The modules of one torch release, read with `ast` from its `.py` sources (never imported).

`ReleaseSource(files)` takes {wheel path: source text} (`torch/distributed/fsdp/__init__.py` -> ...) and
answers, per module: which names it binds at run time, where each one comes from (its own `def`/`class`,
or an import that `resolve` follows to the defining module), and which names it exports (`__all__`, or
its public bindings). `apidoc.release_api` turns that into the per-release facts.

Why static: every torch from 2.4 on is read on one machine with one (pinned) torch installed; importing
a wheel's torch would need its C extensions for this platform. The price is that only what the source
spells literally is seen: a name built at run time (`globals()[...] = ...`) is not.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import PurePosixPath

# Modules whose names come from C++ (torch._C): they are not in the wheel's .py files, so a name imported
# from them is recorded as "external" (it exists, its signature is not read).
EXTERNAL_PREFIXES = ("torch._C",)
# Where a package's `from X import name` counts as a re-export when it has no `__all__`: the stdlib's and
# typing's names that every module imports are not part of torch's API.
REEXPORT_PREFIXES = ("torch.distributed", "torch.utils.checkpoint", "torch._C._distributed")
MAX_ALIAS_DEPTH = 12  # longest chain of re-exports followed (cycles stop here too)


def module_name(path: str) -> str:
    """'torch/distributed/fsdp/__init__.py' -> 'torch.distributed.fsdp' (a `.pyi` stub of a C++ module:
    'torch/_C/_distributed_c10d.pyi' -> 'torch._C._distributed_c10d')."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class Binding:
    """What a module-level name is bound to."""

    kind: str  # 'def' | 'class' | 'assign' | 'import' | 'module'
    node: ast.AST | None = None  # the def/class/assignment value
    source: str = ""  # for 'import': the module the name comes from; for 'module': the module itself
    name: str = ""  # for 'import': the name in `source` ('' when the import binds the module)
    conditional: bool = False  # bound under an `if`/`try`/`for` (may be absent from some builds)


@dataclass
class Module:
    name: str
    path: str
    text: str
    tree: ast.Module
    is_package: bool
    bindings: dict[str, Binding] = field(default_factory=dict)
    star_imports: list[str] = field(default_factory=list)
    # How __all__ is built, in order: ('=', expr), ('+=', expr), ('extend', expr), ('append', expr).
    all_steps: list[tuple[str, ast.expr]] = field(default_factory=list)
    # `sys.modules["a.b"] = import_module("c.d")` run on import (the `_tensor` shim's loop): {a.b: c.d}
    redirects: dict[str, str] = field(default_factory=dict)


def _absolute(module: Module, level: int, target: str | None) -> str:
    """The absolute module a `from ...target import` inside `module` names."""
    if not level:
        return target or ""
    base = module.name.split(".")
    base = base if module.is_package else base[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _runtime_statements(body: list[ast.stmt]) -> list[tuple[ast.stmt, bool]]:
    """(statement, conditional?) for every statement that runs at import: nested `if`/`try`/`with` bodies
    are walked (both branches; the first binding wins there), `if TYPE_CHECKING:` blocks are not."""
    out: list[tuple[ast.stmt, bool]] = []

    def walk(statements: list[ast.stmt], conditional: bool) -> None:
        for statement in statements:
            if isinstance(statement, ast.If):
                test = ast.unparse(statement.test)
                if "TYPE_CHECKING" in test:
                    walk(statement.orelse, True)
                    continue
                walk(statement.body, True)
                walk(statement.orelse, True)
            elif isinstance(statement, ast.Try):
                walk(statement.body, True)
                for handler in statement.handlers:
                    walk(handler.body, True)
                walk(statement.orelse, True)
                walk(statement.finalbody, conditional)
            elif isinstance(statement, ast.With):
                walk(statement.body, conditional)
            elif isinstance(statement, (ast.For, ast.While)):
                walk(statement.body, True)
            else:
                out.append((statement, conditional))

    walk(body, False)
    return out


def _literal_names(node: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def _format(node: ast.expr, env: dict[str, str]) -> str | None:
    """A string constant, a name `env` binds, or an f-string over `env`; None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                out.append(part.value)
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name) and part.value.id in env:
                out.append(env[part.value.id])
            else:
                return None
        return "".join(out)
    return None


def _redirect(statement: ast.stmt, env: dict[str, str]) -> tuple[str, str] | None:
    """(alias, real module) of `sys.modules[ALIAS] = import_module(REAL)` (either may be an f-string of
    `env`'s loop variables); None for any other statement."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return None
    target, value = statement.targets[0], statement.value
    if not (isinstance(target, ast.Subscript) and ast.unparse(target.value) == "sys.modules"
            and isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "import_module"
            and len(value.args) == 1):
        return None
    alias, real = _format(target.slice, env), _format(value.args[0], env)
    return (alias, real) if alias and real else None


def _redirects(module: "Module") -> dict[str, str]:
    """The `sys.modules` redirects a module runs on import: single statements and `for x in LIST:` loops
    over a literal list (or a module-level name bound to one), as torch.distributed._tensor does from 2.5
    (`_tensor.device_mesh` is `tensor.device_mesh` though no file defines it)."""
    lists = {name: values for statement in module.tree.body if isinstance(statement, ast.Assign)
             for name, values in [(ast.unparse(statement.targets[0]), _literal_names(statement.value))]
             if values is not None}
    found: dict[str, str] = {}
    for statement in module.tree.body:
        one = _redirect(statement, {})
        if one:
            found[one[0]] = one[1]
        if isinstance(statement, ast.For) and isinstance(statement.target, ast.Name):
            values = _literal_names(statement.iter) or lists.get(ast.unparse(statement.iter))
            for value in values or []:
                env = {statement.target.id: value}
                for inner in statement.body:  # `full = f"torch.distributed.tensor.{submodule}"` then the redirect
                    if isinstance(inner, ast.Assign) and isinstance(inner.targets[0], ast.Name):
                        text = _format(inner.value, env)
                        if text is not None:
                            env[inner.targets[0].id] = text
                    one = _redirect(inner, env)
                    if one:
                        found[one[0]] = one[1]
    return found


class ReleaseSource:
    """Every module of one release's sources, with name resolution across them."""

    def __init__(self, files: dict[str, str]) -> None:
        self.modules: dict[str, Module] = {}
        self.unparsed: list[str] = []
        for path in sorted(files):
            try:
                tree = ast.parse(files[path], filename=path)
            except SyntaxError:
                self.unparsed.append(path)
                continue
            name = module_name(path)
            module = Module(name, path, files[path], tree, path.endswith("__init__.py"))
            self._bind(module)
            module.redirects = _redirects(module)
            self.modules[name] = module
        # {alias: real module}: a redirect to a module the sources have, unless a file defines the alias
        self.redirects = {alias: real for module in self.modules.values() for alias, real in module.redirects.items()
                          if real in self.modules and alias not in self.modules}
        self._exports: dict[str, list[str]] = {}

    # --- per module -------------------------------------------------------------------------------

    def _bind(self, module: Module) -> None:
        for statement, conditional in _runtime_statements(module.tree.body):
            found: list[tuple[str, Binding]] = []
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((statement.name, Binding("def", statement)))
            elif isinstance(statement, ast.ClassDef):
                found.append((statement.name, Binding("class", statement)))
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    if alias.asname:
                        found.append((alias.asname, Binding("module", source=alias.name)))
                    else:
                        top = alias.name.split(".")[0]
                        found.append((top, Binding("module", source=top)))
            elif isinstance(statement, ast.ImportFrom):
                source = _absolute(module, statement.level, statement.module)
                for alias in statement.names:
                    if alias.name == "*":
                        module.star_imports.append(source)
                    else:
                        found.append((alias.asname or alias.name, Binding("import", source=source, name=alias.name)))
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                value = statement.value
                for target in targets:
                    if isinstance(target, ast.Name) and value is not None:
                        if target.id == "__all__":
                            module.all_steps.append(("=", value))
                        else:
                            found.append((target.id, Binding("assign", value)))
            elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                if statement.target.id == "__all__" and isinstance(statement.op, ast.Add):
                    module.all_steps.append(("+=", statement.value))
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                call = statement.value
                func = call.func
                if (isinstance(func, ast.Attribute) and func.attr in ("extend", "append")
                        and isinstance(func.value, ast.Name) and func.value.id == "__all__" and call.args):
                    module.all_steps.append((func.attr, call.args[0]))
            for name, binding in found:
                binding.conditional = conditional
                if not conditional or name not in module.bindings:
                    module.bindings[name] = binding

    def _all_value(self, module: Module, node: ast.expr, current: list[str]) -> list[str] | None:
        """The names an `__all__` expression stands for: a literal list, `__all__` itself, another module's
        `m.__all__`, or sums of those; None when it is computed some other way."""
        literal = _literal_names(node)
        if literal is not None:
            return literal
        if isinstance(node, ast.Name) and node.id == "__all__":
            return list(current)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._all_value(module, node.left, current), self._all_value(module, node.right, current)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.Attribute) and node.attr == "__all__" and isinstance(node.value, ast.Name):
            binding = module.bindings.get(node.value.id)
            if binding is not None and binding.kind == "module":
                return self.exports(binding.source)
            if binding is not None and binding.kind == "import":
                return self.exports(f"{binding.source}.{binding.name}" if binding.name else binding.source)
        return None

    def declared_all(self, module: Module) -> list[str] | None:
        """The module's `__all__` when it can be read statically, else None."""
        names: list[str] | None = None
        for step, node in module.all_steps:
            if step == "append":
                value = [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
            else:
                value = self._all_value(module, node, names or [])
            if value is None:
                return None
            names = value if step == "=" else (names or []) + value
        return None if names is None else list(dict.fromkeys(names))

    def real(self, module_name: str) -> str:
        """The module a name means at run time: itself, or what a `sys.modules` redirect puts there."""
        return self.redirects.get(module_name, module_name)

    def _submodule(self, package: str, name: str) -> str | None:
        full = f"{package}.{name}"
        return full if full in self.modules or full in self.redirects else None

    def exports(self, module_name: str) -> list[str]:
        """The names `from module import *` gives, and the ones a module offers users: `__all__` if it is
        a literal, else its public bindings (no leading underscore, no plain `import x`, and from-imports
        only from torch.distributed itself), then star-imported names."""
        if module_name in self._exports:
            return self._exports[module_name]
        self._exports[module_name] = []  # a star-import cycle ends here
        module = self.modules.get(self.real(module_name))
        if module is None:
            return []
        declared = self.declared_all(module)
        if declared is not None:
            names = declared
        else:
            # Without __all__: what the module defines, and, for a package's __init__, what it imports from
            # torch.distributed (a package gathering its submodules' names). A plain module's imports are
            # its own dependencies (`from torch.distributed.tensor import DTensor` in a debug helper), not API.
            names = [
                name for name, b in module.bindings.items()
                if not name.startswith("_") and b.kind != "module"
                and (b.kind != "import" or (module.is_package and b.source.startswith(REEXPORT_PREFIXES)))
            ]
            for source in module.star_imports:
                names += [n for n in self.exports(source) if n not in module.bindings]
        self._exports[module_name] = list(dict.fromkeys(names))
        return self._exports[module_name]

    # --- resolution -------------------------------------------------------------------------------

    def lookup(self, module_name: str, name: str) -> Binding | None:
        """The binding of `name` in `module_name`: its own, a submodule of a package, or via a star import."""
        module_name = self.real(module_name)
        module = self.modules.get(module_name)
        if module is None:
            return None
        if name in module.bindings:
            return module.bindings[name]
        for source in module.star_imports:
            if name in self.exports(source):
                return Binding("import", source=source, name=name)
        if module.is_package and self._submodule(module_name, name):
            return Binding("module", source=f"{module_name}.{name}")
        return None

    def resolve(self, module_name: str, name: str) -> tuple[str, str, Binding] | None:
        """(defining module, name there, binding) after following imports and `x = y` aliases;
        None when the name is not bound. An import from torch._C comes back as ('torch._C…', name, import)."""
        current, wanted = module_name, name
        for _ in range(MAX_ALIAS_DEPTH):
            binding = self.lookup(current, wanted)
            if binding is None:
                # `from .pkg import sub` where sub is a module of the package, not a name bound in it
                sub = self._submodule(current, wanted)
                return (current, wanted, Binding("module", source=sub)) if sub else None
            if binding.kind == "import":
                if binding.source.startswith(EXTERNAL_PREFIXES) or self.real(binding.source) not in self.modules:
                    sub = self._submodule(binding.source, binding.name)
                    if sub:
                        return binding.source, binding.name, Binding("module", source=sub)
                    return binding.source, binding.name, binding
                current, wanted = binding.source, binding.name
                continue
            if binding.kind == "assign" and isinstance(binding.node, ast.Name):
                target = binding.node.id
                if target != wanted and self.lookup(current, target) is not None:
                    wanted = target
                    continue
            return self.real(current), wanted, binding
        return None
