"""The shared ledger: observations kept in the object store, what they cost at the S3
emulator, and ``toolfs serve --ledger``'s command line.

Two :class:`ServerContexts` over separate filesystem instances stand for two replicas
here (the process-level proof is tests/server/test_replicas.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import pytest

import toolfs
from toolfs.errors import fs_error
from toolfs.integrations._mcp_contexts import ContextKey, ServerContexts
from toolfs.integrations.cli import _open_ledger, main
from toolfs.policy.shared_ledger import DEFAULT_PREFIX, LedgerStore, entry_name, open_ledger_store
from toolfs.testing.moto import S3Emulator
from toolfs.versions import FileVersion

KEY = ContextKey("alice", "client", "agent-1")


class Pair:
    """Two replicas of one S3 root sharing a ledger in another bucket."""

    def __init__(self, s3: S3Emulator, *, sticky: bool = False) -> None:
        self.s3 = s3
        self.files, self.ledgers = (f"{kind}-{uuid.uuid4().hex[:8]}"
                                    for kind in ("files", "ledger"))
        s3.create_bucket(self.files)
        s3.create_bucket(self.ledgers)
        options = s3.s3fs_storage_options()
        self.root = toolfs.Workspace(s3.s3fs_filesystem(), root=f"{self.files}/work")
        self.store = open_ledger_store(f"s3://{self.ledgers}/ledger", options,
                                       trust_local=sticky)
        self.replicas = [
            ServerContexts(toolfs.AsyncWorkspace(toolfs.Workspace(
                s3.s3fs_filesystem(), root=f"{self.files}/work")), ledger=self.store)
            for _ in range(2)]

    def call(self, replica: int, tool: str, key: ContextKey = KEY, **args: Any) -> Any:
        """A tool call as the server makes it (ServerContexts.execute)."""
        contexts = self.replicas[replica]
        context = contexts.get(key)
        return asyncio.run(contexts.execute(context, lambda: context.execute(tool, args)))

    def counted(self, replica: int, tool: str, **args: Any) -> tuple[Any, int, int]:
        """The call's output, and the requests it made to the files and to the ledger."""
        self.s3.clear_requests()
        out = self.call(replica, tool, **args)
        requests = self.s3.requests()
        ledger = sum(r.path.startswith(f"/{self.ledgers}/") for r in requests)
        return out, len(requests) - ledger, ledger


@pytest.fixture
def pair(s3_emulator: S3Emulator) -> Iterator[Pair]:
    yield Pair(s3_emulator)


def test_read_on_one_replica_then_edit_on_the_other(pair: Pair) -> None:
    pair.root.write("notes.md", "alpha\nbeta\n")
    assert not pair.call(0, "read", file_path="notes.md").is_error
    edited = pair.call(1, "edit", file_path="notes.md", old_string="beta", new_string="gamma")
    assert not edited.is_error, edited.text
    # Its own edit is seen on the first replica too.
    again = pair.call(0, "edit", file_path="notes.md", old_string="gamma", new_string="delta")
    assert not again.is_error, again.text
    # Another context of the same principal never read it.
    other = ContextKey("alice", "client", "agent-2")
    blind = pair.call(1, "edit", other, file_path="notes.md", old_string="delta",
                      new_string="x")
    assert blind.is_error and blind.to_dict()["error"]["code"] == "not_observed"
    assert pair.root.read("notes.md").lines == ["alpha", "delta"]


def test_a_change_on_another_replica_is_stale(pair: Pair) -> None:
    pair.root.write("notes.md", "alpha\nbeta\n")
    pair.call(0, "read", file_path="notes.md")
    # Someone else changes it meanwhile.
    pair.s3.s3fs_filesystem().pipe_file(f"{pair.files}/work/notes.md", b"alpha\nBETA\n")
    stale = pair.call(1, "edit", file_path="notes.md", old_string="alpha", new_string="A")
    # Replica 1 does not hold the bytes replica 0 read (the content cache is per
    # process), so the refusal cannot show a diff: the agent reads again.
    assert stale.to_dict()["error"]["code"] == "stale"
    assert not pair.call(1, "read", file_path="notes.md").is_error
    landed = pair.call(0, "edit", file_path="notes.md", old_string="BETA", new_string="B")
    assert not landed.is_error, landed.text
    # On the replica that holds them, the diff is shown and counts as read everywhere.
    pair.s3.s3fs_filesystem().pipe_file(f"{pair.files}/work/notes.md", b"alpha\nC\n")
    shown = pair.call(0, "edit", file_path="notes.md", old_string="alpha", new_string="A")
    error = shown.to_dict()["error"]
    assert error["code"] == "stale" and "+C" in error["details"]["diff"]
    assert error["details"]["counts_as_read"] is True
    after = pair.call(1, "edit", file_path="notes.md", old_string="alpha", new_string="A")
    assert not after.is_error, after.text


def test_what_the_ledger_costs_at_the_emulator(pair: Pair) -> None:
    """The numbers docs/server.md states: a read adds one request (the entry's PUT), an
    edit two (the entry's GET before, its PUT after), whichever replica serves it."""
    pair.root.write("cost.md", "one\ntwo\n")
    read, _, read_ledger = pair.counted(0, "read", file_path="cost.md")
    assert not read.is_error and read_ledger == 1
    edit, edit_files, edit_ledger = pair.counted(
        1, "edit", file_path="cost.md", old_string="two", new_string="three")
    assert not edit.is_error and edit_ledger == 2
    # The file itself: fetched again (the bytes are cached on the replica that read
    # them), then the conditional PUT.
    assert edit_files == 2
    same, same_files, same_ledger = pair.counted(
        1, "edit", file_path="cost.md", old_string="three", new_string="four")
    assert not same.is_error and (same_files, same_ledger) == (1, 2)
    assert pair.store.requests >= 5


def test_entries_hold_versions_never_content(pair: Pair) -> None:
    pair.root.write("secret.md", "the content itself\n")
    pair.call(0, "read", file_path="secret.md")
    fs = pair.s3.s3fs_filesystem()
    entries = fs.find(f"{pair.ledgers}/ledger")
    assert len(entries) == 1
    assert entries[0].endswith(f"/{KEY.id}/{entry_name(f'{pair.files}/work/secret.md')}")
    body = fs.cat_file(entries[0])
    assert b"the content itself" not in body and b"alice" not in body
    assert b'"kind":"etag"' in body


def test_an_unreadable_entry_counts_as_not_observed(pair: Pair) -> None:
    pair.root.write("x.md", "x\n")
    pair.call(0, "read", file_path="x.md")
    fs = pair.s3.s3fs_filesystem()
    (entry,) = fs.find(f"{pair.ledgers}/ledger")
    fs.pipe_file(entry, b"{not json")
    refused = pair.call(1, "edit", file_path="x.md", old_string="x", new_string="y")
    assert refused.to_dict()["error"]["code"] == "not_observed"


def test_record_if_is_a_conditional_write_on_the_entry() -> None:
    store = open_ledger_store(f"memory://toolfs-ledger-cond-{uuid.uuid4().hex[:6]}/l")
    one, two = store.ledger("ctx"), store.ledger("ctx")
    v1, v2, v3 = (FileVersion.of_bytes(b) for b in (b"1", b"2", b"3"))
    one.record("k", v1)
    assert two.get("k") is not None and two.get("k").version == v1  # type: ignore[union-attr]
    assert two.record_if("k", v1, v2)
    assert not one.record_if("k", v1, v3)  # the entry moved on: not recorded
    assert one.get("k").version == v2  # type: ignore[union-attr]
    one.forget("k")
    assert two.get("k") is None and not two.record_if("k", v2, v3)


def test_a_failing_ledger_fails_the_call_and_says_so(tmp_path: Any) -> None:
    root = toolfs.Workspace("memory://toolfs-ledger-failing/work")
    root.write("f.md", "f\n")

    class Broken(LedgerStore):
        def counted(self) -> None:
            raise fs_error("backend_error", "the ledger bucket is gone")

    where = open_ledger_store("memory://toolfs-ledger-failing/ledger")
    contexts = ServerContexts(toolfs.AsyncWorkspace(root),
                              ledger=Broken(where.store, where.prefix))
    out = asyncio.run(contexts.get(KEY).execute("read", {"file_path": "f.md"}))
    assert out.is_error and "ledger bucket is gone" in out.text


def test_the_ledger_inside_the_root_is_hidden_from_the_tools() -> None:
    url = f"memory://toolfs-ledger-hidden-{uuid.uuid4().hex[:6]}"
    fsspec.filesystem("memory").pipe_file(f"/{url[9:]}/a.md", b"a\n")
    _, hidden = _open_ledger(url, None, url, {})
    assert hidden == (f"/{DEFAULT_PREFIX}",)
    _, below = _open_ledger(url, None, f"{url}/state/ledger", {})
    assert below == ("/state/ledger",)
    _, outside = _open_ledger(url, "sub", f"{url}/ledger", {})
    assert outside == ()
    ws = toolfs.Workspace(url, deny=hidden)
    store = open_ledger_store(f"{url}/{DEFAULT_PREFIX}")
    store.ledger("c").record("k", FileVersion.of_bytes(b"a"))
    assert DEFAULT_PREFIX not in ws.execute("glob", {"pattern": "**"}).text
    peek = ws.execute("read", {"file_path": f"{DEFAULT_PREFIX}/c/{entry_name('k')}"})
    assert peek.to_dict()["error"]["code"] == "denied"
    assert ws.execute("write", {"file_path": f"{DEFAULT_PREFIX}/x", "content": "x"}) \
        .to_dict()["error"]["code"] == "denied"


def test_cli_ledger_needs_http(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "memory://toolfs-ledger-cli", "--ledger", "memory://x/l"]) == 2
    assert "--ledger applies to --transport http only" in capsys.readouterr().err


@pytest.fixture
def sticky(s3_emulator: S3Emulator) -> Iterator[Pair]:
    yield Pair(s3_emulator, sticky=True)


def test_sticky_routing_adds_one_request_per_read_and_per_edit(sticky: Pair) -> None:
    """`--sticky`: the replica that serves a context answers from its own copy."""
    sticky.root.write("s.md", "one\ntwo\n")
    read, _, read_ledger = sticky.counted(0, "read", file_path="s.md")
    edit, edit_files, edit_ledger = sticky.counted(
        0, "edit", file_path="s.md", old_string="two", new_string="three")
    assert not read.is_error and not edit.is_error, edit.text
    assert (read_ledger, edit_ledger) == (1, 1)
    assert edit_files == 1  # the bytes read are cached too: only the conditional PUT
    # A failover: another replica has no copy, and asks the ledger (GET, then PUT).
    moved, _, moved_ledger = sticky.counted(
        1, "edit", file_path="s.md", old_string="three", new_string="four")
    assert not moved.is_error and moved_ledger == 2
    # Back on the first replica, whose copy is outdated: refused stale on it, found out
    # (one GET), made again on the ledger's entry, and it lands.
    back = sticky.call(0, "edit", file_path="s.md", old_string="four", new_string="five")
    assert not back.is_error, back.text
    assert sticky.root.read("s.md").lines == ["one", "five"]


def test_sticky_routing_never_lets_a_stale_write_through(sticky: Pair) -> None:
    sticky.root.write("w.md", "mine\n")
    sticky.call(0, "read", file_path="w.md")
    # Someone else changes it; this replica's copy is current (nothing outdated).
    sticky.s3.s3fs_filesystem().pipe_file(f"{sticky.files}/work/w.md", b"theirs\n")
    write = sticky.call(0, "write", file_path="w.md", content="overwrite\n")
    assert write.to_dict()["error"]["code"] == "stale"
    assert sticky.root.read("w.md").lines == ["theirs"]
    # The refusal showed the whole diff: it counts as read (on every replica).
    again = sticky.call(1, "write", file_path="w.md", content="overwrite\n")
    assert not again.is_error, again.text


def test_cli_sticky_needs_a_ledger(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "memory://toolfs-ledger-cli", "--transport", "http",
                 "--token", "x" * 20, "--sticky"]) == 2
    assert "--sticky needs --ledger" in capsys.readouterr().err


def test_a_ledger_on_local_disk(tmp_path: Any) -> None:
    """A directory on a disk the replicas share (NFS) works as well: the entries'
    directories are made on the first record."""
    (tmp_path / "work").mkdir()
    (tmp_path / "ledger").mkdir()
    root = toolfs.Workspace(str(tmp_path / "work"))
    root.write("a.md", "alpha\nbeta\n")
    store = open_ledger_store(str(tmp_path / "ledger"))
    one, two = (ServerContexts(toolfs.AsyncWorkspace(toolfs.Workspace(str(tmp_path / "work"))),
                               ledger=store) for _ in range(2))
    asyncio.run(one.get(KEY).execute("read", {"file_path": "a.md"}))
    edited = asyncio.run(two.get(KEY).execute(
        "edit", {"file_path": "a.md", "old_string": "beta", "new_string": "gamma"}))
    assert not edited.is_error, edited.text
    assert (tmp_path / "work" / "a.md").read_text() == "alpha\ngamma\n"
    assert len(list((tmp_path / "ledger" / KEY.id).iterdir())) == 1
