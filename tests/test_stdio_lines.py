"""The stdio transport answers every line: a reply for its id, or a JSON-RPC error with id null; no
input ends or hangs the server. Unit tests of the line reading, then the real `fsdp-skill serve`."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest

from fsdp_skill.serve.jsonrpc_lines import MAX_LINE_BYTES, MAX_MESSAGES_PER_LINE, oversized_line, read_line, sniff_id
from fsdp_skill.serve.stdio import LineReader
from search_fixture import make_tree
from stdio_session import StdioSession


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def request(request_id: Any, method: str = "ping", params: dict | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                       **({"params": params} if params is not None else {})})


def get_api_line(request_id: Any, symbol: str) -> str:
    return request(request_id, "tools/call", {"name": "get_api", "arguments": {"symbol": symbol}})


def errors(outcomes: list) -> list[tuple[Any, int, str]]:
    return [(o.id, o.error.code, o.error.message) for o in outcomes if isinstance(o, JSONRPCError)]


# ---------------------------------------------------------------- one line, no process

@pytest.mark.parametrize("control", ["\t", "\r", "\x00", "\x1b"])
def test_a_raw_control_character_inside_a_string_is_read_as_that_character(control: str) -> None:
    line = get_api_line(7, "x").replace('"x"', f'"all{control}reduce"').encode()
    assert b"\\" not in line  # raw, not escaped
    [outcome] = read_line(line)
    message = outcome.message
    assert isinstance(message, JSONRPCRequest) and message.id == 7
    assert message.params and message.params["arguments"]["symbol"] == f"all{control}reduce"


def test_a_leading_byte_order_mark_and_a_crlf_line_end_are_ignored() -> None:
    [outcome] = read_line(b"\xef\xbb\xbf" + request(1).encode() + b"\r")
    assert isinstance(outcome.message, JSONRPCRequest) and outcome.message.id == 1


def test_several_messages_on_one_line_are_each_read_and_too_many_are_refused_in_one_error() -> None:
    line = (request(1) + request(2) + " " + request(3)).encode()
    assert [m.message.id for m in read_line(line)] == [1, 2, 3]
    many = read_line("".join(request(i) for i in range(MAX_MESSAGES_PER_LINE + 5)).encode())
    assert [m.message.id for m in many[:-1]] == list(range(MAX_MESSAGES_PER_LINE))
    assert errors(many[-1:]) == [(None, -32700, f"more than {MAX_MESSAGES_PER_LINE} messages on one line: "
                                                "send each message on its own line")]


def test_json_nested_too_deep_is_an_error_for_its_id_never_a_recursion_error() -> None:
    for depth in (65, 900, 100_000):
        line = request(5, params={"a": "@"}).replace('"@"', "[" * depth + "]" * depth).encode()
        [(request_id, _, message)] = errors(read_line(line))
        assert request_id == 5 and "nested deeper than 64 levels" in message, depth
    [(request_id, _, _)] = errors(read_line(b"[" * 100_000))
    assert request_id is None


def test_a_line_that_is_not_json_rpc_gets_an_error_for_its_id_or_id_null() -> None:
    assert errors(read_line(b"\xff\xfe junk"))[0][:2] == (None, -32700)
    assert errors(read_line(b"{}"))[0][:2] == (None, -32600)
    assert errors(read_line(b'{"id": 3, "method": "ping"}'))[0][:2] == (3, -32600)  # no "jsonrpc"
    assert errors(read_line(b'{"jsonrpc": "2.0", "id": 4, "method": "x", "params": {"n": NaN}}'))[0][:2] == (4, -32700)
    # A batch (MCP dropped them): each request in it is answered.
    assert [e[0] for e in errors(read_line(f"[{request(8)}, {request(9)}]".encode()))] == [8, 9]
    # Invalid UTF-8 inside a request: its id is still read.
    assert errors(read_line(request(6, params={"s": "@"}).encode().replace(b"@", b"\xff")))[0][:2] == (6, -32700)


def test_a_lone_surrogate_in_a_string_or_a_key_is_an_invalid_params_error_saying_where() -> None:
    [(request_id, code, message)] = errors(read_line(get_api_line(2, "\ud800").encode()))
    assert (request_id, code) == (2, -32602) and message.startswith("params.arguments.symbol holds a lone UTF-16")
    line = request("k", "tools/call", {"name": "get_api", "arguments": {"s\udfff": "x"}}).encode()
    assert "the key params.arguments.s\\udfff" in errors(read_line(line))[0][2]


def test_the_clients_own_responses_and_errors_go_to_the_session_never_back_as_replies() -> None:
    # Before: a client's JSON-RPC error came back as if the server had answered the client's request 5.
    for line in (b'{"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no sampling here"}}',
                 b'{"jsonrpc": "2.0", "id": 5, "result": {}}'):
        [outcome] = read_line(line)
        assert isinstance(outcome, SessionMessage) and errors([outcome]) == []


@pytest.mark.parametrize("bad_id", ["null", "1.5", "1.0", "1e400", "true", "false", "{}", '{"a": 1}', "[]", "[1]"])
def test_a_request_with_an_unusable_id_gets_an_invalid_request_error_with_id_null(bad_id: str) -> None:
    # Before: read as a notification (the id an ignored extra member): no reply, and the client hung.
    [(request_id, code, message)] = errors(read_line(f'{{"jsonrpc": "2.0", "id": {bad_id}, "method": "ping"}}'
                                                     .encode()))
    assert (request_id, code) == (None, -32600) and "a JSON-RPC id must be a string or an integer" in message


def test_a_broken_response_is_never_answered_with_its_id() -> None:
    # The client's response to a request of ours: an error carrying id 5 would answer the client's request 5.
    assert errors(read_line(b'{"jsonrpc": "2.0", "id": 5, "result": 1}'))[0][0] is None
    assert sniff_id('{"jsonrpc": "2.0", "id": 5, "result": {"x": [') is None
    assert sniff_id('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {') == 5
    assert sniff_id('{"method": "tools/call", "params": {"a": "}"}, "jsonrpc": "2.0", "id": "k"}') == "k"


def test_an_oversized_line_is_refused_for_its_id_with_only_its_head_and_tail_kept() -> None:
    chunks = [request(11, "tools/call", {"name": "get_api", "arguments": {"symbol": "x" * (MAX_LINE_BYTES + 10)}})
              .encode() + b"\n", request(12).encode() + b"\n"]
    data = b"".join(chunks)
    reads = iter([data[i:i + 65536] for i in range(0, len(data), 65536)] + [b""])

    async def read(size: int) -> bytes:
        return next(reads)

    reader = LineReader(read)

    async def main() -> tuple[Any, Any, Any]:
        return await reader.next_line(), await reader.next_line(), await reader.next_line()

    oversized, normal, end = anyio.run(main)
    assert isinstance(oversized, tuple) and len(oversized[0]) + len(oversized[1]) < 10_000
    reply = oversized_line(*oversized)
    assert reply.id == 11 and f"{len(chunks[0]) - 1:,} bytes" in reply.error.message
    assert normal == chunks[1][:-1] and end is None


# ---------------------------------------------------------------- the real server over stdio

ROW_3_LINES = {
    "tab": get_api_line(1, "@").replace("@", "all\treduce"),
    "cr": get_api_line(2, "@").replace("@", "all\rreduce"),
    "nul": get_api_line(3, "@").replace("@", "all\x00reduce"),
    "bom": "\ufeff" + request(4),
    "two messages": request(5) + request(6),
    "deep nesting": request(7, params={"a": "@"}).replace('"@"', "[" * 5000 + "]" * 5000),
    "lone surrogate": get_api_line(8, "\ud800"),  # json.dumps writes the escape "\ud800"
}


def test_over_stdio_each_line_the_sdk_dropped_gets_a_reply_for_its_id_and_the_session_goes_on(tree: Path) -> None:
    session = StdioSession(tree)
    try:
        for case, line in ROW_3_LINES.items():
            sent = {m.group(0) for m in __import__("re").finditer(r'(?<="id": )\d+', line)}
            session.send(line)
            got = set()
            while len(got) < len(sent):
                reply = session.reply(timeout_s=30)
                assert reply is not None, f"{case}: no reply (got {got}, want {sent})"
                got.add(str(reply["id"]))
                if case == "lone surrogate":
                    assert reply["error"]["code"] == -32602 and "params.arguments.symbol" in reply["error"]["message"]
            assert got == sent, case
            assert session.call(f"after {case}", "ping")["result"] == {}
        after = session.call(99, "tools/call", {"name": "get_api", "arguments": {"symbol": "all_reduce"}})
        assert after["result"]["structuredContent"]["qualified_name"] == "torch.distributed.all_reduce"
    finally:
        stderr = session.close()
    assert "Traceback" not in stderr, stderr[-2000:]


def test_requests_read_before_the_end_of_input_are_answered_before_the_server_exits(tree: Path) -> None:
    session = StdioSession(tree)
    session.send(request(1) + "\n" + request(2))
    assert session.proc.stdin
    session.proc.stdin.close()
    ids = {(session.reply(timeout_s=30) or {}).get("id") for _ in range(2)}
    stderr = session.close()
    assert ids == {1, 2} and session.proc.returncode == 0, stderr[-2000:]


class Want:
    """What a fuzz line must get: replies for `ids`, an id-null error (`null`), or, for a line cut short,
    a reply for `either` or an id-null error (the cut may hide the id)."""

    def __init__(self, ids: set[Any] | None = None, null: bool = False, either: Any = None,
                 silent: bool = False) -> None:
        self.ids, self.null, self.either, self.silent = ids or set(), null, either, silent


def fuzz_lines(rng: random.Random) -> list[tuple[bytes, Want]]:
    """>= 1,000 hostile lines, each with what it must get."""
    lines: list[tuple[bytes, Want]] = []
    next_id = iter(range(10_000, 100_000))

    def add(line: str | bytes, want: Want) -> None:
        lines.append((line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line, want))

    no_lf = [b for b in range(256) if b != 10]
    non_blank = [b for b in no_lf if b not in b" \t\r\xef"]  # nor a BOM's first byte
    for _ in range(300):  # random bytes (no LF: that would be two lines), starting with a non-blank byte
        body = bytes(rng.choice(no_lf) for _ in range(rng.randint(0, 300)))
        add(bytes([rng.choice(non_blank)]) + body, Want(null=True))
    for _ in range(150):  # nesting, from harmless to far past any recursion limit, closed and not
        depth, k = rng.choice([1, 10, 63, 64, 65, 500, 999, 1000, 5000, 200_000]), next(next_id)
        add(request(k, params={"a": "@"}).replace('"@"', "[" * depth + "]" * depth), Want({k}))
        add("[" * depth if rng.random() < 0.5 else '{"a":' * depth, Want(null=True))
    for _ in range(150):  # control characters inside strings, and between tokens
        k, char = next(next_id), chr(rng.choice([0, 1, 9, 11, 12, 13, 27, 31, 127]))
        add(get_api_line(k, "@").replace("@", f"all{char}reduce"), Want({k}))
        if char in "\t\r":  # JSON whitespace
            k = next(next_id)
            add(request(k).replace(",", "," + char, 1), Want({k}))
        else:
            add(f'{{"x": 1,{char}}}', Want(null=True))
    for _ in range(100):  # several messages on one line, a BOM, a batch
        ks = [next(next_id) for _ in range(rng.randint(2, 6))]
        add(rng.choice(["", " ", "\t"]).join(request(k) for k in ks), Want(set(ks)))
        k = next(next_id)
        add("\ufeff" + request(k), Want({k}))
        ks = [next(next_id), next(next_id)]
        add(f"[{request(ks[0])},{request(ks[1])}]", Want(set(ks)))
    for _ in range(100):  # cut short, and not JSON-RPC at all
        k = next(next_id)
        whole = get_api_line(k, "fully_shard")
        add(whole[: rng.randint(1, len(whole) - 1)], Want(either=k))
        add(rng.choice(["{}", "[]", "1", "null", '"x"', '{"id": 1}', '{"jsonrpc":"2.0","method":5}']), Want(null=True))
    for size in (1_000_000, MAX_LINE_BYTES + 1, 2 * MAX_LINE_BYTES):  # huge lines (1 MB is under the cap)
        k = next(next_id)
        add(get_api_line(k, "x" * size), Want({k}))
        k = next(next_id)  # the id last, as some clients write it
        add(json.dumps({"method": "ping", "params": {"p": "x" * size}, "jsonrpc": "2.0", "id": k}), Want({k}))
    add(b"x" * (MAX_LINE_BYTES + 5), Want(null=True))
    for _ in range(100):  # requests whose id cannot be answered for: an id-null error each, never silence
        bad = rng.choice(["null", "1.5", "-0.0", "1e400", "2E3", "true", "false", "{}", '{"id": 1}', "[]", "[7]"])
        method = rng.choice(["ping", "tools/list", "x"])
        add(f'{{"jsonrpc": "2.0", "id": {bad}, "method": "{method}"}}', Want(null=True))
    for _ in range(100):  # the client's own responses and errors: for the session, never echoed back
        k = rng.choice([next(next_id), f"s-{next(next_id)}"])
        add(rng.choice([json.dumps({"jsonrpc": "2.0", "id": k, "error": {"code": -32601, "message": "no"}}),
                        json.dumps({"jsonrpc": "2.0", "id": k, "result": {}})]), Want(silent=True))
    return lines


def test_over_stdio_a_thousand_hostile_lines_each_get_their_answer_and_a_ping_after_each_is_answered(
    tree: Path,
) -> None:
    lines = fuzz_lines(random.Random(20))
    assert len(lines) >= 1000
    session = StdioSession(tree)
    try:
        for n, (line, want) in enumerate(lines):
            session.send(line)
            ping = f"ping-{n}"
            session.send(request(ping))
            got: set[Any] = set()
            # Error replies are written before the next message is read, so they come before the ping's reply.
            while not want.ids | {ping} <= got:
                reply = session.reply(timeout_s=30)
                assert reply is not None, f"line {n} ({line[:120]!r}): no reply for {want.ids | {ping} - got}"
                assert reply.get("jsonrpc") == "2.0" and ("result" in reply) != ("error" in reply), reply
                got.add(reply["id"])
            assert not want.null or None in got, f"line {n} ({line[:120]!r}): no id-null error"
            assert not want.silent or got == {ping}, f"line {n} ({line[:120]!r}): answered {got - {ping}}"
            assert want.either is None or {want.either, None} & got, f"line {n} ({line[:120]!r}): no answer"
    finally:
        stderr = session.close()
    assert session.proc.returncode == 0 and "Traceback" not in stderr, stderr[-3000:]


def test_no_line_is_read_while_the_in_flight_limit_of_requests_is_unanswered() -> None:
    # Before: every line was taken in at once (2,000 queued calls held a ping back 64 s, and their replies
    # 423 MB of RSS); now the client's writes wait on the pipe instead.
    from mcp.types import JSONRPCResponse

    from fsdp_skill.serve.stdio import AnsweredRequests, LineReader, LineReadStream

    data = "".join(request(i) + "\n" for i in range(10)).encode()
    chunks = [data]
    sent: list[SessionMessage] = []

    async def read(size: int) -> bytes:
        return chunks.pop() if chunks else b""

    class Inner:
        async def send(self, item: SessionMessage) -> None:
            sent.append(item)

    async def main() -> None:
        answers = AnsweredRequests(Inner())
        stream = LineReadStream(LineReader(read), answers, max_in_flight=3)
        got = [(await stream.receive()).message.id for _ in range(3)]  # type: ignore[union-attr]
        assert got == [0, 1, 2]
        with anyio.move_on_after(0.3) as waited:
            await stream.receive()
        assert waited.cancelled_caught  # three unanswered: the fourth line is not read
        await answers.send(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=1, result={})))
        with anyio.fail_after(5):
            assert (await stream.receive()).message.id == 3  # type: ignore[union-attr]

    anyio.run(main)
