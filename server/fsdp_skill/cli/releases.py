"""`fsdp-skill releases`: the release matrix (every claim check and pattern, run on each torch release).

    fsdp-skill releases                      the committed matrix as a table, one line per check or pattern
    fsdp-skill releases --json               the committed matrix: {"releases": [...], "rows": [...]}
    fsdp-skill releases --run                run the stale or missing rows of every matrix release
    fsdp-skill releases --run --release 2.8.0 --release 2.15.0
    fsdp-skill releases --prune              drop the rows made from other versions of their files
    fsdp-skill bench releases                wall time per release (install, runs) and peak disk, from the runs

The releases are `matrix` in assets/torch-releases.toml. The work is `verify.releases`; this is its front.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fsdp_skill.core.errors import UserError
from fsdp_skill.core.paths import repo_root, writable_root
from fsdp_skill.verify.releases import (
    first_passing,
    prune,
    public_view,
    read_matrix,
    run_matrix,
    targets,
    write_matrix,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 reads TOML through the tomli backport.
    import tomli as tomllib

RELEASES_FILE = "assets/torch-releases.toml"


def matrix_releases(root: Path) -> list[str]:
    """The releases the matrix runs (assets/torch-releases.toml, key `matrix`), oldest first."""
    path = root / RELEASES_FILE
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path} is unreadable ({exc}): restore it with `git checkout {RELEASES_FILE}`") from None
    releases = data.get("matrix")
    if not isinstance(releases, list) or not all(isinstance(r, str) for r in releases) or not releases:
        raise UserError(f"{path} has no `matrix = [\"2.6.0\", ...]` list of releases")
    return releases


def _chosen(root: Path, asked: list[str] | None) -> list[str]:
    declared = matrix_releases(root)
    if not asked:
        return declared
    unknown = [r for r in asked if r not in declared]
    if unknown:
        raise UserError(f"release {unknown[0][:40]!r} is not in the matrix ({', '.join(declared)}): add it to "
                        f"`matrix` in {RELEASES_FILE} first")
    return list(dict.fromkeys(asked))  # in the order asked: the most wanted release first


def cli_releases(args: argparse.Namespace) -> int:
    if args.prune:
        root = writable_root("releases --prune rewrites references/verification-releases.{json,md}")
        matrix, dropped = prune(read_matrix(root), targets(root))
        write_matrix(root, matrix)
        print(f"dropped {dropped} row(s) made from other versions of their files; "
              "`fsdp-skill releases --run` runs them again", file=sys.stderr)
    if args.run:
        root = writable_root("releases --run rewrites references/verification-releases.{json,md}")
        matrix = run_matrix(root, _chosen(root, args.release), progress=lambda line: print(line, flush=True))
    else:
        root = repo_root()
        matrix = read_matrix(root)
    if args.json:
        print(json.dumps(public_view(matrix), indent=1, ensure_ascii=False))
        return 0
    if not matrix["rows"]:
        print("no release matrix yet: run `fsdp-skill releases --run` in a checkout")
        return 0
    releases = [r["release"] for r in matrix["releases"]]
    declared = matrix_releases(root)
    status = {(r["id"], r["release"]): r["status"] for r in matrix["rows"]}
    mark = {"passed": "ok", "failed": "FAIL", "skipped": "skip"}
    ids = list(dict.fromkeys(r["id"] for r in matrix["rows"]))
    width = max(len(i) for i in ids)
    print(f"{'':{width}}  " + " ".join(f"{r:>7}" for r in releases) + "   passes from")
    for ident in ids:
        cells = " ".join(f"{mark.get(status.get((ident, r), ''), '-'):>7}" for r in releases)
        print(f"{ident:{width}}  {cells}   {first_passing(matrix, ident, declared) or 'never'}")
    failed = sum(r["status"] == "failed" for r in matrix["rows"])
    print(f"\n{len(matrix['rows'])} rows, {failed} failed; reasons: references/verification-releases.md")
    return 0


def cli_bench_releases(args: argparse.Namespace) -> int:
    """Wall time per release and the venv's disk (the peak: one release's venv at a time), from the runs."""
    root = repo_root()
    matrix = read_matrix(root)
    records = [r for r in matrix["releases"] if "install_s" in r]
    if not records:
        print("no timed release runs recorded: run `fsdp-skill releases --run` in a checkout")
        return 0
    wanted = len(targets(root))
    pin = records[-1]
    base = (pin["install_s"] + pin["run_s"]) or 1.0
    print(f"{'release':>8} {'install s':>10} {'runs s':>8} {'runs':>5} {'total s':>8} {'vs newest':>9} {'venv GB':>8}")
    for r in records:
        total = r["install_s"] + r["run_s"]
        print(f"{r['release']:>8} {r['install_s']:>10.1f} {r['run_s']:>8.1f} {r.get('ran', wanted):>5} {total:>8.1f} "
              f"{total / base:>8.2f}x {r['venv_bytes'] / 1e9:>8.2f}")
    peak = max(r["venv_bytes"] for r in records)
    total = sum(r["install_s"] + r["run_s"] for r in records)
    print(f"\nall {len(records)} releases: {total / 60:.1f} min; peak disk {peak / 1e9:.2f} GB (one venv at a time)")
    return 0
