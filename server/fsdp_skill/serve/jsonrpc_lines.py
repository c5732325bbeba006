"""One stdio line in, what the session must see and what the client must be told: pure, no I/O.

The SDK's stdio reader parses each line with pydantic's strict JSON parser and, on any failure, hands
the session a bare exception that it logs and drops: the client then waits forever for its id. Here a
line is read with Python's json instead, and every line gets an outcome:

- each JSON-RPC message on it goes to the session (which answers requests), wrapped in a SessionMessage,
  the client's own responses and errors included: those answer requests of ours and must never be
  mistaken for a reply owed to the client (one sent back gave the client two answers for its id);
- anything else gets a JSON-RPC error (a bare JSONRPCError): for the request's id when one can be read,
  otherwise `id: null` (JSON-RPC 2.0's answer to a line whose id cannot be determined). A request whose
  id is unusable (null, a float, a bool, an object, an array) is one too: it names a method, so it is
  not a notification, and the client is waiting.

Leniency where a sender's intent is plain: a leading byte-order mark, raw control characters (TAB, CR,
NUL) inside strings, and several messages on one line are read as what they obviously mean; a CR LF
line end is a line end. Limits where the input could cost the server: a line's size (the transport
enforces it while reading), nesting depth, and messages per line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from fsdp_skill.core.quoting import quote

__all__ = ["MAX_DEPTH", "MAX_LINE_BYTES", "MAX_MESSAGES_PER_LINE", "Outcome", "oversized_line", "read_line"]

# A line longer than this is refused unread (the reader keeps only its head and tail). Our largest
# legitimate message, a prompt's `code` argument, is a few KB to ~100 KB; 4 MiB leaves room for any
# other client message while bounding what one line can make the server hold.
MAX_LINE_BYTES = 4 * 1024 * 1024
# JSON nested deeper than this is refused. MCP messages are a few levels deep; Python's json raises
# RecursionError near 1,000 levels, and pydantic's own guard trips earlier still.
MAX_DEPTH = 64
# More messages than this on one line are refused in one error, so one line cannot fan out into a
# million replies.
MAX_MESSAGES_PER_LINE = 32
# Bytes of an oversized line kept to find its id: the head (where most clients write `id`) and the tail.
KEEP_HEAD, KEEP_TAIL = 4096, 256

# A message for the session, or an error reply for the client.
Outcome = SessionMessage | JSONRPCError

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder(strict=False, parse_constant=lambda name: _reject_constant(name))
# The id of a line that does not parse is read from its text: the object's leading members with scalar
# values (where `jsonrpc`, `id` and `method` usually are), or `"id": …` as its last member (where some
# clients write it). Either way it is a member of the top-level object, never of nested params.
_STRING = r'"(?:[^"\\]|\\.)*"'
_SCALAR = r'(?:' + _STRING + r'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)'
_MEMBER = re.compile(r'\s*(' + _STRING + r')\s*:\s*(' + _SCALAR + r')\s*([,}])')
_TRAILING = re.compile(r'[{,]\s*"id"\s*:\s*(-?\d+|' + _STRING + r')\s*\}\s*$')
_OPENING = re.compile(r'\s*\{')
MAX_SNIFFED_MEMBERS = 16


def read_line(raw: bytes) -> list[Outcome]:
    """What one stdio line (without its newline) means: messages for the session and error replies.
    A blank line means nothing (no reply)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [_error(sniff_id(raw.decode("utf-8", "replace")), PARSE_ERROR,
                       f"the line is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}): "
                       "send each message as one line of UTF-8 JSON")]
    text = text.removeprefix("\ufeff").rstrip("\r")  # a byte-order mark, a CR LF line end
    if not text.strip():
        return []
    outcomes: list[Outcome] = []
    for value, failure in _values(text):
        if failure is not None:
            outcomes.append(_error(sniff_id(text) if not outcomes else None, PARSE_ERROR, failure))
        else:
            outcomes.extend(_outcomes(value))
    return outcomes


def oversized_line(head: bytes, tail: bytes, size: int) -> JSONRPCError:
    """The reply to a line of `size` bytes over MAX_LINE_BYTES, for its id when the kept head or tail shows it."""
    request_id = sniff_id(head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"))
    return _error(request_id, INVALID_REQUEST,
                  f"the message is {size:,} bytes; the limit is {MAX_LINE_BYTES:,} bytes per line: "
                  "send smaller arguments (no tool needs more than a few KB)")


def sniff_id(text: str, tail: str | None = None) -> int | str | None:
    """The id of a request whose line does not parse, when its text plainly shows it: `"id"` among the
    object's leading scalar members or as its last member (in `tail`, the line's end, when given), and
    a `"method"` among the leading ones: a broken *response* must not be answered with an error that
    carries the id of a request the client is waiting on."""
    members = _leading_members(text)
    if not members.get("method", "").startswith('"'):
        return None
    token = members.get("id")
    if token is None:
        trailing = _TRAILING.search((text if tail is None else tail)[-KEEP_TAIL:])
        token = trailing.group(1) if trailing else None
    return _id_value(token) if token is not None else None


def _leading_members(text: str) -> dict[str, str]:
    """The object's first members whose values are scalars: key -> the value's JSON text."""
    opening = _OPENING.match(text)
    if opening is None:
        return {}
    members: dict[str, str] = {}
    position = opening.end()
    while len(members) < MAX_SNIFFED_MEMBERS and (member := _MEMBER.match(text, position)):
        key = _id_value(member.group(1))
        if isinstance(key, str):
            members.setdefault(key, member.group(2))
        position = member.end()
        if member.group(3) == "}":
            break
    return members


def _id_value(token: str) -> int | str | None:
    try:
        value = json.loads(token)
    except ValueError:
        return None
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _values(text: str) -> Iterator[tuple[Any, str | None]]:
    """(value, None) for each JSON value on the line, then (None, why) if the rest does not parse."""
    position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]  # the pattern matches ""
    count = 0
    while position < len(text):
        if count == MAX_MESSAGES_PER_LINE:
            yield None, (f"more than {MAX_MESSAGES_PER_LINE} messages on one line: "
                         "send each message on its own line")
            return
        try:
            value, position = _DECODER.raw_decode(text, position)
        except RecursionError:
            yield None, f"the JSON is nested deeper than {MAX_DEPTH} levels: send a flatter message"
            return
        except ValueError as exc:
            yield None, f"the line is not JSON ({_json_problem(exc)}): send each message as one line of JSON"
            return
        count += 1
        yield value, None
        position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]


def _json_problem(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at character {exc.pos}"
    return quote(str(exc))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON value")


def _outcomes(value: Any) -> list[Outcome]:
    """One parsed JSON value: a message for the session, or the error replies it gets."""
    if isinstance(value, list):
        # JSON-RPC batches: MCP dropped them (protocol 2025-06-18). Each request in one gets an answer.
        ids = [_request_id(item) for item in value[:MAX_MESSAGES_PER_LINE]]
        text = "JSON-RPC batches are not supported: send each message on its own line"
        return [_error(i, INVALID_REQUEST, text) for i in ids if i is not None] or [_error(None, INVALID_REQUEST, text)]
    request_id = _request_id(value)
    if _depth_over(value, MAX_DEPTH):
        return [_error(request_id, INVALID_REQUEST,
                       f"the JSON is nested deeper than {MAX_DEPTH} levels: send a flatter message")]
    path = _surrogate_path(value)
    if path is not None:
        code = INVALID_PARAMS if path.startswith("params") else INVALID_REQUEST
        return [_error(request_id, code,
                       f"{path} holds a lone UTF-16 surrogate, which is not valid Unicode text: "
                       "send the string as valid UTF-8 (or drop the unpaired \\ud800-\\udfff escape)")]
    unusable = _unusable_id(value)
    if unusable is not None:
        return [_error(None, INVALID_REQUEST,
                       f"the request's id is {unusable}: a JSON-RPC id must be a string or an integer "
                       '(e.g. "id": 1), or leave it out to send a notification')]
    try:
        return [SessionMessage(jsonrpc_message_adapter.validate_python(value, by_name=False))]
    except ValidationError as exc:
        return [_error(request_id, INVALID_REQUEST,
                       f"not a JSON-RPC 2.0 message ({_first_problem(exc)}): send "
                       '{"jsonrpc": "2.0", "id": 1, "method": "...", "params": {...}}')]


def _request_id(value: Any) -> int | str | None:
    """The id of something meant as a request (it names a method); None for anything else, so that a
    malformed response or notification is never answered with an id the client is waiting on."""
    if not isinstance(value, dict) or "method" not in value:
        return None
    request_id = value.get("id")
    return request_id if isinstance(request_id, int | str) and not isinstance(request_id, bool) else None


def _unusable_id(value: Any) -> str | None:
    """What is wrong with the id of something meant as a request (it names a method and has an id member)
    whose id cannot be answered: pydantic read `"id": 1.5` or `"id": null` as a notification's extra
    member, so the request got no reply at all."""
    if not isinstance(value, dict) or "method" not in value or "id" not in value:
        return None
    found = value["id"]
    if isinstance(found, int | str) and not isinstance(found, bool):
        return None
    kind = {type(None): "null", bool: "a boolean", float: "a number with a fraction or exponent",
            dict: "an object", list: "an array"}.get(type(found), type(found).__name__)
    return kind


def _first_problem(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    # A message is a union of four shapes; the shortest location is the most basic thing missing.
    detail = min(errors, key=lambda e: len(e["loc"])) if errors else None
    if detail is None:
        return "unreadable"
    where = ".".join(str(part) for part in detail["loc"][1:]) or "the message"
    return f"{quote(where, 80)}: {detail['msg']}"


def _error(request_id: int | str | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _depth_over(value: Any, limit: int) -> bool:
    """Whether containers nest deeper than `limit` (iterative: the check itself must not recurse)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _surrogate_path(value: Any, path: str = "") -> str | None:
    """Where the first string (or key) holding a lone surrogate is, as 'params.arguments.symbol'
    (called on values already known to nest at most MAX_DEPTH deep)."""
    if isinstance(value, str):
        return (path or "the request") if any(_is_surrogate(c) for c in value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{_escaped(str(key))}".lstrip(".")
            found = _surrogate_path(key, f"the key {where}") or _surrogate_path(item, where)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _surrogate_path(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _is_surrogate(char: str) -> bool:
    return 0xD800 <= ord(char) <= 0xDFFF


def _escaped(text: str) -> str:
    """text cut to ~200 characters, surrogates written as \\uXXXX: the reply itself must be valid UTF-8."""
    text = text if len(text) <= 200 else text[:200] + "…"
    return "".join(f"\\u{ord(c):04x}" if _is_surrogate(c) else c for c in text)
