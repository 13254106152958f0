"""Requests per tool call on S3, GCS and Azure Blob: toolfs vs a naive fsspec composition.

The naive composition is what a tool written straight on fsspec does to get a version
check at all: ``info`` (version before) + ``cat_file`` for a read; ``info`` + ``cat_file`` +
``info`` (re-check) + ``pipe_file`` + ``info`` (new version) for an edit -- and even so it
is check-then-write, not compare-and-swap. Requests are counted at the emulator's server.

    python benchmarks/bench_requests.py [--tiny]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any

import toolfs
from toolfs.testing.azurite import AzuriteEmulator
from toolfs.testing.emulators import GCSEmulator, S3Emulator

BODY = b"".join(b"line %d of a small source file\n" % i for i in range(200))


def count(emu: Any, call: Callable[[], object]) -> int:
    emu.clear_requests()
    call()
    return sum(1 for r in emu.requests() if not r.path.startswith("/_toolfs"))


def version_of(info: dict[str, Any]) -> str:
    """The version in an fsspec ``info`` (s3fs ETag, gcsfs generation, adlfs etag)."""
    return str(info.get("ETag") or info.get("generation") or info.get("etag"))


def naive_read(fs: Any, key: str) -> tuple[bytes, str]:
    fs.invalidate_cache()
    info = fs.info(key)
    return bytes(fs.cat_file(key)), version_of(info)


def naive_edit(fs: Any, key: str, old: bytes, new: bytes, seen: str) -> None:
    fs.invalidate_cache()
    info = fs.info(key)
    if version_of(info) != seen:
        raise RuntimeError("stale")
    data = bytes(fs.cat_file(key)).replace(old, new, 1)
    fs.invalidate_cache()
    fs.info(key)  # re-check right before the write: still a race window
    fs.pipe_file(key, data)
    fs.invalidate_cache()
    fs.info(key)  # learn the new version


def measure(emu: Any, fs: Any, bucket: str, rounds: int) -> list[tuple[str, float, float]]:
    key = f"{bucket}/bench/f.py"
    ws = toolfs.Workspace(fs, root=f"{bucket}/bench")
    # The condition probe runs once per process and bucket (docs/backends.md states its
    # cost); here, before the per-call counts.
    ws.check_root()
    totals = {"read": [0, 0], "edit after read": [0, 0], "write (create)": [0, 0],
              "write (update)": [0, 0], "stale edit": [0, 0]}
    for i in range(rounds):
        fs.pipe_file(key, BODY)
        fs.invalidate_cache()
        totals["read"][0] += count(emu, lambda: ws.read("f.py"))
        totals["edit after read"][0] += count(
            emu, lambda i=i: ws.edit("f.py", "line 1 of", f"line one ({i}) of"))
        totals["write (update)"][0] += count(emu, lambda: ws.write("f.py", BODY.decode()))
        totals["write (create)"][0] += count(emu, lambda i=i: ws.write(f"new{i}.py", "x\n"))
        ws.read("f.py")
        fs.pipe_file(key, BODY + b"# changed by someone else\n")
        totals["stale edit"][0] += count(emu, lambda: ws.execute(
            "edit", {"file_path": "f.py", "old_string": "line 2 of", "new_string": "2"}))

        fs.pipe_file(key, BODY)
        seen: dict[str, str] = {}
        totals["read"][1] += count(emu, lambda s=seen: s.update(v=naive_read(fs, key)[1]))
        totals["edit after read"][1] += count(
            emu, lambda s=seen: naive_edit(fs, key, b"line 1 of", b"line one of", s["v"]))
        totals["write (update)"][1] += count(emu, lambda: (
            fs.invalidate_cache(), fs.info(key), fs.pipe_file(key, BODY), fs.invalidate_cache(),
            fs.info(key)))
        totals["write (create)"][1] += count(emu, lambda i=i: (
            fs.invalidate_cache(), fs.exists(f"{bucket}/bench/n{i}.py"),
            fs.pipe_file(f"{bucket}/bench/n{i}.py", b"x\n"), fs.invalidate_cache(),
            fs.info(f"{bucket}/bench/n{i}.py")))
        seen["v"] = naive_read(fs, key)[1]  # read, then someone else changes the file
        fs.pipe_file(key, BODY + b"# changed\n")
        totals["stale edit"][1] += count(emu, lambda s=seen: _refused(
            lambda: naive_edit(fs, key, b"line 2 of", b"2", s["v"])))
    return [(op, t / rounds, n / rounds) for op, (t, n) in totals.items()]


def _refused(call: Callable[[], object]) -> None:
    with contextlib.suppress(RuntimeError):  # the naive stale check says no
        call()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="one round (smoke test)")
    args = parser.parse_args()
    rounds = 1 if args.tiny else 5
    print("| backend | tool call | toolfs requests | naive fsspec requests | ratio |")
    print("|---|---|---|---|---|")
    for emu_cls in (S3Emulator, GCSEmulator, AzuriteEmulator):
        with emu_cls() as emu:
            emu.create_bucket("bench-bucket")
            fs = (emu.s3fs_filesystem() if isinstance(emu, S3Emulator)
                  else emu.adlfs_filesystem() if isinstance(emu, AzuriteEmulator)
                  else emu.gcsfs_filesystem())
            name = {S3Emulator: "S3 (moto)", GCSEmulator: "GCS (fake-gcs-server)",
                    AzuriteEmulator: "Azure (Azurite)"}[emu_cls]
            for op, ours, naive in measure(emu, fs, "bench-bucket", rounds):
                print(f"| {name} | {op} | {ours:g} | {naive:g} | {ours / naive:.2f}x |")


if __name__ == "__main__":
    main()
