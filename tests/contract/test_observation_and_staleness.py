"""Observation and staleness: an update needs an observation of the current version; what
changed since is stale; the ledger, on every backend and as a stateful model."""

from __future__ import annotations

import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import toolfs
from tests.backend_fixtures import Backend
from tests.contract.calls import err, exec_err, ok
from toolfs.policy.events import FsEvent, Veto


class PolicyMachine(RuleBasedStateMachine):
    """Contexts read, write and edit; each outcome must match a model of observations."""

    def __init__(self) -> None:
        super().__init__()
        self.root = f"memory://toolfs-sm-{uuid.uuid4().hex[:8]}"
        self.contexts: list[toolfs.Workspace] = []
        self.files: dict[str, str] = {}  # the truth
        self.seen: list[dict[str, str | None]] = []  # per context: content observed

    @initialize()
    def setup(self) -> None:
        first = toolfs.Workspace(self.root)
        self.contexts = [first, first.new_context(), first.new_context()]
        self.seen = [{}, {}, {}]

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]))
    def read(self, c: int, f: str) -> None:
        out = self.contexts[c].execute("read", {"file_path": f})
        if f in self.files:
            assert not out.is_error, out.text
            assert isinstance(out.value, toolfs.ReadResult)
            assert "\n".join(out.value.lines) == self.files[f].rstrip("\n")
            self.seen[c][f] = self.files[f]
        else:
            assert out.error is not None and out.error.code == "not_found"
            self.seen[c][f] = None

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]),
          body=st.sampled_from(["one\n", "two\n", "one\ntwo\n", "three\n"]))
    def write(self, c: int, f: str, body: str) -> None:
        out = self.contexts[c].execute("write", {"file_path": f, "content": body})
        expected = self._expected_write_error(c, f)
        if expected is None:
            assert not out.is_error, out.text
            self.files[f] = body
            self.seen[c][f] = body
        else:
            assert out.error is not None and out.error.code == expected, out.text
            self._refused(c, f, expected)

    @rule(c=st.integers(0, 2), f=st.sampled_from(["a.txt", "b.txt"]),
          old=st.sampled_from(["one", "two"]), new=st.sampled_from(["1", "2"]))
    def edit(self, c: int, f: str, old: str, new: str) -> None:
        out = self.contexts[c].execute(
            "edit", {"file_path": f, "old_string": old, "new_string": new})
        if f not in self.files:
            assert out.error is not None
            assert out.error.code == ("not_found" if self.seen[c].get(f) is None
                                      else "stale"), out.text
            return
        expected = self._expected_write_error(c, f)
        if expected is not None:
            assert out.error is not None and out.error.code == expected, out.text
            self._refused(c, f, expected)
            return
        count = self.files[f].count(old)
        if count != 1:
            assert out.error is not None
            assert out.error.code == ("no_match" if count == 0 else "ambiguous_match")
            return
        assert not out.is_error, out.text
        self.files[f] = self.files[f].replace(old, new)
        self.seen[c][f] = self.files[f]

    def _refused(self, c: int, f: str, code: str) -> None:
        """A stale refusal shows the whole (small) change: it counts as a read."""
        if code == "stale":
            self.seen[c][f] = self.files.get(f)

    def _expected_write_error(self, c: int, f: str) -> str | None:
        if f not in self.seen[c]:
            return "not_observed" if f in self.files else None
        seen = self.seen[c][f]
        current = self.files.get(f)
        if seen is None:
            return "stale" if current is not None else None
        return None if seen == current else "stale"

    @invariant()
    def storage_matches_model(self) -> None:
        if not self.contexts:
            return
        fs = self.contexts[0].fs.fs
        for f, body in self.files.items():
            assert fs.cat_file(f"{self.contexts[0].fs.jail.root}/{f}") == body.encode()


TestPolicyMachine = PolicyMachine.TestCase
TestPolicyMachine.settings = settings(max_examples=60, stateful_step_count=25, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])


class ObservationAndStaleness:
    """The observed-file / stale-version policy."""

    @pytest.mark.parametrize("raised", [Veto("no reading"), RuntimeError("hook bug")])
    def test_a_refused_read_records_no_observation(
            self, backend: Backend, raised: Exception) -> None:
        backend.put("r.txt", b"secret\n")
        ws = backend.workspace()

        def hook(event: FsEvent) -> None:
            if event.type == "fs/read":
                raise raised

        ws.subscribe(hook)
        out = exec_err(ws, "read", "denied", file_path="r.txt")
        assert "secret" not in out.text
        with pytest.raises(toolfs.FsError) as info:
            ws.read("r.txt")
        assert info.value.code == "denied"
        ws.fs.subscribers.remove(hook)
        exec_err(ws, "edit", "not_observed", file_path="r.txt", old_string="secret", new_string="x")
        assert backend.get("r.txt") == b"secret\n"

    def test_update_requires_prior_observation(self, backend: Backend) -> None:
        backend.put("f.txt", b"v1\n")
        ws = backend.workspace()
        out = err(ws, "write", "not_observed", file_path="f.txt", content="v2\n")
        assert "read" in out.text.lower()
        err(ws, "edit", "not_observed", file_path="f.txt", old_string="v1", new_string="v2")
        assert backend.get("f.txt") == b"v1\n"
        ok(ws, "read", file_path="f.txt")
        ok(ws, "write", file_path="f.txt", content="v2\n")
        assert backend.get("f.txt") == b"v2\n"

    def test_create_needs_no_observation(self, backend: Backend) -> None:
        ws = backend.workspace()
        ok(ws, "write", file_path="fresh.txt", content="hi\n")
        ok(ws, "edit", file_path="fresh.txt", old_string="hi", new_string="ho")
        assert backend.get("fresh.txt") == b"ho\n"

    def test_edit_of_missing_file_is_not_found(self, backend: Backend) -> None:
        err(backend.workspace(), "edit", "not_found", file_path="nope.txt", old_string="a",
            new_string="b")

    def test_stale_after_outside_change(self, backend: Backend) -> None:
        backend.put("s.txt", b"one\n")
        ws, other = backend.workspace(), backend.workspace()
        ok(ws, "read", file_path="s.txt")
        ok(other, "read", file_path="s.txt")
        backend.put("s.txt", b"two\n")
        out = err(ws, "edit", "stale", file_path="s.txt", old_string="one", new_string="1")
        assert "-one\n+two\n" in out.text and "no need to read the file again" in out.text
        err(other, "write", "stale", file_path="s.txt", content="three\n")
        assert backend.get("s.txt") == b"two\n"
        ok(ws, "edit", file_path="s.txt", old_string="two", new_string="2")  # no read between
        assert backend.get("s.txt") == b"2\n"

    def test_same_size_change_is_stale(self, backend: Backend) -> None:
        backend.put("t.txt", b"aaaa\n")
        ws = backend.workspace()
        ws.read("t.txt")
        backend.put("t.txt", b"bbbb\n")  # same size, same second
        err(ws, "write", "stale", file_path="t.txt", content="cccc\n")

    def test_identical_rewrite_or_touch_is_not_stale(self, backend: Backend) -> None:
        backend.put("i.txt", b"same\n")
        ws = backend.workspace()
        ws.read("i.txt")
        backend.touch("i.txt")
        out = ws.execute("edit", {"file_path": "i.txt", "old_string": "same", "new_string": "new"})
        if backend.capabilities.digest_versions:  # memory, local, generic, S3 (MD5 ETags)
            assert not out.is_error, out.text
        else:  # documented: a GCS generation moves on every upload, even of identical bytes
            assert out.error is not None and out.error.code == "stale"

    def test_deleted_since_read_is_stale(self, backend: Backend) -> None:
        backend.put("gone.txt", b"x\n")
        ws = backend.workspace()
        ws.read("gone.txt")
        backend.remove("gone.txt")
        err(ws, "write", "stale", file_path="gone.txt", content="y\n")
        assert not backend.exists("gone.txt")

    def test_created_since_seen_absent_is_stale(self, backend: Backend) -> None:
        ws = backend.workspace()
        err(ws, "read", "not_found", file_path="late.txt")
        backend.put("late.txt", b"theirs\n")
        err(ws, "write", "stale", file_path="late.txt", content="mine\n")
        assert backend.get("late.txt") == b"theirs\n"

    def test_own_writes_refresh_the_observation(self, backend: Backend) -> None:
        ws = backend.workspace()
        ws.write("chain.txt", "a\n")
        for old, new in [("a", "b"), ("b", "c"), ("c", "d")]:
            ok(ws, "edit", file_path="chain.txt", old_string=old, new_string=new)
        ok(ws, "write", file_path="chain.txt", content="e\n")
        assert backend.get("chain.txt") == b"e\n"

    def test_windowed_read_counts_as_observation(self, backend: Backend) -> None:
        backend.put("w.txt", b"".join(b"line %d\n" % i for i in range(100)))
        ws = backend.workspace()
        ok(ws, "read", file_path="w.txt", offset=50, limit=1)
        ok(ws, "edit", file_path="w.txt", old_string="line 3\n", new_string="LINE 3\n")
        assert b"LINE 3\n" in backend.get("w.txt")

    def test_two_contexts_guard_each_other(self, backend: Backend) -> None:
        backend.put("shared.txt", b"base\n")
        a, b = backend.workspace(), backend.workspace()
        a.read("shared.txt")
        b.read("shared.txt")
        ok(a, "edit", file_path="shared.txt", old_string="base", new_string="from a")
        err(b, "edit", "stale", file_path="shared.txt", old_string="base", new_string="from b")
        b.read("shared.txt")
        ok(b, "edit", file_path="shared.txt", old_string="from a", new_string="from a and b")
        assert backend.get("shared.txt") == b"from a and b\n"

    def test_create_race_second_creator_is_refused(self, backend: Backend) -> None:
        a, b = backend.workspace(), backend.workspace()
        ok(a, "write", file_path="race.txt", content="a\n")
        out = err(b, "write", "not_observed", file_path="race.txt", content="b\n")
        assert "exists" in out.text
        assert backend.get("race.txt") == b"a\n"

    def test_ledger_snapshot_restore(self, backend: Backend) -> None:
        backend.put("r.txt", b"one\n")
        ws = backend.workspace()
        ws.read("r.txt")
        snap = toolfs.LedgerSnapshot.model_validate_json(ws.snapshot().model_dump_json())
        fresh = backend.workspace()
        err(fresh, "edit", "not_observed", file_path="r.txt", old_string="one", new_string="1")
        fresh.restore(snap)
        ok(fresh, "edit", file_path="r.txt", old_string="one", new_string="1")
        # A restored stale observation is still stale.
        again = backend.workspace()
        again.restore(snap)
        err(again, "edit", "stale", file_path="r.txt", old_string="1", new_string="uno")

    def test_policy_off_writes_unconditionally(self, backend: Backend) -> None:
        backend.put("p.txt", b"one\n")
        ws = backend.workspace(policy=None)
        out = ok(ws, "write", file_path="p.txt", content="two\n")
        assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "updated"
        ok(ws, "edit", file_path="p.txt", old_string="two", new_string="three")
        assert backend.get("p.txt") == b"three\n"
        out = ok(ws, "write", file_path="q.txt", content="new\n")
        assert isinstance(out.value, toolfs.WriteResult) and out.value.action == "created"
