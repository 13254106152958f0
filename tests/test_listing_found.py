"""``PolicyFileSystem.list_files`` builds each entry with the per-listing work hoisted out
of the loop; every entry equals what ``_found`` (the per-entry rule, which ``list_dir``
still uses) makes of the same store entry, on every backend, with deny rules and a
prefix, and nothing ``_found`` refuses is listed."""

from __future__ import annotations

from typing import Any

from tests.test_discovery import TREE


def test_list_files_equals_the_per_entry_rule(backend: Any) -> None:
    for rel, data in TREE.items():
        backend.put(rel, data)
    ws = backend.workspace(deny=["secrets/**", "*.pem", "**/.env"])
    fs = ws.fs if hasattr(ws, "fs") else ws._sync.fs
    for path, prefix in ((None, ""), ("src", ""), (None, "src/deep"), ("docs", "")):
        target = fs.search_root(path)
        listed = target.backend_path
        if prefix:
            listed = f"{listed.rstrip('/')}/{prefix}" if listed else prefix
        want = [f for e in fs.store.list_files(listed, sizes=True) if e.kind == "file"
                if (f := fs._found(target, listed, e, prefix)) is not None]
        got = list(fs.list_files(path, prefix=prefix))
        assert sorted(got, key=lambda f: f.path) == sorted(want, key=lambda f: f.path)
        assert got and all(type(f).__name__ == "Found" for f in got)
    assert "id.pem" not in [f.path for f in fs.list_files(None)]
