"""`fsdp-skill search` and `fsdp-skill show`: the search tools for people, as rich output or JSON.

Every string from the docs or the user goes to rich as a `Text` (or a title wrapped in one), never as a
plain `str`: rich reads a plain string as console markup, and `Optional[Union[bool, int]]` would print as
`Optional[Union]` (its `[bool, int]` taken for a style tag).
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from fsdp_skill.search.index import open_index
from fsdp_skill.serve.results import ApiEntryResult, SearchResponse
from fsdp_skill.serve.tools import Toolbox


def _toolbox() -> Toolbox:
    return Toolbox(open_index())


def _console() -> Console:
    # soft_wrap off and a sane width when piped, so tables stay readable in logs.
    return Console(width=None if sys.stdout.isatty() else 120)


def render_search(response: SearchResponse) -> Table:
    table = Table(title=Text(f"{response.query!r} (torch {response.torch_version})"), show_lines=True, expand=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("result", ratio=2)
    table.add_column("snippet", ratio=3)
    table.add_column("score", justify="right", no_wrap=True)
    for n, r in enumerate(response.results, start=1):
        where = f"{r.reference}#{r.anchor}" if r.anchor else (r.reference or "")
        head = Text(r.title, style="bold")
        head.append(f"\n{r.id}" if r.id not in (r.title, where) else "", style="cyan")
        head.append(f"\n{where}", style="dim")
        table.add_row(str(n), Text(r.kind), head, Text(r.snippet), f"{r.score:.2f}")
    return table


def cli_search(args: argparse.Namespace) -> int:
    response = _toolbox().search_docs(args.query, limit=args.limit, kind=args.kind)
    if args.json:
        print(response.model_dump_json(indent=2))
        return 0
    console = _console()
    if not response.results:
        console.print(Text(f"No results for {args.query!r}. Try fewer words or an API name (e.g. fully_shard)."))
        return 1
    console.print(render_search(response))
    return 0


def render_api(entry: ApiEntryResult) -> Group:
    parts: list = [Text(f"{entry.qualified_name}  ({entry.kind}, torch {entry.torch_version})", style="bold")]
    if entry.since:
        parts.append(Text(f"torch releases: {entry.since}", style="cyan"))
    if entry.deprecation:
        dep = entry.deprecation
        named = dep.replacement and dep.replacement not in dep.message  # "use X instead" already says it
        text = f"{dep.message} Use {dep.replacement} instead." if named else dep.message
        parts.append(Panel(Text(text), title="deprecated", style="yellow"))
    if entry.signature:
        parts.append(Syntax(entry.signature, "python", word_wrap=True))
    description = entry.description
    if entry.summary and " ".join(description.split()).startswith(" ".join(entry.summary.split())):
        description = ""  # the body repeats the summary; print it once, in full
    if entry.summary and not description:
        parts.append(Markdown(entry.description or entry.summary))
    else:
        if entry.summary:
            parts.append(Markdown(entry.summary))
        if description:
            parts.append(Markdown(description))
    if entry.parameters:
        params = Table(title="Parameters", expand=True)
        for column in ("parameter", "type", "default", "description"):
            params.add_column(column, overflow="fold")  # a long type is folded onto more lines, never cut
        for p in entry.parameters:
            params.add_row(Text(p.name), Text(p.type or ""), Text(p.default or ""), Text(p.description))
        parts.append(params)
    if entry.returns:
        parts.append(Text.assemble(("Returns: ", "bold"), entry.returns))
    if entry.raises:
        parts.append(Text.assemble(("Raises: ", "bold"), "; ".join(entry.raises)))
    for note in entry.notes:
        parts.append(Panel(Markdown(note), title="note"))
    for example in entry.examples:
        title = f"{example.id}: {example.world_size} rank{'s' if example.world_size != 1 else ''}, {example.status}"
        parts.append(Panel(Syntax(example.code, "python"), title=Text(title)))
    where = f"references/{entry.reference}#{entry.anchor}"
    parts.append(Text(where + (f"\n{entry.url}" if entry.url else ""), style="dim"))
    if entry.other_matches:
        parts.append(Text("Also named so: " + ", ".join(entry.other_matches), style="dim"))
    return Group(*parts)


def cli_show(args: argparse.Namespace) -> int:
    entry = _toolbox().get_api(args.symbol)
    if args.json:
        print(entry.model_dump_json(indent=2))
        return 0
    _console().print(render_api(entry))
    return 0


def cli_api(args: argparse.Namespace) -> int:
    box = _toolbox()
    start: int | None = 0
    while start is not None:
        page = box.list_api(args.module, start)
        text = page.text if args.all is False else page.text.rsplit("\n[", 1)[0]
        print(text)
        start = page.next_start_index if args.all else None
    return 0
