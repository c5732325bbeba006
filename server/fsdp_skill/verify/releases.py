"""The release matrix: every claim check and pattern, run on each torch release in a throwaway venv.

Names tell what exists (the API timeline); runs tell what it does. For each release this makes a fresh venv,
`pip install torch==R numpy` into it (the user's own pip and its configuration), runs
`scripts/verify_examples.py --only-claims` and `--only-patterns` there (the originals; mutants stay on the
pin), records one row per (check or pattern, release) and removes the venv, before the next release: one at a
time, since a CUDA build takes about 5 GB. After each release the matrix file is rewritten atomically, so an
interrupted run keeps every finished release; a rerun skips a release whose rows are all current.

A row is current while its file is unchanged: it records `source_sha256`, the hash of the file (without its
`min_torch:` line, which the matrix itself sets) and of the shared `_*.py` helpers beside it that it imports.
Only the rows that are missing or stale are run again.

    references/verification-releases.json   {"releases": [{release, build, python, date, ...timings}],
                                              "rows": [{id, release, status, reason, source_sha256, seconds}]}
    references/verification-releases.md     the readable table: checks and patterns x releases

Stdlib only, like the rest of `verify` (the runs themselves import torch, in their own venv).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsdp_skill.core.atomic import write_atomic
from fsdp_skill.core.errors import UserError
from fsdp_skill.core.scratch import make_scratch_dir

from .claims import CLAIM_PREFIX, check_files, read_check
from .mutants import source_sha256
from .patterns import PatternHeaderError, pattern_files, read_header

MATRIX_JSON = "references/verification-releases.json"
MATRIX_MD = "references/verification-releases.md"
VENV_PREFIX = "fsdp-skill-release-"
PATTERN_PREFIX = "pattern:"
STATUSES = ("passed", "failed", "skipped")
INSTALL_TIMEOUT_S = 1800.0

Row = dict[str, Any]
Progress = Callable[[str], None]


class MatrixError(UserError):
    """A release could not be set up (its venv or its torch install); the message says what to do."""


@dataclass(frozen=True)
class Target:
    id: str  # claim:NAME or pattern:NAME
    path: Path
    digest: str


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("+")[0].split(".") if part.isdigit())


_HELPER_IMPORT = re.compile(r"^(?:from\s+(_\w+)\s+import|import\s+(_\w+))", re.MULTILINE)


def _digest(path: Path) -> str:
    """The file without its min_torch line, plus the shared helpers beside it that it imports (`from _dist import`):
    editing a helper makes the rows of its importers stale, and only theirs."""
    sha = hashlib.sha256(source_sha256(path).encode())
    text = path.read_text(encoding="utf-8", errors="replace")
    imported = {a or b for a, b in _HELPER_IMPORT.findall(text)}
    for helper in sorted(path.parent.glob("_*.py")):
        if helper.stem in imported:
            sha.update(helper.name.encode() + b"\0" + helper.read_bytes())
    return sha.hexdigest()


def targets(root: Path) -> list[Target]:
    """Every claim check (assets/checks/) and pattern (assets/patterns/) of the checkout, by id."""
    found = [Target(read_check(p).id, p, _digest(p)) for p in check_files(root / "assets" / "checks")]
    for path in pattern_files(root / "assets" / "patterns"):
        try:
            found.append(Target(PATTERN_PREFIX + read_header(path).name, path, _digest(path)))
        except PatternHeaderError:
            continue  # `fsdp-skill validate` reports a bad header; the matrix has nothing to run
    return found


def read_matrix(root: Path) -> dict[str, Any]:
    """The committed matrix, or an empty one."""
    path = root / MATRIX_JSON
    if not path.is_file():
        return {"releases": [], "rows": []}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MatrixError(f"{path} is not a readable JSON matrix ({exc}): restore it with `git checkout {MATRIX_JSON}`")
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise MatrixError(f"{path} has no 'rows' list: restore it with `git checkout {MATRIX_JSON}`")
    data.setdefault("releases", [])
    return data


def public_view(matrix: dict[str, Any]) -> dict[str, Any]:
    """What `fsdp-skill releases --json` prints: releases and rows with their documented keys only."""
    return {
        "releases": [{k: r.get(k) for k in ("release", "build", "python", "date")} for r in matrix["releases"]],
        "rows": [{k: r.get(k) for k in ("id", "release", "status", "reason")} for r in matrix["rows"]],
    }


def stale(matrix: dict[str, Any], release: str, wanted: list[Target]) -> list[Target]:
    """The targets whose row for this release is missing or was made from another version of its file."""
    have = {(r["id"], r.get("source_sha256")) for r in matrix["rows"] if r.get("release") == release}
    return [t for t in wanted if (t.id, t.digest) not in have]


def _run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])[-600:]


def install(venv: Path, release: str, python: str) -> dict[str, Any]:
    """A venv with torch==release and numpy; returns what the installed torch says of its build."""
    made = _run([python, "-m", "venv", str(venv)], 300)
    if made.returncode != 0:
        raise MatrixError(f"`{python} -m venv` failed: {_tail(made.stderr)}")
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    got = _run([*pip, "install", "-q", "--disable-pip-version-check", f"torch=={release}", "numpy"], INSTALL_TIMEOUT_S)
    if got.returncode != 0:
        raise MatrixError(f"pip could not install torch=={release}: {_tail(got.stderr)} (is {release} a release your "
                          "package index serves for this Python? does a pip constraint cap torch?)")
    probe = _run([str(venv / "bin" / "python"), "-c", _PROBE], 300)
    if probe.returncode != 0:
        raise MatrixError(f"torch {release} installed but does not import: {_tail(probe.stderr)}")
    return dict(json.loads(probe.stdout.strip().splitlines()[-1]))


_PROBE = """
import json, platform, torch
cuda = torch.version.cuda
gpus = torch.cuda.device_count() if cuda and torch.cuda.is_available() else 0
kind = f"CUDA {cuda} build" if cuda else "CPU build"
host = f"{gpus} GPU(s)" if gpus else "no GPU on this host"
print(json.dumps({"torch": torch.__version__, "build": f"{torch.__version__} ({kind}; {host})",
                  "python": ".".join(platform.python_version_tuple()[:2])}))
"""


def _verify(venv: Path, root: Path, flag: str, ids: list[str], out: Path, progress: Progress) -> list[Row]:
    """Run verify_examples.py in the venv for these ids (its per-row lines go to `progress`); its report's rows."""
    command = [str(venv / "bin" / "python"), str(root / "scripts" / "verify_examples.py"), flag, "--json", str(out)]
    for ident in ids:
        command += ["--id", ident]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FSDP_SKILL_ROOT", "VIRTUAL_ENV")}
    env["PYTHONUNBUFFERED"] = "1"
    kept: list[str] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          start_new_session=True) as proc:
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # the runner enforces each row's timeout; this loop ends with its output
                kept = (kept + [line])[-20:]
                if line.startswith("["):
                    progress("  " + line.rstrip())
        finally:
            if proc.poll() is None:  # interrupted: leave no rank behind
                os.killpg(proc.pid, 9)
            proc.wait()
    if not out.is_file():
        raise MatrixError(f"verify_examples.py {flag} wrote no report (exit {proc.returncode}): {_tail(''.join(kept))}")
    report = json.loads(out.read_text(encoding="utf-8"))
    return list(report.get("results", []))


def _row(target: Target, release: str, result: Row | None) -> Row:
    status, reason = "failed", "the run reported no row for it"
    if result is not None:
        status = str(result.get("status")) if result.get("status") in STATUSES else "failed"
        reason = str(result.get("reason") or "")
        if status == "failed" and not reason:
            reason = f"status {result.get('status')!r}"
    return {"id": target.id, "release": release, "status": status, "reason": reason or None,
            "source_sha256": target.digest, "seconds": (result or {}).get("seconds")}


def _du(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                pass
    return total


def run_release(
    root: Path, release: str, todo: list[Target], python: str, scratch_parent: Path, progress: Progress = print
) -> tuple[Row, list[Row]]:
    """Install one release, run the targets there, remove the venv: (release record, rows)."""
    scratch = make_scratch_dir(scratch_parent, VENV_PREFIX)  # also removes what a killed run left
    try:
        started = time.monotonic()
        build = install(scratch / "venv", release, python)
        installed = time.monotonic()
        disk = _du(scratch / "venv")
        results: dict[str, Row] = {}
        claims = [t.id for t in todo if t.id.startswith(CLAIM_PREFIX)]
        patterns = [t.id for t in todo if t.id.startswith(PATTERN_PREFIX)]
        if claims:
            for r in _verify(scratch / "venv", root, "--only-claims", claims, scratch / "claims.json", progress):
                results[r.get("name", "")] = r
        if patterns:
            for r in _verify(scratch / "venv", root, "--only-patterns", patterns, scratch / "patterns.json", progress):
                results[r.get("name", "")] = r
        record = {
            "release": release, "build": build["build"], "python": build["python"],
            "date": datetime.date.today().isoformat(), "install_s": round(installed - started, 1),
            "run_s": round(time.monotonic() - installed, 1), "venv_bytes": disk, "ran": len(todo),
        }
        return record, [_row(t, release, results.get(t.id)) for t in todo]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def merge(matrix: dict[str, Any], record: Row, rows: list[Row], wanted: list[Target]) -> dict[str, Any]:
    """The matrix with this release's record and rows replaced; rows of files that no longer exist dropped."""
    ids = {t.id for t in wanted}
    new_ids = {(r["id"], r["release"]) for r in rows}
    kept = [r for r in matrix["rows"] if r["id"] in ids and (r["id"], r["release"]) not in new_ids]
    releases = [r for r in matrix["releases"] if r["release"] != record["release"]] + [record]
    releases.sort(key=lambda r: _release_key(r["release"]))
    order = {t.id: i for i, t in enumerate(wanted)}
    all_rows = sorted(kept + rows, key=lambda r: (order.get(r["id"], 1 << 30), _release_key(r["release"])))
    return {"releases": releases, "rows": all_rows}


def prune(matrix: dict[str, Any], wanted: list[Target]) -> tuple[dict[str, Any], int]:
    """The matrix without the rows made from another version of their file (no longer evidence for it) or of a file
    that is gone, and without releases left with no row; and how many rows went."""
    current = {(t.id, t.digest) for t in wanted}
    rows = [r for r in matrix["rows"] if (r["id"], r.get("source_sha256")) in current]
    kept = {r["release"] for r in rows}
    releases = [r for r in matrix["releases"] if r["release"] in kept]
    return {"releases": releases, "rows": rows}, len(matrix["rows"]) - len(rows)


def write_matrix(root: Path, matrix: dict[str, Any]) -> None:
    write_atomic(root / MATRIX_JSON, json.dumps(matrix, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    write_atomic(root / MATRIX_MD, render_markdown(matrix))


# (checkout, release, the targets to run, progress) -> (release record, rows); `run_release` by default.
ReleaseRunner = Callable[[Path, str, list[Target], Progress], "tuple[Row, list[Row]]"]


def run_matrix(root: Path, releases: list[str], python: str = sys.executable, progress: Progress = print,
               scratch_parent: Path | None = None, runner: ReleaseRunner | None = None) -> dict[str, Any]:
    """Run every release in turn (resumable); the matrix as written after the last one."""
    wanted = targets(root)
    matrix = read_matrix(root)
    parent = scratch_parent or Path(tempfile.gettempdir())

    def default_runner(root: Path, release: str, todo: list[Target], progress: Progress) -> tuple[Row, list[Row]]:
        return run_release(root, release, todo, python, parent, progress)

    run = runner or default_runner
    for release in releases:
        todo = stale(matrix, release, wanted)
        if not todo:
            progress(f"{release}: every row is current, nothing to run")
            continue
        progress(f"{release}: installing torch=={release} into a throwaway venv, then {len(todo)} run(s)")
        record, rows = run(root, release, todo, progress)
        previous = next((r for r in matrix["releases"] if r["release"] == release), None)
        if previous and len(todo) < len(wanted):  # a partial rerun: keep the full run's timings beside it
            record = {**previous, **{k: record[k] for k in ("build", "python", "date")}}
        matrix = merge(matrix, record, rows, wanted)
        write_matrix(root, matrix)
        tally = {s: sum(r["status"] == s for r in rows) for s in STATUSES}
        progress(f"{release}: {tally['passed']} passed, {tally['failed']} failed, {tally['skipped']} skipped "
                 f"({record['build']})")
    return matrix


_CELL = {"passed": "✓", "failed": "✗", "skipped": "–"}


def render_markdown(matrix: dict[str, Any]) -> str:
    """Checks and patterns x releases, then every failed or skipped cell with its reason."""
    releases = [r["release"] for r in matrix["releases"]]
    cells: dict[str, dict[str, Row]] = {}
    for row in matrix["rows"]:
        cells.setdefault(row["id"], {})[row["release"]] = row
    lines = [
        "# Claim checks and patterns on every torch release",
        "",
        "Generated by `fsdp-skill releases --run`: each release installed from the package registry into a",
        "throwaway venv, every claim check (`assets/checks/`) and pattern (`assets/patterns/`) run there on gloo",
        "(the originals; their mutants run on the pin only, see `verification.md`). ✓ passed, ✗ failed,",
        "– skipped, · not run on that release yet (a check or pattern newer or edited since; the next",
        "`fsdp-skill releases --run` runs it); the reasons follow the table. A check or pattern with no row",
        "at all has not been run on any release yet.",
        "",
        "| release | build | python | date |",
        "|---|---|---|---|",
    ]
    lines += [f"| {r['release']} | {r['build']} | {r['python']} | {r['date']} |" for r in matrix["releases"]]
    lines += ["", "| check or pattern | " + " | ".join(releases) + " |", "|---|" + "---|" * len(releases)]
    for ident, by_release in cells.items():
        marks = [_CELL.get(by_release[r]["status"], "?") if r in by_release else "·" for r in releases]
        lines.append(f"| `{ident}` | " + " | ".join(marks) + " |")
    lines += ["", "## Failed and skipped, with reasons", ""]
    for ident, by_release in cells.items():
        for release in releases:
            row = by_release.get(release)
            if row and row["status"] != "passed":
                reason = " ".join(str(row.get("reason") or "").split())[:300]
                lines.append(f"- `{ident}` on {release}: {row['status']}: {reason}")
    return "\n".join(lines) + "\n"


def first_passing(matrix: dict[str, Any], ident: str, declared: list[str] | None = None) -> str | None:
    """The oldest release from which every run of `ident` passed, up to the newest release of the matrix; None
    when the newest did not pass. A release without a row of `ident` ends the run, whether the matrix ran it for
    other rows or only declares it (`declared`, assets/torch-releases.toml's `matrix`): a range is never stated
    across a release nobody ran."""
    by_release = {r["release"]: r["status"] for r in matrix["rows"] if r["id"] == ident}
    known = {r["release"] for r in matrix.get("releases", [])} | set(by_release) | set(declared or [])
    declared = sorted(known, key=_release_key)
    first = None
    for release in reversed(declared):
        if by_release.get(release) != "passed":
            break
        first = release
    return first


def covers(matrix: dict[str, Any], ident: str, releases: list[str]) -> bool:
    """Whether the matrix has a row of `ident` for every one of these releases."""
    have = {r["release"] for r in matrix["rows"] if r["id"] == ident}
    return all(release in have for release in releases)
