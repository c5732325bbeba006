"""Deprecations read from one module's Python source with `ast`: nothing is imported or called.

Pure over the text, so it reads any torch release's files (the release history reads wheels it never
installs) as well as the installed one's. What counts as deprecating a name, and only that name:

- `@deprecated(message)` (typing_extensions / warnings) on a function, method or class deprecates it;
  `category=None` (no runtime warning) does not count;
- `warnings.warn(message, FutureWarning | DeprecationWarning)` whose message says "deprecat", anywhere
  in a function's body, deprecates that function when the warning always runs (not under an `if`,
  loop or `except`) or when its message names the function (`if not is_compiling(): warn("`f` is
  deprecated")`). A conditional warning that names something else is about one argument or code path
  (`optim_input` is deprecated) and deprecates nothing callable, except that a name the warning's
  condition tests (`elif strategy == ShardingStrategy.NO_SHARD: warn("`NO_SHARD` ... is
  deprecated")`) is deprecated under the path the module imports it from;
- a call to a helper of the same module that warns (`_deprecated("all_reduce", "...")`, a class's
  `_warn_legacy_optim_state_dict(curr, new)`) is a warning of the caller, its f-string filled in with
  the call's literal arguments; a helper whose message is built from its parameters is not itself
  deprecated;
- the subject of a deprecation message, the names written before "deprecat" in its sentence, is
  deprecated too when it is a sibling member of the class (`FSDP.state_dict_type() and
  FSDP.set_state_dict_type() are being deprecated`) or a module-level name of this source. Names in the
  replacement clause ("use X", "replaced by X", after the word) never are;
- a deprecation warning at module level (run on import) deprecates the module, and its public names unless
  the message says something else is deprecated (a subject other than the module).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from fsdp_skill.core.catalog import Deprecation

__all__ = [
    "DEPRECATION_CATEGORIES",
    "argument_deprecations_in_source",
    "clean_message",
    "deprecations_in_source",
    "replacement_in",
    "subjects",
]

DEPRECATION_CATEGORIES = frozenset({"FutureWarning", "DeprecationWarning"})
_DECORATORS = frozenset({"typing_extensions.deprecated", "warnings.deprecated", "deprecated"})
_WARN_FUNCTIONS = frozenset({"warn", "_warn", "warn_deprecated"})
_UNKNOWN = "{…}"
# try/except, and try/except* from Python 3.11 (the same fields).
_TRY_NODES: tuple[type[ast.Try], ...] = tuple(getattr(ast, name) for name in ("Try", "TryStar") if hasattr(ast, name))

_REPLACEMENT = [
    re.compile(
        r"\b(?:use|using|switch to|migrate to)\s+(?:the\s+)?(?:APIs?,?\s+)?"
        r"(?P<quote>[`'\"]*)(?P<name>[\w.]+(?:\(\))?)",
        re.IGNORECASE,
    ),
    re.compile(r"\bin favou?r of\s+(?P<quote>[`'\"]*)(?P<name>[\w.]+(?:\(\))?)", re.IGNORECASE),
    re.compile(r"\breplaced (?:by|with)\s+(?P<quote>[`'\"]*)(?P<name>[\w.]+(?:\(\))?)", re.IGNORECASE),
]
# What a subject clause loses before its names are read: "use X", "in favor of X", "replaced by X".
_REPLACEMENT_CLAUSE = re.compile(
    r"\b(?:use|using|switch to|migrate to|in favou?r of|replaced (?:by|with))\b[^;]*", re.IGNORECASE
)
_ARGUMENT_WORDS = re.compile(r"\b(?:argument|parameter|kwarg|keyword|option|flag)s?\b", re.IGNORECASE)
_NAME_TOKEN = re.compile(r"`+([^`]+?)`+|(?<![\w.])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?)")


def _looks_like_api_name(name: str) -> bool:
    """`use it`, `use APIs` are English; an API name has a dot, an underscore, () or CamelCase."""
    return bool(re.search(r"[._]|\(\)$|^[A-Z][a-z]+[A-Z]", name)) and not name.isupper()


def clean_message(message: str) -> str:
    """Sphinx roles and double backticks reduced to plain `name`, whitespace folded."""
    message = re.sub(r":(?:func|meth|class|attr):`~?([^`]+)`", r"\1", message)
    return " ".join(message.replace("``", "`").split())


# "Use torchrun." names a tool in a sentence of its own; "use it." / "use them instead." name nothing.
_USE_ONE_WORD = re.compile(r"\buse\s+(?P<name>[a-z][a-z0-9_-]*)\.(?:\s|$)", re.IGNORECASE)
_NOT_NAMES = frozenset({"it", "this", "that", "them", "these", "those", "instead", "one", "other", "others"})


def replacement_in(message: str) -> str | None:
    """The API (or tool) a deprecation message tells users to switch to, as it spells it (without `()`)."""
    for pattern in _REPLACEMENT:
        for match in pattern.finditer(message):
            name = match.group("name").rstrip(".").removesuffix("()")
            if _UNKNOWN not in name and (match.group("quote") or _looks_like_api_name(name)):
                return name
    for match in _USE_ONE_WORD.finditer(message):
        if match.group("name").lower() not in _NOT_NAMES:
            return match.group("name")
    return None


def subjects(message: str) -> list[str]:
    """The names a message says are deprecated: in each sentence that says "deprecat", the names
    before that word, minus a replacement clause (`X and Y() are being deprecated` -> [X, Y]); a
    sentence about an argument ("The `optim_input` argument is deprecated") names no API."""
    return _subject_names(message, arguments=False)


def _subject_names(message: str, *, arguments: bool) -> list[str]:
    found: list[str] = []
    for sentence in re.split(r"(?<=[.!?])\s+", clean_message(message)):
        where = re.search(r"deprecat", sentence, re.IGNORECASE)
        if where is None:
            continue
        head = _REPLACEMENT_CLAUSE.sub("", sentence[: where.start()])
        if not arguments and _ARGUMENT_WORDS.search(head):
            continue  # "The `check_reduction` argument in `DistributedDataParallel` is deprecated": one argument
        for quoted, bare in _NAME_TOKEN.findall(head):
            name = (quoted or bare).strip().removesuffix("()")
            if quoted or _looks_like_api_name(name):
                if re.fullmatch(r"[A-Za-z_][\w.]*", name):
                    found.append(name)
    return found


@dataclass(frozen=True)
class _Warning:
    message: str
    conditional: bool
    tested: tuple[str, ...] = ()  # dotted names the enclosing `if` tests, resolved through the imports


@dataclass
class _Def:
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    owner: str | None  # the qualname of the class it is defined in, if any


@dataclass
class _Module:
    name: str
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted path it comes from
    constants: dict[str, str] = field(default_factory=dict)  # module-level NAME = "text"
    defs: dict[str, _Def] = field(default_factory=dict)  # qualname -> definition
    top_names: set[str] = field(default_factory=set)  # names bound at module level (not imports)
    members: dict[str, set[str]] = field(default_factory=dict)  # class qualname -> names in its body
    module_warnings: list[str] = field(default_factory=list)
    all_names: list[str] | None = None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def _scan_module(tree: ast.Module, module: str, is_package: bool) -> _Module:
    scan = _Module(module)

    def statements(body: list[ast.stmt], owner: str | None) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = f"{owner}.{node.name}" if owner else node.name
                scan.defs.setdefault(qualname, _Def(qualname, node, owner))
                if owner is None:
                    scan.top_names.add(node.name)
                else:
                    scan.members.setdefault(owner, set()).add(node.name)
                if isinstance(node, ast.ClassDef):
                    statements(node.body, qualname)
                continue
            if owner is None and isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    scan.imports[local] = alias.name if alias.asname else local
            elif owner is None and isinstance(node, ast.ImportFrom):
                source = _absolute(module, is_package, node.level, node.module)
                for alias in node.names:
                    scan.imports[alias.asname or alias.name] = f"{source}.{alias.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                for name in names:
                    (scan.top_names if owner is None else scan.members.setdefault(owner, set())).add(name)
                if owner is None and node.value is not None:
                    text = _string(node.value, scan.constants, {})
                    for name in names:
                        if text is not None:
                            scan.constants[name] = text
                        if name == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                            scan.all_names = [e.value for e in node.value.elts
                                              if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            elif owner is None and isinstance(node, ast.Expr):
                warning = _warning_of(node.value, scan, {}, conditional=False)
                if warning is not None:
                    scan.module_warnings.append(warning.message)
            for child in _nested_bodies(node):
                statements(child, owner)

    statements(tree.body, None)
    return scan


def _nested_bodies(node: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The statement lists under a module- or class-level if/try/with (definitions live there too)."""
    if isinstance(node, (ast.If, ast.For, ast.While)):
        yield node.body
        yield node.orelse
    elif isinstance(node, (ast.With, ast.AsyncWith)):
        yield node.body
    elif isinstance(node, ast.Try):
        yield node.body
        for handler in node.handlers:
            yield handler.body
        yield node.orelse
        yield node.finalbody


def _string(node: ast.AST, constants: dict[str, str], env: dict[str, str]) -> str | None:
    """The text of a string expression: literals, implicit and `+` concatenation, f-strings (names
    bound in env filled in, other parts as {…}), and names of string constants."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                parts.append(env.get(value.value.id, _UNKNOWN))
            else:
                parts.append(_UNKNOWN)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left, constants, env), _string(node.right, constants, env)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Name):
        return env.get(node.id, constants.get(node.id))
    return None


def _resolve(name: str, scan: _Module) -> str:
    head, _, rest = name.partition(".")
    if head in scan.imports:
        return scan.imports[head] + (f".{rest}" if rest else "")
    return name


def _warning_of(call: ast.AST, scan: _Module, env: dict[str, str], *, conditional: bool,
                tested: tuple[str, ...] = ()) -> _Warning | None:
    """The deprecation warning a `warn(...)` call raises, or None if it is not one."""
    if not isinstance(call, ast.Call):
        return None
    func = _dotted(call.func) or ""
    if func.rsplit(".", 1)[-1] not in _WARN_FUNCTIONS or not call.args:
        return None
    category_node = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg == "category"), None)
    category = (_dotted(category_node) or "") if category_node is not None else ""
    if category.rsplit(".", 1)[-1] not in DEPRECATION_CATEGORIES:
        return None
    message = _string(call.args[0], scan.constants, env)
    if message is None or "deprecat" not in message.lower():
        return None
    return _Warning(message, conditional, tested)


def _decorator_message(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, scan: _Module) -> str | None:
    for decorator in node.decorator_list:
        if not isinstance(decorator, ast.Call) or not decorator.args:
            continue
        name = _dotted(decorator.func) or ""
        if _resolve(name, scan) not in _DECORATORS or (name == "deprecated" and "deprecated" in scan.top_names):
            continue
        category = next((k.value for k in decorator.keywords if k.arg == "category"), None)
        if isinstance(category, ast.Constant) and category.value is None:
            continue  # @deprecated(..., category=None): documented, but nothing warns at runtime
        message = _string(decorator.args[0], scan.constants, {})
        return message if message is not None else f"deprecated ({ast.unparse(decorator.args[0])})"
    return None


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*node.args.posonlyargs, *node.args.args)]


def _is_template(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the function's warning text is built from its parameters (a warning helper); f-strings
    elsewhere in it (error messages) do not count."""
    params = set(_parameters(node)) | {a.arg for a in node.args.kwonlyargs}
    for call, _, _ in _own_calls(node.body, False, ()):
        func = _dotted(call.func) or ""
        if func.rsplit(".", 1)[-1] in _WARN_FUNCTIONS and call.args and any(
            isinstance(n, ast.FormattedValue) and isinstance(n.value, ast.Name) and n.value.id in params
            for n in ast.walk(call.args[0])
        ):
            return True
    return False


def _own_calls(body: list[ast.stmt], conditional: bool,
               tested: tuple[str, ...]) -> Iterator[tuple[ast.Call, bool, tuple[str, ...]]]:
    """Every call in a function body (not in nested functions or classes), with whether it runs only
    under a condition and the dotted names the enclosing `if` tests test."""
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):
            names = tuple(n for n in (_dotted(x) for x in ast.walk(statement.test)) if n and "." in n)
            yield from _own_calls(statement.body, True, tested + names)
            yield from _own_calls(statement.orelse, True, tested)
            yield from _calls_in(statement.test, conditional, tested)
            continue
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While, ast.Match)):
            for child in ast.iter_child_nodes(statement):
                if isinstance(child, ast.expr):
                    yield from _calls_in(child, conditional, tested)
            for block in ("body", "orelse"):
                yield from _own_calls(getattr(statement, block, []), True, tested)
            for case in getattr(statement, "cases", []):
                yield from _own_calls(case.body, True, tested)
            continue
        if isinstance(statement, _TRY_NODES):
            yield from _own_calls(statement.body, conditional, tested)
            for handler in statement.handlers:
                yield from _own_calls(handler.body, True, tested)
            yield from _own_calls(statement.orelse, True, tested)
            yield from _own_calls(statement.finalbody, conditional, tested)
            continue
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                yield from _calls_in(item.context_expr, conditional, tested)
            yield from _own_calls(statement.body, conditional, tested)
            continue
        yield from _calls_in(statement, conditional, tested)


_Calls = Iterator[tuple[ast.Call, bool, tuple[str, ...]]]


def _calls_in(node: ast.AST, conditional: bool, tested: tuple[str, ...]) -> _Calls:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(current, ast.Call):
            yield current, conditional, tested
        stack.extend(reversed(list(ast.iter_child_nodes(current))))


def _local_strings(node: ast.FunctionDef | ast.AsyncFunctionDef, scan: _Module) -> dict[str, str]:
    """`msg = "..."` assignments of the function, for a warn(msg, ...) that passes the variable."""
    env: dict[str, str] = {}
    for child in ast.walk(node):
        if isinstance(child, ast.Assign) and len(child.targets) == 1 and isinstance(child.targets[0], ast.Name):
            text = _string(child.value, scan.constants, env)
            if text is not None:
                env[child.targets[0].id] = text
    return env


def _helper_for(call: ast.Call, scan: _Module, owner: str | None) -> tuple[_Def, int] | None:
    """The private same-module function or method a call runs (a warning helper: `_deprecated(...)`;
    a public API that merely calls another deprecated one is not deprecated by it), and how many
    leading parameters the call does not pass (`self`/`cls`)."""
    name = _dotted(call.func)
    if name is None or not name.rsplit(".", 1)[-1].startswith("_") or name.endswith("__"):
        return None
    head, _, attr = name.rpartition(".")
    if not head:
        found = scan.defs.get(attr)
        return (found, 0) if found is not None else None
    if head in ("self", "cls") and owner is not None:
        found = scan.defs.get(f"{owner}.{attr}")
        if found is None or isinstance(found.node, ast.ClassDef):
            return None
        static = any(_dotted(d) == "staticmethod" for d in found.node.decorator_list)
        return found, 0 if static else 1
    found = scan.defs.get(name)
    return (found, 0) if found is not None else None


def _warnings_of(definition: _Def, scan: _Module, depth: int = 0) -> list[_Warning]:
    """The deprecation warnings a function raises itself or through a same-module helper it calls."""
    node = definition.node
    if isinstance(node, ast.ClassDef):
        return []
    env = _local_strings(node, scan)
    found: list[_Warning] = []
    for call, conditional, tested in _own_calls(node.body, False, ()):
        warning = _warning_of(call, scan, env, conditional=conditional, tested=tested)
        if warning is not None:
            found.append(warning)
            continue
        helper = _helper_for(call, scan, definition.owner) if depth == 0 else None
        if helper is None or helper[0] is definition or isinstance(helper[0].node, ast.ClassDef):
            continue
        target, skipped = helper
        assert not isinstance(target.node, ast.ClassDef)
        bound = dict(zip(_parameters(target.node)[skipped:], call.args, strict=False))
        bound.update({k.arg: k.value for k in call.keywords if k.arg})
        arguments = {name: text for name, value in bound.items()
                     if (text := _string(value, scan.constants, env)) is not None}
        inner_env = {**_local_strings(target.node, scan), **arguments}
        for inner_call, inner_conditional, inner_tested in _own_calls(target.node.body, False, ()):
            inner = _warning_of(inner_call, scan, inner_env, conditional=conditional or inner_conditional,
                                tested=tested + inner_tested)
            if inner is not None:
                found.append(inner)
    return found


def _names(subject: str, short: str) -> bool:
    return subject.rsplit(".", 1)[-1] == short


def deprecations_in_source(source: str, module: str, *, is_package: bool = False) -> dict[str, Deprecation]:
    """What one module's source deprecates (the rules in this module's docstring), read with `ast`.

    Returns {dotted path: Deprecation(message, replacement)}. A name this source defines is keyed
    `module.qualname` (`torch.distributed.fsdp.FSDPModule.set_reduce_scatter_divide_factor`; a class for a
    warning in its `__init__`; the module itself for a warning run on import); a name it deprecates
    but only imports (`ShardingStrategy.NO_SHARD` in `fsdp._init_utils`) is keyed by the path it is
    imported from. message is the warning's text, folded (f-string parts it cannot know as `{…}`),
    prefixed "Stated in the deprecation warning of X:" when X's warning names this one; replacement is
    the API the message names after "use"/"in favor of"/"replaced by", as spelled, never the deprecated
    name itself. is_package: the source is a package's `__init__.py` (for relative imports).
    Raises SyntaxError when the source does not parse.
    """
    if not re.search(r"deprecat", source, re.IGNORECASE):
        return {}  # every rule needs the word in a message; most files can skip the parse
    tree = ast.parse(source)
    scan = _scan_module(tree, module, is_package)
    direct: dict[str, Deprecation] = {}
    stated: dict[str, Deprecation] = {}

    def record(path: str, message: str, by: str | None) -> None:
        replacement = replacement_in(clean_message(message))
        if replacement is not None and (replacement == path or replacement in subjects(message)):
            replacement = None
        text = clean_message(message)
        if by is not None:
            stated.setdefault(path, Deprecation(message=f"Stated in the deprecation warning of {by}: {text}",
                                                replacement=replacement))
        else:
            direct.setdefault(path, Deprecation(message=text, replacement=replacement))

    def stated_by(message: str, definition: _Def, tested: tuple[str, ...], conditional: bool) -> None:
        short = definition.qualname.rsplit(".", 1)[-1]
        siblings = scan.members.get(definition.owner or "", set())
        node = definition.node
        parameters = set() if isinstance(node, ast.ClassDef) else set(_parameters(node)) | {
            a.arg for a in node.args.kwonlyargs}
        for subject in subjects(message):
            last = subject.rsplit(".", 1)[-1]
            prefix = subject.rpartition(".")[0]
            if last == short or subject == module:  # itself, or "the module torch.distributed.launch"
                continue
            if subject in parameters:  # DDP.__init__'s `broadcast_buffers` argument, not the property
                continue
            if definition.owner is not None and last in siblings:
                record(f"{module}.{definition.owner}.{last}", message, definition.qualname)
            elif last in scan.top_names and (not prefix or module.startswith(prefix)):
                record(f"{module}.{last}", message, definition.qualname)
            elif conditional:
                for name in tested:
                    if name.rsplit(".", 1)[-1] == last:  # its own module names the stater: it is not the class's
                        record(_resolve(name, scan) if name.split(".")[0] in scan.imports
                               else f"{module}.{name}", message, f"{module}.{definition.qualname}")

    for definition in scan.defs.values():
        node = definition.node
        short = node.name
        is_init = short in ("__init__", "__new__") and definition.owner is not None
        target = f"{module}.{definition.owner}" if is_init else f"{module}.{definition.qualname}"
        names_self = (definition.owner or "").rsplit(".", 1)[-1] if is_init else short
        decorated = _decorator_message(node, scan)
        if decorated is not None:
            record(target, decorated, None)
            stated_by(decorated, definition, (), False)
        # A warning helper (`_deprecated(name, suggestion)`, `_warn_optim_input`) warns for its callers.
        template = not isinstance(node, ast.ClassDef) and (
            _is_template(node) or re.search(r"warn|deprecat", short, re.IGNORECASE) is not None)
        for warning in _warnings_of(definition, scan):
            own = [s for s in subjects(warning.message) if _names(s, names_self)]
            if own or (not warning.conditional and not template):
                record(target, warning.message, None)
            if _UNKNOWN not in warning.message:
                stated_by(warning.message, definition, warning.tested, warning.conditional)

    for message in scan.module_warnings:
        record(module, message, None)
        # The import warning deprecates the module's names when it is about the module ("torch.distributed.launch
        # is deprecated") or names nothing else; 2.4's torch.distributed.optim warns on import that
        # "`TorchScript` support for functional optimizers is deprecated": ZeroRedundancyOptimizer is not.
        named = subjects(message)
        if named and not any(_names(subject, module.rsplit(".", 1)[-1]) or subject == module for subject in named):
            continue
        public = scan.all_names if scan.all_names is not None else sorted(
            n for n in scan.top_names if not n.startswith("_"))
        for name in public:
            record(f"{module}.{name}", message, None)

    merged = {**stated, **direct}  # a name's own warning wins over another's mention of it
    return dict(sorted(merged.items()))


def argument_deprecations_in_source(source: str, module: str, *,
                                    is_package: bool = False) -> dict[str, dict[str, Deprecation]]:
    """The arguments one module's functions warn are deprecated, read with `ast` like
    deprecations_in_source: {function path (a class for its `__init__`): {parameter: Deprecation}}.

    A deprecation warning of the function (directly or through a warning helper, under any condition)
    whose subject is one of the function's own parameters: DDP's "`broadcast_buffers` is deprecated.
    Use `forward_sync_buffers` instead." gives {"...DistributedDataParallel": {"broadcast_buffers": ...}}.
    """
    if not re.search(r"deprecat", source, re.IGNORECASE):
        return {}
    scan = _scan_module(ast.parse(source), module, is_package)
    found: dict[str, dict[str, Deprecation]] = {}
    for definition in scan.defs.values():
        node = definition.node
        if isinstance(node, ast.ClassDef) or _is_template(node) or re.search(r"warn|deprecat", node.name, re.I):
            continue
        is_init = node.name in ("__init__", "__new__") and definition.owner is not None
        target = f"{module}.{definition.owner}" if is_init else f"{module}.{definition.qualname}"
        parameters = [p for p in (*_parameters(node), *(a.arg for a in node.args.kwonlyargs))
                      if p not in ("self", "cls")]
        for warning in _warnings_of(definition, scan):
            text = clean_message(warning.message)
            replacement = replacement_in(text)
            for subject in _subject_names(warning.message, arguments=True):
                if subject not in parameters:
                    continue
                known = found.setdefault(target, {}).get(subject)
                if known is None or (known.replacement is None and replacement not in (None, subject)):
                    # the warning that names a replacement wins (DDP warns twice about broadcast_buffers)
                    found[target][subject] = Deprecation(
                        message=text, replacement=None if replacement == subject else replacement)
    return dict(sorted(found.items()))
