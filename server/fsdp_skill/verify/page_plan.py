"""Page code as the runner sees it: read `page_code` from catalog.json, assemble, decide how to verify.

Each block of the catalog's `page_code` (see `fsdp_skill.build.page_code` for the kinds) gets one plan:

- **program**: run on every rank as the page launches it: its `__main__` entry point runs with the
  page's own `mp.spawn` / `mp.Process` calls served by the pool's ranks (`launcher`); a torchrun script
  (no entry point, top-level set-up) runs with the environment torchrun gives each rank;
- **rank function**: run through the page's launcher template: the template block (without its entry
  point), the blocks the function needs, the function's block, then the template's own launch (its
  `__main__` body, which starts `run` — now the page's new `run` — or a call of its launcher function,
  `run_demo(demo_basic, world_size)`);
- **continuation** with a stated outcome (`standins.STATED`): the blocks it needs, the block, then the
  driver that checks what the page says it does;
- everything else Python (fragments, other continuations), and runnable blocks that lack a name the page
  never defines: the static check (`static_check`);
- shell and output blocks: skipped, saying what they are (an output block shown for a Python block is
  compared when that block runs).

A block needs the earlier (or, for a helper a tutorial defines after its use, later) blocks of its page
that define the names it reads, transitively; only their definitions are taken (imports, functions,
classes, assignments), never their entry points. The world size is the page's: a literal in the
launcher (`size = 2`, `nprocs=2`), else the page's torchrun line (`--nproc_per_node=8`), else a literal
device mesh, else 2. Stdlib only (the catalog is read with `json`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from . import code_shape
from .examples import ExampleSpec, Unit, _mesh_sizes
from .launcher import page_rewrites
from .plan import MAX_LOCAL_RANKS
from .standins import STANDINS, STATED, Stated

RUNNABLE = ("program", "rank-function")
DEFAULT_WORLD_SIZE = 2
_NPROC = re.compile(r"--nproc[-_]per[-_]node[= ](\d+)")
_DOWNLOADS = {
    "from_pretrained": "downloads a Hugging Face model (from_pretrained)",
    "load_dataset": "downloads a dataset (load_dataset)",
    "urlretrieve": "downloads a file",
    "urlopen": "downloads a file",
    "hf_hub_download": "downloads from the Hugging Face hub",
}
_RPC = {"init_rpc", "remote", "rpc_sync", "rpc_async"}


@dataclass(frozen=True)
class PageBlock:
    id: str
    reference: str
    anchor: str
    kind: str
    language: str
    code: str
    uses: tuple[str, ...]
    launcher: str | None
    output: str | None
    line: int | None
    source: str | None
    origin: str
    page: tuple[str, str]  # blocks that build on one another: (reference, source or section)


@dataclass(frozen=True)
class PageSpec(ExampleSpec):
    """An ExampleSpec the pool can run, with the page's launch description for `page_exec`."""

    page: dict[str, Any] = field(default_factory=dict)


@dataclass
class PagePlan:
    block: PageBlock
    action: str  # "run", "static" or "skip"
    reason: str | None = None
    spec: PageSpec | None = None
    standins: tuple[str, ...] = ()
    rewrites: tuple[str, ...] = ()
    how: str = ""
    stated: Stated | None = None
    parts: tuple[str, ...] = ()  # ids of the blocks assembled into the run, in order


def blocks_from_catalog(data: dict[str, Any]) -> list[PageBlock]:
    blocks: list[PageBlock] = []
    for entry in data.get("page_code") or []:
        page_key = (
            entry.get("source") if entry.get("origin") != "docstring" else f"{entry['reference']}#{entry['anchor']}"
        )
        blocks.append(
            PageBlock(
                id=entry["id"],
                reference=entry["reference"],
                anchor=entry["anchor"],
                kind=entry["kind"],
                language=entry.get("language") or "",
                code=entry.get("code") or "",
                uses=tuple(entry.get("uses") or ()),
                launcher=entry.get("launcher"),
                output=entry.get("output"),
                line=entry.get("line"),
                source=entry.get("source"),
                origin=entry.get("origin") or "page",
                page=(entry["reference"], str(page_key)),
            )
        )
    return blocks


def _tree(block: PageBlock) -> ast.Module | None:
    code = block.code
    if code.lstrip().startswith(">>>"):
        code = "\n".join(ln.lstrip()[4:] for ln in code.split("\n") if ln.lstrip().startswith((">>>", "...")))
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def _definitions(tree: ast.Module) -> list[ast.stmt]:
    """The statements a later block may rely on: imports, functions, classes, assignments (no entry point)."""
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    return [stmt for stmt in tree.body if isinstance(stmt, keep)]


def _defined_by(stmts: list[ast.stmt]) -> set[str]:
    return code_shape.top_level_names(ast.Module(body=stmts, type_ignores=[]))


class PageContext:
    """The blocks of each page in order, to find which block defines a name."""

    def __init__(self, blocks: list[PageBlock]) -> None:
        self.by_page: dict[tuple[str, str], list[PageBlock]] = {}
        self.by_id = {b.id: b for b in blocks}
        self.trees: dict[str, ast.Module | None] = {}
        for block in blocks:
            self.by_page.setdefault(block.page, []).append(block)
            self.trees[block.id] = _tree(block) if block.kind not in ("shell", "output") else None

    def definer(self, block: PageBlock, name: str) -> PageBlock | None:
        """The block of the same page defining `name`: the nearest before, else the first after."""
        page = self.by_page[block.page]
        index = page.index(block)
        for candidate in [*reversed(page[:index]), *page[index + 1 :]]:
            tree = self.trees.get(candidate.id)
            if tree is not None and name in _defined_by(_definitions(tree)):
                return candidate
        return None

    def needed(self, block: PageBlock, reads: set[str], exclude: set[str]) -> tuple[list[PageBlock], set[str]]:
        """(blocks that define what `reads` needs, transitively, in page order; names nothing defines)."""
        chosen: dict[str, PageBlock] = {}
        missing: set[str] = set()
        pending = list(reads)
        done: set[str] = set()
        while pending:
            name = pending.pop()
            if name in done or name in exclude:
                continue
            done.add(name)
            found = self.definer(block, name)
            if found is None:
                missing.add(name)
                continue
            if found.id not in chosen and found.id != block.id:
                chosen[found.id] = found
                tree = self.trees[found.id]
                assert tree is not None
                module = ast.Module(body=_definitions(tree), type_ignores=[])
                pending.extend(code_shape.free_names(module) - _defined_by(module.body))
        page = self.by_page[block.page]
        return sorted(chosen.values(), key=page.index), missing


def _unit(source: str, line: int | None, expected_by_rank: dict[int, str] | None = None) -> Unit:
    return Unit(source, None, dict(expected_by_rank or {}), line)


def _literal_size(tree: ast.AST) -> int | None:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, int)
            and any(isinstance(t, ast.Name) and t.id in code_shape.SIZE_PARAMS for t in node.targets)
        ):
            return int(node.value.value)
        if isinstance(node, ast.Call) and code_shape.call_name(node) in code_shape.LAUNCH_CALLS:
            for kw in node.keywords:
                if kw.arg == "nprocs" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
                    return int(kw.value.value)
    return None


def _page_launch_size(ctx: PageContext, block: PageBlock) -> int | None:
    """The --nproc-per-node of the page's next torchrun line after the block."""
    page = ctx.by_page[block.page]
    for candidate in page[page.index(block) + 1 :]:
        if candidate.kind == "shell" and (match := _NPROC.search(candidate.code)):
            return int(match.group(1))
        if candidate.kind in RUNNABLE:
            break
    return None


def _world_size(ctx: PageContext, block: PageBlock, trees: list[ast.AST], code: str) -> tuple[int, str]:
    for tree in trees:
        if (size := _literal_size(tree)) is not None:
            return size, "the world size the page's launcher sets"
    if (size := _page_launch_size(ctx, block)) is not None:
        return size, "the --nproc-per-node of the page's torchrun line"
    if sizes := _mesh_sizes(code):
        return max(sizes), "the ranks the page's device mesh spans"
    return DEFAULT_WORLD_SIZE, f"{DEFAULT_WORLD_SIZE} ranks (the page sizes the job by its GPU count)"


def _main_body(tree: ast.Module) -> list[ast.stmt]:
    return [s for stmt in tree.body if code_shape.is_main_guard(stmt) for s in stmt.body]  # type: ignore[attr-defined]


def _launch_call(template: ast.Module, function: str, size: int) -> str | None:
    """`run_demo(demo_basic, 2)`: a call of the template's launcher function with the rank function."""
    for stmt in template.body:
        if isinstance(stmt, ast.FunctionDef) and code_shape.launches_processes(stmt):
            params = [a.arg for a in stmt.args.args]
            called = {code_shape.call_name(n) for n in ast.walk(stmt) if isinstance(n, ast.Call)}
            spawned = {
                n.id for c in ast.walk(stmt) if isinstance(c, ast.Call) for n in c.args[:1] if isinstance(n, ast.Name)
            }
            args = []
            for param in params:
                if param in code_shape.SIZE_PARAMS:
                    args.append(str(size))
                elif param in called or param in spawned or param.endswith(("fn", "func", "function")):
                    args.append(function)
                else:
                    return None
            return f"{stmt.name}({', '.join(args)})"
    return None


def _blocked(code: str, size: int) -> str | None:
    """Why assembled code cannot run here: downloads, RPC, GPUs per rank, too many ranks."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for call in calls:
        name = code_shape.call_name(call)
        if name in _DOWNLOADS:
            return f"needs a download: {_DOWNLOADS[name]}"
        if name in _RPC:
            return "needs RPC: it runs named RPC workers (rpc.init_rpc), not collective ranks"
        if any(
            kw.arg == "download" and isinstance(kw.value, ast.Constant) and kw.value.value is True
            for kw in call.keywords
        ):
            return f"needs a download: {ast.unparse(call.func)}(download=True)"
    devices = {
        c.args[0].id
        for c in calls
        if isinstance(c.func, ast.Attribute)
        and c.func.attr == "to"
        and len(c.args) == 1
        and isinstance(c.args[0], ast.Name)
        and c.args[0].id.startswith("dev")
    }
    if len(devices) >= 2:
        return f"needs {len(devices)} GPUs per rank: it places parts of one model on {', '.join(sorted(devices))}"
    if size > MAX_LOCAL_RANKS:
        return f"needs {size} ranks: more than the {MAX_LOCAL_RANKS} processes this runner starts on one machine"
    if any(code_shape.call_name(c) == "parse_args" and not c.args for c in calls):
        return "reads the command line (argparse): run it with torchrun and its arguments"
    return None


_SET_UP = {"init_process_group", "destroy_process_group", "set_device"}


def only_setup(tree: ast.Module) -> bool:
    """Only imports and process-group set-up: nothing the runner would not do itself."""
    return all(
        isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass))
        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
        or (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and code_shape.call_name(stmt.value) in _SET_UP
        )
        for stmt in tree.body
    )


def _configures_init(tree: ast.Module) -> str | None:
    """An environment variable the program sets that only takes effect when a process group is created."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Subscript)
            and ast.unparse(node.targets[0].value) == "os.environ"
            and isinstance(node.targets[0].slice, ast.Constant)
        ):
            key = str(node.targets[0].slice.value)
            if key.startswith(("TORCH_DISTRIBUTED_DEBUG", "TORCH_NCCL", "NCCL_", "GLOO_", "TORCH_CPP_LOG_LEVEL")):
                return key
    return None


def _source(stmts: list[ast.stmt]) -> str:
    return ast.unparse(ast.Module(body=stmts, type_ignores=[]))


def plan_block(ctx: PageContext, block: PageBlock, backend: str) -> PagePlan:
    if block.kind == "shell":
        first = next((ln.strip() for ln in block.code.split("\n") if ln.strip()), "")
        return PagePlan(
            block, "skip", f"shell command, not Python: `{first[:100]}` (the runner launches the code itself)"
        )
    if block.kind == "output":
        shown_for = next((b.id for b in ctx.by_page[block.page] if b.output == block.code), None)
        why = (
            f"output the page shows for {shown_for}: compared when that block runs"
            if shown_for
            else "text, not code (output or a diagram)"
        )
        return PagePlan(block, "skip", why)
    tree = ctx.trees.get(block.id)
    stated = STATED.get(block.id)
    if tree is None or not (block.kind in RUNNABLE or (block.kind == "continuation" and stated and stated.driver)):
        return PagePlan(block, "static", stated=stated)
    return _plan_run(ctx, block, tree, backend, stated)


def _plan_run(ctx: PageContext, block: PageBlock, tree: ast.Module, backend: str, stated: Stated | None) -> PagePlan:
    template_block = ctx.by_id.get(block.launcher or "") if block.kind == "rank-function" else None
    template = ctx.trees.get(template_block.id) if template_block else None
    own_definitions = _definitions(tree) if block.kind != "program" else tree.body
    body = own_definitions if block.kind != "program" else tree.body
    module = ast.Module(body=body, type_ignores=[])
    exclude = _defined_by(body) | {"__name__", "__file__"}
    deps, missing = ctx.needed(block, code_shape.free_names(module), exclude)
    units: list[Unit] = []
    parts: list[str] = []
    launch_stmts: list[ast.stmt] = []
    trees: list[ast.AST] = [tree]
    how = ""
    launches = 0
    functions = code_shape.rank_functions(tree)
    if template_block is not None and template is not None and template_block.id != block.id:
        trees.insert(0, template)
        extra, missing_template = ctx.needed(
            template_block,
            code_shape.free_names(ast.Module(body=_definitions(template), type_ignores=[])),
            _defined_by(_definitions(template)),
        )
        missing |= missing_template
        deps = [*deps, *extra, template_block]
    # Page order, each block once: a tutorial's imports come before the classes that use them.
    page_order = ctx.by_page[block.page]
    deps = sorted({d.id: d for d in deps if d.id != block.id}.values(), key=page_order.index)
    for dep in deps:
        dep_tree = ctx.trees[dep.id]
        assert dep_tree is not None
        units.append(_unit(_source(_definitions(dep_tree)), dep.line))
        parts.append(dep.id)
    code_so_far = "\n".join(u.source for u in units) + "\n" + block.code
    size, size_why = _world_size(ctx, block, trees, code_so_far)
    if block.kind == "program":
        units.append(_unit(ast.unparse(tree) if block.code.lstrip().startswith(">>>") else block.code, block.line))
        main = bool(_main_body(tree))
        if main and not code_shape.launches_processes(tree):
            # A script the page launches with torchrun (its next shell line says how many), else one process.
            launched = _page_launch_size(ctx, block)
            size, size_why = (
                (launched, "the --nproc-per-node of the page's torchrun line")
                if launched
                else (1, "one process: its entry point starts no ranks")
            )
        if only_setup(tree):
            return PagePlan(
                block, "skip", "nothing to check: it only initializes the process group, which the runner does itself"
            )
        if configured := _configures_init(tree):
            return PagePlan(
                block,
                "skip",
                f"sets {configured} for its own init_process_group; the runner's process group "
                "already exists, so the setting could not take effect",
            )
        launches = (
            1 if main and code_shape.launches_processes(ast.Module(body=_main_body(tree), type_ignores=[])) else 0
        )
        how = (
            "as a program: its __main__ entry point, the page's own process starts served by the pool's ranks"
            if launches
            else ("as a torchrun script: each rank with the RANK / WORLD_SIZE / LOCAL_RANK environment torchrun sets")
        )
        torchrun_env = not launches  # a script without its own launcher gets what torchrun would set
    else:
        units.append(_unit(_source(_definitions(tree)), block.line))
        main, torchrun_env = False, False
        if block.kind == "rank-function":
            template_tree = template if template is not None else tree
            template_id = template_block.id if template_block is not None else block.id
            main_body = _main_body(template_tree)
            for function in functions:
                if main_body and function in {n.id for s in main_body for n in ast.walk(s) if isinstance(n, ast.Name)}:
                    launch_stmts = main_body
                    how = (
                        f"through the page's launcher template ({template_id}: its __main__ process starts, "
                        "served by the pool's ranks)"
                    )
                elif call := _launch_call(template_tree, function, size):
                    launch_stmts += ast.parse(call).body
                    how = f"through the page's launcher template ({template_id}: `{call}`)"
                else:
                    continue
                launches += 1
            if not launch_stmts:
                return PagePlan(
                    block, "static", "the page's launcher template does not start its rank function", stated=stated
                )
    expected = dict(stated.output_by_rank) if stated and stated.output_by_rank else {}
    if launch_stmts:
        # Its own line (the launch's line in the template's block), so tracebacks show the right source.
        launch_line = ((template_block.line or 0) if template_block is not None else (block.line or 0)) + launch_stmts[
            0
        ].lineno
        units.append(_unit(_source(launch_stmts), launch_line, expected))
    elif expected:
        units[-1] = _unit(units[-1].source, units[-1].line, expected)
    if stated and stated.driver:
        units.append(_unit(stated.driver, block.line))
        how = how or "by the driver that checks what the page states (standins.STATED)"
        if block.kind == "continuation":
            size = stated.world_size or DEFAULT_WORLD_SIZE
            size_why = "the ranks the driver runs on"
    code = "\n".join(u.source for u in units)
    undefined = sorted(missing - set(STANDINS))
    if undefined:
        return PagePlan(block, "static", f"uses {', '.join(undefined)}, which the page never defines", stated=stated)
    blocked = _blocked(code, size)
    if blocked and not (blocked.startswith("needs a download") and "datasets" in missing):
        return PagePlan(block, "skip", blocked, stated=stated)
    standins = tuple(sorted(missing & set(STANDINS)))
    page = {"main": main, "torchrun_env": torchrun_env, "expects_launch": launches, "standins": list(standins)}
    spec = PageSpec(
        id=block.id,
        symbol="",
        units=tuple(units),
        world_size=size,
        device="cpu",
        requires=(),
        skip=None,
        source=block.source,
        line=block.line,
        page=page,
    )
    rewrites = tuple(page_rewrites(code, backend))
    return PagePlan(
        block,
        "run",
        spec=spec,
        standins=standins,
        rewrites=rewrites,
        how=f"{how}; world size {size}: {size_why}",
        stated=stated,
        parts=tuple(parts),
    )
