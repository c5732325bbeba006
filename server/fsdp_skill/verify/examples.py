"""Catalog examples as the runner sees them: read with `json` alone, cut into executable units.

The runner must work from a plain clone with only torch installed, so it reads `references/catalog.json`
with the stdlib instead of the pydantic models in `fsdp_skill.core.catalog` (the field names are the same).

A *unit* is the smallest piece of source that compiles on its own, with the output documented under it.
Most units are one doctest step; upstream sometimes writes block bodies with `>>>` instead of `...`
(`>>> for i in range(n):` / `>>>     dist.scatter(...)`), and those steps are merged until they compile.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_skill.core.errors import UserError  # stdlib only

_RANK_TAG = re.compile(r"\s*#\s*rank\s*(\d+)\s*$", re.IGNORECASE)


class CatalogReadError(UserError):
    """catalog.json is missing or not a catalog; the message says what to do."""


@dataclass(frozen=True)
class Unit:
    """Source that compiles on its own, and what the docs say it prints (shared, or per rank)."""

    source: str
    expected: str | None
    expected_by_rank: dict[int, str]
    line: int | None

    def wants_output(self) -> bool:
        return self.expected is not None or bool(self.expected_by_rank)

    def expected_for(self, rank: int) -> str | None:
        return self.expected_by_rank.get(rank, self.expected)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "expected": self.expected,
            "expected_by_rank": {str(k): v for k, v in sorted(self.expected_by_rank.items())},
            "line": self.line,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Unit:
        return cls(
            source=data["source"],
            expected=data.get("expected"),
            expected_by_rank={int(k): v for k, v in (data.get("expected_by_rank") or {}).items()},
            line=data.get("line"),
        )


@dataclass(frozen=True)
class ExampleSpec:
    """One catalog example, cut into units; `notes` lists inconsistencies found in the catalog entry."""

    id: str
    symbol: str
    units: tuple[Unit, ...]
    world_size: int
    device: str
    requires: tuple[str, ...]
    skip: str | None
    source: str | None
    line: int | None
    notes: tuple[str, ...] = field(default=())

    @property
    def code(self) -> str:
        return "\n".join(u.source for u in self.units)


def _strip_rank_tag(text: str) -> str:
    return "\n".join(_RANK_TAG.sub("", line) for line in text.splitlines())


def _compiles(source: str) -> bool:
    try:
        compile(source, "<example>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def _raw_steps(entry: dict[str, Any]) -> list[dict[str, Any]]:
    steps = entry.get("steps") or []
    if steps:
        return steps
    code = entry.get("code") or ""
    # A fenced example from a page has code but no doctest steps: it runs as one unit, checking no output.
    return (
        [{"source": code, "expected": None, "expected_by_rank": {}, "line": entry.get("line")}] if code.strip() else []
    )


_BLOCK_CONTINUATION = re.compile(r"^(else|elif|except|finally)\b")


def _continues_block(source: str) -> bool:
    """Whether a step is the body or next clause of the block above (upstream's `>>>` continuations)."""
    first = next((ln for ln in source.splitlines() if ln.strip()), "")
    return first[:1].isspace() or bool(_BLOCK_CONTINUATION.match(first))


def _has_output(step: dict[str, Any]) -> bool:
    return step.get("expected") is not None or bool(step.get("expected_by_rank"))


def build_units(steps: list[dict[str, Any]]) -> list[Unit]:
    """Turn catalog steps into compilable units, merging steps that only compile together.

    A step joins the one above while the code so far does not compile (an open `for ...:`) or while it
    is indented / an `else:`-like clause (the body of a block upstream wrote with `>>>` prompts), as
    long as nothing above it documents an output.
    """
    units: list[Unit] = []
    i = 0
    while i < len(steps):
        j = i
        while j + 1 < len(steps) and not _has_output(steps[j]):
            joined = "\n".join(s.get("source") or "" for s in steps[i : j + 1])
            if _compiles(joined) and not _continues_block(steps[j + 1].get("source") or ""):
                break
            j += 1
        last = steps[j]
        expected = last.get("expected")
        by_rank = {int(k): _strip_rank_tag(v) for k, v in (last.get("expected_by_rank") or {}).items()}
        source = "\n".join(s.get("source") or "" for s in steps[i : j + 1])
        units.append(
            Unit(source, _strip_rank_tag(expected) if expected is not None else None, by_rank, steps[i].get("line"))
        )
        i = j + 1
    return units


_STATED_WORLD_SIZE = re.compile(r"world[_ ]size (?:of|is|=)\s*(\d+)", re.IGNORECASE)


def _mesh_sizes(code: str) -> list[int]:
    """Ranks a literal device mesh needs: init_device_mesh(..., (2, 4)) -> 8; DeviceMesh(..., [[0, 1], [2, 3]]) -> 4."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    sizes: list[int] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        keywords = {k.arg: k.value for k in node.keywords}
        if name == "init_device_mesh":
            shape = keywords.get("mesh_shape", node.args[1] if len(node.args) > 1 else None)
            elts = shape.elts if isinstance(shape, ast.Tuple) else []
            dims = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
            if isinstance(shape, ast.Tuple) and len(dims) == len(elts):
                sizes.append(math.prod(dims))
        elif name == "DeviceMesh":
            mesh = keywords.get("mesh", node.args[1] if len(node.args) > 1 else None)
            if isinstance(mesh, (ast.List, ast.Tuple)):
                sizes.append(sum(1 for e in ast.walk(mesh) if isinstance(e, ast.Constant) and isinstance(e.value, int)))
    return sizes


def _inferred_world_size(units: list[Unit], catalog_size: int, notes: list[str]) -> int:
    """The catalog's world size, raised (with a note) when the example itself proves it needs more."""
    size = catalog_size
    tagged = {rank for u in units for rank in u.expected_by_rank}
    code = "\n".join(u.source for u in units)
    evidence = [
        (max(tagged) + 1 if tagged else 0, f"outputs are tagged up to '# Rank {max(tagged) if tagged else 0}'"),
        *((int(m.group(1)), f"the code says '{m.group(0)}'") for m in _STATED_WORLD_SIZE.finditer(code)),
        *((n, f"a literal device mesh spans {n} ranks") for n in _mesh_sizes(code)),
    ]
    for needed, why in evidence:
        if 0 < needed <= 64 and needed > size:
            notes.append(f"catalog world_size {catalog_size}, but {why}")
            size = needed
    return size


def spec_from_entry(entry: dict[str, Any]) -> ExampleSpec:
    units = build_units(_raw_steps(entry))
    notes: list[str] = []
    world_size = _inferred_world_size(units, int(entry.get("world_size") or 1), notes)
    for unit in units:
        if not _compiles(unit.source):
            notes.append(f"step at line {unit.line} does not compile on its own")
    return ExampleSpec(
        id=entry["id"],
        symbol=entry.get("symbol") or entry["id"].split("#")[0],
        units=tuple(units),
        world_size=world_size,
        device=entry.get("device") or "cpu",
        requires=tuple(entry.get("requires") or ()),
        skip=entry.get("skip"),
        source=entry.get("source"),
        line=entry.get("line"),
        notes=tuple(notes),
    )


def read_catalog(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogReadError(f"{path} does not exist: run `fsdp-skill regenerate` (or pass --catalog PATH)") from None
    except OSError as exc:
        raise CatalogReadError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CatalogReadError(
            f"{path} is not valid JSON ({exc}): regenerate it with `fsdp-skill regenerate`"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("examples"), list):
        raise CatalogReadError(f"{path} has no 'examples' list: it is not a catalog.json; regenerate it")
    return data


def load_examples(path: Path) -> tuple[str | None, list[ExampleSpec]]:
    """The catalog's torch version and its examples, in catalog order."""
    data = read_catalog(path)
    return data.get("torch_version"), examples_from_catalog(data, path)


def examples_from_catalog(data: dict[str, Any], path: Path) -> list[ExampleSpec]:
    """The examples of a catalog `read_catalog` returned; `path` names it in error messages."""
    specs: list[ExampleSpec] = []
    for entry in data["examples"]:
        try:
            specs.append(spec_from_entry(entry))
        except (KeyError, TypeError, ValueError) as exc:
            raise CatalogReadError(
                f"{path}: malformed example {entry.get('id', '?')!r} ({exc!r}); regenerate it"
            ) from None
    return specs


def select(
    specs: list[ExampleSpec],
    ids: list[str] | None = None,
    pattern: str | None = None,
) -> list[ExampleSpec]:
    """Filter by exact ids (order kept as given) and a case-insensitive substring of the id."""
    chosen = specs
    if ids:
        by_id = {s.id: s for s in specs}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            near = [s.id for s in specs if unknown[0].split("#")[0].lower() in s.id.lower()][:5]
            hint = f" (similar: {', '.join(near)})" if near else " (list them with `fsdp-skill search --kind example`)"
            raise CatalogReadError(f"no example with id {unknown[0]!r} in the catalog{hint}")
        chosen = [by_id[i] for i in dict.fromkeys(ids)]
    if pattern:
        needle = pattern.lower()
        chosen = [s for s in chosen if needle in s.id.lower()]
    return chosen
