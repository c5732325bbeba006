"""RST tables (grid, simple, list-table) → GFM pipe tables.

Pipe tables hold one line per cell, so multi-line cells are joined with spaces. Column spans are
flattened: a spanning header cell labels every column under it ("gloo" over "CPU | GPU" gives
"gloo CPU | gloo GPU"); a spanning body cell fills its first column. Row spans are not supported
by any upstream page and would come out as a cell per row segment.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from fsdp_skill.core.errors import FsdpSkillError

# Converts one cell's raw RST lines to a single line of markdown (the caller owns block parsing).
Cell = Callable[[list[str]], str]

GRID_BORDER = re.compile(r"^\+(?:[-=]+\+)+\s*$")
GRID_PARTIAL_BORDER = re.compile(r"^[+|][-=+| ]*[+|]\s*$")
SIMPLE_BORDER = re.compile(r"^=+(?: +=+)+\s*$|^=+\s*$")


class TableError(FsdpSkillError, ValueError):
    """The lines do not form a well-shaped table; the caller falls back to a literal block."""


def _cell_text(parts: list[str], cell: Cell) -> str:
    return cell(parts).replace("|", "\\|").strip()


def pipe_table(header: list[str], rows: list[list[str]]) -> list[str]:
    width = max([len(header)] + [len(r) for r in rows])
    header = header + [""] * (width - len(header))
    lines = ["| " + " | ".join(h or " " for h in header) + " |", "|" + "|".join(["---"] * width) + "|"]
    for row in rows:
        row = row + [""] * (width - len(row))
        lines.append("| " + " | ".join(c or " " for c in row) + " |")
    return lines


def grid_table(lines: list[str], cell: Cell) -> list[str]:
    """A grid table (every line starts with + or |) → pipe table lines."""
    lines = [ln.rstrip() for ln in lines]
    if not lines or not GRID_BORDER.match(lines[0]) or not GRID_BORDER.match(lines[-1]):
        raise TableError("grid table must start and end with a +---+ border")
    width = len(lines[0])
    bounds = sorted({i for ln in lines if ln.startswith("+") for i, ch in enumerate(ln) if ch == "+"})
    # Split into row segments: runs of content lines between border lines.
    segments: list[tuple[list[str], bool]] = []  # (content lines, is_header)
    current: list[str] = []
    header_end = None
    for ln in lines[1:]:
        if len(ln) != width:
            ln = ln.ljust(width)[:width] if len(ln) < width else ln
        if ln.startswith("+") and GRID_PARTIAL_BORDER.match(ln) and "|" not in ln.strip("|"):
            if current:
                segments.append((current, False))
                current = []
            if "=" in ln:
                header_end = len(segments)
        elif ln.startswith("|"):
            current.append(ln)
        else:
            raise TableError(f"unexpected line in grid table: {ln!r}")
    if current:
        raise TableError("grid table is not closed by a border")
    ncols = len(bounds) - 1
    table: list[list[tuple[str, int]]] = []  # per row: (text, span) per cell
    for seg_lines, _ in segments:
        dividers = [b for b in bounds if all(len(ln) > b and ln[b] == "|" for ln in seg_lines)]
        if dividers[:1] != [bounds[0]]:
            raise TableError("grid table row does not start with |")
        row: list[tuple[str, int]] = []
        for left, right in itertools.pairwise(dividers):
            span = bounds.index(right) - bounds.index(left)
            row.append((_cell_text([ln[left + 1 : right] for ln in seg_lines], cell), span))
        table.append(row)
    flat = [_flatten(row, ncols) for row in table]
    if header_end:
        header = _merge_header([table[i] for i in range(header_end)], ncols)
        body = flat[header_end:]
    else:
        header, body = flat[0], flat[1:]
    return pipe_table(header, body)


def _flatten(row: list[tuple[str, int]], ncols: int) -> list[str]:
    out: list[str] = []
    for text, span in row:
        out.extend([text] + [""] * (span - 1))
    return out + [""] * (ncols - len(out))


def _merge_header(rows: list[list[tuple[str, int]]], ncols: int) -> list[str]:
    """Several header rows → one: spanning labels prefix each column they cover."""
    parts: list[list[tuple[str, bool]]] = [[] for _ in range(ncols)]
    for row in rows:
        col = 0
        for text, span in row:
            for c in range(col, min(col + span, ncols)):
                if text:
                    parts[c].append((text, span > 1))
            col += span
    merged: list[str] = []
    for col_parts in parts:
        texts: list[str] = []
        for text, _ in col_parts:
            if text not in texts:
                texts.append(text)
        joiner = " " if any(spanning for _, spanning in col_parts) else " / "
        merged.append(joiner.join(texts))
    return merged


def simple_table(lines: list[str], cell: Cell) -> list[str]:
    """A simple table (=== borders, columns by position) → pipe table lines."""
    lines = [ln.rstrip() for ln in lines]
    borders = [i for i, ln in enumerate(lines) if SIMPLE_BORDER.match(ln)]
    if len(borders) < 2 or borders[0] != 0 or borders[-1] != len(lines) - 1:
        raise TableError("simple table must start and end with a === border")
    starts = [m.start() for m in re.finditer(r"=+", lines[0])]

    def split(ln: str) -> list[str]:
        cells = []
        for k, start in enumerate(starts):
            stop = starts[k + 1] if k + 1 < len(starts) else len(ln)
            cells.append(ln[start:stop] if k + 1 < len(starts) else ln[start:])
        return cells

    def rows_between(a: int, b: int) -> list[list[str]]:
        rows: list[list[list[str]]] = []
        for ln in lines[a + 1 : b]:
            if not ln.strip() or re.match(r"^[-= ]+$", ln):
                continue
            cells = split(ln)
            if rows and not cells[0].strip():  # blank first column: continuation of the row above
                for k, c in enumerate(cells):
                    rows[-1][k].append(c)
            else:
                rows.append([[c] for c in cells])
        return [[_cell_text(c, cell) for c in row] for row in rows]

    if len(borders) >= 3:
        header_rows = rows_between(borders[0], borders[1])
        header = [" ".join(filter(None, col)) for col in zip(*header_rows)] if header_rows else []
        body = rows_between(borders[1], borders[-1])
    else:
        body = rows_between(borders[0], borders[1])
        if not body:
            raise TableError("empty simple table")
        header, body = body[0], body[1:]
    return pipe_table(header, body)


def list_table(content: list[str], options: dict[str, str], cell: Cell) -> list[str]:
    """The body of a `.. list-table::` (a two-level bullet list) → pipe table lines."""
    rows: list[list[list[str]]] = []
    for ln in content:
        if not ln.strip():
            continue
        first_cell = re.match(r"^\*\s+-(?:\s+(.*))?$", ln)
        next_cell = re.match(r"^\s+-(?:\s+(.*))?$", ln)
        if first_cell:
            rows.append([[first_cell.group(1) or ""]])
        elif re.match(r"^\*\s*$", ln):
            rows.append([])
        elif next_cell and rows:
            rows[-1].append([next_cell.group(1) or ""])
        elif rows and rows[-1]:
            rows[-1][-1].append(ln.strip())
        else:
            raise TableError(f"unexpected line in list-table: {ln!r}")
    if not rows:
        raise TableError("empty list-table")
    cells = [[_cell_text(c, cell) for c in row] for row in rows]
    header_rows = int(options.get("header-rows", "0") or 0)
    if header_rows:
        header = [" ".join(filter(None, col)) for col in zip(*cells[:header_rows])]
        body = cells[header_rows:]
    else:
        header, body = cells[0], cells[1:]
    return pipe_table(header, body)
