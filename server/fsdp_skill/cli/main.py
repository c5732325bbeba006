"""`fsdp-skill`: a thin command line over the library.

Each subcommand parses its arguments here and hands them to one `cli_*` function in the module that
owns the work; those are imported lazily so that `fsdp-skill serve` never pays for torch, rich tables
or the build pipeline. A handler returns the process exit code. Errors the user can fix are raised as
`UserError` (or a subclass) and printed as one line, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from fsdp_skill.core.errors import FsdpSkillError, UserError
from fsdp_skill.core.limits import DEFAULT_MAX_RANKS, DEFAULT_MAX_RUNS, DEFAULT_SESSION_IDLE_S
from fsdp_skill.core.streams import stdout_closed
from fsdp_skill.core.vocabulary import DOCUMENT_KINDS


def _add_fetch(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fetch", help="download the declared upstream sources into the cache upstream/")
    p.add_argument(
        "--ref",
        action="append",
        metavar="[OWNER/NAME=]REF",
        help="git tag/branch/commit to fetch: REF for pytorch/pytorch (default: v<installed torch version>), "
        "OWNER/NAME=REF for another repository (pytorch/tutorials defaults to main); repeatable",
    )
    p.add_argument("--from-dir", metavar="DIR", help="seed the cache from a local snapshot instead of the network")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds (default 30)")
    p.add_argument("--retries", type=int, default=3, help="retries per file on network errors (default 3)")
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="a mirror serving URL/<owner>/<name>/<ref>/<path> instead of "
        "https://raw.githubusercontent.com (env FSDP_SKILL_UPSTREAM_URL)",
    )
    p.add_argument(
        "--api-url",
        metavar="URL",
        help="GitHub API base for commits and trees (default https://api.github.com; env FSDP_SKILL_GITHUB_API)",
    )
    p.add_argument("--release", action="append", metavar="X.Y.Z",
                   help="torch release whose API to read (default: every one in assets/torch-releases.toml); "
                   "repeatable; releases not named are dropped from upstream/torch-api/")
    p.add_argument("--refresh-releases", action="store_true",
                   help="download and read every release again, not only those missing from upstream/torch-api/")
    p.add_argument("--only-releases", action="store_true", help="only the torch releases' API, not the docs")
    p.add_argument("--skip-releases", action="store_true", help="only the docs, not the torch releases' API")
    p.set_defaults(handler="fsdp_skill.cli.fetch:cli_fetch")


def _add_regenerate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "regenerate", help="rebuild references/, catalog.json, api-drift.md and the index from the cache"
    )
    p.add_argument("--strict", action="store_true", help="fail on any warning (unknown directive, bad docstring)")
    p.add_argument("--check", action="store_true", help="build in a temp dir and report differences; change nothing")
    p.add_argument("--ref", help="upstream ref recorded in the output (default: the cache manifest's)")
    p.set_defaults(handler="fsdp_skill.build.pipeline:cli_regenerate")


def _add_search(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="search the docs index")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--kind", choices=DOCUMENT_KINDS)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler="fsdp_skill.cli.search:cli_search")


def _add_show(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="show one API entry (short names and aliases work: all_reduce, FSDP)")
    p.add_argument("symbol")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler="fsdp_skill.cli.search:cli_show")


def _add_history(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("history", help="in which torch releases (2.4 on) an API exists, its deprecation, moves and "
                       "parameter changes (the api_history tool)")
    p.add_argument("name", help="qualified or short name: fully_shard, dist.all_gather_single, FSDPModule.unshard")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler="fsdp_skill.cli.history:cli_history")
    w = sub.add_parser("what-changed", help="what was added, deprecated, removed, moved, re-signed between two "
                       "torch releases (the what_changed tool)")
    w.add_argument("from_version", metavar="FROM", help="the older torch, e.g. 2.8 or 2.8.0")
    w.add_argument("to_version", metavar="TO", nargs="?", help="the newer torch (default: the pinned one)")
    w.add_argument("--area", choices=["fsdp", "checkpoint", "tensor", "device_mesh", "pipelining", "collectives",
                                      "other"], help="only this part of the API")
    w.add_argument("--json", action="store_true")
    w.set_defaults(handler="fsdp_skill.cli.history:cli_what_changed")


def _add_releases(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("releases", help="the release matrix: every claim check and pattern run on each torch release "
                       "(2.6 to the pin) in a throwaway venv")
    p.add_argument("--run", action="store_true", help="install each release and run its missing or stale rows "
                   "(resumable; one venv at a time, removed after)")
    p.add_argument("--release", action="append", metavar="X.Y.Z", help="only this release (repeatable)")
    p.add_argument("--prune", action="store_true", help="drop the rows made from other versions of their files")
    p.add_argument("--json", action="store_true", help="print the matrix as JSON")
    p.set_defaults(handler="fsdp_skill.cli.releases:cli_releases")


def _add_api(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("api", help="list every public name with its one-line summary, by module (the list_api tool)")
    p.add_argument("--module", help="only this module and its submodules (torch.distributed.checkpoint, dcp, dist)")
    p.add_argument("--all", action="store_true", help="every page at once instead of the first")
    p.set_defaults(handler="fsdp_skill.cli.search:cli_api")


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    p.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000; 0 picks a free port and prints it)")
    p.add_argument("--allow-run", action="store_true", help="register verify_example (runs catalog examples only)")
    p.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, metavar="N",
                   help=f"verify_example runs at once (default {DEFAULT_MAX_RUNS}); a call over that is refused")
    p.add_argument("--max-ranks", type=int, default=DEFAULT_MAX_RANKS, metavar="N",
                   help=f"rank processes of all verify_example runs together (default {DEFAULT_MAX_RANKS})")
    p.add_argument("--session-idle-timeout", type=float, metavar="SECONDS",
                   help=f"close HTTP sessions idle this long (default {DEFAULT_SESSION_IDLE_S:g}, "
                   "or $FSDP_SKILL_SESSION_IDLE_TIMEOUT)")
    p.add_argument("--log-queries", metavar="FILE",
                   help="append one JSON line per tool call to FILE (tool, arguments, latency, result ids); "
                   "off by default")
    p.set_defaults(handler="fsdp_skill.serve.server:cli_serve")


def _add_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="run the catalog's documented examples across ranks")
    # The flags live with the runner, which `python -m fsdp_skill.verify` and scripts/ share (stdlib only).
    from fsdp_skill.verify.args import add_arguments

    add_arguments(p)
    p.set_defaults(handler="fsdp_skill.verify.cli:cli_verify")


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check SKILL.md, links, code blocks and patterns")
    p.add_argument("root", nargs="?", help="skill folder to check (default: this repository)")
    p.set_defaults(handler="fsdp_skill.cli.validate:cli_validate")


def _add_skill(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("skill", help="install the Agent Skill folder for an agent (SKILL.md, references/, ...)")
    ssub = p.add_subparsers(dest="skill", required=True)
    i = ssub.add_parser(
        "install",
        help="write the skill folder from this fsdp-skill's data (default ~/.claude/skills/pytorch-fsdp)",
        description="Write SKILL.md, references/, assets/ and scripts/ into DIR/pytorch-fsdp (DIR: an agent's "
        "skills folder, default ~/.claude/skills), or exactly into --target FOLDER, atomically. An existing "
        "pytorch-fsdp skill of another version (or with local edits) is replaced only with --force; a folder that "
        "is not this skill, or is a clone of the repository, is never replaced.",
    )
    where = i.add_mutually_exclusive_group()
    where.add_argument("--dir", metavar="DIR", help="an agent's skills folder: the skill goes into DIR/pytorch-fsdp "
                       "(default ~/.claude/skills)")
    where.add_argument("--target", metavar="FOLDER", help="the skill folder itself, used as given")
    i.add_argument("stray", nargs="?", metavar="DIR", help=argparse.SUPPRESS)  # refused: say --dir or --target
    i.add_argument("--force", action="store_true", help="replace another version of the skill, or local edits")
    i.set_defaults(handler="fsdp_skill.cli.skill_install:cli_skill_install")


def _add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check the data, index, search mode, MCP server and torch; say what to fix")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--no-torch", action="store_true", help="skip the torch probe (a subprocess importing torch)")
    p.set_defaults(handler="fsdp_skill.cli.doctor:cli_doctor")


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmarks that print ratios against an in-run baseline")
    bsub = p.add_subparsers(dest="bench", required=True)
    s = bsub.add_parser("search", help="retrieval quality vs BM25, latency, cold start, tokens, HTTP load")
    s.add_argument("--skip-load", action="store_true", help="skip the streamable-HTTP load test")
    s.add_argument("--queries", metavar="PATH", help="eval set (default: tests/eval/queries.jsonl)")
    s.set_defaults(handler="fsdp_skill.cli.bench_search:cli_bench_search")
    v = bsub.add_parser("verify", help="pooled runner vs a spawn per example vs the bare floor")
    v.add_argument("--timeout", type=float, default=60.0)
    v.add_argument("--catalog", metavar="PATH", help="catalog.json to read (default: references/catalog.json)")
    v.set_defaults(handler="fsdp_skill.cli.bench_verify:cli_bench_verify")
    lim = bsub.add_parser("limits", help="the server's input limits: 1 MB get_api refusal, HTTP session release")
    lim.add_argument("--sessions", type=int, default=2000, help="HTTP sessions to open and abandon (default 2000)")
    lim.add_argument("--idle", type=float, default=3.0, help="the server's session idle timeout, seconds (default 3)")
    lim.add_argument("--skip-sessions", action="store_true", help="only the get_api latency")
    lim.set_defaults(handler="fsdp_skill.cli.bench_limits:cli_bench_limits")
    rel = bsub.add_parser("releases", help="the release matrix's wall time per release and peak disk")
    rel.set_defaults(handler="fsdp_skill.cli.releases:cli_bench_releases")


class _VersionAction(argparse.Action):
    """`fsdp-skill --version`: the package version and which data it serves (checkout, package or $FSDP_SKILL_ROOT)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from fsdp_skill import __version__
        from fsdp_skill.core.paths import locate

        try:
            data = locate().describe()
        except UserError as exc:
            data = f"none ({exc})"
        print(f"fsdp-skill {__version__}\ndata: {data}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fsdp-skill",
        description="PyTorch FSDP / torch.distributed docs: regenerate, search, serve over MCP, verify examples.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and where the data is read from")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (
        _add_fetch,
        _add_regenerate,
        _add_search,
        _add_show,
        _add_history,
        _add_releases,
        _add_api,
        _add_serve,
        _add_verify,
        _add_validate,
        _add_skill,
        _add_doctor,
        _add_bench,
    ):
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:  # `fsdp-skill api --all | head`: the reader left; stop quietly (core/streams.py)
        return stdout_closed()


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    module_name, func_name = args.handler.split(":")
    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        return int(handler(args) or 0)
    except FsdpSkillError as exc:
        print(f"fsdp-skill {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"fsdp-skill {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
