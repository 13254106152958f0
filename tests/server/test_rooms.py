"""A room per principal through HTTP: principal A's token never reaches B's files (the
confinement cases of the contract suite), read-only principals are neither offered nor
allowed changes, and every change lands in the audit trail without content or tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from tests.contract.test_confinement_and_deny import ATTACKS
from tests.server.conftest import (
    ALICE_TEXT,
    SECRET_TEXT,
    STATIC_TOKEN,
    Served,
    bearer_client,
)

WRITE_TOOLS = {"write", "edit", "notebook_edit"}


def _code(result: Any) -> str | None:
    """The error code of a tool result, ``None`` when it succeeded."""
    data = result.structured_content or {}
    return None if data.get("ok") else data["error"]["code"]


def _text(result: Any) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def _calls_on(path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every tool, aimed at ``path``."""
    return [("read", {"file_path": path}),
            ("write", {"file_path": path, "content": "overwritten by alice\n"}),
            ("edit", {"file_path": path, "old_string": "launch", "new_string": "LAUNCH"}),
            ("ls", {"path": path}),
            ("glob", {"pattern": "*", "path": path}),
            ("grep", {"pattern": "launch", "path": path})]


@pytest.mark.anyio
async def test_alice_cannot_reach_bobs_room(served: Served) -> None:
    bob_file = served.root / "teams" / "bob" / "secret.txt"
    # The contract's attacks, plus B's files named every other way: relative to A's
    # root, by absolute path, through a sibling whose name starts like A's root.
    attacks = [(path, why) for path, why in ATTACKS] + [
        ("../bob/secret.txt", "B's file, relative"),
        ("../../teams/bob/secret.txt", "B's file, from the server's root"),
        (str(bob_file), "B's file, absolute"),
        ("../alice-old/leak.txt", "a sibling prefix of A's root"),
        ("../bob", "B's directory"),
    ]
    async with bearer_client(served.url, served.token("alice")) as alice:
        for path, why in attacks:
            for tool, args in _calls_on(path):
                result = await alice.call_tool(tool, args)
                assert _code(result) == "outside_root", (tool, path, why, _text(result))
                assert SECRET_TEXT not in _text(result)
        everything = await alice.call_tool("glob", {"pattern": "**/*"})
        found = await alice.call_tool("grep", {"pattern": "launch code",
                                               "output_mode": "content"})
    assert "secret" not in _text(everything) and "bob" not in _text(everything)
    assert "notes.txt" in _text(everything)
    assert SECRET_TEXT not in _text(found)
    assert bob_file.read_text() == SECRET_TEXT + "\n"  # nothing changed


@pytest.mark.anyio
async def test_a_principals_deny_globs_hold(served: Served) -> None:
    async with bearer_client(served.url, served.token("alice")) as alice:
        result = await alice.call_tool("read", {"file_path": "private/diary.txt"})
        listing = await alice.call_tool("glob", {"pattern": "**/*.txt"})
    assert _code(result) == "denied"
    assert "diary" not in _text(listing)


@pytest.mark.anyio
async def test_the_contracts_deny_globs_hold_in_a_principals_room(served: Served) -> None:
    """bob's deny list is the contract's DENY; its cases, through HTTP."""
    cases = [(".env", True), ("sub/.env", True), (".git/config", True),
             ("a/.git/HEAD", True), ("keys/id.pem", True), ("src/app.py", False),
             (".envrc", False), ("gitx/config", False)]
    async with bearer_client(served.url, served.token("bob")) as bob:
        for path, denied in cases:
            out = await bob.call_tool("write", {"file_path": path, "content": "secret\n"})
            assert (_code(out) == "denied") is denied, (path, _text(out))
            if denied:
                assert _code(await bob.call_tool("read", {"file_path": path})) == "denied"
        mine = await bob.call_tool("read", {"file_path": "secret.txt"})
        alices = await bob.call_tool("read", {"file_path": "../alice/notes.txt"})
    assert _code(mine) is None and SECRET_TEXT in _text(mine)
    assert _code(alices) == "outside_root"


@pytest.mark.anyio
@pytest.mark.parametrize("who", ["carol (group readers)", "robot (files:read only)"])
async def test_read_only_principals_are_not_offered_and_not_allowed_changes(
        served: Served, who: str) -> None:
    if who.startswith("carol"):
        token = served.token("carol")
        target = "teams/alice/notes.txt"
    else:
        token = served.issuer.mint(sub="robot-ci", aud=served.url, client_id="robot-ci")
        target = "notes.txt"
    async with bearer_client(served.url, token) as reader:
        tools = {t.name for t in (await reader.list_tools()).tools}
        assert tools == {"read", "glob", "grep", "ls"}
        read = await reader.call_tool("read", {"file_path": target})
        assert _code(read) is None
        for tool, args in [("write", {"file_path": target, "content": "x\n"}),
                           ("edit", {"file_path": target, "old_string": "alice",
                                     "new_string": "mallory"}),
                           ("notebook_edit", {"file_path": "n.ipynb", "cell_id": "c",
                                              "new_source": "x"})]:
            with pytest.raises(MCPError, match="Unknown tool"):
                await reader.call_tool(tool, args)
    assert (served.root / "teams" / "alice" / "notes.txt").read_text().startswith("alice")


@pytest.mark.anyio
async def test_writers_are_offered_every_tool_the_server_offers(served: Served) -> None:
    async with bearer_client(served.url, served.token("bob")) as bob:
        tools = {t.name for t in (await bob.list_tools()).tools}
    assert tools >= WRITE_TOOLS


@pytest.mark.anyio
async def test_a_static_token_reaches_its_principals_room(served: Served) -> None:
    async with bearer_client(served.url, STATIC_TOKEN) as shared:
        listing = await shared.call_tool("ls", {})
    assert "readme.txt" in _text(listing) and "teams" not in _text(listing)


@pytest.mark.anyio
async def test_every_change_is_one_audit_line_without_content_or_tokens(
        served: Served) -> None:
    token = served.token("alice", client_id="agent-7")
    body = "a brand new file that must never appear in the audit trail\n"
    async with bearer_client(served.url, token) as alice:
        assert _code(await alice.call_tool("write", {"file_path": "new/plan.md",
                                                     "content": body})) is None
        assert _code(await alice.call_tool("read", {"file_path": "a/b/c.txt"})) is None
        assert _code(await alice.call_tool("grep", {"pattern": "launch code",
                                                    "path": "a"})) is None
        assert _code(await alice.call_tool("edit", {
            "file_path": "a/b/c.txt", "old_string": "c", "new_string": "C was here"})) is None
    async with bearer_client(served.url, token, context="another agent") as other_session:
        # A change from a context that never read the file: refused, and recorded so.
        refused = await other_session.call_tool("edit", {
            "file_path": "a/b/c.txt", "old_string": "C", "new_string": "D"})
        assert _code(refused) == "not_observed"
    async with bearer_client(served.url, STATIC_TOKEN) as shared:
        assert _code(await shared.call_tool("write", {"file_path": "s.txt",
                                                      "content": "s\n"})) is None
    raw = served.audit.read_text()
    lines = [json.loads(line) for line in raw.splitlines()]
    mine = [r for r in lines if r["client_id"] == "agent-7"]
    written = [r for r in mine if r["event"] == "written"]
    assert [(r["tool"], r["operation"], r["path"]) for r in written] == [
        ("write", "write", "teams/alice/new/plan.md"),
        ("edit", "edit", "teams/alice/a/b/c.txt")]
    create, edit = written
    assert create["version_before"] is None and create["version_after"]
    assert edit["version_before"] and edit["version_after"] != edit["version_before"]
    for r in mine:
        assert r["principal"] == "alice" and r["sub"] == "alice"
        assert r["iss"] == served.issuer.url and r["context"]
        assert r["time"].endswith("Z")
    reads = [r for r in mine if r["event"] == "read"]
    assert ("read", "teams/alice/a/b/c.txt") in [(r["tool"], r["path"]) for r in reads]
    searched = [(r["tool"], r["path"]) for r in mine if r["event"] == "searched"]
    assert searched == [("grep", "teams/alice/a")]  # the directory, never the pattern
    denied = [r for r in mine if r["event"] == "denied"]
    assert [(r["tool"], r["reason"]) for r in denied] == [("edit", "not_observed")]
    assert denied[0]["context"] != edit["context"]  # another session, another context
    static = [r for r in lines if r["principal"] == "shared" and r["event"] == "written"]
    assert [(r["path"], r["iss"], r["sub"], r["client_id"]) for r in static] == [
        ("shared/s.txt", None, None, None)]
    # Never content, tokens or credentials.
    for secret in (body.strip(), "C was here", ALICE_TEXT.strip(), token, STATIC_TOKEN,
                   "launch code",
                   token.split(".")[2], "Bearer"):
        assert secret not in raw
    assert set().union(*(r.keys() for r in lines)) <= {
        "time", "event", "principal", "iss", "sub", "client_id", "context", "tool",
        "operation", "path", "version_before", "version_after", "reason"}


@pytest.mark.anyio
async def test_parallel_sessions_each_get_their_audit_lines(served: Served) -> None:
    """Eight agents of one principal write at once: eight contexts, eight lines, each
    whole (the sink takes lines from the tools' worker threads)."""
    import anyio

    token = served.token("bob", client_id="swarm")

    async def agent(n: int) -> None:
        async with bearer_client(served.url, token, context=f"agent-{n}") as client:
            out = await client.call_tool("write", {"file_path": f"swarm/{n}.txt",
                                                   "content": f"{n}\n"})
            assert _code(out) is None, _text(out)

    async with anyio.create_task_group() as group:
        for n in range(8):
            group.start_soon(agent, n)
    lines = [json.loads(line) for line in served.audit.read_text().splitlines()]
    swarm = [r for r in lines if r["client_id"] == "swarm" and r["event"] == "written"]
    assert sorted(r["path"] for r in swarm) == [f"teams/bob/swarm/{n}.txt" for n in range(8)]
    assert len({r["context"] for r in swarm}) == 8


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["s3"], indirect=True)
async def test_rooms_on_an_object_store_keep_principals_apart(backend: Any) -> None:
    """The same rooms over S3 (moto), served in process with static tokens only (no
    issuer: no metadata, 401 without resource_metadata)."""
    import httpx2

    from tests.server.conftest import free_port, uvicorn_thread
    from toolfs.integrations.mcp_server import ToolfsMCP
    from toolfs.server.auth import sha256_hex
    from toolfs.server.http import resource_server
    from toolfs.server.principals import parse_principals
    from toolfs.server.rooms import Rooms
    from toolfs.workspace import AsyncWorkspace, Workspace

    backend.put("teams/alice/notes.txt", b"alice\n")
    backend.put("teams/bob/secret.txt", SECRET_TEXT.encode())
    backend.put("teams/alice-old/leak.txt", SECRET_TEXT.encode())
    tokens = {"alice": "alice-static-token-0123456789", "bob": "bob-static-token-0123456789"}
    principals = parse_principals("\n".join(
        f'[[principal]]\nname = "{n}"\nmatch = {{ token_sha256 = "{sha256_hex(t)}" }}\n'
        f'root = "teams/{n}"\nscopes = ["files:read", "files:write"]\n'
        for n, t in tokens.items()))
    tools = ("read", "write", "edit", "glob", "grep", "ls")
    base = AsyncWorkspace(Workspace(backend.fs, root=backend.root))
    rooms = Rooms(base, tools, principals=principals,
                  factory=Rooms.factory_of(backend.fs, root=backend.root))
    auth = resource_server(resource=None, static_hashes=principals.static_hashes(),
                           rooms=rooms)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    app = ToolfsMCP(base, tools=tools, rooms=rooms).http_app(auth=auth)
    with uvicorn_thread(app, port):
        refused = httpx2.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert refused.status_code == 401
        assert "resource_metadata" not in refused.headers["www-authenticate"]
        async with bearer_client(url, tokens["alice"]) as alice:
            for path, why in [*ATTACKS, ("../bob/secret.txt", "B's file"),
                              ("../alice-old/leak.txt", "sibling prefix")]:
                for tool, args in _calls_on(path)[:3]:
                    result = await alice.call_tool(tool, args)
                    assert _code(result) == "outside_root", (tool, path, why, _text(result))
            listing = await alice.call_tool("glob", {"pattern": "**/*"})
            assert "notes.txt" in _text(listing) and "secret" not in _text(listing)
    assert backend.get("teams/bob/secret.txt") == SECRET_TEXT.encode()


@pytest.mark.anyio
@pytest.mark.parametrize(("who", "outcome"), [("alice", None), ("bob", "stale")])
async def test_each_principal_has_its_own_on_stale(served: Served, who: str,
                                                   outcome: str | None) -> None:
    """alice's room merges a stale edit that does not overlap (on_stale = "merge"); bob's
    refuses it (the server's default)."""
    token = served.token(who)
    path = f"merge-{who}.txt"
    async with bearer_client(served.url, token, context="first") as first, \
            bearer_client(served.url, token, context="second") as second:
        assert _code(await first.call_tool("write", {
            "file_path": path, "content": "one\ntwo\nthree\n"})) is None
        assert _code(await second.call_tool("read", {"file_path": path})) is None
        assert _code(await second.call_tool("edit", {
            "file_path": path, "old_string": "three", "new_string": "THREE"})) is None
        late = await first.call_tool("edit", {"file_path": path, "old_string": "one",
                                              "new_string": "ONE"})
    assert _code(late) == outcome, _text(late)
    text = (served.root / "teams" / who / path).read_text()
    assert text == ("ONE\ntwo\nTHREE\n" if outcome is None else "one\ntwo\nTHREE\n")
