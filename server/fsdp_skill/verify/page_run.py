"""Page code in a verify run: select, plan, hand the runnable ones to the pool, check the rest statically.

Rows look like the examples' rows (name = the block id, `getting-started.md#point-to-point-communication:1`)
plus `kind` (the block's kind) and, where they apply, `how` (how it was launched), `rewrites` (the
cuda->cpu / nccl->gloo rewrites it ran with), `stand_ins` and `stated` (the page's words checked).

Statuses: **passed**; **passed-with-stand-ins** (it ran only with declared stand-ins, never plain
"passed"); **doc-bug** (raised on every rank, an output or stated outcome differs, a name does not
resolve, a call does not bind); **checked** (static check only: "checked: N names resolved, M calls
bound"); **skipped** (a reason); **failed** (hang, crash, ranks disagreeing).

`static_for_fragments` applies the same static check to docstring examples the runner skipped as
fragments, so every code block of the references ends passed, doc-bug, skipped with a reason, or checked.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from .examples import ExampleSpec
from .module_globals import defining_module
from .page_plan import PageBlock, PageContext, PagePlan, blocks_from_catalog, plan_block
from .page_report import PAGE_STATUSES
from .static_check import CONVENTIONAL, StaticResult, check, page_imports

Result = dict[str, Any]


def select_blocks(blocks: list[PageBlock], ids: list[str] | None, pattern: str | None) -> list[PageBlock]:
    chosen = blocks
    if ids:
        wanted = set(ids)
        chosen = [b for b in blocks if b.id in wanted]
    if pattern:
        needle = pattern.lower()
        chosen = [b for b in chosen if needle in b.id.lower()]
    return chosen


def plan_all(data: dict[str, Any], chosen: list[PageBlock], backend: str) -> tuple[PageContext, list[PagePlan]]:
    context = PageContext(blocks_from_catalog(data))
    return context, [plan_block(context, context.by_id[b.id], backend) for b in chosen]


def _row(
    plan: PagePlan, backend: str, world_size: int, status: str, reason: str | None, seconds: float = 0.0
) -> Result:
    row: Result = {
        "name": plan.block.id,
        "backend": backend,
        "world_size": world_size,
        "status": status,
        "reason": reason,
        "seconds": round(seconds, 3),
        "warnings": [],
        "kind": plan.block.kind,
    }
    if plan.how:
        row["how"] = plan.how
    if plan.rewrites:
        row["rewrites"] = list(plan.rewrites)
    if plan.standins:
        row["stand_ins"] = list(plan.standins)
    if plan.stated is not None:
        row["stated"] = plan.stated.quote
    if plan.parts:
        row["assembled_from"] = list(plan.parts)
    return row


def _context(ctx: PageContext, block: PageBlock) -> dict[str, str]:
    trees = [t for b in ctx.by_page[block.page] if (t := ctx.trees.get(b.id)) is not None]
    return {**CONVENTIONAL, **page_imports(trees)}


def _code_of(block: PageBlock) -> str:
    if block.code.lstrip().startswith(">>>"):
        return "\n".join(ln.lstrip()[4:] for ln in block.code.split("\n") if ln.lstrip().startswith((">>>", "...")))
    return block.code


def static_verdict(result: StaticResult, why_not_run: str | None) -> tuple[str, str]:
    """(status, reason) of a statically checked block."""
    tail = f"; not run: {why_not_run}" if why_not_run else ""
    if result.syntax_error:
        return "doc-bug", f"the documented code is {result.syntax_error}{tail}"
    if result.failures:
        return "doc-bug", f"{result.summary}; {len(result.failures)} problem(s): " + "; ".join(result.failures) + tail
    if result.unbuilt:
        return "skipped", (
            f"{result.summary}; names a backend this torch build lacks: {', '.join(result.unbuilt)}; "
            "check it on a build with that backend" + tail
        )
    return "checked", result.summary + tail


def static_rows(ctx: PageContext, plans: list[PagePlan], backend: str) -> list[Result]:
    rows: list[Result] = []
    for plan in plans:
        if plan.action == "skip":
            rows.append(_row(plan, backend, 1, "skipped", plan.reason))
        elif plan.action == "static":
            why = plan.reason or (
                "a fragment: part of a program the page never shows whole"
                if plan.block.kind == "fragment"
                else "it builds on earlier blocks and states no outcome to check"
            )
            status, reason = static_verdict(check(_code_of(plan.block), _context(ctx, plan.block)), why)
            rows.append(_row(plan, backend, 1, status, reason))
    return rows


def finish_run_rows(plans: list[PagePlan], results: list[Result]) -> list[Result]:
    """Add the page fields to the pool's rows; a pass that needed stand-ins says so in its status."""
    by_id = {p.block.id: p for p in plans}
    rows: list[Result] = []
    for result in results:
        plan = by_id[result["name"]]
        row = {
            **_row(
                plan, result["backend"], result["world_size"], result["status"], result.get("reason"), result["seconds"]
            ),
            "warnings": result.get("warnings", []),
        }
        if result.get("ranks"):
            row["ranks"] = result["ranks"]
        shown = _raised_as_shown(result, plan.block.output) if row["status"] in ("failed", "doc-bug") else None
        if shown:
            row["status"], row["reason"] = "passed", f"raised what the page shows it raises: {shown}"
        elif row["status"] in ("failed", "doc-bug") and (missing := _MISSING_FILE.search(_evidence(result))):
            row["status"] = "skipped"
            row["reason"] = (
                "reads a file an earlier block of the page writes, and that block did not run here: " + missing.group(0)
            )
        if row["status"] == "passed" and plan.standins:
            row["status"] = "passed-with-stand-ins"
            row["reason"] = (
                "passed with stand-ins: "
                + ", ".join(plan.standins)
                + (f" ({row['reason']})" if row.get("reason") else "")
            )
        elif plan.standins:
            row["reason"] = f"{row.get('reason') or ''} (ran with stand-ins: {', '.join(plan.standins)})".strip()
        rows.append(row)
    return rows


_EXCEPTION_LINE = re.compile(r"^([\w.]*(?:Error|Exception)): (.*)$", re.MULTILINE)
_RANK_PREFIX = re.compile(r"^\[Rank \d+\]:\s*")
_MISSING_FILE = re.compile(r"No such file or directory: '[^']*'")


def _evidence(result: Result) -> str:
    return "\n".join(
        str(rank.get(key) or "") for rank in result.get("ranks", []) for key in ("traceback", "log")
    ) + str(result.get("reason"))


def _raised_as_shown(result: Result, output: str | None) -> str | None:
    """The error every raising rank raised, when the page's output block shows exactly that error."""
    if not output:
        return None
    shown = " ".join(output.split())
    raised = [tb for rank in result.get("ranks", []) if (tb := rank.get("traceback"))]
    matched: list[str] = []
    for traceback in raised:
        lines = _EXCEPTION_LINE.findall(traceback)
        if not lines:
            return None
        kind, message = lines[-1]
        text = f"{kind.rsplit('.', 1)[-1]}: {_RANK_PREFIX.sub('', message.strip())}"
        if " ".join(text.split()) not in shown:
            return None
        matched.append(text)
    return matched[0] if matched else None


def remove_workdir() -> None:
    """The folder this run's page code ran in (see page_exec.workdir), and those of killed runs."""
    from fsdp_skill.core.scratch import remove_leftovers

    from .page_exec import WORKDIR_PREFIX, workdir

    shutil.rmtree(workdir(os.getpid()), ignore_errors=True)
    remove_leftovers(Path(tempfile.gettempdir()), WORKDIR_PREFIX)


def runnable_specs(plans: list[PagePlan]) -> list[ExampleSpec]:
    return [p.spec for p in plans if p.action == "run" and p.spec is not None]


_FRAGMENT = "fragment:"


def static_for_fragments(results: list[Result], specs: list[ExampleSpec]) -> list[Result]:
    """Docstring examples skipped as fragments get the static check (checked, or doc-bug with evidence)."""
    by_id = {s.id: s for s in specs}
    out: list[Result] = []
    for result in results:
        spec = by_id.get(result["name"])
        if spec is None or result["status"] != "skipped" or not str(result.get("reason") or "").startswith(_FRAGMENT):
            out.append(result)
            continue
        module = defining_module(spec.symbol)
        globals_ = dict(vars(module)) if module is not None else {}
        try:
            trees = [ast.parse(spec.code)]
        except SyntaxError:
            trees = []
        status, reason = static_verdict(
            check(spec.code, {**CONVENTIONAL, **page_imports(trees)}, globals_), result["reason"]
        )
        out.append({**result, "status": status, "reason": reason})
    return out


def tally_by_kind(rows: list[Result]) -> list[str]:
    """'program: 3 passed, 1 skipped (4)' per kind, for the command line."""
    by_kind: dict[str, Counter[str]] = {}
    for row in rows:
        by_kind.setdefault(row.get("kind", "?"), Counter())[row["status"]] += 1
    lines = []
    for kind in ("program", "rank-function", "continuation", "fragment", "shell", "output"):
        if kind in by_kind:
            tally = by_kind[kind]
            lines.append(
                f"{kind}: "
                + ", ".join(f"{tally[s]} {s}" for s in PAGE_STATUSES if tally[s])
                + f" ({sum(tally.values())})"
            )
    return lines


def summary_line(rows: list[Result]) -> str:
    tally = Counter(r["status"] for r in rows)
    return "verify: page code: " + ", ".join(f"{tally[s]} {s}" for s in PAGE_STATUSES) + f" ({len(rows)} blocks)"


def split_results(
    ran: list[Result], static: list[Result], plans: list[PagePlan], examples: list[ExampleSpec], blocks: list[PageBlock]
) -> tuple[list[Result], list[Result]]:
    """(example rows, page-code rows in page order) from one pooled run: fragment examples get the
    static check; the page rows join the statically checked ones."""
    page_ids = {p.block.id for p in plans if p.action == "run"}
    results = static_for_fragments([r for r in ran if r["name"] not in page_ids], examples)
    order = {b.id: i for i, b in enumerate(blocks)}
    rows = static + finish_run_rows(plans, [r for r in ran if r["name"] in page_ids])
    return results, sorted(rows, key=lambda r: order.get(r["name"], len(order)))


def summary_lines(rows: list[Result]) -> list[str]:
    """The page-code summary, then its counts per kind (what `fsdp-skill verify` prints)."""
    return [summary_line(rows), *(f"  {line}" for line in tally_by_kind(rows))]
