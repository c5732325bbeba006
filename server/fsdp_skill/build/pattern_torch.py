"""The oldest torch a pattern runs on, computed statically from the API timeline (references/api-history.json).

A pattern's `min_torch:` header line (right after `name:`) states it; `fsdp-skill validate` recomputes it here and
reports a header that disagrees. What the pattern needs: every torch.distributed / torch.utils.checkpoint name it
imports or uses as a dotted name (`build.code_names.used_names`), each module it imports, the methods it calls on
instances of the scope's classes it imports (`module.set_gradient_divide_factor(...)` with FSDPModule imported:
the instance's type is not known statically), and every keyword
argument it passes to one of those callables (`fully_shard(m, shard_placement_fn=...)`). Each needs the first
release of the run of releases that ends at the pinned torch and has it (a keyword: the release whose signature
change added it, when later than the name itself). A name the timeline does not hold (an enum value, a class's
attribute) counts by its longest prefix the timeline holds. The answer is the newest of those, as major.minor;
the oldest release read (2.4) when nothing is newer.

Releases are read from their last patch (2.5.1 for 2.5): `min_torch: 2.5` means "from 2.5.1 on" strictly.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from fsdp_skill.build.code_names import SCOPE, used_names
from fsdp_skill.core.api_history import ApiHistory, NameHistory, release_key
from fsdp_skill.verify.code_shape import dotted_parts
from fsdp_skill.verify.patterns import PatternHeader
from fsdp_skill.verify.static_check import CONVENTIONAL, page_imports

__all__ = ["MinTorch", "header_problems", "min_torch", "minor"]


def minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


@dataclass
class MinTorch:
    release: str  # the oldest full release ('2.6.0')
    because: list[tuple[str, str]] = field(default_factory=list)  # (what, the release it needs), newest first

    @property
    def minor(self) -> str:
        return minor(self.release)


def _since(entry: NameHistory, history: ApiHistory) -> str | None:
    """The first release of the run of releases, ending at the pinned one, that has the name."""
    releases = history.releases[: history.releases.index(history.pinned) + 1]
    if history.pinned not in entry.versions:
        return None
    start = history.pinned
    for release in reversed(releases):
        if release not in entry.versions:
            break
        start = release
    return start


def _entry(name: str, history: ApiHistory) -> NameHistory | None:
    parts = name.split(".")
    for cut in range(len(parts), 1, -1):
        entry = history.names.get(".".join(parts[:cut]))
        if entry is not None:
            return entry
    return None


def _keywords(tree: ast.Module) -> set[tuple[str, str]]:
    """(callable's torch path, keyword) for every call of a scope name with keyword arguments."""
    names = {**CONVENTIONAL, **page_imports([tree])}
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.keywords:
            continue
        func = node.func
        parts = [func.id] if isinstance(func, ast.Name) else dotted_parts(func) if isinstance(func, ast.Attribute) \
            else None
        if not parts or parts[0] not in names:
            continue
        path = ".".join([names[parts[0]], *parts[1:]])
        if path.startswith(SCOPE):
            found.update((path, k.arg) for k in node.keywords if k.arg)
    return found


def _instance_methods(tree: ast.Module, history: ApiHistory) -> set[str]:
    """`Class.method` for every call `obj.method(...)` on an object that is not an imported name (an instance:
    `module.set_gradient_divide_factor(1.0)`) where a class the code imports from the scope has that method
    in the timeline: the type is not known statically, the classes the code names are the candidates."""
    names = {**CONVENTIONAL, **page_imports([tree])}
    classes = [path for path in names.values() if path.startswith(SCOPE)
               and (entry := history.names.get(path)) is not None and entry.kind in ("class", "external")]
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = dotted_parts(node.func.value) if isinstance(node.func.value, (ast.Name, ast.Attribute)) else None
        if owner and owner[0] in names:
            continue  # `dist.barrier()`, `FSDP.state_dict_type(...)`: a dotted name, counted by used_names
        found.update(f"{cls}.{node.func.attr}" for cls in classes if f"{cls}.{node.func.attr}" in history.names)
    return found


def _modules(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(SCOPE))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith(SCOPE):
            found.add(node.module)
    return found


def min_torch(text: str, history: ApiHistory) -> MinTorch:
    """The oldest release (of those read, up to the pinned one) where everything the code uses exists."""
    oldest = history.releases[0]
    needs: list[tuple[str, str]] = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return MinTorch(oldest)
    for name in sorted(used_names([text]) | _modules(tree) | _instance_methods(tree, history)):
        entry = _entry(name, history)
        since = _since(entry, history) if entry else None
        if since:
            needs.append((entry.name if entry else name, since))
    for path, keyword in sorted(_keywords(tree)):
        entry = _entry(path, history)
        if entry is None or entry.name != path:
            continue
        added = [c.version for c in entry.signature_changes if keyword in c.added
                 and release_key(c.version) <= release_key(history.pinned)]
        if added:
            needs.append((f"{path}({keyword}=...)", added[-1]))
    needs.sort(key=lambda item: (release_key(item[1]), item[0]), reverse=True)
    newest = needs[0][1] if needs and release_key(needs[0][1]) > release_key(oldest) else oldest
    return MinTorch(newest, [n for n in needs if n[1] == newest and newest != oldest])


def header_problems(
    text: str, header: PatternHeader, history: ApiHistory, ran_from: str | None = None
) -> list[tuple[int, str]]:
    """(line, problem) where a pattern's `min_torch:` header line is missing, misplaced, or not what the runs say:
    `ran_from`, the first release of the release matrix from which it passed on every release run. Without runs
    (a GPU or SLURM pattern) it is what the timeline gives for its code (a shell template uses no torch name:
    the oldest release read). Names tell what exists; runs tell what works."""
    name_line = header.key_lines.get("name", 1)
    if ran_from is not None:
        fix = f"min_torch: {minor(ran_from)}"
        if header.min_torch is None:
            return [(name_line, f"no min_torch: add the line '{fix}' right after the name: line")]
        if header.min_torch != minor(ran_from):
            return [(header.key_lines["min_torch"], f"min_torch: {header.min_torch} but the release matrix "
                     f"(references/verification-releases.md) has it passing from {ran_from} on: write '{fix}'")]
        if header.key_lines["min_torch"] != name_line + 1:
            return [(header.key_lines["min_torch"], "min_torch: must be the line right after name:")]
        return []
    computed = min_torch(text, history) if header.kind == "python" else MinTorch(history.releases[0])
    fix = f"min_torch: {computed.minor}"
    if header.min_torch is None:
        return [(name_line, f"no min_torch: add the line '{fix}' right after the name: line")]
    problems = []
    if header.key_lines["min_torch"] != name_line + 1:
        problems.append((header.key_lines["min_torch"], "min_torch: must be the line right after name:"))
    if header.min_torch != computed.minor:
        needs = ", ".join(f"{what} needs {minor(release)}" for what, release in computed.because[:3])
        problems.append((header.key_lines["min_torch"],
                         f"min_torch: {header.min_torch} but the API timeline gives {computed.minor}"
                         + (f" ({needs})" if needs else " (every name it uses is in the oldest release read)")
                         + f": write '{fix}'"))
    return problems
