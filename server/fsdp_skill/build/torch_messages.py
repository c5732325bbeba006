"""The error and warning messages torch.distributed raises, read statically from the installed torch, so a
pasted error finds the API entry or the pitfall it belongs to.

An agent that hits an error pastes it: "All operands in aten.stack.default must have the same mesh, but
got …". The scan walks the AST of every `torch/distributed/**/*.py` file of the installed torch (the
pinned one, like the docstrings `apidoc` reads: nothing is imported or run) for

    raise SomeError("…")   raise SomeError(f"… {x} …")   raise SomeError("… %s" % x)   warnings.warn("…")

and keeps each message's literal text (an f-string's or a format's placeholders become "…"). A message
then joins

- the API entry whose function encloses it (its method, or the class's `__init__` for a class entry),
  matched through the entry's definition path (`apidoc.introspect`), or a helper that function calls
  directly (`FullyShardedDataParallel.__init__` → `_init_device_handle` raises "FSDP needs a non-CPU
  accelerator device"; `DefaultLoadPlanner.create_local_plan` → `create_default_local_load_plan` raises
  "Missing key in checkpoint state_dict"), when that helper's name is defined once in torch.distributed and
  is no API entry itself (one hop: deeper, every entry would collect the messages of half the package);
- every SKILL.md part (pitfall, …) that quotes part of it: the pitfall says "must have the same mesh",
  so the whole message, pasted with its other words, reaches it.

Messages that join nothing are not kept. The result is sorted and stored in the catalog, so the index is
rebuilt from committed data alone, byte for byte.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.apidoc.introspect import definition_path, resolve
from fsdp_skill.core.catalog import ApiEntry, SkillDoc

__all__ = ["Message", "Scan", "attach_messages", "scan_messages", "scan_torch", "torch_package_dir"]

SCOPE = "distributed"  # under the torch package
MIN_CHARS = 12  # literal text: shorter is a word or two ("invalid"), no evidence of anything
# A quoted fragment of a skill part claims a message when it is a phrase (three words or more, "must have
# the same mesh"): a quoted name (`hasattr(m, "reset_parameters")`) is code, not a message.
MIN_QUOTE_CHARS = 12
MAX_MESSAGES_PER_DOC = 40  # an entry's own raises; more would drown its description
PLACEHOLDER = "…"
_QUOTED = re.compile(r'"([^"\n]{%d,})"' % MIN_QUOTE_CHARS)
_PHRASE = re.compile(r"\S+\s+\S+\s+\S+")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, order=True)
class Message:
    definition: str  # the enclosing function's (or method's) dotted path: module.Class.method
    text: str
    file: str  # relative to the torch package's parent: torch/distributed/…
    line: int


def torch_package_dir() -> Path | None:
    """The installed torch's package folder (found without importing torch), or None."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass
class Scan:
    messages: list[Message]
    calls: dict[str, set[str]]  # definition → the private names (`_helper`) it calls


def scan_messages(torch_dir: Path) -> list[Message]:
    """Every literal raise / warnings.warn message under torch/distributed/, in file and line order."""
    return scan_torch(torch_dir).messages


def scan_torch(torch_dir: Path) -> Scan:
    """The messages, and which private helpers each function calls."""
    out: list[Message] = []
    calls: dict[str, set[str]] = {}
    for path in sorted((torch_dir / SCOPE).rglob("*.py")):
        relative = path.relative_to(torch_dir.parent)
        module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        _Visitor(module, relative.as_posix(), out, calls).visit(tree)
    return Scan(out, calls)


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, file: str, out: list[Message], calls: dict[str, set[str]]) -> None:
        self.module, self.file, self.out, self.calls = module, file, out, calls
        self.scope: list[str] = []
        self.in_function = 0

    def _named(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        # A nested function's messages belong to the outermost function: that is what the API names.
        nested = self.in_function > 0
        is_function = not isinstance(node, ast.ClassDef)
        if not nested:
            self.scope.append(node.name)
            if is_function:  # every definition counts when deciding whether a helper's name is unique
                self.calls.setdefault(".".join([self.module, *self.scope]), set())
        self.in_function += is_function
        self.generic_visit(node)
        self.in_function -= is_function
        if not nested:
            self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _named

    def visit_Raise(self, node: ast.Raise) -> None:
        if isinstance(node.exc, ast.Call) and node.exc.args:
            self._add(node.exc.args[0], node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "warn"
            and isinstance(func.value, ast.Name)
            and func.value.id == "warnings"
            and node.args
        ):
            self._add(node.args[0], node.lineno)
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        # A private helper (self._init_x(), _check()), or a module-level function called by its bare name
        # (`create_default_local_load_plan(...)`, which raises DefaultLoadPlanner's "Missing key in checkpoint
        # state_dict"): attach_messages keeps those defined once and not themselves an API entry.
        helper = called.startswith("_") and not called.startswith("__") or isinstance(func, ast.Name)
        if helper and called and self.scope:
            self.calls.setdefault(".".join([self.module, *self.scope]), set()).add(called)
        self.generic_visit(node)

    def _add(self, node: ast.expr, line: int) -> None:
        text = literal_text(node)
        if text is None or len(text.replace(PLACEHOLDER, "").strip()) < MIN_CHARS or not self.scope:
            return
        self.out.append(Message(".".join([self.module, *self.scope]), text, self.file, line))


def literal_text(node: ast.expr) -> str | None:
    """The text of a message expression: a string, an f-string (placeholders as …), "…" % x, "…".format(),
    or a concatenation of those, whitespace folded; None when it holds no literal text (a variable)."""
    text = _raw_text(node)
    return None if text is None else _SPACES.sub(" ", text).strip()


def _raw_text(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfigx]|\{[^{}]*\}", PLACEHOLDER, node.value)
    elif isinstance(node, ast.JoinedStr):
        text = "".join(
            part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else PLACEHOLDER
            for part in node.values
        )
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _raw_text(node.left)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _raw_text(node.left), _raw_text(node.right)
        if left is None and right is None:
            return None
        text = (left or PLACEHOLDER) + (right or PLACEHOLDER)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
    ):
        return _raw_text(node.func.value)
    else:
        return None
    return text


def attach_messages(
    api: Sequence[ApiEntry], skill: Sequence[SkillDoc], messages: Iterable[Message],
    calls: dict[str, set[str]] | None = None,
) -> None:
    """Set `messages` on the API entries and skill parts the scanned messages belong to (see the module
    docstring), each list in scan order without repeats: the entry's own, then its helpers'."""
    by_definition: dict[str, list[str]] = {}
    every: list[str] = []
    for message in messages:
        by_definition.setdefault(message.definition, []).append(message.text)
        every.append(message.text)
    # Private helper names defined exactly once (a name defined in several modules is ambiguous).
    defined: dict[str, list[str]] = {}
    for definition in sorted(set(by_definition) | set(calls or {})):
        defined.setdefault(definition.rsplit(".", 1)[-1], []).append(definition)
    paths_of = {entry.qualified_name: _definitions(entry) for entry in api}
    # A function that is an API entry of its own keeps its messages: init_process_group calling get_rank does
    # not raise get_rank's errors as its own.
    entry_paths = {path for paths in paths_of.values() for path in paths}
    for entry in api:
        own: list[str] = []
        paths = paths_of[entry.qualified_name]
        for path in paths:
            own.extend(by_definition.get(path, []))
        for path in paths:
            for helper in sorted((calls or {}).get(path, ())):
                places = defined.get(helper, [])
                if len(places) == 1 and places[0] not in entry_paths:
                    own.extend(by_definition.get(places[0], []))
        entry.messages = list(dict.fromkeys(own))[:MAX_MESSAGES_PER_DOC]
    folded = [(_fold(text), text) for text in dict.fromkeys(every)]
    for doc in skill:
        quotes = {_fold(q) for q in _QUOTED.findall(doc.markdown + "\n" + doc.check_text) if _PHRASE.search(q)}
        doc.messages = [text for fold, text in folded if any(quote in fold for quote in quotes)][:MAX_MESSAGES_PER_DOC]


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text.replace(PLACEHOLDER, " ")).strip().lower()


def _definitions(entry: ApiEntry) -> list[str]:
    """The dotted definition paths whose messages are the entry's own: its function or method (unwrapped
    from decorators), or a class's `__init__`."""
    import inspect

    resolved = resolve(entry.qualified_name, None)
    if resolved is None:
        return []
    obj = resolved.obj
    if isinstance(obj, property):
        obj = obj.fget
    try:
        obj = inspect.unwrap(obj)
    except ValueError:
        pass
    path = definition_path(obj)
    if path is None:
        return []
    return [path, f"{path}.__init__", f"{path}.__post_init__"] if inspect.isclass(obj) else [path]
