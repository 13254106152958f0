"""Differential fuzzing of the stdio lane: seeded random JSON-RPC lines, sent alike to a
server with the lane, to one with the lane switched off (a pass-through middleware: the
lane's transport, every call the SDK's), and to the SDK's own stdio transport (the
reference); every answer must be the reference's.

Lines are sent one at a time, each followed by a ping that tells when the server has
read it (a request the reference reads is also waited for), and in bursts of many
lines in one write. The generator covers valid and invalid ``tools/call`` params (extra
keys, ``_meta`` of every JSON type with and without the envelope keys and progress
tokens, ``task``, ``inputResponses``, ``requestState``, arguments and names of every JSON
type, unknown tools, long and odd Unicode), ids of every JSON type (floats such as
``1.0``, bools, null, very large integers, strings that look like integers, ids reused),
other methods and notifications (cancels of calls and of unknown ids), mid-stream
``initialize``, malformed JSON, JSON that is no object, batches, duplicate keys in the
raw text, and line framing (CRLF, a lone CR, trailing whitespace, bytes that are not
UTF-8). Episodes hold calls in flight (parked at a gate in the store) while cancels and
requests reusing their ids come, then release them.

Answers are compared as parsed JSON, each step's sorted: within a step the ping and the
step's request run at once (a burst's requests too), so their order is not the SDK's
to fix either. Nothing else is normalised.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import mcp_types
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from tests.test_mcp import _ParkingStore
from tests.test_mcp_lane import ENVELOPE, MODERN, _parked, _workspace
from tests.test_mcp_lane_adversarial import Raw, _both, _call, _sync, raw
from toolfs.backends.memory import MemoryStore
from toolfs.integrations import mcp_server
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
             ("grep", {"pattern": "x =", "output_mode": "count", "glob": "*.py"}), ("read", {})]


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


class GateStore(MemoryStore):
    """A memory store whose reads of ``slow.txt`` wait, while the gate is closed, until
    it opens: those calls stay in flight meanwhile (only the slow calls read it: the
    generator's greps search ``*.py``)."""

    def __init__(self, fs: Any) -> None:
        super().__init__(fs)
        self.open = threading.Event()
        self.open.set()
        self.parked = 0
        self._lock = threading.Lock()

    def get(self, path: str, **kw: Any) -> Any:
        blob = super().get(path, **kw)
        if path.endswith("/slow.txt") and not self.open.is_set():
            with self._lock:
                self.parked += 1
            assert self.open.wait(30), "never released"
        return blob


class CountingMCP(ToolfsMCP):
    """A server that counts the calls the SDK has run to their end (answered, refused
    or cancelled); the lane's are counted by :func:`_count_lane_calls`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.counts = Counter[str]()
        self.counting = threading.Lock()
        super().__init__(*args, **kwargs)

    def count(self, what: str) -> None:
        with self.counting:
            self.counts[what] += 1

    async def _call_tool(self, ctx: Any, params: Any) -> dict[str, Any]:
        self.count("started")
        try:
            return await super()._call_tool(ctx, params)
        finally:
            self.count("settled")

    def quiet(self) -> bool:
        """Every call taken has ended, its answer (if any) written."""
        with self.counting:
            return self._lane_calls + self.counts["started"] == self.counts["settled"]


@pytest.fixture(autouse=True)
def _count_lane_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = mcp_server._StdioLane._answer

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            answer(self, *args, **kwargs)
        finally:
            if isinstance(self._owner, CountingMCP):
                self._owner.count("settled")

    monkeypatch.setattr(mcp_server._StdioLane, "_answer", counted)


class Server:
    """One server under test, with its client."""

    def __init__(self, kind: str, modern: bool, seed: int) -> None:
        tools = None if seed % 3 else ["read", "ls", "glob", "grep", "write"]
        fs = MemoryFileSystem()
        self.store = GateStore(fs)
        workspace = _workspace(f"/fuzz-{kind}", self.store)
        workspace.write("slow.txt", "slow\n")
        server = CountingMCP(workspace, tools=tools)
        if kind == "lane-off":
            async def pass_through(ctx: Any, call_next: Any) -> Any:
                return await call_next(ctx)
            server.server.middleware.append(pass_through)
        self.kind = kind
        self.server = server
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

    async def settle(self) -> None:
        """Wait until every call the server took has ended."""
        for _ in range(10_000):
            if self.server.quiet():
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{self.kind}: calls still running")

    async def parked(self, n: int) -> None:
        for _ in range(10_000):
            if self.store.parked >= n:
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"{self.kind}: {n - self.store.parked} calls never parked")

    async def close(self) -> list[str]:
        rest = await self.client.close()
        return sorted(json.dumps(a, sort_keys=True) for a in [*self.held, *rest])


class Session:
    """The same lines to every server; each step's answers compared with the SDK's."""

    def __init__(self, seed: int, modern: bool) -> None:
        self.seed, self.modern = seed, modern
        self.servers = [Server(kind, modern, seed) for kind in SERVERS]
        self.steps = 0

    async def start(self) -> None:
        for server in self.servers:
            await server.client.start()

    async def step(self, data: bytes) -> None:
        self.steps += 1
        results = await asyncio.gather(*(
            s.exchange(data, f"sync-{self.steps}", self.modern)
            for s in self.servers))
        for kind, answers in zip(SERVERS, results, strict=True):
            assert answers == results[-1], (
                f"seed {self.seed} step {self.steps}: {kind} differs from the SDK for "
                f"{data!r}")

    async def close(self) -> None:
        ends = await asyncio.gather(*(s.close() for s in self.servers))
        for kind, rest in zip(SERVERS, ends, strict=True):
            assert rest == ends[-1], (self.seed, kind, ends)


def _opening(gen: Generator, rng: random.Random, modern: bool, odd: int = 0) -> bytes:
    """The stream's start: ``odd`` random lines (the era is decided by the first line
    the SDK takes for a request), then the usual opening."""
    opening = b""
    for _ in range(odd):
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
    return opening


async def _run(seed: int, modern: bool, steps: int, bursts: int) -> None:
    rng = random.Random(seed)
    session = Session(seed, modern)
    await session.start()
    gen = Generator(rng, modern)
    odd = rng.choice([0, 0, 0, 1, 3, 9])
    await session.step(_opening(gen, rng, modern, odd))
    for _ in range(steps):
        await session.step(gen.line(mutating=True))
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
        await session.step(b"".join(lines))
    await session.close()
    if not odd:  # (odd lines first may open the other era, or leave it uninitialized)
        assert session.servers[0].server._lane_calls > 0  # the lane did answer calls


def _slow_call(rng: random.Random, request_id: Any, modern: bool) -> bytes:
    """A call that parks at the gate, in a form the lane takes or one it leaves to the
    SDK (which runs it all the same)."""
    params: dict[str, Any] = {"name": "read", "arguments": {"file_path": "slow.txt"}}
    if modern:
        params["_meta"] = dict(ENVELOPE)
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                               "params": params}
    form = rng.choice(["plain", "member", "member", "progress", "task"])
    if form == "member":  # a member beyond JSON-RPC's: the SDK's
        message["trace"] = 1
    elif form == "progress":
        params["_meta"] = {**params.get("_meta", {}), "progressToken": rng.choice([1, "p"])}
    elif form == "task":
        params["task"] = {"ttl": 1000}
    return json.dumps(message).encode() + b"\n"


def _around(rng: random.Random, gen: Generator, ids: list[Any], modern: bool) -> bytes:
    """A line sent while calls with ``ids`` are parked: mostly about those ids."""
    target = rng.choice(ids)
    roll = rng.random()
    envelope = {"_meta": dict(ENVELOPE)} if modern else {}
    if roll < 0.35:
        request_id = rng.choice([target, target, str(target), f" {target}", True,
                                 float(target) if isinstance(target, int) else target])
        return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id}}).encode() + b"\n"
    if roll < 0.75:
        request_id = rng.choice([target, str(target), target])
        kind = rng.choice(["call", "call", "call", "member", "ping", "list"])
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if kind in ("call", "member"):
            message.update(method="tools/call", params={
                "name": rng.choice(["ls", "read"]), "arguments": {"file_path": "a.txt"}
                if rng.random() < 0.5 else {}, **envelope})
            if kind == "member":
                message["trace"] = 1
        else:
            message.update(method="ping" if kind == "ping" else "tools/list",
                           params=envelope)
        return json.dumps(message).encode() + b"\n"
    return gen.line(mutating=False)


async def _episode(seed: int, modern: bool, lines: int) -> None:
    """Calls parked in flight while lines about their ids come (cancels, requests
    reusing them), then released."""
    rng = random.Random(seed)
    session = Session(seed, modern)
    await session.start()
    gen = Generator(rng, modern)
    await session.step(_opening(gen, rng, modern))
    for server in session.servers:
        server.store.open.clear()
    try:
        ids = [rng.choice([7, 8, "7", "s"]) for _ in range(rng.choice([1, 1, 2, 3]))]
        for n, request_id in enumerate(ids, 1):
            data = _slow_call(rng, request_id, modern)
            for server in session.servers:
                server.client.send_raw(data)
            await asyncio.gather(*(server.parked(n) for server in session.servers))
        for _ in range(lines):
            await session.step(_around(rng, gen, ids, modern))
    finally:  # (a failed step leaves no call parked)
        for server in session.servers:
            server.store.open.set()
    await asyncio.gather(*(server.settle() for server in session.servers))
    await session.step(b"")
    await session.close()


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
@pytest.mark.parametrize("seed", [1, 2])
async def test_the_lane_answers_random_lines_as_the_sdk_does(seed: int, modern: bool) -> None:
    await _run(seed * 2 + modern, modern, steps=120, bursts=4)


@pytest.mark.anyio
@pytest.mark.parametrize("modern", [False, True], ids=["handshake-era", "modern-era"])
async def test_the_lane_answers_lines_about_calls_in_flight_as_the_sdk_does(
        modern: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(16):
        # Every other episode with one lane thread: a call read while another runs
        # queues on the workers.
        monkeypatch.setattr(mcp_server, "_LANE_THREADS", 1 if seed % 2 else 32)
        await _episode(seed * 2 + modern, modern, lines=8)


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


@pytest.mark.anyio
async def test_an_initialize_reusing_the_id_of_a_request_the_sdk_runs_holds_the_lane(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The lane tells the answer to an initialize by its id, and leaves calls to the SDK
    # until it came (the version may change; the SDK reads no line meanwhile). The
    # answer to an earlier request of that id, which the SDK still ran, was taken for
    # it: the lane then answered a call sent after the initialize before the SDK had
    # answered the initialize, and kept the old version.
    from mcp.server import runner

    on_request = runner.ServerRunner._on_request
    entered, judged, verdicts = threading.Event(), threading.Event(), []

    async def held(self: Any, dctx: Any, method: str, params: Any) -> Any:
        if method == "initialize" and dctx.request_id == 5:
            entered.set()
            await asyncio.to_thread(judged.wait, 5)  # until the call after it was judged
        return await on_request(self, dctx, method, params)

    eligible = mcp_server._StdioLane._eligible

    def noted(self: Any, message: dict[str, Any]) -> Any:
        verdict = eligible(self, message)
        if message.get("id") == "after":
            verdicts.append(verdict)
            judged.set()
        return verdict

    monkeypatch.setattr(runner.ServerRunner, "_on_request", held)
    monkeypatch.setattr(mcp_server._StdioLane, "_eligible", noted)
    store = _ParkingStore(MemoryFileSystem())
    async with raw(_workspace("/reinit-held", store), modern=False, lane=True) as client:
        store.arm(only="/a.txt")
        client.send({**_call(client, 5), "trace": "x"})  # the SDK's (a member beyond)
        await _parked(store)
        client.send({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        assert await asyncio.to_thread(entered.wait, 5)  # the lane has read it
        store.release.set()
        call = await client.answer_to(5)  # the call's: the initialize is held
        assert "content" in call["result"]
        client.send(_call(client, "after"))
        answers = [await client.receive(), await client.receive()]
        await client.close()
    assert verdicts == [None]  # left to the SDK
    assert [a["id"] for a in answers] == [5, "after"]  # the initialize's answer first
    assert answers[0]["result"]["protocolVersion"] == "2024-11-05"
