"""Per-call latency and edit correctness: ``toolfs serve`` vs the reference MCP filesystem server.

Both servers run over stdio, driven by the official ``mcp`` Python client in the same
way (handshake-era protocol, no client cache), one after the other:

* toolfs: ``python -m toolfs serve DIR``, and ``python -m toolfs serve memory://...``
  (the same calls with no disk under them; the file is created with toolfs's write
  tool);
* reference: ``@modelcontextprotocol/server-filesystem DIR`` (Node), installed with npm
  into a cache directory (``$TOOLFS_BENCH_NODE_DIR``, default ``/tmp/toolfs-bench-node``;
  never into the repository).

Latency workload, per iteration: read a ~12 KB source file whole, then edit one line
(a unique marker toggled between two values). The table gives the median per call and
the toolfs/reference ratio, plus the time to spawn and initialise each server.

Correctness: on CRLF files and on files with CJK, emoji and combining marks, each
server reads the file then makes one edit; the bytes on disk are compared with the
expected bytes (the replaced span changed, every other byte unchanged).

Where the time goes (``--decompose``, on by default): the same servers driven by a bare
JSON-RPC client over the same pipes (no SDK: what the server and the pipes cost), and the
SDK client answered by a canned stdio server that replays each server's own read answer,
byte for byte (what the client costs to take that answer: its message parsing, result
models and output-schema check). The two add up to roughly the first table.

Exit status: 0 after printing the tables (also when the toolfs server is not available
yet: it says so and reports the reference server alone); 77 when the reference server
cannot be installed or started (no node/npm, no registry), so that callers can skip.

Rounds (``--rounds R``): the latency run R times, each with freshly started servers; the
first table pools every round's samples, and a second gives each round's ratios and their
median (one pair of server processes can be luckier than another: a verdict from one
round is worth less than the median of several).

Usage: ``python benchmarks/bench_mcp.py [--tiny] [--iterations N] [--rounds R]
[--no-decompose]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from _common import fmt_us, machine_facts, markdown_table, ratio

REF_PACKAGE = "@modelcontextprotocol/server-filesystem"
# Pinned so that reruns measure the same server as docs/benchmarks.md.
REF_VERSION = "2026.8.31"
NODE_DIR = Path(os.environ.get("TOOLFS_BENCH_NODE_DIR", "/tmp/toolfs-bench-node"))
EXIT_SKIP = 77
CALL_TIMEOUT = 60.0
MARK_A, MARK_B = "MARKER_ALPHA_0001", "MARKER_OMEGA_0002"


class Unavailable(Exception):
    """A server cannot be installed or started; the message says why."""


# -- servers ----------------------------------------------------------------------


def reference_command(node_dir: Path, version: str) -> list[str]:
    """``[node, index.js]`` of the reference server, installing it with npm if needed."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise Unavailable("node and npm are needed for the reference server "
                          f"(node: {node or 'missing'}, npm: {npm or 'missing'})")
    pkg_dir = node_dir / "node_modules" / REF_PACKAGE
    entry = pkg_dir / "dist" / "index.js"

    def installed() -> str | None:
        try:
            return str(json.loads((pkg_dir / "package.json").read_text())["version"])
        except (OSError, ValueError, KeyError):
            return None

    if not entry.exists() or installed() != version:
        node_dir.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(node_dir), "--no-audit", "--no-fund",
                 "--no-save", "--loglevel=error", f"{REF_PACKAGE}@{version}"],
                capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"npm install {REF_PACKAGE}@{version} failed: {exc}") from exc
        if done.returncode != 0 or not entry.exists():
            tail = (done.stderr or done.stdout).strip()[-600:]
            raise Unavailable(f"npm install {REF_PACKAGE}@{version} failed "
                              f"(exit {done.returncode}): {tail}")
    return [node, str(entry)]


def toolfs_missing() -> str | None:
    """Why ``python -m toolfs serve`` cannot work in this checkout, if it cannot."""
    for module in ("toolfs.__main__", "toolfs.integrations.cli",
                   "toolfs.integrations.mcp_server"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"module {module} does not exist yet"
    return None


@dataclass
class Server:
    """One MCP server under test and how to call its read/edit tools."""

    name: str
    command: list[str]
    root: Path
    absolute_paths: bool
    """The reference server takes absolute paths; toolfs takes root-relative ones."""
    read_tool: str = ""
    edit_tool: str = ""
    read_path_key: str = "path"
    edit_keys: tuple[str, str, str] = ("path", "old", "new")
    edits_list: bool = False
    """Reference ``edit_file`` takes ``edits: [{oldText, newText}]``."""
    log: Path | None = None
    in_memory: bool = False
    """toolfs over ``memory://``: files are created with its ``write`` tool, not on disk
    (latency only; the correctness cases compare bytes on disk)."""

    def path(self, rel: str) -> str:
        return str(self.root / rel) if self.absolute_paths else rel

    def read_args(self, rel: str) -> dict[str, Any]:
        return {self.read_path_key: self.path(rel)}

    def edit_args(self, rel: str, old: str, new: str) -> dict[str, Any]:
        path_key, old_key, new_key = self.edit_keys
        if self.edits_list:
            return {path_key: self.path(rel), "edits": [{old_key: old, new_key: new}]}
        return {path_key: self.path(rel), old_key: old, new_key: new}


def pick_tools(server: Server, tools: list[Any]) -> None:
    """Find the read and edit tools and their argument names from the tool list."""
    by_name = {t.name: t for t in tools}
    for candidate in ("read", "read_text_file", "read_file"):
        if candidate in by_name:
            server.read_tool = candidate
            break
    for candidate in ("edit", "edit_file"):
        if candidate in by_name:
            server.edit_tool = candidate
            break
    if not server.read_tool or not server.edit_tool:
        raise Unavailable(f"{server.name}: no read/edit tool among {sorted(by_name)}")
    read_props = by_name[server.read_tool].input_schema.get("properties", {})
    server.read_path_key = "file_path" if "file_path" in read_props else "path"
    edit_props = by_name[server.edit_tool].input_schema.get("properties", {})
    if "edits" in edit_props:
        server.edits_list = True
        server.edit_keys = ("path", "oldText", "newText")
    else:
        path_key = "file_path" if "file_path" in edit_props else "path"
        old_key = "old_string" if "old_string" in edit_props else "oldText"
        new_key = "new_string" if "new_string" in edit_props else "newText"
        server.edit_keys = (path_key, old_key, new_key)


@contextlib.asynccontextmanager
async def connect(server: Server) -> AsyncIterator[tuple[Client, float]]:
    """Spawn and initialise ``server``; yields the client and the startup seconds."""
    assert server.log is not None
    with server.log.open("w", encoding="utf-8") as errlog:
        # The SDK passes a server only a few safe variables: PYTHONPATH must be handed
        # on, or `python -m toolfs` would run whichever toolfs is installed, not this one.
        env = get_default_environment()
        if os.environ.get("PYTHONPATH"):
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        params = StdioServerParameters(command=server.command[0], args=server.command[1:],
                                       cwd=str(server.root), env=env)
        t0 = time.perf_counter()
        # The read timeout also bounds the initialize request, so a server that
        # starts but never answers fails instead of hanging the benchmark.
        client = Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None,
                        read_timeout_seconds=CALL_TIMEOUT)
        async with contextlib.AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(client)
            except Exception as exc:
                cause = _leaf(exc)
                raise Unavailable(f"{server.name} did not start: {type(cause).__name__}: "
                                  f"{cause}; stderr: {_tail(server.log)}") from exc
            startup = time.perf_counter() - t0
            pick_tools(server, (await client.list_tools()).tools)
            yield client, startup


def _failure(server: Server, exc: BaseException) -> str:
    """One line saying why ``server`` could not be measured."""
    if isinstance(exc, Unavailable):
        return str(exc)
    cause = _leaf(exc)
    return f"{type(cause).__name__}: {cause}; stderr: {_tail(server.log) if server.log else ''}"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups from anyio task groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text[-limit:] or "(empty)"


def _text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def call(client: Client, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    """``(ok, text)`` of one tool call."""
    result = await client.call_tool(tool, args)
    return not result.is_error, _text(result)


# -- latency ----------------------------------------------------------------------


def workload_text() -> str:
    """A ~12 KB Python-like source file with one unique marker."""
    lines: list[str] = []
    for i in range(120):
        lines += [f"def function_{i:03d}(value: int) -> int:",
                  f'    """Return value scaled by {i}."""',
                  f"    return value * {i} + {i % 7}", ""]
    lines[len(lines) // 2] = f"MARKER = '{MARK_A}'"
    return "\n".join(lines) + "\n"


@dataclass
class Timings:
    startup: float = 0.0
    read: list[int] = field(default_factory=list)
    edit: list[int] = field(default_factory=list)


async def run_latency(servers: list[Server], iterations: int, warmup: int
                      ) -> dict[str, Timings]:
    """Both servers connected at once, calls alternated between them.

    Alternating (and flipping which goes first) makes load from other processes hit
    both servers alike; only one server is busy at any moment.
    """
    timings = {s.name: Timings() for s in servers}
    async with contextlib.AsyncExitStack() as stack:
        clients: dict[str, Client] = {}
        for server in servers:
            (server.root / "workload.py").write_text(workload_text(), encoding="utf-8",
                                                     newline="")
            clients[server.name], timings[server.name].startup = (
                await stack.enter_async_context(connect(server)))
            if server.in_memory:
                ok, text = await call(clients[server.name], "write",
                                      {"file_path": "workload.py",
                                       "content": workload_text()})
                if not ok:
                    raise RuntimeError(f"{server.name} write failed: {text[:300]}")
        has_a = {s.name: True for s in servers}
        for i in range(warmup + iterations):
            for server in servers if i % 2 else servers[::-1]:
                client, t = clients[server.name], timings[server.name]
                t0 = time.perf_counter_ns()
                ok, text = await call(client, server.read_tool,
                                      server.read_args("workload.py"))
                t1 = time.perf_counter_ns()
                if not ok:
                    raise RuntimeError(f"{server.name} read failed: {text[:300]}")
                old, new = (MARK_A, MARK_B) if has_a[server.name] else (MARK_B, MARK_A)
                ok, text = await call(client, server.edit_tool,
                                      server.edit_args("workload.py", old, new))
                t2 = time.perf_counter_ns()
                if not ok:
                    raise RuntimeError(f"{server.name} edit failed: {text[:300]}")
                has_a[server.name] = not has_a[server.name]
                if i >= warmup:
                    t.read.append(t1 - t0)
                    t.edit.append(t2 - t1)
    return timings


def pooled(rounds: list[dict[str, Timings]]) -> dict[str, Timings]:
    """Every round's samples per server (startup: the median round's)."""
    out: dict[str, Timings] = {}
    for name in rounds[0]:
        merged = Timings(startup=statistics.median(r[name].startup for r in rounds))
        for r in rounds:
            merged.read += r[name].read
            merged.edit += r[name].edit
        out[name] = merged
    return out


def report_rounds(rounds: list[dict[str, Timings]], out: TextIO) -> None:
    """Each round's toolfs/reference ratio per call, their median, and how many rounds
    met the target (≤ 1.0x)."""
    rows: list[list[object]] = []
    for op, label in (("read", "read whole ~12 KB file"),
                      ("edit", "edit one line (after a read)")):
        for name, root in (("toolfs", "local"), ("toolfs-memory", "memory://")):
            if name not in rounds[0]:
                continue
            ratios = [statistics.median(getattr(r[name], op))
                      / statistics.median(getattr(r["reference"], op)) for r in rounds]
            rows.append([label, root, " / ".join(f"{x:.2f}x" for x in ratios),
                         f"{statistics.median(ratios):.2f}x",
                         f"{sum(x <= 1.0 for x in ratios)} of {len(ratios)}"])
    print(markdown_table(["call", "toolfs root", "toolfs / reference, each round",
                          "median of rounds", "rounds ≤ 1.0x"], rows), file=out)


# -- where the time goes ---------------------------------------------------------


class RawClient:
    """A bare JSON-RPC client over a server's stdin and stdout (blocking pipes)."""

    def __init__(self, server: Server) -> None:
        assert server.log is not None
        env = {**get_default_environment(), **({"PYTHONPATH": os.environ["PYTHONPATH"]}
                                              if os.environ.get("PYTHONPATH") else {})}
        self.errlog = server.log.with_suffix(".raw.log").open("w", encoding="utf-8")
        self.process = subprocess.Popen(server.command, cwd=server.root, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errlog)
        self.next_id = 0

    def send(self, method: str, params: dict[str, Any] | None = None,
             notify: bool = False) -> bytes:
        """The answer line (``b""`` for a notification)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        if notify:
            return b""
        line = self.process.stdout.readline()
        if not line:
            raise Unavailable(f"the server closed stdout; stderr: {_tail(Path(self.errlog.name))}")
        return line

    def call(self, tool: str, args: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
        line = self.send("tools/call", {"name": tool, "arguments": args})
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer or answer["result"].get("isError"):
            raise RuntimeError(f"{tool} failed: {line[:300]!r}")
        return line, answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.errlog.close()


@dataclass
class Captured:
    """One server's answers, as it wrote them, for the canned replay."""

    tools: dict[str, Any] = field(default_factory=dict)
    read_result: dict[str, Any] = field(default_factory=dict)


def run_raw(servers: list[Server], iterations: int, warmup: int
            ) -> tuple[dict[str, Timings], dict[str, Captured]]:
    """Read + edit pairs through :class:`RawClient`, alternated between the servers."""
    timings = {s.name: Timings() for s in servers}
    captured = {s.name: Captured() for s in servers}
    clients: dict[str, RawClient] = {}
    try:
        for server in servers:
            (server.root / "workload.py").write_text(workload_text(), encoding="utf-8",
                                                     newline="")
            client = clients[server.name] = RawClient(server)
            client.send("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "clientInfo": {"name": "bench", "version": "1"}})
            client.send("notifications/initialized", notify=True)
            listed = json.loads(client.send("tools/list"))["result"]
            captured[server.name].tools = listed
            pick_tools(server, [SimpleNamespace(name=t["name"], input_schema=t["inputSchema"])
                                for t in listed["tools"]])
            if server.in_memory:
                client.call("write", {"file_path": "workload.py", "content": workload_text()})
        has_a = {s.name: True for s in servers}
        for i in range(warmup + iterations):
            for server in servers if i % 2 else servers[::-1]:
                client, t = clients[server.name], timings[server.name]
                t0 = time.perf_counter_ns()
                _, read = client.call(server.read_tool, server.read_args("workload.py"))
                t1 = time.perf_counter_ns()
                old, new = (MARK_A, MARK_B) if has_a[server.name] else (MARK_B, MARK_A)
                client.call(server.edit_tool, server.edit_args("workload.py", old, new))
                t2 = time.perf_counter_ns()
                has_a[server.name] = not has_a[server.name]
                captured[server.name].read_result = read["result"]
                if i >= warmup:
                    t.read.append(t1 - t0)
                    t.edit.append(t2 - t1)
    finally:
        for client in clients.values():
            client.close()
    return timings, captured


_CANNED_SERVER = r"""
import json, sys
tools, answer = (open(p, "rb").read().strip() for p in sys.argv[1:3])
init = b'{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},' \
       b'"serverInfo":{"name":"canned","version":"1"}}'
for line in sys.stdin.buffer:
    message = json.loads(line)
    if "id" not in message:
        continue
    body = {"initialize": init, "tools/list": tools}.get(message["method"], answer)
    sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode()
                            + b',"result":' + body + b"}\n")
    sys.stdout.buffer.flush()
"""


@dataclass
class ClientCost:
    wall: list[int] = field(default_factory=list)
    cpu_us: float = 0.0


async def run_client_cost(servers: list[Server], captured: dict[str, Captured],
                          iterations: int, warmup: int, work: Path) -> dict[str, ClientCost]:
    """The SDK client taking each server's own read answer from a canned server."""
    costs: dict[str, ClientCost] = {}
    for rnd in range(2):  # two rounds, servers alternated; the cost is summed over both
        for server in servers if rnd else servers[::-1]:
            got = captured[server.name]
            tools, answer = work / f"{server.name}.tools.json", work / f"{server.name}.answer.json"
            tools.write_text(json.dumps(got.tools, ensure_ascii=False, separators=(",", ":")),
                             encoding="utf-8")
            answer.write_text(json.dumps(got.read_result, ensure_ascii=False,
                                         separators=(",", ":")), encoding="utf-8")
            params = StdioServerParameters(command=sys.executable,
                                           args=["-c", _CANNED_SERVER, str(tools), str(answer)])
            cost = costs.setdefault(server.name, ClientCost())
            async with Client(stdio_client(params), mode="legacy", cache=None,
                              read_timeout_seconds=CALL_TIMEOUT) as client:
                await client.list_tools()
                args = server.read_args("workload.py")
                for _ in range(warmup):
                    await client.call_tool(server.read_tool, args)
                cpu0 = time.process_time()
                for _ in range(iterations // 2):
                    t0 = time.perf_counter_ns()
                    await client.call_tool(server.read_tool, args)
                    cost.wall.append(time.perf_counter_ns() - t0)
                cost.cpu_us += (time.process_time() - cpu0) * 1e6 / iterations
    return costs


def report_decomposition(raw: dict[str, Timings], costs: dict[str, ClientCost],
                         sdk: dict[str, Timings], out: TextIO) -> None:
    def med(samples: list[int]) -> float:
        return statistics.median(samples) / 1000.0

    names = {"toolfs": "toolfs, local", "toolfs-memory": "toolfs, memory://",
             "reference": "reference"}
    ref = "reference"
    rows: list[list[object]] = []
    for name in (n for n in names if n in raw):
        rows.append([names[name], fmt_us(med(sdk[name].read)) if name in sdk else "n/a",
                     fmt_us(med(raw[name].read)), ratio(med(raw[name].read), med(raw[ref].read)),
                     fmt_us(costs[name].cpu_us), ratio(costs[name].cpu_us, costs[ref].cpu_us),
                     fmt_us(med(raw[name].edit)), ratio(med(raw[name].edit), med(raw[ref].edit))])
    print(markdown_table(["server", "read µs, SDK client (table above)",
                          "read µs, bare client", "bare / reference",
                          "SDK client CPU µs per read answer", "client CPU / reference",
                          "edit µs, bare client", "bare / reference"], rows), file=out)
    print(file=out)
    print("- bare client: JSON-RPC over the same pipes without the SDK (the server and the "
          "pipes); SDK client CPU: the client process's CPU time per call_tool when a canned "
          "server replays that server's own read answer (the client's parsing, result models "
          "and output-schema check of it)", file=out)


# -- correctness ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    initial: bytes
    old: str
    """As a model sends it: ``\\n`` line breaks."""
    new: str
    expected: bytes


CASES: list[Case] = [
    Case("CRLF: one line", b"alpha\r\nbeta\r\ngamma\r\n", "beta", "BETA",
         b"alpha\r\nBETA\r\ngamma\r\n"),
    Case("CRLF: span over two lines, new text with 3 lines", b"alpha\r\nbeta\r\ngamma\r\n",
         "alpha\nbeta", "one\ntwo\nthree", b"one\r\ntwo\r\nthree\r\ngamma\r\n"),
    Case("CRLF: mixed endings, other lines untouched", b"a = 1\r\nb = 2\nc = 3\r\n",
         "c = 3", "c = 4", b"a = 1\r\nb = 2\nc = 4\r\n"),
    Case("CRLF + BOM", "\ufefft\u00edtulo\r\n\u00f1and\u00fa\r\n".encode(),
         "\u00f1and\u00fa", "ostrich", "\ufefft\u00edtulo\r\nostrich\r\n".encode()),
    Case("CJK", "def \u51fd\u6570():\n    return '\u4f60\u597d\uff0c\u4e16\u754c'\n".encode(),
         "\u4f60\u597d\uff0c\u4e16\u754c", "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
         "def \u51fd\u6570():\n    return '\u3053\u3093\u306b\u3061\u306f\u4e16\u754c'\n"
         .encode()),
    Case("emoji: ZWJ family -> single emoji",
         "a = '\U0001f44d\U0001f3fd ok'\nb = '\U0001f468\u200d\U0001f469\u200d\U0001f467'\n"
         .encode(),
         "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f389",
         "a = '\U0001f44d\U0001f3fd ok'\nb = '\U0001f389'\n".encode()),
    Case("emoji: skin-tone modifier kept apart",
         "x = '\U0001f44d\U0001f3fd'\ny = '\U0001f44d'\n".encode(),
         "\U0001f44d\U0001f3fd", "\U0001f44e",
         "x = '\U0001f44e'\ny = '\U0001f44d'\n".encode()),
    Case("combining: NFD match leaves NFC twin",
         "n = 'cafe\u0301'\nm = 'caf\u00e9'\n".encode(), "cafe\u0301", "coffee",
         "n = 'coffee'\nm = 'caf\u00e9'\n".encode()),
    Case("combining: NFC match leaves NFD twin",
         "n = 'cafe\u0301'\nm = 'caf\u00e9'\n".encode(), "caf\u00e9", "tea",
         "n = 'cafe\u0301'\nm = 'tea'\n".encode()),
]


async def run_correctness(server: Server) -> dict[str, str]:
    """Case name -> ``ok`` or what went wrong."""
    files = {f"case{i}.txt": case for i, case in enumerate(CASES)}
    for name, case in files.items():
        (server.root / name).write_bytes(case.initial)
    out: dict[str, str] = {}
    async with connect(server) as (client, _):
        for name, case in files.items():
            ok, text = await call(client, server.read_tool, server.read_args(name))
            if ok:
                ok, text = await call(client, server.edit_tool,
                                      server.edit_args(name, case.old, case.new))
            got = (server.root / name).read_bytes()
            if not ok:
                out[case.name] = "error: " + " ".join(text.split())[:80]
            elif got == case.expected:
                out[case.name] = "ok"
            else:
                out[case.name] = f"**wrong bytes**: {_describe(case.expected, got)}"
    return out


def _describe(expected: bytes, got: bytes) -> str:
    crlf = b"\r\n"
    if got.replace(crlf, b"\n") == expected.replace(crlf, b"\n"):
        return (f"line endings changed ({expected.count(crlf)} CRLF expected, "
                f"{got.count(crlf)} found)")
    if got.startswith(b"\xef\xbb\xbf") != expected.startswith(b"\xef\xbb\xbf"):
        return "BOM changed"
    return f"expected {expected[:40]!r}, got {got[:40]!r}"


# -- main -------------------------------------------------------------------------


def report(results: dict[str, tuple[Timings, dict[str, str]]], iterations: int,
           toolfs_why: str | None, out: TextIO,
           memory: Timings | None = None) -> None:
    ref = results["reference"][0]
    tfs = results["toolfs"][0] if "toolfs" in results else None

    def med(samples: list[int]) -> float:
        return statistics.median(samples) / 1000.0

    rows: list[list[object]] = []
    for op, label in (("read", "read whole ~12 KB file"),
                      ("edit", "edit one line (after a read)")):
        r = med(getattr(ref, op))
        for name, timings in (("local", tfs), ("memory://", memory)):
            if name == "memory://" and timings is None:
                continue
            t = med(getattr(timings, op)) if timings else None
            rows.append([label, name, iterations, fmt_us(t) if t is not None else "n/a",
                         fmt_us(r), ratio(t, r) if t is not None else "n/a"])
    rows.append(["spawn + initialize (once)", "local", 1,
                 fmt_us(tfs.startup * 1e6) if tfs else "n/a", fmt_us(ref.startup * 1e6),
                 ratio(tfs.startup, ref.startup) if tfs else "n/a"])
    print(markdown_table(["call", "toolfs root", "n", "toolfs µs (median)",
                          "reference µs (median)", "toolfs / reference"], rows), file=out)
    print(file=out)
    print("- reference: always a local directory; it writes edits with writeFile + rename "
          "and no fsync, toolfs fsyncs the file and the directory (local root)", file=out)
    print(file=out)
    ref_ok = results["reference"][1]
    tfs_ok = results["toolfs"][1] if "toolfs" in results else {}
    print(markdown_table(
        ["edit correctness case", "toolfs", "reference"],
        [[c.name, tfs_ok.get(c.name, "n/a"), ref_ok[c.name]] for c in CASES]), file=out)
    print(file=out)
    for name in ("toolfs", "reference"):
        if name in results:
            passed = sum(v == "ok" for v in results[name][1].values())
            print(f"- {name}: {passed}/{len(CASES)} edits byte-exact", file=out)
    if toolfs_why:
        print(f"- toolfs MCP server NOT MEASURED: {toolfs_why}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="5 iterations (smoke test)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="read+edit pairs per server (default 200, --tiny 5)")
    parser.add_argument("--node-dir", type=Path, default=NODE_DIR,
                        help="npm cache/install directory for the reference server")
    parser.add_argument("--ref-version", default=REF_VERSION,
                        help=f"{REF_PACKAGE} version (default {REF_VERSION})")
    parser.add_argument("--no-memory", dest="memory", action="store_false",
                        help="skip the toolfs server over memory:// (local root only)")
    parser.add_argument("--no-decompose", dest="decompose", action="store_false",
                        help="skip the bare-client and canned-answer runs")
    parser.add_argument("--rounds", type=int, default=1,
                        help="latency runs, each with freshly started servers (default 1)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    iterations = args.iterations or (5 if args.tiny else 200)
    warmup = 1 if args.tiny else 10

    try:
        ref_cmd = reference_command(args.node_dir, args.ref_version)
    except Unavailable as exc:
        print(f"SKIP: reference MCP server unavailable: {exc}")
        return EXIT_SKIP

    base = Path(tempfile.mkdtemp(prefix="toolfs-bench-mcp-"))
    try:
        servers: dict[str, Server] = {}
        toolfs_why = toolfs_missing()
        if toolfs_why is None:
            root = base / "toolfs"
            root.mkdir()
            servers["toolfs"] = Server("toolfs", [sys.executable, "-m", "toolfs", "serve",
                                                  str(root)], root, absolute_paths=False,
                                       log=base / "toolfs.log")
            if args.memory:
                root = base / "toolfs-memory"  # the process's cwd; the files are in memory
                root.mkdir()
                servers["toolfs-memory"] = Server(
                    "toolfs-memory", [sys.executable, "-m", "toolfs", "serve",
                                      f"memory://bench-{os.getpid()}"], root,
                    absolute_paths=False, log=base / "toolfs-memory.log", in_memory=True)
        root = base / "reference"
        root.mkdir()
        servers["reference"] = Server("reference", [*ref_cmd, str(root)], root,
                                      absolute_paths=True, log=base / "reference.log")

        results: dict[str, tuple[Timings, dict[str, str]]] = {}
        order = list(servers.values())
        try:
            timings = anyio.run(run_latency, order, iterations, warmup)
        except Exception as exc:
            if "toolfs" not in servers:
                raise
            # Was it toolfs? Measure the reference alone; if that fails too, it was not.
            toolfs_why = _failure(servers.pop("toolfs"), exc)
            servers.pop("toolfs-memory", None)
            order = [servers["reference"]]
            try:
                timings = anyio.run(run_latency, order, iterations, warmup)
            except Unavailable as ref_exc:
                print(f"SKIP: reference MCP server unavailable: {ref_exc}")
                return EXIT_SKIP
        rounds = [timings]
        for _ in range(args.rounds - 1):
            rounds.append(anyio.run(run_latency, order, iterations, warmup))
        timings = pooled(rounds)
        memory = timings.get("toolfs-memory")
        for server in order:
            if server.in_memory:
                continue
            try:
                results[server.name] = (timings[server.name],
                                        anyio.run(run_correctness, server))
            except Exception as exc:
                if server.name == "reference":
                    raise
                toolfs_why = _failure(server, exc)

        print(f"## MCP servers over stdio: toolfs vs {REF_PACKAGE}@{args.ref_version}"
              f"{' (--tiny: smoke test only)' if args.tiny else ''}")
        print()
        print(machine_facts())
        print(f"client: mcp {_version('mcp')} (Python), handshake-era protocol; "
              f"node {_node_version()}")
        print()
        report(results, iterations * len(rounds), toolfs_why, sys.stdout, memory)
        if len(rounds) > 1 and toolfs_why is None:
            print()
            print(f"### {len(rounds)} rounds, each with freshly started servers")
            print()
            report_rounds(rounds, sys.stdout)
        if args.decompose and toolfs_why is None:
            raw, captured = run_raw(order, iterations, warmup)
            costs = anyio.run(run_client_cost, order, captured, iterations, warmup, base)
            print()
            print("### Where the time goes (reads of the same file, alternated servers)")
            print()
            report_decomposition(raw, costs, timings, sys.stdout)
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _node_version() -> str:
    node = shutil.which("node")
    if node is None:
        return "?"
    done = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    raise SystemExit(main())
