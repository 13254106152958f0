"""Credentials never leave in errors or exceptions; file content is never masked."""

from __future__ import annotations

import os
import traceback
from typing import Any

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import toolfs
from tests.contract.calls import exec_err, exec_ok

SECRET = "hunter2-s3cr3t-value"


class _LeakyFileSystem(MemoryFileSystem):  # type: ignore[misc]
    """A client library that puts its credential into its exception text."""

    protocol = "leakyfs"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        token = kwargs.get("token", "")
        try:
            raise OSError(f"GET https://auth.example/tokeninfo?access_token={token} failed")
        except OSError as inner:
            raise ConnectionError(f"cannot authenticate with {token}") from inner


def test_a_secret_in_file_content_is_never_masked() -> None:
    ws = toolfs.Workspace(f"memory://redact-{os.getpid()}",
                          storage_options={"password": SECRET, "token": "anon"})
    content = f"MINIO_ROOT_PASSWORD={SECRET}\nauth_mode = anonymous\n"
    exec_ok(ws, "write", file_path="env.txt", content=content)
    out = exec_ok(ws, "read", file_path="env.txt")
    assert SECRET in out.text and "anonymous" in out.text
    assert out.value.lines == content.splitlines()  # type: ignore[union-attr]
    exec_ok(ws, "edit", file_path="env.txt", old_string=f"={SECRET}", new_string="=rotated")
    assert ws.read("env.txt").lines[0] == "MINIO_ROOT_PASSWORD=rotated"
    # ... while an error message holding it is masked.
    out = exec_err(ws, "read", "not_found", file_path=f"{SECRET}.txt")
    assert SECRET not in out.text and "***" in out.text
    assert SECRET not in str(out.error.to_dict())  # type: ignore[union-attr]


def test_no_secret_leaves_in_any_exception_or_its_causes() -> None:
    fsspec.register_implementation("leakyfs", _LeakyFileSystem, clobber=True)
    with pytest.raises(toolfs.FsError) as info:
        toolfs.Workspace("leakyfs://bkt/x", storage_options={"token": SECRET})
    text = "".join(traceback.format_exception(info.value))
    assert info.value.code == "backend_error"
    assert SECRET not in text
    assert "ConnectionError" in text and "***" in text
