"""A pasted error taken apart: its error lines, and the rest as prose without the terminal's debris.

Agents paste what the terminal printed: `[rank1]:` prefixes, `Traceback (most recent call last):`, a dozen
`File "/usr/lib/python3.11/site-packages/torch/distributed/...py", line 1234, in _lazy_init` frames, torch's
own source lines, `^^^^` markers, and at the end the line that matters (`RuntimeError: Missing key in
checkpoint state_dict: model.weight.`), often followed by a sentence of their own. Searched as one bag of
words, the paths' "torch distributed fsdp site packages" outweighed the message; and a paste that ends with
"how do I fix it?" counted as a question, so it was never matched against torch's messages at all.

`take_apart` finds the error lines (an exception class and its message, a warning, torchrun's failure
summary fields) and returns them apart from the prose: file paths, line numbers, rank and log prefixes,
timestamps and addresses are not words of the question. A frame's function name stays when it is public
(`in load_state_dict`), and so does the code of a frame outside torch's own files (the user's call).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `[rank1]:`, `[default0]:` (torchrun --tee; the indentation after it is kept: it tells a frame's code),
# `[rank0]:[W1204 10:00:00.123 ProcessGroupNCCL.cpp:1234]`, `I1204 …]`.
_PREFIX = re.compile(
    r"^(?:\[(?:rank|default)\d+\]:?)+ ?|^\s*\[?[IWEF]\d{4} [\d:.]+(?: \d+)? [\w.]+:\d+\]\s*"
)
_LOG_PREFIX = re.compile(r"\[[IWEF]\d{4} [\d:.]+(?: \d+)? [\w.]+:\d+\]\s*")
# A frame: File "/path/x.py", line 12, in name
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]*)", line \d+(?:, in (?P<name>[\w.<>]+))?')
# An exception or warning line: `torch.distributed.DistBackendError: msg`, `/x.py:88: UserWarning: msg`,
# `ValueError`, `Warning: msg` (NCCL's C++ logs).
_ERROR = re.compile(
    r"^(?:[^\s:]+\.py:\d+:\s*)?(?P<cls>(?:[A-Za-z_]\w*\.)*[A-Za-z_]*(?:Error|Exception|Warning|Failure|Interrupt))"
    r"(?::\s*(?P<msg>.*))?$"
)
# torchrun's failure summary: `exitcode  : -9 (pid: 4242)`, `traceback : Signal 9 (SIGKILL) received by PID 4242`.
_SUMMARY = re.compile(r"^\s*(?P<key>exitcode|traceback|error_file|Root Cause[^:]*)\s*:\s*(?P<msg>.+)$")
_DEBRIS = (
    re.compile(r"^\s*Traceback \(most recent call last\):\s*$"),
    re.compile(r"^[\s^~]+$"),  # the caret markers under a frame's code (one class: no backtracking on spaces)
    re.compile(r"^\s*(?:During handling of the above exception|The above exception was the direct cause)"),
    re.compile(r"^\s*[=\-*]{8,}\s*$"),  # torchrun's summary rules
    re.compile(r"^\s*\[\d+\]:\s*$|^\s*(?:time|host|rank|local_rank)\s*:"),  # summary fields that name no error
)
# Inside any kept line: paths, addresses, pids, clock times, bare line numbers.
_NOISE = re.compile(
    r"(?:[A-Za-z]:)?(?:/[\w.+-]+)+/?|\b0x[0-9a-fA-F]+\b|\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b|\bpid:? \d+\b|\bline \d+\b"
)
# torch's own files: their source lines in a traceback are torch's code, not the user's.
_TORCH_FILE = re.compile(r"[/\\](?:torch|site-packages|dist-packages)[/\\]")


@dataclass(frozen=True)
class PastedError:
    """What `take_apart` found: the error lines (class and message) and the rest as prose."""

    errors: tuple[str, ...]  # "RuntimeError: Missing key in checkpoint state_dict: model.weight."
    messages: tuple[str, ...]  # the messages alone, for matching torch's message texts
    prose: str  # everything else worth reading: the user's sentences, public frame names, the user's code

    @property
    def text(self) -> str:
        """What the question is about, as words: the error lines, then the prose."""
        return "\n".join([*self.errors, self.prose]).strip()


def take_apart(text: str) -> PastedError | None:
    """The error lines of a pasted traceback, warning or torchrun summary, and the rest as prose; None when
    the text has no error line (a question in words is searched as it is)."""
    errors: list[str] = []
    messages: list[str] = []
    prose: list[str] = []
    framed = False  # saw a frame: the traceback's shape, which makes a bare `KeyError: 'x'` an error line
    skip_code = False  # the line after a frame of torch's own files is torch's source
    for raw in text.splitlines():
        line = _LOG_PREFIX.sub("", _PREFIX.sub("", raw)).rstrip()
        if not line.strip() or any(d.match(line) for d in _DEBRIS):
            continue
        frame = _FRAME.match(line)
        if frame:
            framed = True
            skip_code = bool(_TORCH_FILE.search(frame.group("path")))
            name = (frame.group("name") or "").rsplit(".", 1)[-1]
            if name and not name.startswith(("_", "<")) and name not in ("wrapper", "inner", "fn", "forward"):
                prose.append(name)
            continue
        if skip_code and line[:1].isspace():
            skip_code = False
            continue
        skip_code = False
        found = _ERROR.match(line.strip())
        summary = _SUMMARY.match(line)
        if found and (found.group("msg") is not None or framed):
            message = (found.group("msg") or "").strip()
            errors.append(_clean(f"{found.group('cls').rsplit('.', 1)[-1]}: {message}".rstrip(": ")))
            if message:
                messages.append(_clean(message))
        elif summary:
            errors.append(_clean(summary.group("msg")))
            messages.append(_clean(summary.group("msg")))
        else:
            prose.append(_clean(line))
    if not errors:
        return None
    return PastedError(tuple(dict.fromkeys(errors)), tuple(dict.fromkeys(m for m in messages if m)),
                       " ".join(p for p in prose if p))


def _clean(line: str) -> str:
    return " ".join(_NOISE.sub(" ", line).split())
