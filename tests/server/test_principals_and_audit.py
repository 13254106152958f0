"""The principals file (validated at start, errors naming the line), the audit sinks,
and ``toolfs serve``'s command line for OAuth, principals and audit."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.backend_fixtures import Backend
from tests.server.conftest import child_env, serve_command
from toolfs.__main__ import main
from toolfs.server.audit import FileSink, ObjectStoreSink, open_audit
from toolfs.server.principals import PrincipalsError, parse_principals

GOOD = """\
[[principal]]
name = "alice"
match = { sub = "alice" }
root = "teams/alice"
scopes = ["files:read", "files:write"]
deny = ["private/**"]
on_stale = "merge"

[[principal]]
name = "ci"
match = { client_id = "ci", groups = "bots" }
root = "."
read_only = true
"""


def test_a_good_file_gives_principals_in_order() -> None:
    principals = parse_principals(GOOD)
    alice, ci = principals.principals
    assert (alice.name, alice.root, alice.writable, alice.on_stale) == (
        "alice", "teams/alice", True, "merge")
    assert (ci.root, ci.writable, ci.on_stale) == ("", False, None)
    assert ci.tools(("read", "write", "edit", "glob", "notebook_edit")) == ("read", "glob")
    assert principals.match({}, client_id=None, subject="alice", token_sha256=None) is alice
    # Every key of a match must hold: client_id alone is not ci.
    assert principals.match({"groups": ["x"]}, client_id="ci", subject=None,
                            token_sha256=None) is None
    assert principals.match({"groups": ["x", "bots"]}, client_id="ci", subject=None,
                            token_sha256=None) is ci
    assert principals.match({}, client_id=None, subject="mallory", token_sha256=None) is None


def _shifted(table: str, where: int = 2) -> str:
    """GOOD with ``table`` put in as the second [[principal]]."""
    first, second = GOOD.split("\n\n")
    return f"{first}\n\n{table}\n\n{second}" if where == 2 else f"{table}\n\n{GOOD}"


@pytest.mark.parametrize(("text", "line", "says"), [
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "../etc"\n'
              'read_only = true'), 12, "relative path"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "/abs"\n'
              'read_only = true'), 12, "relative path"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "s3://x"\n'
              'read_only = true'), 12, "URL scheme"),
    (_shifted('[[principal]]\nname = "b"\nmatch = {}\nroot = "b"\nread_only = true'), 11,
     "at least one of"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { token_sha256 = "hunter2hunter2" }\n'
              'root = "b"\nread_only = true'), 11, "never the token itself"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b", email = "x" }\nroot = "b"\n'
              'read_only = true'), 11, "unknown key"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "b"'), 9,
     "exactly one of scopes"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "b"\n'
              'scopes = ["files:write"]'), 9, "must include files:read"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "b"\n'
              'scopes = ["files:admin"]'), 13, "files:read"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "b"\n'
              'read_only = true\non_stale = "ignore"'), 14, "refuse"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nread_only = true'), 9,
     "root: missing"),
    (_shifted('[[principal]]\nname = "b"\nmatch = { sub = "b" }\nroot = "b"\n'
              'read_only = true\ncolour = "red"'), 14, "colour: unknown key"),
    (_shifted('[[principal]]\nname = "alice"\nmatch = { sub = "b" }\nroot = "b"\n'
              'read_only = true'), 10, "used twice"),
    (_shifted('[[principal]]\nname = "b c"\nmatch = { sub = "b" }\nroot = "b"\n'
              'read_only = true'), 10, "letters, digits"),
    (GOOD + "\n[[principal]\n", 15, "not valid TOML"),
    ("title = 'x'\n", 1, "unknown key"),
    ("", 1, "principal: missing"),
])
def test_a_bad_file_is_refused_naming_its_line(text: str, line: int, says: str) -> None:
    with pytest.raises(PrincipalsError) as caught:
        parse_principals(text, source="p.toml")
    assert caught.value.line == line, str(caught.value)
    assert str(caught.value).startswith(f"p.toml:{line}: ")
    assert says in str(caught.value)


def test_a_token_hash_used_twice_is_refused() -> None:
    h = "ab" * 32
    text = "\n\n".join(
        f'[[principal]]\nname = "{n}"\nmatch = {{ token_sha256 = "{h}" }}\nroot = "{n}"\n'
        'read_only = true' for n in ("a", "b"))
    with pytest.raises(PrincipalsError, match=r"p.toml:9: .*same token_sha256"):
        parse_principals(text, source="p.toml")


def test_the_command_line_names_the_file_and_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "principals.toml"
    bad.write_text(GOOD.replace('root = "teams/alice"', 'root = "teams/../../etc"'))
    status = main(["serve", str(tmp_path), "--transport", "http", "--principals", str(bad),
                   "--auth-issuer", "http://127.0.0.1:9", "--resource",
                   "http://127.0.0.1:8/mcp"])
    assert status == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: [[principal]] #1 ('alice'): root: must be a relative path" in err


@pytest.mark.parametrize(("args", "says"), [
    (["--auth-issuer", "http://127.0.0.1:9"], "--auth-issuer needs --resource"),
    (["--resource", "http://127.0.0.1:8/mcp"], "--resource needs --auth-issuer"),
    (["--auth-issuer", "http://127.0.0.1:9", "--resource", "http://x/mcp", "--jwks-url",
      "http://a", "--introspection-url", "http://b"], "not both"),
    (["--audit-reads", "--token", "x" * 20], "--audit-reads needs --audit"),
    (["--principals", "p.toml", "--token", "x" * 20], "token_sha256"),
    (["--jwks-url", "http://a", "--token", "x" * 20], "--jwks-url needs --auth-issuer"),
])
def test_options_that_do_not_go_together_are_usage_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    assert main(["serve", str(tmp_path), "--transport", "http", *args]) == 2
    assert says in capsys.readouterr().err


def test_oauth_options_are_http_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path), "--principals", "p.toml"]) == 2
    assert "--principals applies to --transport http only" in capsys.readouterr().err


def test_claims_principals_need_an_issuer(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "p.toml"
    p.write_text(GOOD)
    assert main(["serve", str(tmp_path), "--transport", "http", "--principals", str(p)]) == 2
    assert "'alice' is matched by token claims, which needs --auth-issuer" in \
        capsys.readouterr().err


def test_an_issuer_that_cannot_be_reached_is_said_at_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", str(tmp_path), "--transport", "http", "--auth-issuer",
                 "http://127.0.0.1:9", "--resource", "http://127.0.0.1:8/mcp"]) == 2
    assert "cannot read the metadata of issuer http://127.0.0.1:9" in capsys.readouterr().err


def test_the_file_sink_appends_and_flushes_each_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_text('{"earlier": true}\n')
    sink = open_audit(str(path))
    assert isinstance(sink, FileSink)
    sink.write('{"n": 1}')
    assert path.read_text().splitlines() == ['{"earlier": true}', '{"n": 1}']  # no close yet
    other = open_audit(f"file://{path}")  # a second writer on the same file
    other.write('{"n": 2}')
    sink.write('{"n": 3}')
    sink.close()
    other.close()
    assert [json.loads(line) for line in path.read_text().splitlines()][1:] == [
        {"n": 1}, {"n": 2}, {"n": 3}]


@pytest.mark.parametrize("backend", ["s3"], indirect=True)
def test_the_object_store_sink_writes_new_objects_and_never_replaces_one(
        backend: Backend) -> None:
    prefix = f"{backend.root}/audit"
    sinks = [ObjectStoreSink(prefix, fs=backend.fs, flush_seconds=0.05, batch_lines=4)
             for _ in range(2)]  # two replicas, one prefix
    for n in range(25):
        sinks[n % 2].write(json.dumps({"n": n}))
    for sink in sinks:
        sink.close()
    backend.fs.invalidate_cache()
    names = sorted(backend.fs.find(prefix))
    assert all(re.search(r"/audit/\d{4}-\d\d-\d\d/\d{8}T\d{6}\.\d{6}Z-[^/]+-\d{6}\.jsonl$", n)
               for n in names), names
    lines: list[Any] = []
    for name in names:
        lines += [json.loads(x) for x in backend.fs.cat_file(name).decode().splitlines()]
    assert sorted(r["n"] for r in lines) == list(range(25))  # every line once
    assert sum(s.objects_written for s in sinks) == len(names)


def test_audit_on_an_object_store_url_through_the_command_line(
        s3_emulator: Any, tmp_path: Path) -> None:
    """``toolfs serve --audit s3://...``: the lines of a session arrive as objects by the
    time the server has stopped."""
    import asyncio
    import subprocess

    s3_emulator.create_bucket("toolfs-audit")
    fs = s3_emulator.s3fs_filesystem()
    options: list[str] = []
    for k, v in s3_emulator.s3fs_storage_options().items():
        options += ["-o", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
    (tmp_path / "f.txt").write_text("f\n")
    token = "t" * 24
    proc = subprocess.Popen(
        serve_command("s3://toolfs-audit/files", "--transport", "http", "--port", "0",
                      "--audit", "s3://toolfs-audit/trail", *options),
        stderr=subprocess.PIPE, text=True, env=child_env(TOOLFS_TOKEN=token))
    assert proc.stderr is not None
    first = proc.stderr.readline()
    url = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", first)
    assert url, first + proc.stderr.read()
    from tests.server.conftest import bearer_client

    async def change() -> None:
        async with bearer_client(url.group(1), token) as client:
            await client.call_tool("write", {"file_path": "a.txt", "content": "hello\n"})

    asyncio.run(change())
    proc.terminate()
    _, err = proc.communicate(timeout=20)
    fs.invalidate_cache()
    assert "Traceback" not in err and "audit" not in err, err
    lines = [json.loads(x) for name in fs.find("toolfs-audit/trail")
             for x in fs.cat_file(name).decode().splitlines()]
    assert [(r["event"], r["tool"], r["path"], r["principal"]) for r in lines] == [
        ("written", "write", "a.txt", None)]
    assert "hello" not in json.dumps(lines) and token not in json.dumps(lines)


def test_a_principals_missing_root_is_said_at_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "root" / "teams").mkdir(parents=True)
    p = tmp_path / "p.toml"
    p.write_text('[[principal]]\nname = "ci"\nmatch = { token_sha256 = "' + "ab" * 32
                 + '" }\nroot = "teams/ci"\nread_only = true\n')
    assert main(["serve", str(tmp_path / "root"), "--transport", "http",
                 "--principals", str(p)]) == 1
    err = capsys.readouterr().err
    assert "principal 'ci' (root 'teams/ci')" in err and "not_found" in err, err


@pytest.mark.anyio
async def test_audit_over_stdio(tmp_path: Path) -> None:
    """``toolfs serve DIR --audit FILE`` over stdio: one agent, no principal."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

    (tmp_path / "root").mkdir()
    audit = tmp_path / "audit.jsonl"
    argv = serve_command(str(tmp_path / "root"), "--audit", str(audit), "--audit-reads")
    env = {**get_default_environment(), "PYTHONPATH": child_env()["PYTHONPATH"]}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with Client(stdio_client(params)) as client:
        await client.call_tool("write", {"file_path": "a.txt", "content": "x\n"})
        await client.call_tool("read", {"file_path": "a.txt"})
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert [(r["event"], r["tool"], r["path"], r["principal"], r["sub"]) for r in lines] == [
        ("written", "write", "a.txt", None, None), ("read", "read", "a.txt", None, None)]


@pytest.mark.parametrize("backend", ["s3"], indirect=True)
def test_the_object_store_sink_keeps_its_lines_while_the_store_refuses(
        backend: Backend) -> None:
    bucket = "toolfs-audit-later"
    sink = ObjectStoreSink(f"{bucket}/trail", fs=backend.fs, flush_seconds=3600)
    try:
        for n in range(3):
            sink.write(json.dumps({"n": n}))
        sink.flush()  # no such bucket yet: nothing written, nothing lost
        assert sink.objects_written == 0
        backend.emulator.create_bucket(bucket)
        sink.write(json.dumps({"n": 3}))
    finally:
        sink.close()
    backend.fs.invalidate_cache()
    names = backend.fs.find(f"{bucket}/trail")
    got = [json.loads(x)["n"] for name in names
           for x in backend.fs.cat_file(name).decode().splitlines()]
    assert got == [0, 1, 2, 3] and sink.objects_written == 1


def test_static_tokens_carry_their_principals_scopes_for_required_scope() -> None:
    import httpx2

    from tests.server.conftest import free_port, uvicorn_thread
    from toolfs.integrations.mcp_server import ToolfsMCP
    from toolfs.server.auth import sha256_hex
    from toolfs.server.http import resource_server
    from toolfs.workspace import Workspace

    writer, reader = "writer-static-token-0123456789", "reader-static-token-0123456789"
    principals = parse_principals(
        f'[[principal]]\nname = "w"\nmatch = {{ token_sha256 = "{sha256_hex(writer)}" }}\n'
        'root = "."\nscopes = ["files:read", "files:write"]\n\n'
        f'[[principal]]\nname = "r"\nmatch = {{ token_sha256 = "{sha256_hex(reader)}" }}\n'
        'root = "."\nread_only = true\n')
    auth = resource_server(resource=None, static_hashes=principals.static_hashes(),
                           static_scopes=principals.scopes(), required_scopes=["files:write"])
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}
    with uvicorn_thread(ToolfsMCP(Workspace("memory://toolfs-static-scopes")).http_app(
            auth=auth), port):
        def status(token: str) -> httpx2.Response:
            return httpx2.post(url, json=init, headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json, text/event-stream"})
        assert status(writer).status_code == 200
        refused = status(reader)
        assert refused.status_code == 403
        assert 'error="insufficient_scope"' in refused.headers["www-authenticate"]


def test_the_bare_command_line_says_where_the_server_options_live(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``toolfs.integrations.cli.main`` alone (without the entry point's server setup)
    refuses the server's options with a line saying what to run."""
    from toolfs.integrations.cli import main as bare_main

    assert bare_main(["serve", str(tmp_path), "--audit", str(tmp_path / "a.jsonl")]) == 2
    assert "need toolfs.server: run the toolfs command or python -m toolfs" in \
        capsys.readouterr().err
