"""The MCP server: wiring only. Tool logic lives in `tools.Toolbox`; this module registers it.

`fsdp-skill serve` speaks stdio; `--http` serves streamable HTTP (default 127.0.0.1). Every tool is
read-only except `verify_example`, registered only with `--allow-run`. Nothing here (or in what it
imports) imports torch, so the server starts in the time the MCP SDK itself needs.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from fsdp_skill import __version__
from fsdp_skill.core.errors import FsdpSkillError
from fsdp_skill.core.paths import rebuild_hint, references_dir, repo_root
from fsdp_skill.core.vocabulary import DocumentKind, StatusFilter
from fsdp_skill.search import semantic
from fsdp_skill.search.index import DocsIndex, open_index
from fsdp_skill.serve.app import DocsServer
from fsdp_skill.serve.history import ApiHistoryResult, HistoryArea, WhatChangedResult
from fsdp_skill.serve.http import idle_timeout_s, listen, serve_http
from fsdp_skill.serve.http_guard import connection_limit, raise_open_files_limit
from fsdp_skill.serve.prompts import hang_prompt, migrate_prompt
from fsdp_skill.serve.query_log import QueryLog
from fsdp_skill.serve.results import (
    ApiEntryResult,
    ApiListPage,
    ExampleDetail,
    ExampleList,
    PatternDetail,
    PatternList,
    ReferenceList,
    ReferencePage,
    SearchResponse,
    VerifyResult,
)
from fsdp_skill.serve.runs import RunHandle, RunSlots, stop_all_runs
from fsdp_skill.serve.tools import EXAMPLE_PAGE, MAX_EXAMPLE_PAGE, MAX_LIMIT, Toolbox

__all__ = ["build_server", "cli_serve"]

T = TypeVar("T")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
RUNS_CODE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
Offline documentation for PyTorch FSDP (fully_shard / FSDP2 and FullyShardedDataParallel / FSDP1) \
and torch.distributed, pinned to torch {torch_version}. Start with search_docs; use get_api for \
exact signatures and defaults (short names and aliases like all_reduce, dist.barrier, FSDP work); \
read_reference for a whole topic or section; list_patterns/get_pattern for runnable scripts. \
Examples carry their verification status (passed / failed / skipped / doc-bug) on this torch. \
Search mode: {search_mode}."""


def _answer(call: Callable[[], T]) -> T:
    """Run a tool body; errors the caller can fix become ToolErrors the model reads."""
    try:
        return call()
    except FsdpSkillError as exc:
        raise ToolError(str(exc)) from None


def build_server(root: Path | None = None, allow_run: bool = False, index: DocsIndex | None = None,
                 runs: RunSlots | None = None, log_queries: Path | None = None) -> MCPServer:
    root = (root or repo_root()).resolve()
    box = Toolbox(index or open_index(root), root, runs)
    server = DocsServer(
        "pytorch-fsdp",
        title="PyTorch FSDP docs",
        version=__version__,
        log_level="WARNING",
        instructions=INSTRUCTIONS.format(torch_version=box.index.torch_version, search_mode=box.index.search_mode),
    )
    if log_queries is not None:
        server.query_log = QueryLog(log_queries)
    _add_reading_tools(server, box)
    _add_history_tools(server, box)
    _add_example_tools(server, box)
    if allow_run:
        _add_verify_tool(server, box)
    _add_resources(server, root)
    _add_prompts(server, box.index.torch_version)
    return server


def _add_reading_tools(server: MCPServer, box: Toolbox) -> None:
    """Search, API entries and the reference files."""

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def search_docs(
        query: Annotated[
            str, Field(description="Words, a question or an API name, e.g. 'fully_shard mixed precision'.")
        ],
        limit: Annotated[int, Field(description=f"How many results, 1 to {MAX_LIMIT}.")] = 5,
        kind: Annotated[DocumentKind | None, Field(description="Only this kind of result; omit for all.")] = None,
    ) -> SearchResponse:
        """Search the FSDP / torch.distributed docs (sections, API entries, runnable examples, patterns, the
        skill's own checked advice: SKILL.md pitfalls, decision tables and core recipe, tuning sections, and
        what each torch release changed).

        Understands API names whole or in parts (all_reduce, MixedPrecisionPolicy, TORCH_DISTRIBUTED_DEBUG),
        aliases (dist.X, FSDP, FSDP2, DCP, HSDP, DDP, ZeRO), parameter names, a whole pasted traceback (its
        error lines are matched against torch's messages; paths and rank prefixes are ignored), release
        questions ("what did torch 2.14 add", "is X deprecated", "since which torch"; API entries carry a
        History line), and questions in other languages (Russian, Japanese) when the semantic side is
        installed. kind: section, api, example, pattern, skill or release. Each result has a short snippet;
        follow up with get_api(symbol) for an API entry, read_reference(reference, section=anchor) for a
        section, a skill or a release result, get_example(id) or get_pattern(id).
        """
        return _answer(lambda: box.search_docs(query, limit, kind))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def get_api(
        symbol: Annotated[
            str,
            Field(
                description="Qualified or short name or alias: 'torch.distributed.all_reduce', 'all_reduce', "
                "'dist.all_reduce', 'FSDP'."
            ),
        ],
    ) -> ApiEntryResult:
        """The full documentation of one API: signature, parameters, returns, deprecation, notes, examples
        with their verification status, and the upstream URL. An unknown name gives the closest names."""
        return _answer(lambda: box.get_api(symbol))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def list_api(
        module: Annotated[
            str | None,
            Field(
                description="Only this module and its submodules, e.g. 'torch.distributed.checkpoint' "
                "(or 'dist.checkpoint', 'dcp'); omit for every name."
            ),
        ] = None,
        start_index: Annotated[
            int, Field(description="Position to start from (the previous page's next_start_index).")
        ] = 0,
    ) -> ApiListPage:
        """Every public name of the docs with its one-line summary, grouped by module, about 2,000 tokens a
        page; the last line says how to get the next page. Use it instead of search_docs when you do not know
        what an API is called, want to see everything a module offers, or a search did not find the name:
        scan the summaries, then get_api(name) for the chosen one."""
        return _answer(lambda: box.list_api(module, start_index))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def read_reference(
        name: Annotated[str, Field(description="A file name from list_references, e.g. 'fsdp2.md', or a skill "
                                   "result's page: 'SKILL.md', 'assets/traps.md', 'assets/tuning.md'.")],
        section: Annotated[
            str | None,
            Field(description="An anchor (from search results) to read only that section and its subsections."),
        ] = None,
        start_index: Annotated[
            int, Field(description="Character offset to start from (the previous page's end_index).")
        ] = 0,
        max_chars: Annotated[int, Field(description="Page size in characters, 200 to 50000.")] = 8000,
    ) -> ReferencePage:
        """Read a reference file (or one section of it) as markdown, a page at a time. The text ends with a
        line saying how to get the next page; code blocks cut by a page end are closed and reopened."""
        return _answer(lambda: box.read_reference(name, section, start_index, max_chars))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def list_references() -> ReferenceList:
        """The reference files: name, title, what each covers, and its size in tokens."""
        return _answer(box.list_references)


def _add_history_tools(server: MCPServer, box: Toolbox) -> None:
    """The API timeline across torch releases (references/api-history.json)."""

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def api_history(
        symbol: Annotated[str, Field(description="Qualified or short name, as for get_api: 'fully_shard', "
                                     "'dist.all_gather_single', 'torch.distributed.fsdp.FSDPModule.unshard'.")],
    ) -> ApiHistoryResult:
        """In which torch releases (2.4 on) an API exists, from which it is deprecated and for what, where it
        lived before a move, and how its parameters changed. Call it before using an API when the user's
        torch is not the pinned one: e.g. dist.all_gather_single exists from 2.13 only."""
        return _answer(lambda: box.api_history(symbol))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def what_changed(
        from_version: Annotated[str, Field(description="The older torch, e.g. the user's: '2.8' or '2.8.0'.")],
        to_version: Annotated[
            str | None, Field(description="The newer torch; omit for the pinned release the checks run on.")
        ] = None,
        area: Annotated[
            HistoryArea | None, Field(description="Only this part of the API; omit for all, most important first.")
        ] = None,
    ) -> WhatChangedResult:
        """What was added, deprecated, removed, moved and re-signed in torch.distributed (FSDP, DCP, DTensor,
        DeviceMesh, pipelining, collectives) between two torch releases. Use it when the user's torch differs
        from the pinned one, before writing code: advice for the pinned torch may not exist on theirs."""
        return _answer(lambda: box.what_changed(from_version, to_version, area))


def _add_example_tools(server: MCPServer, box: Toolbox) -> None:
    """The documented examples and the runnable patterns (read-only)."""

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def list_examples(
        symbol: Annotated[
            str | None, Field(description="Only examples of APIs whose name contains this, e.g. 'all_reduce'.")
        ] = None,
        status: Annotated[
            StatusFilter | None, Field(description="Only examples with this verification status.")
        ] = None,
        start_index: Annotated[
            int, Field(description="Position to start from (the previous page's next_start_index).")
        ] = 0,
        limit: Annotated[int, Field(description=f"Examples per page, 1 to {MAX_EXAMPLE_PAGE}.")] = EXAMPLE_PAGE,
    ) -> ExampleList:
        """Runnable doctest examples from the API docs, a page at a time: id, verification status on this
        torch, and one line (ranks, device, why it did not pass). Filter by API name or status; the note
        at the end says how to get the next page. get_example(id) returns the code itself."""
        return _answer(lambda: box.list_examples(symbol, status, start_index, limit))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def get_example(
        name: Annotated[str, Field(description="Example id, e.g. 'torch.distributed.all_reduce#1'.")],
    ) -> ExampleDetail:
        """One example: its code, the output each rank should print, the world size it assumes, and its
        latest verification results (passed / failed / skipped / doc-bug, or 'not verified')."""
        return _answer(lambda: box.get_example(name))

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def list_patterns() -> PatternList:
        """Commented, runnable FSDP scripts (training loop, mixed precision, DCP checkpoints, HSDP, …)."""
        return _answer(box.list_patterns)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    def get_pattern(
        name: Annotated[str, Field(description="A pattern name from list_patterns.")],
    ) -> PatternDetail:
        """One pattern: its full source, the torchrun command that launches it, and its verification status."""
        return _answer(lambda: box.get_pattern(name))


VERIFY_DESCRIPTION = """\
Run one documented example across ranks on this machine's torch and report passed / failed / \
skipped / doc-bug with each rank's output. Only catalog examples can run, never other code. This \
server runs {limits}: a call over that is refused at once, saying so; call again when a run has finished."""


def _add_verify_tool(server: MCPServer, box: Toolbox) -> None:
    """The one tool that runs code (only with --allow-run): a catalog example, never other code."""

    @server.tool(annotations=RUNS_CODE, structured_output=True,
                 description=VERIFY_DESCRIPTION.format(limits=box.runs.describe()))
    async def verify_example(
        name: Annotated[str, Field(description="Example id from the catalog, e.g. 'torch.distributed.all_reduce#1'.")],
        backend: Annotated[
            Literal["gloo", "nccl"], Field(description="gloo runs on CPU; nccl needs one GPU per rank.")
        ] = "gloo",
        world_size: Annotated[int | None, Field(description="Ranks to start (default: the example's own).")] = None,
        timeout: Annotated[float, Field(description="Seconds the example may run, 1 to 600.")] = 120.0,
    ) -> VerifyResult:
        # In a worker thread that a cancelled call abandons, stopping its run: the session does not wait
        # for a run nobody will read (a client that hung up, a server shutting down).
        handle = RunHandle()
        try:
            return await anyio.to_thread.run_sync(
                lambda: _answer(lambda: box.verify_example(name, backend, world_size, timeout, handle)),
                abandon_on_cancel=True,
            )
        except anyio.get_cancelled_exc_class():
            handle.cancel()
            raise


def _add_resources(server: MCPServer, root: Path) -> None:
    def reader(path: Path) -> Callable[[], str]:
        def read() -> str:
            try:
                return path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ResourceError(f"{path.name} cannot be read ({exc.strerror}): {rebuild_hint(root)}") from None

        return read

    skill = root / "SKILL.md"
    if skill.is_file():
        server.resource(
            "fsdp-skill://SKILL.md",
            name="SKILL.md",
            mime_type="text/markdown",
            description="The skill's guide: when to use FSDP2/FSDP1/DDP, the core recipe, pitfalls.",
        )(reader(skill))
    refs = references_dir(root)
    for path in sorted(refs.glob("*.md")) if refs.is_dir() else []:
        server.resource(
            f"fsdp-skill://references/{path.name}",
            name=path.name,
            mime_type="text/markdown",
            description=f"Reference file {path.name} (also pageable with read_reference).",
        )(reader(path))


def _add_prompts(server: MCPServer, torch_version: str) -> None:
    @server.prompt(
        name="migrate-fsdp1-to-fsdp2",
        title="Migrate FSDP1 code to FSDP2",
        description="Rewrite FullyShardedDataParallel code with fully_shard, argument by argument.",
    )
    def migrate(
        code: Annotated[
            str,
            Field(
                description="The FSDP1 code to migrate: the FullyShardedDataParallel wrapping, "
                "training step and checkpoint code. Omit it to be asked for it."
            ),
        ] = "",
    ) -> str:
        return migrate_prompt(code, torch_version)

    @server.prompt(
        name="debug-distributed-hang",
        title="Debug a distributed hang",
        description="A checklist to find why a torch.distributed job hangs or times out.",
    )
    def debug_hang(
        symptom: Annotated[
            str,
            Field(
                description="What the job does when it hangs: the call it stops in, how many "
                "ranks and nodes, any timeout message."
            ),
        ] = "",
        backend: Annotated[str, Field(description="The process group backend: 'nccl' (GPUs) or 'gloo' (CPU).")] = "",
    ) -> str:
        return hang_prompt(symptom, backend, torch_version)


def mode_of(server: MCPServer) -> str:
    """The search mode line of a built server (it is the last sentence of its instructions)."""
    return (server.instructions or "").rsplit("Search mode: ", 1)[-1].rstrip(".")


def cli_serve(args: argparse.Namespace) -> int:
    # The semantic model is not loaded here: it loads on the first search that needs it (a name lookup
    # never does), so a server starts as fast as in lexical mode; a background load measured slower
    # (it competes with the start for the interpreter).
    runs = RunSlots(args.max_runs, args.max_ranks)
    log_queries = getattr(args, "log_queries", None)
    server = build_server(allow_run=args.allow_run, runs=runs, log_queries=Path(log_queries) if log_queries else None)
    server_mode = mode_of(server)
    # SIGTERM (how clients and supervisors stop a server) exits through the `finally` below, not around it.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        _serve(server, server_mode, args)
    finally:
        stop_all_runs()  # a verify_example still running must not outlive the server (nor its scratch folder)
    return 0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def lexical_note(server_mode: str) -> str | None:
    """The one stderr line a server in lexical mode starts with: what it cannot answer, and how to change that."""
    if not server_mode.startswith("lexical"):
        return None
    if semantic.disabled_by_environment():
        enable = "unset FSDP_SKILL_SEMANTIC to use the semantic side"
    elif not semantic.installed():
        enable = semantic.ENABLE_HINT
    else:
        enable = "run `fsdp-skill regenerate` in a checkout to store the document vectors"
    return (f"fsdp-skill serve: search mode {server_mode}: a question with no English words or API names (Russian, "
            f"Japanese, ...) finds nothing; {enable}")


def _serve(server: MCPServer, server_mode: str, args: argparse.Namespace) -> None:
    # Once, at startup, on stdio too (clients log a server's stderr); after the arguments are checked and the
    # port is bound, so a bad argument is still a one-line error and the address is still the first line.
    note = lexical_note(server_mode)
    if args.http:
        idle_s = idle_timeout_s(args.session_idle_timeout)
        sock = listen(args.host, args.port)
        if args.host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"fsdp-skill serve: warning: listening on {args.host}, not loopback; there is no authentication",
                file=sys.stderr,
            )
        port = sock.getsockname()[1]  # the one picked for --port 0
        shown = f"[{args.host}]" if ":" in args.host else args.host
        print(f"fsdp-skill serve: streamable HTTP on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)
        print(f"fsdp-skill serve: search mode {server_mode}", file=sys.stderr, flush=True)
        open_files = raise_open_files_limit()
        print(f"fsdp-skill serve: HTTP sessions idle for {idle_s:g} s are closed (--session-idle-timeout); at most "
              f"{connection_limit(open_files)} connections at once (open-files limit {open_files}), 503 beyond",
              file=sys.stderr, flush=True)
        if note:
            print(note, file=sys.stderr, flush=True)
        serve_http(server, sock, args.host, idle_s, open_files)
    else:
        if sys.stdin.isatty():
            # Someone typed `make serve` in a terminal: say what is waiting, since stdio MCP is silent.
            print(
                "fsdp-skill serve: MCP server on stdio, waiting for a client (see README, 'MCP clients'); "
                f"search mode {server_mode}; Ctrl-C to stop",
                file=sys.stderr,
                flush=True,
            )
        if note:
            print(note, file=sys.stderr, flush=True)
        server.run()
