"""A real ``toolfs serve`` process behind OAuth (the test issuer of
:mod:`toolfs.testing.oauth_issuer`), with a principals file and an audit file."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import toolfs
from tests.contract.test_confinement_and_deny import DENY
from toolfs.server.auth import sha256_hex
from toolfs.testing.oauth_issuer import OAuthIssuer

STATIC_TOKEN = "static-token-for-the-shared-room-8d1f"
SECRET_TEXT = "bob's secret: the launch code is 0000"
ALICE_TEXT = "alice's notes\n"

PRINCIPALS = """\
# The rooms of the tests' server.
[[principal]]
name = "alice"
match = {{ sub = "alice" }}
root = "teams/alice"
scopes = ["files:read", "files:write"]
deny = ["private/**"]
on_stale = "merge"

[[principal]]
name = "bob"
match = {{ sub = "bob" }}
root = "teams/bob"
scopes = ["files:read", "files:write"]
deny = {deny}

[[principal]]
name = "readers"
match = {{ groups = "readers" }}
root = "."
read_only = true

[[principal]]
name = "robot"
match = {{ client_id = "robot-ci" }}
root = "teams/alice"
scopes = ["files:read"]

[[principal]]
name = "shared"
match = {{ token_sha256 = "{static}" }}
root = "shared"
scopes = ["files:read", "files:write"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "toolfs", "serve", *args]


def child_env(**extra: str) -> dict[str, str]:
    src = os.path.dirname(os.path.dirname(toolfs.__file__))
    return {**os.environ, "PYTHONPATH": src, **extra}


@dataclass
class Served:
    """A running ``toolfs serve``: its endpoint, files, audit file and issuer."""

    url: str
    root: Path
    audit: Path
    issuer: OAuthIssuer
    proc: subprocess.Popen[str]
    log: list[str]

    @property
    def resource(self) -> str:
        return self.url

    def token(self, sub: str, **kw: Any) -> str:
        kw.setdefault("aud", self.url)
        return self.issuer.mint(sub=sub, **kw)


def make_tree(root: Path) -> None:
    for rel, text in {
        "teams/alice/notes.txt": ALICE_TEXT,
        "teams/alice/private/diary.txt": "alice's private diary\n",
        "teams/alice/a/b/c.txt": "c\n",
        "teams/bob/secret.txt": SECRET_TEXT + "\n",
        "teams/bob/escape.txt": SECRET_TEXT + "\n",
        "teams/bob/x.txt": SECRET_TEXT + "\n",
        "teams/alice-old/leak.txt": SECRET_TEXT + "\n",
        "shared/readme.txt": "shared\n",
        "escape.txt": SECRET_TEXT + "\n",
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@contextmanager
def running_server(args: list[str], env: dict[str, str] | None = None
                   ) -> Iterator[tuple[subprocess.Popen[str], str, list[str]]]:
    """``toolfs serve ARGS`` until the block ends; yields the process, its URL and its
    stderr lines so far (read on a thread)."""
    proc = subprocess.Popen(serve_command(*args), stderr=subprocess.PIPE, text=True,
                            env=env or child_env())
    assert proc.stderr is not None
    lines: list[str] = []
    first = proc.stderr.readline()
    lines.append(first)
    match = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", first)
    if not match:
        proc.kill()
        raise AssertionError(first + proc.stderr.read())
    stderr = proc.stderr
    reader = threading.Thread(target=lambda: lines.extend(iter(stderr.readline, "")),
                              daemon=True)
    reader.start()
    try:
        yield proc, match.group(1), lines
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        reader.join(5)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def issuer() -> Iterator[OAuthIssuer]:
    with OAuthIssuer(groups={"carol": ["readers", "staff"]}) as iss:
        yield iss


@pytest.fixture(scope="module")
def served(issuer: OAuthIssuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("served")
    root = base / "root"
    make_tree(root)
    principals = base / "principals.toml"
    principals.write_text(PRINCIPALS.format(static=sha256_hex(STATIC_TOKEN),
                                            deny=json.dumps(DENY)))
    audit = base / "audit.jsonl"
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with running_server([
            str(root), "--transport", "http", "--port", str(port),
            "--auth-issuer", issuer.url, "--resource", resource,
            "--principals", str(principals), "--audit", str(audit), "--audit-reads",
            "--tools", "read,write,edit,glob,grep,ls,notebook_edit"]) as (proc, url, log):
        assert url == resource
        yield Served(url, root, audit, issuer, proc, log)


@asynccontextmanager
async def bearer_client(url: str, token: str, *,
                        context: str | None = None) -> AsyncIterator[Client]:
    """The official MCP client over streamable HTTP with ``token`` (the 2026-07-28
    protocol, the client's choice), naming its ``context`` (``toolfs-context``) if given:
    without one, every client of a principal is one context."""
    headers = {"Authorization": f"Bearer {token}"}
    if context is not None:
        headers["toolfs-context"] = context
    async with httpx2.AsyncClient(headers=headers) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


@contextmanager
def uvicorn_thread(app: Any, port: int = 0) -> Iterator[int]:
    """``app`` served on a thread; yields its port."""
    sock = socket.create_server(("127.0.0.1", port))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
