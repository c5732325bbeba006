"""The page-code part of references/verification.md: a summary per page, then a row per block.

Rows are named by reference and anchor (`getting-started.md#point-to-point-communication:1`) and carry
their kind; the per-page summary counts statuses for each reference file, so a reader sees at once
which tutorial's code runs on this torch.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fsdp_skill.core.quoting import table_cell  # stdlib only
from fsdp_skill.core.vocabulary import EXAMPLE_STATUSES  # stdlib only

PAGE_STATUSES: tuple[str, ...] = EXAMPLE_STATUSES


def is_page_row(row: dict[str, Any]) -> bool:
    return "kind" in row and "#" in str(row.get("name", "")) and str(row["name"]).rsplit(":", 1)[-1].isdigit()


def _tally(rows: list[dict[str, Any]]) -> str:
    tally = Counter(r["status"] for r in rows)
    return ", ".join(f"{tally[s]} {s}" for s in PAGE_STATUSES if tally[s]) or "none"


def page_section(rows: list[dict[str, Any]]) -> list[str]:
    by_page: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_page.setdefault(str(row["name"]).split("#", 1)[0], []).append(row)
    lines = [
        "",
        "## Page code",
        "",
        (
            "Every code block of the reference files (not the generated signatures, not the `>>>` examples above), "
            "by kind: **program** (run as the page launches it: its `__main__` entry point with the page's own "
            "`mp.spawn` / `mp.Process` calls served by the runner's ranks, or a torchrun script with torchrun's "
            "environment), **rank-function** (run through the page's own launcher template), **continuation** "
            "(builds on earlier blocks; run where the page states an outcome to check), **fragment**, **shell**, "
            "**output**. Blocks that cannot run are statically checked: every torch name resolved and every call's "
            "arguments bound to the installed torch's signatures (**checked** — nothing ran). "
            "**passed-with-stand-ins** ran with declared stand-ins (`server/fsdp_skill/verify/standins.py`). "
            "Rewrites (`cuda->cpu`, `nccl->gloo`) are listed per row in `verification.json`."
        ),
        "",
        "Summary: " + _tally(rows) + f" ({len(rows)} blocks).",
        "",
        "| page | blocks | statuses |",
        "|---|---|---|",
    ]
    lines += [f"| `{page}` | {len(page_rows)} | {_tally(page_rows)} |" for page, page_rows in sorted(by_page.items())]
    lines += ["", "| block | kind | backend | world size | status | reason |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| `{table_cell(r['name'])}` | {r.get('kind', '')} | {r['backend']} | {r['world_size']} | {r['status']} | "
            f"{table_cell(r.get('reason'))} |"
        )
    return lines
