"""Two builds of toolfs's MCP server, side by side: this checkout against another one.

A change to the server is measured against the commit before it, in one run: both
builds serve the same ~12 KB file (``bench_mcp.py``'s workload) from their own
directory (or ``memory://``), and their calls alternate (who goes first flips each
iteration), so load from other processes hits both alike. Two clients:

* the official ``mcp`` Python client (what ``bench_mcp.py`` drives);
* a bare JSON-RPC client over the same pipes (the server and the pipes alone).

The table gives the medians per call and this checkout / the other build.

Usage: ``python benchmarks/bench_mcp_builds.py --base OTHER/src [--iterations N]
[--memory] [--tiny]``, where ``OTHER`` is, say, ``git worktree add /tmp/base HEAD~1``.
Without ``--base`` the build is compared with itself (a check of the method: ~1.00x).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from _common import machine_facts, markdown_table, ratio
from bench_mcp import MARK_A, MARK_B, workload_text

HERE = Path(__file__).resolve().parent.parent / "src"


@dataclass
class Build:
    name: str
    src: Path
    root: Path
    flip: bool = True
    read: list[int] = field(default_factory=list)
    edit: list[int] = field(default_factory=list)

    def command(self, target: str) -> list[str]:
        return [sys.executable, "-m", "toolfs", "serve", target]

    def env(self) -> dict[str, str]:
        return {**get_default_environment(), "PYTHONPATH": str(self.src)}

    def edit_args(self) -> dict[str, str]:
        old, new = (MARK_A, MARK_B) if self.flip else (MARK_B, MARK_A)
        self.flip = not self.flip
        return {"file_path": "workload.py", "old_string": old, "new_string": new}


READ = {"file_path": "workload.py"}


def _target(build: Build, memory: bool) -> str:
    return f"memory://builds-{build.name}-{os.getpid()}" if memory else str(build.root)


async def run_sdk(builds: list[Build], iterations: int, warmup: int, memory: bool) -> None:
    # The servers' stderr goes to the null device.
    with open(os.devnull, "w") as devnull:
        async with contextlib.AsyncExitStack() as stack:
            await _run_sdk(stack, devnull, builds, iterations, warmup, memory)


async def _run_sdk(stack: contextlib.AsyncExitStack, devnull: TextIO, builds: list[Build],
                   iterations: int, warmup: int, memory: bool) -> None:
    """Connect a client to each build and time read + edit pairs, alternated."""
    clients: dict[str, Client] = {}
    for build in builds:
        params = StdioServerParameters(command=sys.executable,
                                       args=build.command(_target(build, memory))[1:],
                                       cwd=str(build.root), env=build.env())
        client = await stack.enter_async_context(Client(
            stdio_client(params, errlog=devnull),
            mode="legacy", cache=None))
        await client.list_tools()
        if memory:
            await client.call_tool("write", {"file_path": "workload.py",
                                             "content": workload_text()})
        clients[build.name] = client
    for i in range(warmup + iterations):
        for build in builds if i % 2 else builds[::-1]:
            client = clients[build.name]
            t0 = time.perf_counter_ns()
            await client.call_tool("read", READ)
            t1 = time.perf_counter_ns()
            result = await client.call_tool("edit", build.edit_args())
            t2 = time.perf_counter_ns()
            if result.is_error:
                raise RuntimeError(f"{build.name}: the edit failed: {result.content}")
            if i >= warmup:
                build.read.append(t1 - t0)
                build.edit.append(t2 - t1)


def _send(process: subprocess.Popen[bytes], request_id: int, method: str,
          params: dict[str, Any] | None = None) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        message["params"] = params
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    answer: dict[str, Any] = json.loads(process.stdout.readline())
    return answer


def run_bare(builds: list[Build], iterations: int, warmup: int, memory: bool) -> None:
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for build in builds:
            process = processes[build.name] = subprocess.Popen(
                build.command(_target(build, memory)), cwd=build.root, env=build.env(),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            _send(process, 1, "initialize", {"protocolVersion": "2025-06-18",
                                             "capabilities": {},
                                             "clientInfo": {"name": "bench", "version": "1"}})
            assert process.stdin is not None
            process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            process.stdin.flush()
            if memory:
                _send(process, 2, "tools/call", {"name": "write", "arguments": {
                    "file_path": "workload.py", "content": workload_text()}})
        for i in range(warmup + iterations):
            for build in builds if i % 2 else builds[::-1]:
                process = processes[build.name]
                t0 = time.perf_counter_ns()
                _send(process, 10 + 2 * i, "tools/call", {"name": "read", "arguments": READ})
                t1 = time.perf_counter_ns()
                answer = _send(process, 11 + 2 * i, "tools/call",
                               {"name": "edit", "arguments": build.edit_args()})
                t2 = time.perf_counter_ns()
                if answer["result"]["isError"]:
                    raise RuntimeError(f"{build.name}: the edit failed: {answer}")
                if i >= warmup:
                    build.read.append(t1 - t0)
                    build.edit.append(t2 - t1)
    finally:
        for process in processes.values():
            assert process.stdin is not None
            process.stdin.close()
            process.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, default=HERE,
                        help="the src directory of the build to compare with "
                             "(default: this checkout's own)")
    parser.add_argument("--iterations", type=int, default=None,
                        help="read+edit pairs per build and client (default 1000, --tiny 5)")
    parser.add_argument("--memory", action="store_true", help="serve memory:// instead of "
                                                               "a local directory")
    parser.add_argument("--tiny", action="store_true", help="5 iterations (smoke test)")
    args = parser.parse_args(argv)
    iterations = args.iterations or (5 if args.tiny else 1000)
    warmup = 1 if args.tiny else 100
    if not (args.base / "toolfs" / "__init__.py").is_file():
        parser.error(f"--base {args.base}: no toolfs package there")
    with tempfile.TemporaryDirectory(prefix="toolfs-bench-builds-") as tmp:
        rows: list[list[object]] = []
        for client in ("SDK", "bare"):
            builds = []
            for name, src in (("this", HERE), ("base", args.base.resolve())):
                root = Path(tmp) / f"{client}-{name}"
                root.mkdir()
                (root / "workload.py").write_text(workload_text(), encoding="utf-8",
                                                  newline="")
                builds.append(Build(name, src, root))
            if client == "SDK":
                anyio.run(run_sdk, builds, iterations, warmup, args.memory)
            else:
                run_bare(builds, iterations, warmup, args.memory)
            this, base = builds
            for op in ("read", "edit"):
                t = statistics.median(getattr(this, op)) / 1000
                b = statistics.median(getattr(base, op)) / 1000
                rows.append([f"{op} ({client} client)", iterations, f"{t:,.0f}", f"{b:,.0f}",
                             ratio(t, b)])
    print(f"## toolfs serve {'memory://' if args.memory else 'DIR'}: this checkout vs "
          f"{args.base}{' (--tiny: smoke test only)' if args.tiny else ''}")
    print()
    print(machine_facts())
    print()
    print(markdown_table(["call", "n", "this µs (median)", "base µs (median)",
                          "this / base"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
