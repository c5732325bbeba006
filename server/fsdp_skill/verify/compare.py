"""Compare what each rank printed with what the docs say, and classify the example.

Statuses, and the rule behind each (applied in this order):

- **skipped** — the example cannot run here, for a named reason: decided before running (see `plan`),
  or because a rank raised an error that names a missing capability (no CUDA, no numpy, an op gloo
  does not implement, a torch name this version lacks), or because the example's own code read a
  name that nothing defines (a fragment the static check could not see).
- **failed** — the runner could not get a clean answer: a rank timed out, died, stayed blocked after
  another rank raised, or the ranks raised *different* errors (a partial, rank-dependent failure).
- **doc-bug** — the documented example is wrong for this torch, with evidence: either every rank
  raised the same exception at the same statement (the code as written cannot work), or every rank ran
  every statement cleanly but a documented output differs from the actual one after normalization.
- **passed** — every rank ran every statement and every documented output matched.

Normalization forgives only what the runner itself changed or what doctest conventions allow: the
`device=...` annotation (the runner moves CUDA examples to the rank's device), whitespace (alignment
padding in tensor reprs, line wrapping), a trailing `# Rank N` tag, and `...` as a wildcard (xdoctest's
ELLIPSIS). Values, dtypes and structure must match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fsdp_skill.core.vocabulary import ExampleStatus  # stdlib only

from .examples import ExampleSpec

_DEVICE_KWARG = re.compile(r",?\s*device\s*=\s*'[^']*'")
_DEVICE_REPR = re.compile(r"device\(type='[^']*'(?:,\s*index=\d+)?\)")
_RANK_TAG = re.compile(r"#\s*rank\s*\d+\s*$", re.IGNORECASE | re.MULTILINE)
_ON_RANK = re.compile(r"\bon rank (\d+)\b", re.IGNORECASE)

# Errors that name a capability this machine or build lacks: the example is skipped, not failed.
_CAPABILITY_ERRORS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"Torch not compiled with CUDA|Found no NVIDIA driver|No CUDA GPUs are available|CUDA driver|"
            r"when CUDA is available|requires CUDA|CUDA is not available|needs a non-CPU accelerator"
        ),
        "needs CUDA",
    ),
    (re.compile(r"Numpy is not available|No module named 'numpy'"), "needs numpy"),
    (re.compile(r"No module named '(?!torch\b)[\w.]+'"), "needs a package this environment lacks"),
    (
        re.compile(
            r"gloo[^\n]*(does not support|not supported|unsupported)|"
            r"(does not support|not supported|unsupported)[^\n]*gloo",
            re.IGNORECASE,
        ),
        "gloo does not implement it",
    ),
    (
        re.compile(r"module 'torch[\w.]*' has no attribute|cannot import name '\w+' from 'torch"),
        "not in this torch version",
    ),
]


def normalize(text: str) -> str:
    """The comparable form of an output: see the module docstring for what is forgiven."""
    text = _RANK_TAG.sub("", text)
    text = _DEVICE_REPR.sub("device(...)", text)
    text = _DEVICE_KWARG.sub("", text)
    text = " ".join(text.split())
    text = re.sub(r"([\[(]) ", r"\1", text)
    text = re.sub(r" ([\]),])", r"\1", text)
    return text


def outputs_match(expected: str, actual: str) -> bool:
    want, got = normalize(expected), normalize(actual)
    if want == "None" and got == "":
        return True  # the docs show a None value; doctest's displayhook prints nothing for it
    if "..." not in want:
        return want == got
    pattern = ".*?".join(re.escape(part) for part in want.split("..."))
    return re.fullmatch(pattern, got, re.DOTALL) is not None


def ranks_meant(spec: ExampleSpec, index: int) -> int | None:
    """The rank a shared output belongs to when the comment above it says so ("on rank 2:")."""
    unit = spec.units[index]
    comments = [ln for ln in unit.source.splitlines() if ln.strip().startswith("#")]
    i = index - 1
    while i >= 0 and all(ln.strip().startswith("#") or not ln.strip() for ln in spec.units[i].source.splitlines()):
        comments = spec.units[i].source.splitlines() + comments
        i -= 1
    for line in reversed(comments):
        if match := _ON_RANK.search(line):
            return int(match.group(1))
    return None


@dataclass
class Verdict:
    status: ExampleStatus
    reason: str | None
    ranks: list[dict[str, Any]] = field(default_factory=list)
    raised: bool = False  # a doc-bug whose evidence is an exception every rank raised when it ran


def capability_reason(message: str) -> str | None:
    for pattern, label in _CAPABILITY_ERRORS:
        if pattern.search(message):
            return label
    return None


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def diffs_for_rank(spec: ExampleSpec, rank: int, outputs: dict[str, str]) -> list[dict[str, Any]]:
    diffs: list[dict[str, Any]] = []
    for index, unit in enumerate(spec.units):
        want = unit.expected_for(rank)
        if want is None:
            continue
        if unit.expected is not None and not unit.expected_by_rank:
            meant = ranks_meant(spec, index)
            if meant is not None and meant != rank:
                continue
        got = outputs.get(str(index), "")
        if not outputs_match(want, got):
            diffs.append(
                {"line": unit.line, "source": unit.source, "expected": want.rstrip("\n"), "actual": got.rstrip("\n")}
            )
    return diffs


def classify(spec: ExampleSpec, outcome: Any, compare_outputs: bool = True, backend: str = "gloo") -> Verdict:
    """Turn a pool `Outcome` (or the torchrun equivalent) into a status, a reason and per-rank evidence."""
    results: dict[int, dict[str, Any]] = outcome.results
    errors = {r: res["error"] for r, res in sorted(results.items()) if res.get("error")}
    skipped = _skip_for_error(spec, errors, backend)
    if skipped is not None:
        return skipped
    if outcome.failure:
        return Verdict("failed", outcome.message, _failure_evidence(spec, outcome, errors))
    if errors:
        return _verdict_for_errors(errors, len(results))
    if not compare_outputs:
        return Verdict("passed", None)
    return _verdict_for_outputs(spec, results)


def _skip_for_error(spec: ExampleSpec, errors: dict[int, dict[str, Any]], backend: str) -> Verdict | None:
    """An error that says the example cannot run here (a fragment, a missing capability) is a skip, not a failure."""
    for rank, err in errors.items():
        if err.get("undefined_name"):
            # The static check is lenient inside functions, loops and branches (a name bound anywhere there
            # counts), so a read that runs before its binding, or never gets one, only shows now.
            return Verdict(
                "skipped",
                f"fragment: uses {err['undefined_name']} without defining it (found when it ran: rank {rank} raised "
                f"NameError at line {err['line']}; upstream shows part of a program)",
            )
        label = capability_reason(f"{err['type']}: {err['message']}")
        if label is None and backend == "gloo" and spec.device == "cuda" and "gloo" in err["message"].lower():
            # Written for CUDA/NCCL (which accepts e.g. the "stack form" of all_gather_single); gloo is stricter.
            label = "written for CUDA/NCCL and gloo rejects it"
        if label is None and backend == "nccl" and "no backend type associated with device type cpu" in (
            err["message"].lower()
        ):
            # Written with CPU tensors (gloo); an NCCL-only group takes CUDA tensors.
            label = "written with CPU tensors, which an NCCL-only group does not take"
        if label:
            return Verdict(
                "skipped",
                f"{label}: rank {rank} raised {err['type']} at line {err['line']}: {_first_line(err['message'])}",
            )
    return None


def _failure_evidence(spec: ExampleSpec, outcome: Any, errors: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rank of a timed-out or crashed group: its traceback, its stack when stuck, its log."""
    ranks: list[dict[str, Any]] = []
    for rank in range(spec_world_size(outcome, spec)):
        entry: dict[str, Any] = {"rank": rank}
        if rank in errors:
            entry["traceback"] = errors[rank]["traceback"]
        if outcome.stacks.get(rank):
            entry["stack"] = outcome.stacks[rank]
        if outcome.logs.get(rank):
            entry["log"] = outcome.logs[rank]
        if len(entry) > 1:
            ranks.append(entry)
    return ranks


def _verdict_for_errors(errors: dict[int, dict[str, Any]], rank_count: int) -> Verdict:
    """The same error at the same statement on every rank is the documentation's bug; anything else failed."""
    signatures = {(e["unit"], e["type"]) for e in errors.values()}
    ranks = [{"rank": r, "traceback": e["traceback"]} for r, e in errors.items()]
    first = next(iter(errors.values()))
    if len(errors) == rank_count and len(signatures) == 1:
        return Verdict(
            "doc-bug",
            f"the documented code raises {first['type']} on every rank at line {first['line']}: "
            f"{_first_line(first['message'])}",
            ranks,
            raised=True,
        )
    where = ", ".join(f"rank {r}: {e['type']} at line {e['line']}" for r, e in errors.items())
    return Verdict("failed", f"ranks raised different errors ({where})", ranks)


def _verdict_for_outputs(spec: ExampleSpec, results: dict[int, dict[str, Any]]) -> Verdict:
    ranks: list[dict[str, Any]] = []
    for rank, res in sorted(results.items()):
        diffs = diffs_for_rank(spec, rank, res.get("outputs", {}))
        if diffs:
            ranks.append({"rank": rank, "diffs": diffs})
    if ranks:
        first = ranks[0]["diffs"][0]
        where = ", ".join(f"rank {entry['rank']}" for entry in ranks)
        return Verdict(
            "doc-bug",
            f"documented output differs on {where}; e.g. line {first['line']}: expected "
            f"{_first_line(first['expected'])!r}, got {_first_line(first['actual']) or '(nothing)'!r}",
            ranks,
        )
    return Verdict("passed", None)


def spec_world_size(outcome: Any, spec: ExampleSpec) -> int:
    ranks = set(outcome.results) | set(outcome.stacks) | set(outcome.logs)
    return max([spec.world_size, *(r + 1 for r in ranks)])
