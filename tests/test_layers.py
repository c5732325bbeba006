"""The package's layout: imports go only down the pipeline, and no two modules import each other in a cycle.

The rules read from the AST of every module, so an import added anywhere (top level or inside a
function) is caught: a forbidden direction or a new cycle fails here with the file and line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "fsdp_skill"

# Which subpackages each stage may import (besides itself). `verify` is stdlib + torch (plus the stdlib
# `core.atomic` and `core.scratch`), so a plain clone runs it; `build` reads the pattern header parser
# from `verify.patterns`.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "upstream": {"core"},
    "convert": {"core"},
    "apidoc": {"convert", "core"},
    "search": {"core"},
    "build": {"apidoc", "convert", "search", "upstream", "core", "verify"},
    "serve": {"search", "core"},
    "verify": {"core"},
    "cli": {"serve", "build", "verify", "search", "apidoc", "convert", "upstream", "core"},
}
# Top-level modules of the package that are not a stage: they may import the CLI only.
ROOT_MODULES = {"__init__": set(), "__main__": {"cli"}}


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted under fsdp_skill ('build.pipeline')
    target: str  # imported module, dotted under fsdp_skill ('core.catalog')
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def resolve(target: str, modules: dict[str, Path]) -> str:
    """`from pkg import name` names a module when pkg.name is one; otherwise the import is of pkg itself."""
    return (
        target if target in modules else target.rpartition(".")[0] if target.rpartition(".")[0] in modules else target
    )


def imports_of(path: Path, modules: dict[str, Path]) -> list[Import]:
    source = module_name(path)
    package = source.split(".") if path.name == "__init__.py" else source.split(".")[:-1]
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "fsdp_skill":
                    found.append(Import(source, resolve(alias.name.partition(".")[2], modules), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "fsdp_skill":
                stem = node.module.partition(".")[2]
            else:
                continue
            for alias in node.names:
                full = f"{stem}.{alias.name}" if stem else alias.name
                found.append(Import(source, resolve(full, modules) if full in modules else stem, node.lineno))
    return [imp for imp in found if imp.target and imp.target != imp.source]


def stage(module: str) -> str:
    return module.split(".")[0]


def forbidden(imports: list[Import]) -> list[str]:
    lines = []
    for imp in imports:
        src, dst = stage(imp.source), stage(imp.target)
        if src == dst:
            continue
        allowed = ALLOWED.get(src, ROOT_MODULES.get(src))
        if allowed is None or dst not in allowed:
            lines.append(f"fsdp_skill/{imp.source.replace('.', '/')}.py:{imp.line}: {src} may not import {imp.target}")
    return lines


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle to break."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        graph.setdefault(imp.source, set()).add(imp.target)
        graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def package_imports() -> list[Import]:
    modules = all_modules()
    return [imp for path in modules.values() for imp in imports_of(path, modules)]


def test_every_module_lives_in_a_stage_subpackage() -> None:
    loose = [
        name for name in all_modules() if "." not in name and name not in ROOT_MODULES and name not in ALLOWED and name
    ]
    assert loose == [], f"modules outside a stage subpackage: {loose}"
    assert len(ALLOWED) >= 5


def test_imports_only_go_down_the_pipeline(package_imports: list[Import]) -> None:
    assert forbidden(package_imports) == []


def test_no_module_imports_itself_through_a_cycle(package_imports: list[Import]) -> None:
    assert cycles(package_imports) == []


def declared_all(package: str, modules: dict[str, Path]) -> set[str] | None:
    """The names in a package's `__all__`, read from its `__init__.py` without importing it (None: no __all__)."""
    path = modules[package]
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {
                elt.value
                for elt in ast.walk(node.value)
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str)
            }
    return None


def undeclared(imports: list[Import], modules: dict[str, Path]) -> list[str]:
    """Imports from another stage of a module its package's `__all__` does not list (every package level)."""
    lines = []
    for imp in imports:
        if stage(imp.source) == stage(imp.target):
            continue
        parts = imp.target.split(".")
        for depth in range(1, len(parts)):
            package, name = ".".join(parts[:depth]), parts[depth]
            if package in modules and name not in (declared_all(package, modules) or set()):
                lines.append(f"fsdp_skill/{imp.source.replace('.', '/')}.py:{imp.line}: {imp.target} is not in "
                             f"{package}.__all__")
                break
    return list(dict.fromkeys(lines))


def test_every_subpackage_declares_its_public_face_in_all() -> None:
    modules = all_modules()
    packages = [name for name, path in modules.items() if path.name == "__init__.py"]
    assert [p for p in packages if declared_all(p, modules) is None] == []


def test_other_stages_import_only_the_modules_a_subpackage_declares(package_imports: list[Import]) -> None:
    assert undeclared(package_imports, all_modules()) == []


def test_no_module_is_over_600_lines() -> None:
    long = {name: n for name, path in all_modules().items() if (n := len(path.read_text().splitlines())) > 600}
    assert long == {}


def test_the_layer_rule_catches_a_forbidden_import(tmp_path: Path) -> None:
    # The rule itself must be able to fail: search importing the build is reported with file and line.
    bad = [Import("search.ranking", "build.pipeline", 12), Import("serve.tools", "search.index", 3)]
    assert forbidden(bad) == ["fsdp_skill/search/ranking.py:12: search may not import build.pipeline"]


def test_the_cycle_rule_catches_a_cycle() -> None:
    ring = [Import("a.x", "a.y", 1), Import("a.y", "a.z", 1), Import("a.z", "a.x", 1), Import("a.z", "b.q", 1)]
    assert cycles(ring) == [["a.x", "a.y", "a.z"]]


def test_the_public_face_rule_catches_an_import_of_an_undeclared_module() -> None:
    modules = all_modules()
    bad = [Import("serve.tools", "search.documents", 7), Import("serve.tools", "search.index", 8)]
    assert undeclared(bad, modules) == ["fsdp_skill/serve/tools.py:7: search.documents is not in search.__all__"]
