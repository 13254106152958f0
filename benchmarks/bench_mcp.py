"""Per-call latency of ``toolfs serve`` over stdio, through the official ``mcp`` client.

The bound (docs/benchmarks.md): every call well under 10 ms on the machine that runs it,
against model turns of seconds. No ratio is a target; the reference MCP filesystem server
(``@modelcontextprotocol/server-filesystem``, Node, installed with npm into
``$TOOLFS_BENCH_NODE_DIR``, default ``/tmp/toolfs-bench-node``, never into the
repository) is measured beside toolfs for scale when node and npm are there.

Servers (each spawned by the client over stdio, handshake-era protocol, no client cache):

* ``toolfs (local)``: ``python -m toolfs serve DIR``;
* ``toolfs (memory://)``: ``python -m toolfs serve memory://...`` (no disk under the calls);
* ``reference``: ``server-filesystem DIR`` (skipped with a note when unavailable).

Workload, per iteration: read a ~12 KB source file whole, then edit one line (a marker
toggled between two values). Calls alternate between the servers, the order flipping
each iteration, so load from other processes hits them alike. The table gives the median
and 90th percentile per call in milliseconds, the CPU time per call of the server and the
client together (Linux: what a call costs apart from waiting for a CPU, which dominates
on a busy machine), and the time to spawn and initialise each server.

Usage: ``python benchmarks/bench_mcp.py [--tiny] [--iterations N] [--no-reference]``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from _common import machine_facts, markdown_table

REF_PACKAGE = "@modelcontextprotocol/server-filesystem"
# Pinned so that reruns measure the same server as docs/benchmarks.md.
REF_VERSION = "2026.8.31"
NODE_DIR = Path(os.environ.get("TOOLFS_BENCH_NODE_DIR", "/tmp/toolfs-bench-node"))
CALL_TIMEOUT = 60.0
BOUND_MS = 10.0
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
    pid: int | None = None
    """The server process, for its CPU time (Linux)."""
    in_memory: bool = False
    """toolfs over ``memory://``: the file is created with its ``write`` tool."""

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
            server.pid = _child_pid(server.command)
            yield client, startup


def _child_pid(command: list[str]) -> int | None:
    """The pid of this process's child running ``command`` (Linux ``/proc``), if found."""
    wanted = "\0".join(command).encode()
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == os.getpid() and (entry / "cmdline").read_bytes().rstrip(b"\0") == wanted:
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def cpu_ns(pid: int | None) -> int:
    """CPU time a process has run, all its threads, in ns (``schedstat``; 0 if unknown).

    Per call it tells what the server costs apart from waiting for a CPU, which on a
    busy machine is most of the wall time."""
    if pid is None:
        return 0
    total = 0
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int((task / "schedstat").read_text().split()[0])
    return total


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
    cpu: dict[str, list[int]] = field(default_factory=lambda: {"read": [], "edit": []})
    """Per call: the server's CPU ns plus the client's (this process's) CPU ns."""


async def run_latency(servers: list[Server], iterations: int, warmup: int
                      ) -> dict[str, Timings]:
    """Every server connected at once, calls alternated between them."""
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
                old, new = (MARK_A, MARK_B) if has_a[server.name] else (MARK_B, MARK_A)
                for op, tool, args in (
                        ("read", server.read_tool, server.read_args("workload.py")),
                        ("edit", server.edit_tool, server.edit_args("workload.py", old, new))):
                    cpu0, mine0 = cpu_ns(server.pid), time.process_time_ns()
                    t0 = time.perf_counter_ns()
                    ok, text = await call(client, tool, args)
                    t1 = time.perf_counter_ns()
                    cpu = cpu_ns(server.pid) - cpu0 + time.process_time_ns() - mine0
                    if not ok:
                        raise RuntimeError(f"{server.name} {op} failed: {text[:300]}")
                    if i >= warmup:
                        getattr(t, op).append(t1 - t0)
                        if server.pid is not None:
                            t.cpu[op].append(cpu)
                has_a[server.name] = not has_a[server.name]
    return timings


def _ms(samples_ns: list[int], quantile: float = 0.5) -> float:
    ordered = sorted(samples_ns)
    return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="5 iterations (smoke test)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="read+edit pairs per server (default 200, --tiny 5)")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="measure toolfs alone")
    parser.add_argument("--node-dir", type=Path, default=NODE_DIR,
                        help="npm install directory for the reference server")
    args = parser.parse_args(argv)
    iterations = args.iterations or (5 if args.tiny else 200)
    warmup = 1 if args.tiny else 10
    why = toolfs_missing()
    if why is not None:
        print(f"toolfs MCP server unavailable: {why}")
        return 1

    base = Path(tempfile.mkdtemp(prefix="toolfs-bench-mcp-"))
    notes: list[str] = []
    try:
        servers = []
        for name, url in (("toolfs (local)", None),
                          ("toolfs (memory://)", f"memory://bench-{os.getpid()}")):
            root = base / name.split()[1].strip("()/:")
            root.mkdir()
            servers.append(Server(name, [sys.executable, "-m", "toolfs", "serve",
                                         url or str(root)], root, absolute_paths=False,
                                  log=root.with_suffix(".log"), in_memory=url is not None))
        if args.reference:
            try:
                command = reference_command(args.node_dir, REF_VERSION)
                root = base / "reference"
                root.mkdir()
                servers.append(Server("reference", [*command, str(root)], root,
                                      absolute_paths=True, log=base / "reference.log"))
            except Unavailable as exc:
                notes.append(f"reference server not measured: {exc}")
        try:
            timings = anyio.run(run_latency, servers, iterations, warmup)
        except Exception as exc:
            if servers[-1].name != "reference":
                raise
            notes.append(f"reference server not measured: {_failure(servers[-1], exc)}")
            timings = anyio.run(run_latency, servers[:-1], iterations, warmup)

        print(f"## MCP per call over stdio{' (--tiny: smoke test only)' if args.tiny else ''}")
        print()
        print(machine_facts())
        print(f"client: mcp {_version('mcp')} (Python), handshake-era protocol; "
              f"{iterations} iterations after {warmup} warm-up")
        print()
        rows: list[list[object]] = []
        for op, label in (("read", "read ~12 KB file"), ("edit", "edit one line")):
            for name, t in timings.items():
                samples = getattr(t, op)
                cpu = f"{_ms(t.cpu[op]):.2f}" if t.cpu[op] else "n/a"
                rows.append([label, name, len(samples), f"{_ms(samples):.2f}",
                             f"{_ms(samples, 0.9):.2f}", cpu])
        print(markdown_table(["call", "server", "n", "median ms", "p90 ms", "CPU ms"], rows))
        print()
        print("- spawn + initialize (once): " + ", ".join(
            f"{name} {t.startup * 1e3:,.0f} ms" for name, t in timings.items()))
        worst = max(_ms(getattr(t, op)) for name, t in timings.items()
                    if name.startswith("toolfs") for op in ("read", "edit"))
        print(f"- toolfs's slowest median: {worst:.2f} ms per call; bound {BOUND_MS:.0f} ms: "
              f"{'held' if worst < BOUND_MS else 'NOT HELD'}")
        print("- CPU ms: median CPU time per call of the server process (all threads) and "
              "the client, what a call costs apart from waiting for a CPU, the disk or the "
              "pipes")
        for note in notes:
            print(f"- {note}")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    raise SystemExit(main())
