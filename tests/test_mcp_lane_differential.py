"""Differential fuzzing of the stdio lane: seeded random JSON-RPC lines, sent alike to a
server with the lane, to one with the lane switched off, and to the SDK's own stdio
transport (the reference); every answer must be the reference's.

Lines are sent one at a time, each followed by a ping that tells when the server has
read it (it answers in order what it reads in order; a request the reference answers
is also waited for), and in bursts of many lines in one write. The generator covers
valid and invalid ``tools/call`` params (extra keys, ``_meta`` of every JSON type with
and without the envelope keys and progress tokens, ``task``, ``inputResponses``,
``requestState``, arguments and names of every JSON type, unknown tools, long and odd
Unicode), ids of every JSON type (floats such as ``1.0``, bools, null, very large
integers, strings that look like integers, ids reused), other methods and
notifications (cancels of calls and of unknown ids), mid-stream ``initialize``,
malformed JSON, JSON that is no object, batches, duplicate keys in the raw text, and
line framing (CRLF, a lone CR, trailing whitespace, bytes that are not UTF-8).
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import mcp_types
import pytest

from tests.test_mcp_lane import ENVELOPE, MODERN, _parked, _workspace
from tests.test_mcp_lane_adversarial import Raw, _both, _call, _sync
from toolfs.integrations.mcp_server import ToolfsMCP

pytestmark = pytest.mark.usefixtures("lane_wakeups")  # each test with each way of waiting

HANDSHAKE = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
SERVERS = ("lane", "lane-off", "sdk")
"""The lane; the lane's transport with every call left to the SDK (a pass-through
middleware); the SDK's own stdio transport (the reference)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _lane_classifies_every_line(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No generated line makes the lane's own classification fail."""
    yield
    records = [*caplog.get_records("setup"), *caplog.get_records("call")]
    assert not [r for r in records if "could not classify" in r.getMessage()]


# -- raw JSON text --------------------------------------------------------------------


class Lit:
    """JSON text written as is (a number json.dumps would not write, e.g. ``1e400``)."""

    def __init__(self, text: str) -> None:
        self.text = text


class Obj:
    """A JSON object written member by member: its keys may repeat."""

    def __init__(self, *pairs: tuple[str, Any]) -> None:
        self.pairs = list(pairs)


def text(value: Any, rng: random.Random) -> str:
    """``value`` as JSON text; strings sometimes \\u-escaped, spacing varied."""
    if isinstance(value, Lit):
        return value.text
    if isinstance(value, Obj | dict):
        pairs = value.pairs if isinstance(value, Obj) else list(value.items())
        sep = rng.choice([", ", ",", " ,\t"])
        return "{" + sep.join(f"{text(k, rng)}: {text(v, rng)}" for k, v in pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(text(v, rng) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=rng.random() < 0.3)
    return json.dumps(value)


# -- the generator --------------------------------------------------------------------

ODD_STRINGS = ["", " ", "é", "字\u0000", "\u2028\u2029", "😀" * 3, "\ufeffread", "x" * 5000,
               "a\tb\\n", "READ", "read ", "ré" * 700]
SCALARS: list[Any] = [None, True, False, 0, -1, 1, 2**63, 2**100, -(2**70), 1.0, -0.0, 0.5,
                      Lit("1e400"), Lit("-1E2"), Lit("1.0e0"), "", "7", "x"]
READ_ONLY = [("read", {"file_path": "a.txt"}), ("read", {"file_path": "sub/c.py", "limit": 2}),
             ("read", {"file_path": "missing.txt"}), ("read", {"file_path": "../out"}),
             ("read", {"path": "a.txt"}), ("ls", {}), ("glob", {"pattern": "**/*.py"}),
             ("grep", {"pattern": "x =", "output_mode": "count"}), ("read", {})]


class Generator:
    """Random lines for one stream; ``mutating`` allows writes and edits (whose answers
    depend on the order calls run in, so not in bursts)."""

    def __init__(self, rng: random.Random, modern: bool) -> None:
        self.rng = rng
        self.modern = modern
        self.used: list[Any] = []  # ids sent so far
        self.serial = 0

    # values -------------------------------------------------------------------------

    def json_value(self, depth: int = 0) -> Any:
        rng = self.rng
        roll = rng.random()
        if depth > 2 or roll < 0.5:
            return rng.choice([*SCALARS, *ODD_STRINGS[:6]])
        if roll < 0.75:
            return [self.json_value(depth + 1) for _ in range(rng.randrange(3))]
        return {rng.choice(["a", "", "_meta", "ttl", "😀"]): self.json_value(depth + 1)
                for _ in range(rng.randrange(3))}

    def fresh_id(self) -> Any:
        self.serial += 1
        rng, n = self.rng, self.serial
        return rng.choice([n, n, str(n), f"id-{n}", -n, n + 2**64, f"{n:03d}", f" {n}",
                           f"é{n}"])

    def request_id(self) -> tuple[bool, Any]:
        """(whether the message has an id, the id)."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.65:
            value = self.fresh_id()
        elif roll < 0.8 and self.used:
            value = rng.choice(self.used[-6:])  # reused: answered by now (or in this burst)
        elif roll < 0.95:
            value = rng.choice([*SCALARS, [1], {"a": 1}, 1.5, Lit("7.0")])
        else:
            return False, None
        self.used.append(value)
        return True, value

    def envelope(self) -> Any:
        """The params' ``_meta``: the modern envelope, or anything else."""
        rng = self.rng
        roll = rng.random()
        if self.modern and roll < 0.7:
            meta: dict[str, Any] = dict(ENVELOPE)
            if rng.random() < 0.25:
                meta["progressToken"] = rng.choice([1, "p", True, 1.5, None, [1]])
            if rng.random() < 0.15:
                key = rng.choice(list(ENVELOPE))
                if rng.random() < 0.5:
                    del meta[key]
                else:
                    meta[key] = rng.choice([*SCALARS[:6], "2025-06-18", "2099-01-01", MODERN,
                                            {}, []])
            return meta
        if roll < 0.85:
            return {"progressToken": rng.choice([1, "p", True, 1.5, None, 2**80, {}])}
        if roll < 0.9 and not self.modern:
            return dict(ENVELOPE)  # the SDK refuses it on a handshake stream
        return self.json_value()

    # messages -----------------------------------------------------------------------

    def call_params(self, mutating: bool) -> Any:
        rng = self.rng
        tools = READ_ONLY + ([
            ("write", {"file_path": f"w{rng.randrange(4)}.txt", "content": rng.choice(
                ["x\n", "é\r\n", "字" * 50])}),
            ("edit", {"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
            ("edit", {"file_path": f"w{rng.randrange(4)}.txt", "old_string": "x",
                      "new_string": "y"}),
        ] if mutating else [])
        name, arguments = rng.choice(tools)
        params: list[tuple[str, Any]] = []
        roll = rng.random()
        if roll < 0.1:
            params.append(("name", rng.choice([*SCALARS[:8], ["read"], {"read": 1}])))
        elif roll < 0.2:
            params.append(("name", rng.choice(["delete", "Read", *ODD_STRINGS])))
        elif roll > 0.02:
            params.append(("name", name))
        roll = rng.random()
        if roll < 0.1:
            params.append(("arguments", self.json_value()))
        elif roll < 0.15:
            params.append(("arguments", {**arguments, "file_path": rng.choice(ODD_STRINGS)}))
        elif roll < 0.2:
            pass  # no arguments
        else:
            params.append(("arguments", arguments))
        if self.modern or rng.random() < 0.2:
            params.append(("_meta", self.envelope()))
        for key, values in (
                ("task", [{"ttl": 1000}, {"ttl": "x"}, {}, 5, None, "t", [], {"ttl": 1.5}]),
                ("inputResponses", [{}, {"k": {"action": "accept"}}, 3, None, [], "x"]),
                ("requestState", ["s", 4, None, {}, ""]),
                (rng.choice(["extra", "", "Name", "arguments2", "😀"]), [1, None, {}])):
            if rng.random() < 0.08:
                params.append((key, rng.choice(values)))
        rng.shuffle(params)
        if rng.random() < 0.05 and params:  # a key twice in the raw text: the last counts
            params.insert(0, (params[-1][0], self.json_value()))
        if rng.random() < 0.03:
            return rng.choice([None, [], "x", 1])
        return Obj(*params)

    def message(self, mutating: bool) -> Any:
        rng = self.rng
        roll = rng.random()
        has_id, request_id = self.request_id()
        if roll < 0.6:
            method: Any = "tools/call"
            params: Any = self.call_params(mutating)
        elif roll < 0.75:
            method = rng.choice(["ping", "tools/list", "resources/list", "foo/bar",
                                 "server/discover", "prompts/get", "completion/complete"])
            params = rng.choice([None, Obj(), Obj(("_meta", self.envelope())),
                                 Obj(("cursor", self.json_value()), ("_meta", self.envelope())),
                                 self.json_value()])
            if self.modern and rng.random() < 0.8:
                params = Obj(("_meta", dict(ENVELOPE)))
        elif roll < 0.88:
            has_id = rng.random() < 0.1  # a notification (or one with an id)
            method = rng.choice(["notifications/cancelled"] * 4 + [
                "notifications/initialized", "notifications/progress", "notifications/x"])
            target = rng.choice([*self.used[-4:], 12345, "nope", True, 7.0, None])
            params = rng.choice([Obj(("requestId", target)),
                                 Obj(("requestId", target), ("reason", "r")),
                                 Obj(("requestId", target), ("requestId", self.fresh_id())),
                                 None, self.json_value()])
        elif roll < 0.93:
            method = "initialize"
            params = Obj(("protocolVersion", rng.choice([*HANDSHAKE, MODERN, "1999", 3])),
                         ("capabilities", rng.choice([{}, None])),
                         ("clientInfo", rng.choice([{"name": "r", "version": "1"}, {}])))
            if self.modern and rng.random() < 0.5:
                params.pairs.append(("_meta", dict(ENVELOPE)))
        else:
            method = rng.choice([None, 5, ["tools/call"], "", "TOOLS/CALL"])
            params = self.call_params(mutating)
        pairs: list[tuple[str, Any]] = [
            ("jsonrpc", rng.choice(["2.0"] * 30 + ["1.0", 2.0, None]))]
        if has_id:
            pairs.append(("id", request_id))
        if method is not None or rng.random() < 0.5:
            pairs.append(("method", method))
        if params is not None or rng.random() < 0.3:
            pairs.append(("params", params))
        if rng.random() < 0.03:
            pairs.append((rng.choice(["extra", "result", "error"]), rng.choice([1, {}])))
        rng.shuffle(pairs)
        if rng.random() < 0.04 and has_id:  # the id twice in the raw text
            pairs.insert(0, ("id", self.fresh_id()))
        return Obj(*pairs)

    def line(self, mutating: bool) -> bytes:
        """One line, as sent: always ended, so the ping after it is a line of its own."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.06:
            body = rng.choice(["", " ", "{", "null", "1", '"x"', "[]", "{}", "[1, 2]", "}{",
                               '{"jsonrpc": "2.0", "id": 1, "method": "ping"} x',
                               '{"jsonrpc": "2.0", "id": 1, "method": "ping"',
                               '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'])
            data = body.encode()
        elif roll < 0.09:  # a batch
            data = ("[" + ", ".join(text(self.message(mutating), rng)
                                    for _ in range(rng.randrange(1, 3))) + "]").encode()
        else:
            data = text(self.message(mutating), rng).encode()
            roll = rng.random()
            if roll < 0.05:  # a byte that is not UTF-8, in a string or outside one
                at = data.rfind(b'"read"')
                data = (data[:at + 2] + b"\xff" + data[at + 2:]) if at >= 0 else data + b"\xc3"
            elif roll < 0.07:
                data = b"\xef\xbb\xbf" + data  # a byte order mark
        ending = rng.choice([b"\n"] * 12 + [b"\r\n", b"\r", b" \n", b"\t\r\n", b"\n\n",
                                            b" \r \n"])
        if rng.random() < 0.05:
            ending = b"\r" + ending  # a lone CR and a blank line
        return rng.choice([b"", b"", b"", b" ", b"\t"]) + data + ending


def sdk_requests(data: bytes) -> Counter[str]:
    """The ids of the requests the SDK reads from ``data`` (which it answers unless a
    cancel stops them), by their JSON text: the reference's own reading of the bytes."""
    ids: Counter[str] = Counter()
    lines = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace")
    for line in lines:
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            continue
        if isinstance(message, mcp_types.JSONRPCRequest):
            ids[json.dumps(message.id)] += 1
    return ids


# -- the servers ----------------------------------------------------------------------


class Server:
    """One server under test, with its client."""

    def __init__(self, kind: str, modern: bool, seed: int) -> None:
        tools = None if seed % 3 else ["read", "ls", "glob", "grep", "write"]
        server = ToolfsMCP(_workspace(f"/fuzz-{kind}"), tools=tools)
        if kind == "lane-off":
            async def pass_through(ctx: Any, call_next: Any) -> Any:
                return await call_next(ctx)
            server.server.middleware.append(pass_through)
        self.kind = kind
        self.client = Raw(server, modern, lane=kind != "sdk")
        self.held: list[dict[str, Any]] = []

    async def exchange(self, data: bytes, sync_id: str, modern: bool) -> list[str]:
        """Send ``data`` and a ping; every answer until the ping's and the answers to
        the requests in ``data`` came (answers that come later show in the next step,
        or at the end, as a difference)."""
        ping = {"jsonrpc": "2.0", "id": sync_id, "method": "ping",
                **({"params": {"_meta": ENVELOPE}} if modern else {})}
        self.client.send_raw(data + json.dumps(ping).encode() + b"\n")
        due = sdk_requests(data)
        due[json.dumps(sync_id)] += 1
        answers = self.held
        self.held = []
        got = Counter(json.dumps(a.get("id")) for a in answers)
        try:
            while any(got[k] < n for k, n in due.items()):
                answer = await self.client.receive(timeout=5)
                answers.append(answer)
                got[json.dumps(answer.get("id"))] += 1
        except TimeoutError:
            answers.append({"timeout": f"waited for {due - got}"})
        return sorted(json.dumps(a, sort_keys=True) for a in answers)

    async def close(self) -> list[str]:
        rest = await self.client.close()
        return sorted(json.dumps(a, sort_keys=True) for a in [*self.held, *rest])


async def _run(seed: int, modern: bool, steps: int, bursts: int) -> None:
    rng = random.Random(seed)
    servers = [Server(kind, modern, seed) for kind in SERVERS]
    for server in servers:
        await server.client.start()
    gen = Generator(rng, modern)
    # The opening: mostly the usual one, sometimes odd lines first (the era is decided
    # by the first line the SDK takes for a request).
    opening = b""
    for _ in range(rng.choice([0, 0, 0, 1, 3, 9])):
        opening += gen.line(mutating=False)
    if modern:
        first = {"jsonrpc": "2.0", "id": "open", "method": "server/discover",
                 "params": {"_meta": ENVELOPE}}
    else:
        first = {"jsonrpc": "2.0", "id": "open", "method": "initialize",
                 "params": {"protocolVersion": rng.choice(HANDSHAKE), "capabilities": {},
                            "clientInfo": {"name": "fuzz", "version": "1"}}}
    opening += json.dumps(first).encode() + b"\n"
    if not modern:
        opening += b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
    plan: list[bytes] = [opening]
    plan += [gen.line(mutating=True) for _ in range(steps)]
    for _ in range(bursts):
        # One write of many lines; their calls run at once, so only calls whose answers
        # do not depend on the order they run in, and no cancel of a call in the burst.
        used = len(gen.used)
        lines = []
        for _ in range(rng.randrange(5, 25)):
            line = gen.line(mutating=False)
            if b"notifications/cancelled" in line and len(gen.used) > used:
                continue
            lines.append(line)
        plan.append(b"".join(lines))
    seen: dict[str, list[list[str]]] = {kind: [] for kind in SERVERS}
    for step, data in enumerate(plan):
        results = await asyncio.gather(*(
            s.exchange(data, f"sync-{step}", modern) for s in servers))
        for server, answers in zip(servers, results, strict=True):
            seen[server.kind].append(answers)
        reference = seen["sdk"][-1]
        for kind in ("lane", "lane-off"):
            assert seen[kind][-1] == reference, (
                f"seed {seed} step {step}: {kind} differs from the SDK for {data!r}")
    ends = await asyncio.gather(*(s.close() for s in servers))
    assert ends[0] == ends[2] and ends[1] == ends[2], (seed, ends)
    assert servers[0].client.server._lane_calls > 0  # the lane did answer calls


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_lane_answers_random_lines_as_the_sdk_does(seed: int, modern: bool) -> None:
    await _run(seed * 2 + modern, modern, steps=120, bursts=4)


# -- focused regressions (each failed before its fix) --------------------------------

_CANCEL_7 = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
@pytest.mark.parametrize("again", ["int", "string"])
async def test_a_lane_call_reusing_the_id_of_a_call_the_sdk_runs_leaves_its_cancel_alone(
        modern: bool, again: str) -> None:
    # The SDK files in-flight requests by id, the newest over the older, and forgets the
    # id once the newest is answered: a call that reuses the id of a slow call the SDK
    # runs (here: one with a member beyond JSON-RPC's, which the lane leaves to it) makes
    # a later cancel of that id stop nothing, and the slow call is answered. The lane
    # took such a call itself, so the SDK still held the slow call under the id, and the
    # cancel stopped it: its answer never came.
    async def script(client: Raw) -> list[dict[str, Any]]:
        assert client.store is not None
        client.store.arm(only="/a.txt")
        client.send({**_call(client, 7), "trace": "x"})
        await _parked(client.store)
        reuse = 7 if again == "int" else "7"
        answers = [await client.answer_to(
            (client.send(_call(client, reuse, "ls", {})), reuse)[1])]
        client.send(_CANCEL_7)
        await _sync(client)  # the cancel was read
        client.store.release.set()
        answers.append(await asyncio.wait_for(client.answer_to(7), 5))
        return answers

    seen = await _both("reuse-sdk-id", script, modern=modern, parking=True)
    assert seen[True] == seen[False]
