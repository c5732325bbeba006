"""`fsdp-skill bench search`: retrieval quality, latency, cold start, tokens and HTTP load, each against a
baseline measured in the same run.

- Quality: Recall@1, Recall@5 and MRR@10 on every eval set of tests/eval/ (EVAL_SETS: dev, the dev
  held-out set that was tuned on, dev2, the frozen blind set, the Russian/Japanese set, the
  mixed-language set, the agents' own searches, the agent-style dev and blind sets, each of those also per
  kind of question; any other file too), for our search in the mode it runs in, lexically, and for plain
  BM25 (rank-bm25 over the same documents, lowercase word tokens, no stemming, no field weights), all in
  the same run.
- Latency: in-process `search_docs` (the tool function, snippets and models included) p50/p95/p99, in
  the mode it runs in and lexically, beside rank-bm25's scoring of the same queries. In semantic mode
  every call embeds its query (nothing cached between calls); the embedding's own time and the engine
  threads each call used are reported from inside those same calls.
- Cold start over stdio: spawn `fsdp-skill serve`, initialize, list tools, first search; versus a bare
  MCPServer with one tool doing the same; medians of interleaved runs, printed as a ratio.
- Tokens: median characters / 4 of the text a client receives for a limit=5 search.
- Load: 8 concurrent streamable-HTTP clients × 200 searches on loopback; errors and p50/p99.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import catalog_path, index_path, repo_root
from fsdp_skill.search import semantic
from fsdp_skill.search.freshness import stale_reason
from fsdp_skill.search.index import DocsIndex, open_index
from fsdp_skill.search.query import QueryError, parse_query
from fsdp_skill.search.ranking import fts_matches, search
from fsdp_skill.serve.tools import Toolbox

TARGETS = {
    "recall5": 0.95,
    "mrr": 0.85,
    "multilingual_recall5": 0.85,
    "agent_recall5": 0.95,
    "agent_dev_recall5": 0.90,
    "agent_blind_recall5": 0.85,
    "p50_ms": 2.0,
    "semantic_p50_ms": 25.0,
    "p99_ms": 10.0,
    "cold_ratio": 1.3,
    "tokens": 1500,
}
# (label, file under tests/eval/): dev is what the ranking was developed on; "dev held-out" was written
# after the first tuning and later read, so it is dev too; dev2 was written from the docs (mostly plain
# language that names no API) before its rankings were looked at, then tuned on with dev; blind was written
# from the docs before any tuning and is never read to tune (its misses are not printed); ru/ja dev asks in
# Russian and Japanese only (no Latin letter), longer questions and symptoms, written and judged from the
# corpus (not from rankings) to tune the multilingual side on; ru/ja asks in Russian and Japanese, not tuned
# on since ru/ja dev exists; mixed ru/ja asks in Russian or Japanese around API and product names (FSDP, NCCL, DCP,
# fully_shard, torchrun), written and judged before the routing it measures was tuned; agent holds the
# searches real agents made with the server as their only documentation (serve --log-queries, issue 21),
# each judged by hand, a regression guard. agent dev and agent blind (issue 31) ask as agents do: pasted
# tracebacks, settings described without their parameter's name, release questions, symptoms, code fragments,
# Russian/Japanese around API names (each row's "type", reported per type); both were written in one sitting
# from the corpus before any ranking was looked at; agent dev is tuned on, agent blind never (its misses are
# not printed). Any other *.jsonl under tests/eval/ is reported too, under its file stem.
EVAL_SETS = (
    ("dev", "queries.jsonl"),
    ("dev held-out", "heldout.jsonl"),
    ("dev2", "dev2.jsonl"),
    ("blind", "blind.jsonl"),
    ("ru/ja dev", "multilingual_dev.jsonl"),
    ("ru/ja", "multilingual.jsonl"),
    ("mixed ru/ja", "mixed.jsonl"),
    ("agent", "agent.jsonl"),
    ("agent dev", "agent_dev.jsonl"),
    ("agent blind", "agent_blind.jsonl"),
)


def eval_sets(eval_dir: Path) -> list[tuple[str, str]]:
    """(label, file name) of every eval set in eval_dir: the known ones in EVAL_SETS order, then the rest."""
    present = {path.name for path in eval_dir.glob("*.jsonl")}
    known = [(label, name) for label, name in EVAL_SETS if name in present]
    named = {name for _, name in EVAL_SETS}
    return known + [(Path(name).stem, name) for name in sorted(present - named)]


COLD_RUNS = 5
LOAD_CLIENTS, LOAD_CALLS = 8, 200

BARE_SERVER = """\
from mcp.server.mcpserver import MCPServer
server = MCPServer("bare")

@server.tool()
def echo(text: str) -> str:
    \"\"\"Echo the text.\"\"\"
    return text

server.run()
"""


@dataclass(frozen=True)
class EvalQuery:
    question: str
    symbols: frozenset[str]
    sections: frozenset[str]
    patterns: frozenset[str]
    kind: str | None = None  # the kind filter the question was asked with (an agent's search_docs call)
    type: str | None = None  # how it asks (agent-style sets): traceback, parameter, release, symptom, code, mixed


def load_queries(path: Path) -> list[EvalQuery]:
    if not path.is_file():
        raise UserError(f"{path} does not exist: the eval set is tests/eval/queries.jsonl in the repository")
    queries = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            queries.append(
                EvalQuery(
                    row["question"],
                    frozenset(row.get("symbols", [])),
                    frozenset(row.get("sections", [])),
                    frozenset(row.get("patterns", [])),
                    row.get("kind"),
                    row.get("type"),
                )
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(
                f"{path}:{n}: not an eval row ({exc}); expected "
                '{"question": ..., "symbols": [...], "sections": [...]}'
            ) from None
    return queries


def is_relevant(
    query: EvalQuery, kind: str, id: str, symbol: str | None, reference: str | None, anchor: str | None
) -> bool:
    """An expected API entry (or one of its members: Stateful.load_state_dict answers a question about
    Stateful), an expected section, or an expected pattern."""
    if symbol and (symbol in query.symbols or symbol.rsplit(".", 1)[0] in query.symbols):
        return True
    if kind == "pattern":
        return id in query.patterns
    return id in query.sections or f"{reference}#{anchor}" in query.sections


@dataclass
class Quality:
    recall1: float
    recall5: float
    mrr: float
    misses: list[tuple[str, list[str]]]


def score_rankings(
    queries: list[EvalQuery], rankings: list[list[tuple[str, str, str | None, str | None, str | None]]]
) -> Quality:
    r1 = r5 = rr = 0.0
    misses = []
    for query, ranking in zip(queries, rankings):
        ranks = [i for i, doc in enumerate(ranking[:10], start=1) if is_relevant(query, *doc)]
        first = ranks[0] if ranks else None
        r1 += first == 1
        r5 += first is not None and first <= 5
        rr += 1.0 / first if first else 0.0
        if first is None or first > 5:
            misses.append((query.question, [doc[1] for doc in ranking[:5]]))
    n = len(queries)
    return Quality(r1 / n, r5 / n, rr / n, misses)


def pattern_recall(queries: list[EvalQuery], rankings: list[list[tuple]]) -> tuple[int, float, float]:
    """(questions with an expected pattern, share with that pattern in the top 3, in the top 5): whether
    task questions surface the verified recipe, not only some relevant section."""
    firsts = [
        next((i for i, doc in enumerate(ranking[:5], start=1) if doc[0] == "pattern" and doc[1] in q.patterns), None)
        for q, ranking in zip(queries, rankings)
        if q.patterns
    ]
    if not firsts:
        return 0, 0.0, 0.0
    return (
        len(firsts),
        sum(f is not None and f <= 3 for f in firsts) / len(firsts),
        sum(f is not None for f in firsts) / len(firsts),
    )


def canonical(index: DocsIndex, queries: list[EvalQuery]) -> list[EvalQuery]:
    """Expected symbols under the catalog's current names: an old qualified name that is now an
    alias (state_dict_saver.save → checkpoint.save) still counts; an unknown one is an error."""
    out = []
    for q in queries:
        names = set()
        for symbol in q.symbols:
            matches = [qualified for rank, qualified in index.resolve_name(symbol) if rank <= 1]
            if not matches:
                raise UserError(
                    f"eval set: {symbol!r} ({q.question!r}) is not in the catalog: update tests/eval/queries.jsonl"
                )
            names.add(matches[0])
        out.append(EvalQuery(q.question, frozenset(names), q.sections, q.patterns, q.kind, q.type))
    return out


def our_rankings(index: DocsIndex, queries: list[EvalQuery], use_dense: bool = True) -> list[list[tuple]]:
    def ranking(query: EvalQuery) -> list[tuple]:
        try:
            hits = search(index, query.question, limit=10, kind=query.kind, use_dense=use_dense)
        except QueryError:  # a Russian question without the semantic side: nothing found
            return []
        return [(h.doc.kind, h.doc.id, h.doc.symbol, h.doc.reference, h.doc.anchor) for h in hits]

    return [ranking(q) for q in queries]


_TOKEN = re.compile(r"\w+")


class PlainBM25:
    """The baseline: rank-bm25's BM25Okapi over each document's title and text, nothing else."""

    def __init__(self, index: DocsIndex) -> None:
        from rank_bm25 import BM25Okapi

        documents = index.document_texts()
        self.docs = [key for key, _ in documents]
        self.bm25 = BM25Okapi([self.tokens(text) for _, text in documents])

    @staticmethod
    def tokens(text: str) -> list[str]:
        return _TOKEN.findall(text.lower())

    def rank(self, question: str, limit: int = 10, kind: str | None = None) -> list[tuple]:
        scores = self.bm25.get_scores(self.tokens(question))
        allowed = [i for i in range(len(scores)) if kind is None or self.docs[i][0] == kind]
        best = sorted(allowed, key=lambda i: -scores[i])[:limit]
        return [self.docs[i] for i in best]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def timed(fn: Callable[..., object], *args: object) -> tuple[float, float]:
    """(wall ms, this process's CPU ms): on a busy machine the two differ, and the gap says so."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*args)
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


# ---------------------------------------------------------------- MCP sessions


def _cold_start_once(command: list[str], tool: str, arguments: dict, env: dict[str, str]) -> float:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.types import TextContent

    async def session() -> float:
        start = time.perf_counter()
        with anyio.fail_after(120):
            async with Client(StdioServerParameters(command=command[0], args=command[1:], env=env)) as client:
                await client.list_tools()
                result = await client.call_tool(tool, arguments)
                if result.is_error:
                    said = " ".join(block.text for block in result.content if isinstance(block, TextContent))
                    raise UserError(f"cold start: {tool} failed: {said}")
                return time.perf_counter() - start

    return anyio.run(session)


def cold_start(root: Path) -> tuple[float, float]:
    """Median seconds for (ours, bare) over interleaved runs."""
    env = {**os.environ, "FSDP_SKILL_ROOT": str(root)}
    ours_cmd = [str(Path(sys.executable).with_name("fsdp-skill")), "serve"]
    with tempfile.TemporaryDirectory(prefix="fsdp-bench-") as tmp:
        bare_file = Path(tmp) / "bare_server.py"
        bare_file.write_text(BARE_SERVER, encoding="utf-8")
        bare_cmd = [sys.executable, str(bare_file)]
        ours, bare = [], []
        # One warm-up of each (file cache), then interleave so machine noise hits both alike.
        _cold_start_once(ours_cmd, "search_docs", {"query": "fully_shard"}, env)
        _cold_start_once(bare_cmd, "echo", {"text": "fully_shard"}, env)
        for _ in range(COLD_RUNS):
            ours.append(_cold_start_once(ours_cmd, "search_docs", {"query": "fully_shard"}, env))
            bare.append(_cold_start_once(bare_cmd, "echo", {"text": "fully_shard"}, env))
    return statistics.median(ours), statistics.median(bare)


def response_tokens(root: Path, queries: list[EvalQuery]) -> tuple[list[int], list[float]]:
    """Tokens (chars / 4) of each limit=5 response as a client receives it, and in-process MCP round trips."""
    import anyio
    from mcp import Client

    from fsdp_skill.serve.server import build_server

    server = build_server(root)
    tokens: list[int] = []
    latencies: list[float] = []

    async def run() -> None:
        async with Client(server) as client:
            for q in queries:
                start = time.perf_counter()
                result = await client.call_tool("search_docs", {"query": q.question, "limit": 5})
                latencies.append((time.perf_counter() - start) * 1000)
                tokens.append(sum(len(block.text) for block in result.content if hasattr(block, "text")) // 4)

    anyio.run(run)
    return tokens, latencies


def http_load(root: Path, queries: list[EvalQuery]) -> tuple[int, int, list[float], float]:
    """(calls, errors, latencies ms, wall seconds) for LOAD_CLIENTS concurrent clients × LOAD_CALLS searches."""
    import anyio
    from mcp import Client

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("fsdp-skill")), "serve", "--http", "--port", str(port)],
        env={**os.environ, "FSDP_SKILL_ROOT": str(root)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise UserError(f"the HTTP server exited with code {proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise UserError(f"the HTTP server did not listen on port {port} within 60 s") from None
                time.sleep(0.05)
        latencies: list[float] = []
        errors = 0

        async def client_loop(n: int) -> None:
            nonlocal errors
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                for i in range(LOAD_CALLS):
                    question = queries[(n * 31 + i) % len(queries)].question
                    start = time.perf_counter()
                    try:
                        result = await client.call_tool("search_docs", {"query": question, "limit": 5})
                        errors += bool(result.is_error) or not result.structured_content["results"]
                    except Exception:  # noqa: BLE001 - a load test counts every failure
                        errors += 1
                    latencies.append((time.perf_counter() - start) * 1000)

        async def run() -> float:
            start = time.perf_counter()
            with anyio.fail_after(600):
                async with anyio.create_task_group() as group:
                    for n in range(LOAD_CLIENTS):
                        group.start_soon(client_loop, n)
            return time.perf_counter() - start

        wall = anyio.run(run)
        return LOAD_CLIENTS * LOAD_CALLS, errors, latencies, wall
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# ---------------------------------------------------------------- report


def _mark(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def cli_bench_search(args: argparse.Namespace) -> int:
    root = repo_root()
    queries = load_queries(
        Path(args.queries) if getattr(args, "queries", None) else root / "tests" / "eval" / "queries.jsonl"
    )
    reason = stale_reason(index_path(root), catalog_path(root), root)
    if reason:
        print(
            f"note: {reason}: every server start below rebuilds a temporary index, which the cold-start "
            "ratio includes; run `fsdp-skill regenerate` first for a representative number",
            flush=True,
        )
    index = open_index(root)
    queries = canonical(index, queries)
    toolbox = Toolbox(index, root)
    print(
        f"fsdp-skill bench search: {len(queries)} dev queries, torch {index.torch_version}, "
        f"{index.document_count()} documents",
        flush=True,
    )
    baseline = PlainBM25(index)
    _report_quality(root, index, queries, baseline, with_heldout=not getattr(args, "queries", None))
    _report_latency(toolbox, baseline, queries)
    _report_responses(root, queries)
    _report_cold_start(root)
    if args.skip_load:
        print("\nload: skipped (--skip-load)")
    else:
        _report_load(root, queries)
    return 0


def _report_quality(
    root: Path, index: DocsIndex, queries: list[EvalQuery], baseline: PlainBM25, with_heldout: bool
) -> None:
    """Recall@1/5 and MRR on each eval set, in the running mode, lexically and for plain BM25; dev
    pattern recall; dev misses (never the blind set's)."""
    semantic_mode = index.semantic_available
    print(f"search mode: {index.search_mode}", flush=True)
    eval_dir = root / "tests" / "eval"
    sets = [("dev", queries)] + [
        (label, canonical(index, load_queries(eval_dir / name)))
        for label, name in (eval_sets(eval_dir) if with_heldout else [])
        if label != "dev"
    ]
    print("\nquality                              Recall@1  Recall@5  MRR@10")
    results: dict[str, Quality] = {}
    for label, qs in sets:
        mode = "semantic" if semantic_mode else "lexical"
        rows = [(f"fsdp-skill {mode}", score_rankings(qs, our_rankings(index, qs)))]
        if semantic_mode:
            rows.append(("fsdp-skill lexical only", score_rankings(qs, our_rankings(index, qs, use_dense=False))))
        rows.append(("plain BM25", score_rankings(qs, [baseline.rank(q.question, kind=q.kind) for q in qs])))
        results[label] = rows[0][1]
        for name, quality in rows:
            print(
                f"  {label + f' ({len(qs)})':16s} {name:24s} {quality.recall1:6.3f}    "
                f"{quality.recall5:6.3f}  {quality.mrr:6.3f}"
            )
        ours, plain = rows[0][1], rows[-1][1]
        _report_types(index, qs, baseline)
        if label in ("agent dev", "agent blind"):
            target = TARGETS["agent_dev_recall5" if label == "agent dev" else "agent_blind_recall5"]
            print(f"    target Recall@5 >= {target} {_mark(ours.recall5 >= target)}, above BM25 "
                  f"{_mark(ours.recall5 >= plain.recall5 and ours.mrr > plain.mrr)}")
        elif label == "agent":
            print(
                f"    target Recall@5 >= {TARGETS['agent_recall5']} {_mark(ours.recall5 >= TARGETS['agent_recall5'])}"
            )
        elif label == "ru/ja dev":
            print("    the multilingual side's tuning set: no target of its own (ru/ja and mixed ru/ja have them)")
        elif label in ("ru/ja", "mixed ru/ja"):
            print(
                f"    target Recall@5 >= {TARGETS['multilingual_recall5']} "
                f"{_mark(ours.recall5 >= TARGETS['multilingual_recall5'])}"
            )
        else:
            print(
                f"    targets Recall@5 >= {TARGETS['recall5']} {_mark(ours.recall5 >= TARGETS['recall5'])}, "
                f"MRR >= {TARGETS['mrr']} {_mark(ours.mrr >= TARGETS['mrr'])}, above BM25 "
                f"{_mark(ours.recall5 >= plain.recall5 and ours.mrr > plain.mrr)}"
            )
    our_ranked = our_rankings(index, queries)
    n_tasks, ours_p3, ours_p5 = pattern_recall(queries, our_ranked)
    if n_tasks:
        _, plain_p3, plain_p5 = pattern_recall(queries, [baseline.rank(q.question) for q in queries])
        print(
            f"  dev task questions ({n_tasks}) whose expected pattern ranks in the top 3 / top 5: "
            f"fsdp-skill {ours_p3:.3f} / {ours_p5:.3f}, plain BM25 {plain_p3:.3f} / {plain_p5:.3f}"
        )
    for question, top in results["dev"].misses:  # dev only: the blind set's misses are never shown
        print(f"  dev, not in top 5: {question!r} -> {top}")


def _report_types(index: DocsIndex, queries: list[EvalQuery], baseline: PlainBM25) -> None:
    """Recall@5 / MRR per kind of question of an agent-style set (rows with a "type"), ours beside BM25."""
    types = sorted({q.type for q in queries if q.type})
    for kind in types:
        qs = [q for q in queries if q.type == kind]
        ours = score_rankings(qs, our_rankings(index, qs))
        plain = score_rankings(qs, [baseline.rank(q.question, kind=q.kind) for q in qs])
        print(f"    {kind + f' ({len(qs)})':16s} Recall@5 / MRR {ours.recall5:.3f} / {ours.mrr:.3f}   "
              f"plain BM25 {plain.recall5:.3f} / {plain.mrr:.3f}")


def _report_latency(toolbox: Toolbox, baseline: PlainBM25, queries: list[EvalQuery]) -> None:
    index = toolbox.index
    semantic_mode = index.semantic_available
    rounds = 5
    semantic.Encoder.recent.clear()
    ours_t = [timed(toolbox.search_docs, q.question, 5, None) for _ in range(rounds) for q in queries]
    embedded = list(semantic.Encoder.recent)
    lexical_t = [timed(search, index, q.question, 5, None, False) for _ in range(rounds) for q in queries]
    bm25_t = [timed(baseline.rank, q.question) for _ in range(rounds) for q in queries]
    ours_ms, ours_cpu = [w for w, _ in ours_t], [c for _, c in ours_t]
    bm25_ms = [w for w, _ in bm25_t]
    p50, p99 = percentile(ours_ms, 50), percentile(ours_ms, 99)
    p50_target = TARGETS["semantic_p50_ms" if semantic_mode else "p50_ms"]
    mode = "semantic" if semantic_mode else "lexical"
    load = f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores" if hasattr(os, "getloadavg") else ""
    print(f"\nlatency (in-process, {len(ours_ms)} calls each; wall clock, CPU time in brackets{load})")
    print(
        f"  search_docs, {mode:8s}  p50 {p50:6.2f} ms ({percentile(ours_cpu, 50):.2f})  "
        f"p95 {percentile(ours_ms, 95):6.2f} ms  p99 {p99:6.2f} ms ({percentile(ours_cpu, 99):.2f})   "
        f"target p50 <= {p50_target} {_mark(p50 <= p50_target)}"
    )
    if semantic_mode and embedded:
        _report_embedding(embedded, len(ours_ms), p50)
    lex_ms = [w for w, _ in lexical_t]
    lex_p50 = percentile(lex_ms, 50)
    if semantic_mode:
        print(
            f"  search, lexical only   p50 {lex_p50:6.2f} ms ({percentile([c for _, c in lexical_t], 50):.2f})  "
            f"p95 {percentile(lex_ms, 95):6.2f} ms  p99 {percentile(lex_ms, 99):6.2f} ms   "
            f"target p50 <= {TARGETS['p50_ms']} {_mark(lex_p50 <= TARGETS['p50_ms'])}"
        )
        # The absolute target depends on how fast the machine is at that moment (the same commit measured
        # 1.5 and 2.8 ms on this 2-core machine on one day); the ratio to plain rank-bm25 scoring, timed
        # in this same process, does not.
        print(f"    lexical / rank-bm25 at p50 = {lex_p50 / percentile(bm25_ms, 50):.2f}x")
    # The share of the lexical p50 that is SQLite's bm25 (the FTS5 queries alone, timed over the same queries):
    # the part no Python change reaches.
    parsed = [parse_query(q.question, index) for q in queries]
    fts_ms = [timed(fts_matches, index, p, None)[0] for _ in range(rounds) for p in parsed]
    print(f"    of which SQLite FTS5 (bm25 over documents, parameters, messages) p50 {percentile(fts_ms, 50):.2f} ms "
          f"({percentile(fts_ms, 50) / lex_p50:.0%} of the lexical p50)")
    print(
        f"  rank-bm25              p50 {percentile(bm25_ms, 50):6.2f} ms  p99 {percentile(bm25_ms, 99):6.2f} ms   "
        f"(baseline scoring only; search_docs / rank-bm25 at p50 = {p50 / percentile(bm25_ms, 50):.2f}x)"
    )


def _report_embedding(embedded: list[tuple[int, float]], calls: int, search_p50: float) -> None:
    """What the semantic p50 holds: nothing cached between calls (each embeds its query; only the model
    and the document vectors were loaded before timing), the embedding's share, and the engine threads
    each call used (two only while no other task wanted a core)."""
    embed_ms = [ms for _, ms in embedded]
    threads = {n: sum(1 for used, _ in embedded if used == n) for n in sorted({used for used, _ in embedded})}
    rest = calls - len(embedded)
    lookups = f" (the other {rest} are API-name lookups, answered lexically)" if rest else ""
    print(
        f"    uncached: {len(embedded)} of the {calls} calls embedded their query{lookups}; "
        "loaded before timing: the model and the document vectors"
    )
    print(
        f"    of which the query embedding: p50 {percentile(embed_ms, 50):6.2f} ms  p95 "
        f"{percentile(embed_ms, 95):6.2f} ms ({percentile(embed_ms, 50) / search_p50:.0%} of the search p50); "
        f"engine threads per call (at most {semantic.Encoder.threads}, {semantic.THREADS_VARIABLE}): "
        + ", ".join(f"{n}: {count} calls" for n, count in threads.items())
    )


def _report_responses(root: Path, queries: list[EvalQuery]) -> None:
    tokens, mcp_ms = response_tokens(root, queries)
    median_tokens = statistics.median(tokens)
    print(
        f"\nresponse size (limit=5, chars/4): median {median_tokens:.0f} tokens, max {max(tokens)}   "
        f"target <= {TARGETS['tokens']} {_mark(median_tokens <= TARGETS['tokens'])}"
    )
    print(
        f"  in-process MCP round trip (mcp.Client): p50 {percentile(mcp_ms, 50):.2f} ms  p99 "
        f"{percentile(mcp_ms, 99):.2f} ms"
    )


def _report_cold_start(root: Path) -> None:
    ours_s, bare_s = cold_start(root)
    ratio = ours_s / bare_s
    print(f"\ncold start over stdio (spawn, initialize, list tools, first call; median of {COLD_RUNS})")
    print(
        f"  fsdp-skill serve {ours_s * 1000:7.0f} ms   bare MCPServer {bare_s * 1000:7.0f} ms   "
        f"ratio {ratio:.2f}x   target <= {TARGETS['cold_ratio']}x {_mark(ratio <= TARGETS['cold_ratio'])}"
    )


def _report_load(root: Path, queries: list[EvalQuery]) -> None:
    calls, errors, load_ms, wall = http_load(root, queries)
    print(
        f"\nload: {LOAD_CLIENTS} streamable-HTTP clients x {LOAD_CALLS} searches = {calls} calls in {wall:.1f} s "
        f"({calls / wall:.0f}/s), errors {errors} {_mark(errors == 0)}"
    )
    print(f"  per call p50 {percentile(load_ms, 50):.1f} ms  p99 {percentile(load_ms, 99):.1f} ms")
