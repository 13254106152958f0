"""The object-store core (``toolfs.backends.objectstore``) over each dialect: what the
core assumes of a client holds from its very first request."""

from __future__ import annotations

from typing import Any

import pytest

import toolfs


@pytest.mark.parametrize("name", ["s3", "gcs", "azure"])
def test_a_fresh_clients_first_request_may_be_a_conditional_update(
        request: pytest.FixtureRequest, name: str) -> None:
    """After a restart (a restored ledger) the first request of a new client can be an
    update or a delete: the core asks the dialect whether the client may have resent
    it before the client has made any session, which must neither fail nor block."""
    backend: Any = request.getfixturevalue(f"{name}_backend")
    backend.setup()
    try:
        backend.put("a.txt", b"one\n")
        first = backend.workspace()
        first.read("a.txt")
        snapshot = first.snapshot()
        for verb in ("write", "delete"):
            fresh = toolfs.Workspace(type(backend.fs)(**_options(backend)), root=backend.root)
            fresh.restore(snapshot)
            if verb == "write":
                out = fresh.execute("write", {"file_path": "a.txt", "content": "two\n"})
                assert out.error is None, out.text
                assert backend.get("a.txt") == b"two\n"
                snapshot = fresh.snapshot()
            else:
                fresh.run(lambda fs: fs.rm_file("a.txt"))
                assert not backend.exists("a.txt")
    finally:
        backend.teardown()


def _options(backend: Any) -> dict[str, Any]:
    """Options for a new client of ``backend``'s emulator, past fsspec's instance cache."""
    emulator = backend.emulator
    if backend.name == "s3":
        options: dict[str, Any] = emulator.s3fs_storage_options()
    elif backend.name == "gcs":
        options = emulator.gcsfs_storage_options()
    else:
        options = emulator.adlfs_storage_options()
    return {**options, "skip_instance_cache": True}
