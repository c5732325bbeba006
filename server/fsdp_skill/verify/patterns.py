"""Run one pattern from assets/patterns/ under torchrun, and read the metadata header it starts with.

Stdlib only (torch is imported lazily, to count GPUs), like the rest of `fsdp_skill.verify`: a plain
clone runs it. The catalog builder (`fsdp_skill.build.patterns`) reads the same header through
`read_header`, so the two can never disagree about what a pattern needs.

The header. A Python pattern's module docstring, a shell template's first comment block, starts with
`key: value` lines, then a blank line, then prose whose first paragraph is the summary:

    name: fsdp2-training              lowercase words joined by hyphens, unique
    min_torch: 2.6                    the oldest torch it runs on, major.minor, right after `name:`; computed
                                      from the API timeline by `fsdp-skill validate` (build.pattern_torch)
    title: FSDP2 training loop ...    one line
    world_size: 2                     ranks it is launched with (torchrun --nproc-per-node)
    requires: cuda                    comma-separated, empty when gloo on CPU is enough
    tags: fsdp2, fully_shard, ...     comma-separated search terms
    launch: ...                       optional: the command line, when the default does not fit
    mutant: NAME: `OLD` -> `NEW`      one line per mutant, at least one: an edit that makes the pattern's claim
                                      false, which its run must then fail (see `mutants`)

Running. A `.py` pattern runs as `python -m torch.distributed.run --standalone --nproc-per-node N`
(the same interpreter, so no `torchrun` on PATH is needed); a shell template runs with bash, with
NPROC_PER_NODE/NNODES/MASTER_ADDR/MASTER_PORT set for one local node and a `torchrun` shim for this
interpreter first on PATH. Everything starts in a new session, so on a timeout the whole process
group (torchrun and every rank) is killed: no orphans.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsdp_skill.core.errors import UserError  # stdlib only, like core.paths
from fsdp_skill.core.paths import patterns_dir

PATTERN_SUFFIXES = (".py", ".sh", ".sbatch")
REQUIRED_KEYS = ("name", "title", "world_size")
OPTIONAL_KEYS = ("min_torch", "requires", "tags", "launch")
MIN_TORCH_RE = re.compile(r"^\d+\.\d+$")
# What a pattern may declare it needs; anything else is a typo the header check reports.
KNOWN_REQUIREMENTS = {
    "cuda": "one CUDA GPU per rank and the nccl backend",
    "slurm": "a SLURM allocation (srun and SLURM_JOB_ID)",
    # Its checks need every rank it states (an uneven split, a mismatch between two ranks, a 2-D mesh):
    # --max-ranks skips it rather than run it at fewer ranks, where it would fail for that reason alone.
    "gloo": "the gloo backend on CPU (it exercises the CPU-only code path; an nccl run skips it)",
    "stated-ranks": "every one of its stated ranks (--max-ranks below that skips it)",
}
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_KEY_RE = re.compile(r"^([a-z_]+):[ \t]*(.*?)\s*$")
OUTPUT_LIMIT = 40_000  # characters of output kept per run (the tail: that is where errors are)
KILL_GRACE_S = 5.0


class PatternHeaderError(UserError, ValueError):
    """A pattern's header is missing or malformed; `line` is 1-based in the pattern file."""

    def __init__(self, path: Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line, self.message = path, line, message


@dataclass(frozen=True)
class PatternHeader:
    path: Path
    name: str
    title: str
    world_size: int
    requires: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    launch: str | None = None
    min_torch: str | None = None  # 'major.minor'
    summary: str = ""
    description: str = ""
    key_lines: dict[str, int] = field(default_factory=dict)  # key -> 1-based line, for error messages

    @property
    def kind(self) -> str:
        return "python" if self.path.suffix == ".py" else "shell"


def _python_comment_block(path: Path, text: str) -> tuple[list[str], int]:
    """The module docstring's lines and the 1-based file line of its first line."""
    try:
        module = ast.parse(text, filename=str(path))
    except SyntaxError as exc:
        raise PatternHeaderError(path, exc.lineno or 1, f"does not parse: {exc.msg}") from None
    first = module.body[0] if module.body else None
    if not (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    ):
        raise PatternHeaderError(path, 1, "no module docstring: start the file with the metadata header docstring")
    # The raw (uncleaned) string starts right after the opening quotes, on the docstring's first line.
    return first.value.value.split("\n"), first.lineno


def _shell_comment_block(path: Path, text: str) -> tuple[list[str], int]:
    """The first comment block after the shebang, without the '#' markers (#SBATCH lines end it)."""
    lines = text.split("\n")
    start = 1 if lines and lines[0].startswith("#!") else 0
    block: list[str] = []
    for line in lines[start:]:
        if not line.startswith("#") or line.startswith("#SBATCH") or line.startswith("#!"):
            break
        block.append(line[2:] if line.startswith("# ") else line[1:])
    return block, start + 1


def _split_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


# Keys that may appear on several lines of one header (each line one item): a check's or pattern's mutants.
REPEATABLE_KEYS = ("mutant",)


def header_entries(path: Path, text: str) -> tuple[list[tuple[int, str, str]], int, str]:
    """The `key: value` lines a file's header starts with, as (1-based file line, key, value), the line after
    them, and the prose that follows. Keys are not checked here: `read_key_block` does that."""
    if path.suffix == ".py":
        block, first_line = _python_comment_block(path, text)
    elif path.suffix in PATTERN_SUFFIXES:
        block, first_line = _shell_comment_block(path, text)
    else:
        raise PatternHeaderError(path, 1, f"not a pattern file (expected one of {', '.join(PATTERN_SUFFIXES)})")

    index = 0
    while index < len(block) and not block[index].strip():
        index += 1
    entries: list[tuple[int, str, str]] = []
    while index < len(block) and block[index].strip():
        line_no = first_line + index
        match = _KEY_RE.match(block[index].strip())
        if not match:
            got = block[index].strip()
            raise PatternHeaderError(path, line_no, f"expected 'key: value' in the header, got {got!r}")
        entries.append((line_no, match.group(1), match.group(2)))
        index += 1
    return entries, first_line + index, "\n".join(block[index:]).strip()


def read_key_block(
    path: Path, text: str, required: tuple[str, ...], optional: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, int], int, str]:
    """The `key: value` lines a file's header starts with: (values, key -> 1-based line, the line after
    them, the prose that follows). Shared by the patterns and the claim checks (`claims`). A repeatable
    key (`mutant`) is allowed on any header and on several lines; its lines are read by `mutants`, not here."""
    entries, header_end, prose = header_entries(path, text)
    values: dict[str, str] = {}
    key_lines: dict[str, int] = {}
    for line_no, key, value in entries:
        if key in REPEATABLE_KEYS:
            continue
        if key not in required + optional:
            allowed = ", ".join(required + optional + REPEATABLE_KEYS)
            raise PatternHeaderError(path, line_no, f"unknown header key {key!r} (allowed: {allowed})")
        if key in values:
            raise PatternHeaderError(path, line_no, f"header key {key!r} given twice")
        values[key], key_lines[key] = value, line_no
    for key in required:
        if not values.get(key):
            raise PatternHeaderError(path, header_end, f"header has no {key!r}: add a '{key}: ...' line")
    return values, key_lines, header_end, prose


def parse_world_size(path: Path, values: dict[str, str], key_lines: dict[str, int]) -> int:
    try:
        world_size = int(values["world_size"])
    except ValueError:
        world_size = 0
    if world_size < 1:
        raise PatternHeaderError(
            path, key_lines["world_size"], f"world_size must be a positive integer, got {values['world_size']!r}"
        )
    return world_size


def parse_requires(path: Path, values: dict[str, str], key_lines: dict[str, int]) -> tuple[str, ...]:
    requires = _split_list(values.get("requires", ""))
    for requirement in requires:
        if requirement not in KNOWN_REQUIREMENTS:
            known = ", ".join(sorted(KNOWN_REQUIREMENTS))
            raise PatternHeaderError(
                path, key_lines["requires"], f"unknown requirement {requirement!r} (known: {known})"
            )
    return requires


def parse_header(path: Path, text: str) -> PatternHeader:
    """Parse the metadata header of one pattern's source text; raises PatternHeaderError."""
    values, key_lines, header_end, description = read_key_block(path, text, REQUIRED_KEYS, OPTIONAL_KEYS)

    name = values["name"]
    if not NAME_RE.match(name):
        raise PatternHeaderError(path, key_lines["name"], f"name {name!r} must be lowercase words joined by hyphens")
    world_size = parse_world_size(path, values, key_lines)
    requires = parse_requires(path, values, key_lines)
    min_torch = values.get("min_torch") or None
    if min_torch is not None and not MIN_TORCH_RE.match(min_torch):
        raise PatternHeaderError(path, key_lines["min_torch"],
                                 f"min_torch must be a torch release as major.minor (e.g. 2.6), got {min_torch!r}")
    summary = " ".join(description.split("\n\n", 1)[0].split()) if description else ""
    if not summary:
        raise PatternHeaderError(path, header_end, "no summary: add a paragraph after the header's blank line")
    return PatternHeader(
        path=path,
        name=name,
        title=values["title"],
        world_size=world_size,
        requires=requires,
        tags=_split_list(values.get("tags", "")),
        launch=values.get("launch") or None,
        min_torch=min_torch,
        summary=summary,
        description=description,
        key_lines=key_lines,
    )


def read_header(path: Path | str) -> PatternHeader:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PatternHeaderError(path, 1, "no such file") from None
    return parse_header(path, text)


def pattern_files(directory: Path) -> list[Path]:
    """The pattern files of a directory, sorted by name (deterministic catalogs and reports)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.is_file() and p.suffix in PATTERN_SUFFIXES)


# ---------------------------------------------------------------------------------------- running


def _skip_reason(requires: tuple[str, ...], world_size: int, backend: str) -> str | None:
    """Why this pattern cannot run here with this backend, or None when it can."""
    if "slurm" in requires and not (shutil.which("srun") and os.environ.get("SLURM_JOB_ID")):
        return (
            "needs a SLURM allocation (srun on PATH and SLURM_JOB_ID set): "
            "submit it with sbatch, or run it inside salloc"
        )
    if "gloo" in requires and backend != "gloo":
        return f"written for gloo on CPU (the CPU-only code path); this run uses {backend}"
    needs_gpus = backend == "nccl" or "cuda" in requires
    if not needs_gpus:
        return None
    if "cuda" in requires and backend != "nccl":
        return f"needs CUDA ({world_size} GPU(s), one per rank) and the nccl backend; this run uses {backend}"
    import torch  # lazily: only GPU questions need it

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < world_size:
        return f"needs {world_size} CUDA GPU(s), one per rank, for nccl; this machine has {gpus}"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _torchrun_shim(directory: Path) -> Path:
    """A `torchrun` for this interpreter, so templates work from a venv that is not activated."""
    shim = directory / "torchrun"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m torch.distributed.run "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return directory


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole session (torchrun and its ranks), then SIGKILL whatever is left after a grace period.

    The group id stays valid while any member lives, even after the leader (torchrun) exited.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # ranks that ignored SIGTERM, or a stuck leader
    except ProcessLookupError:
        pass
    proc.wait(timeout=KILL_GRACE_S)


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt|Exit)\b:?.*")
_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")
# torchrun's summary of the first rank that died: "Root Cause ... rank : 1 ... exitcode : -6".
_ROOT_CAUSE = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.DOTALL)


# An exception that only reports that another rank went away (it died first): never the cause.
_PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|Broken pipe|recvValue failed|Socket closed", re.IGNORECASE
)
_RANK_OF = re.compile(r"^\[(?:rank|default)(\d+)\]:")


def rank_exceptions(output: str) -> list[tuple[int | None, str]]:
    """Each rank's last exception line, ranks in the order they first raised; None for unprefixed lines.

    A rank's own error wins over a peer's disconnect it reported later (an assertion, then "Connection closed by
    peer" from a collective in its cleanup): the later line only says that another rank went away."""
    last: dict[int | None, str] = {}
    for raw in output.splitlines():
        prefix = _RANK_OF.match(raw)
        line = _RANK_PREFIX.sub("", raw).strip()
        if _ERROR_LINE.match(line) and "ChildFailedError" not in line:
            rank = int(prefix.group(1)) if prefix else None
            if rank not in last or not _PEER_LOST.search(line) or _PEER_LOST.search(last[rank]):
                last[rank] = line
    return list(last.items())


def failure_reason(output: str, returncode: int) -> str:
    """The most telling line of a failed run: the first failing rank's exception (torchrun's root cause,
    else the first to raise), passing over ranks that only report a peer's disconnect; else which rank
    died how (signal, C++ terminate message); else the exit status."""
    terminate = next((line.strip() for line in output.splitlines() if "terminate called" in line), None)
    root = _ROOT_CAUSE.search(output)
    errors = rank_exceptions(output)
    if errors:
        causes = [e for e in errors if not _PEER_LOST.search(e[1])] or errors
        first = int(root.group(1)) if root else None
        return next((line for rank, line in causes if rank == first), causes[0][1])[:300]
    if root:
        rank, code = int(root.group(1)), int(root.group(2))
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return f"rank {rank} {how}" + (f" ({terminate})" if terminate else "")
    if returncode < 0:
        return f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
    return f"exit code {returncode}"


# The tail of a failed run's output kept in its row: where the exception and torchrun's summary are.
FAILED_OUTPUT_CHARS = 6_000


def launch_row(
    name: str, backend: str, stated: int, status: str, reason: str | None, seconds: float,
    world_size: int | None = None, output: str = "",
) -> dict[str, Any]:
    """The report row of one script run under torchrun (a pattern or a claim check): `world_size` is the size
    it ran at when --max-ranks cut it below the `stated` one (the row then says so and keeps the stated size);
    a failed row carries the output's tail."""
    size = world_size or stated
    row: dict[str, Any] = {
        "name": name,
        "backend": backend,
        "world_size": size,
        "status": status,
        "reason": fitted_reason(size, stated, status, reason),
        "seconds": round(float(seconds), 3),
        "warnings": [],
    }
    if size != stated:
        row["stated_world_size"] = stated
    if status == "failed" and output:
        row["output"] = output[-FAILED_OUTPUT_CHARS:]
    return row


def fitted_size(stated: int, requires: tuple[str, ...] | list[str], max_ranks: int | None) -> tuple[int, str | None]:
    """The world size to run at under --max-ranks, and why not to run at all (None: run)."""
    if not max_ranks or stated <= max_ranks:
        return stated, None
    if "stated-ranks" in requires:
        return stated, (
            f"needs all {stated} of its stated ranks (requires: stated-ranks), and --max-ranks is {max_ranks}"
        )
    return max_ranks, None


def fitted_reason(size: int, stated: int, status: str, reason: str | None) -> str | None:
    """A row run below its stated size (--max-ranks) says so first: its cross-rank assertions covered fewer ranks."""
    if size == stated or status == "skipped":
        return reason or None
    note = f"ran at {size} of its {stated} stated ranks (--max-ranks {size})"
    return f"{note}: {reason}" if reason else note


def build_command(path: Path, world_size: int) -> list[str]:
    if path.suffix == ".py":
        return [
            sys.executable, "-m", "torch.distributed.run",
            "--standalone", "--nnodes", "1", "--nproc-per-node", str(world_size), str(path),
        ]
    return ["bash", str(path)]


def run_pattern(
    path: Path | str,
    world_size: int,
    backend: str = "gloo",
    timeout: float = 180.0,
    requires: tuple[str, ...] | list[str] | None = None,
) -> dict[str, Any]:
    """Run one pattern at `world_size` ranks; returns {status, seconds, reason, output, command}.

    status is "passed" (exit 0), "failed" (non-zero exit, a timeout, or a bad header) or "skipped"
    (this machine or backend cannot run it; reason says what it needs). `requires` defaults to the
    pattern's header. The pattern picks its device from DIST_BACKEND, which is set to `backend`.
    """
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    path = Path(path).resolve()
    result: dict[str, Any] = {"status": "failed", "seconds": 0.0, "reason": "", "output": "", "command": ""}
    if requires is None:
        try:
            requires = read_header(path).requires
        except PatternHeaderError as exc:
            result["reason"] = str(exc)
            return result
    skip = _skip_reason(tuple(requires), world_size, backend)
    if skip:
        result.update(status="skipped", reason=skip)
        return result

    command = build_command(path, world_size)
    result["command"] = " ".join(command)
    started = time.monotonic()
    raw, returncode = _run_launcher(command, world_size, backend, timeout)
    result["seconds"] = round(time.monotonic() - started, 2)
    output = raw.decode("utf-8", errors="replace")
    result["output"] = output[-OUTPUT_LIMIT:]
    if returncode is None:
        result["reason"] = f"timed out after {timeout:g} s; killed torchrun and its ranks"
    elif returncode == 0:
        skipped = _skip_marker(output)
        result["status"], result["reason"] = ("skipped", skipped) if skipped else ("passed", "")
    else:
        result["reason"] = failure_reason(output, returncode)
    return result


# A check about something a torch release lacks ends with this line and exit 0 (assets/checks/_dist.py
# `skip_unless`, which spells the same marker): the row is skipped with its reason, never passed or failed.
SKIP_MARKER = "SKIP-ON-THIS-TORCH:"


def _skip_marker(output: str) -> str | None:
    for line in output.splitlines():
        head, _, reason = line.partition(SKIP_MARKER)
        if _ and not head.strip(" []0-9:"):  # torchrun may prefix a rank tag like "[0]:"
            reason = reason.partition(SKIP_MARKER)[0]  # two ranks' markers written into one line
            return reason.strip() or "skipped by the check on this torch"
    return None


def _run_launcher(command: list[str], world_size: int, backend: str, timeout: float) -> tuple[bytes, int | None]:
    """Run the launch command in a scratch folder on one node: (combined output, exit code or None on a timeout).

    A timed-out or interrupted run has its whole process group (torchrun and every rank) killed.
    """
    with tempfile.TemporaryDirectory(prefix="fsdp-pattern-") as scratch:
        env = dict(os.environ)
        env.update(
            DIST_BACKEND=backend,
            PYTHONUNBUFFERED="1",
            OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),  # also silences torchrun's banner
            NPROC_PER_NODE=str(world_size),
            NNODES="1",
            # A rendezvous that waits for a node that never comes (the launch templates' mutants) then fails by
            # torchrun's own RendezvousTimeoutError, well inside the run's timeout (torchrun's default is 600 s).
            JOIN_TIMEOUT=env.get("JOIN_TIMEOUT", "30"),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
            PATH=f"{_torchrun_shim(Path(scratch))}{os.pathsep}{env.get('PATH', '')}",
        )
        # A new session: the pattern's whole process tree shares one process group we can kill.
        proc = subprocess.Popen(
            command, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            raw, _ = proc.communicate(timeout=timeout)
            return raw, proc.returncode
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raw, _ = proc.communicate(timeout=KILL_GRACE_S)  # everything that wrote the pipe is dead
            return raw, None
        finally:
            if proc.poll() is None:  # an exception (Ctrl-C) while waiting: leave nothing behind
                _kill_group(proc)


def main(argv: list[str] | None = None) -> int:
    """`python -m fsdp_skill.verify.patterns [FILE ...]`: run patterns, one summary line each."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m fsdp_skill.verify.patterns", description=main.__doc__)
    parser.add_argument("files", nargs="*", help="pattern files (default: every file in assets/patterns/)")
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--timeout", type=float, default=180.0, help="per-pattern timeout in seconds")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files]
    if not files:
        try:
            default_dir = patterns_dir()
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        files = pattern_files(default_dir)
        if not files:
            print(f"no pattern files in {default_dir}", file=sys.stderr)
            return 2
    failed = 0
    for file in files:
        try:
            header = read_header(file)
        except PatternHeaderError as exc:
            print(f"FAILED   {file.name}: {exc.message}")
            failed += 1
            continue
        outcome = run_pattern(file, header.world_size, backend=args.backend, timeout=args.timeout)
        losses = [line.strip() for line in outcome["output"].splitlines() if line.lstrip().startswith("loss ")]
        detail = outcome["reason"] or (losses[-1] if losses else "")
        print(
            f"{outcome['status'].upper():8} {header.name:28} ws={header.world_size} {outcome['seconds']:6.1f}s  "
            f"{detail}"
        )
        failed += outcome["status"] == "failed"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
