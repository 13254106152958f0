"""Undo: requests per rewound or committed file, what a journal costs per change, and
what each store's versioning saves. Requests are counted at the emulator's server.

For N files on each store (S3 on moto, with and without bucket versioning; GCS on
fake-gcs-server, with and without object versioning; Azure Blob on Azurite, which has
no blob versioning):

* an edit of each file after a read, with the in-memory journal: requests per edit,
  and those the journal added (none while the observed bytes are held);
* the same with a persisted journal in the same bucket: the requests it adds per change
  (a record, plus a pre-image copy where the store keeps no versions);
* ``rewind`` of the N edits, and an all-or-nothing commit of N updates
  (``toolfs.undo.atomic.commit_all``): requests and conditional writes per file, against
  the bound of 2N + 1 requests and N writes; and ``fork.commit()`` of N updates made in
  a fork (its overlay in memory);
* the in-memory journal's bytes held per change.

    python benchmarks/bench_undo.py [--tiny] [--files N] [--stores s3,gcs,azure]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import _common
import toolfs
from toolfs.undo.atomic import Planned, commit_all

# The persisted journal opens gs:// by URL: gcsfs's default class would ask a gRPC API
# that fake-gcs-server lacks (see toolfs.testing.fakegcs); the core class is enough.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

WRITES = ("PUT", "POST", "DELETE")


def body(i: int, size: int) -> bytes:
    line = b"line %d of a source file in the undo benchmark\n" % i
    return (line * (size // len(line) + 1))[:size]


def counted(emu: Any, call: Callable[[], object]) -> tuple[int, int]:
    """(requests, writes) ``call`` sent to the emulator."""
    emu.clear_requests()
    call()
    reqs = [r for r in emu.requests() if not r.path.startswith("/_toolfs")]
    return len(reqs), sum(1 for r in reqs if r.method in WRITES)


@contextlib.contextmanager
def stores(names: list[str]) -> Iterator[Iterator[tuple[str, Any, Any, str, Any]]]:
    """(label, emulator, filesystem, bucket, journal storage options) per store."""
    with contextlib.ExitStack() as stack:
        def made() -> Iterator[tuple[str, Any, Any, str, Any]]:
            if "s3" in names:
                from toolfs.testing.emulators import S3Emulator

                s3 = stack.enter_context(S3Emulator())
                for versioned in (False, True):
                    bucket = f"undo-{'v' if versioned else 'u'}"
                    s3.create_bucket(bucket)
                    fs = s3.s3fs_filesystem()
                    if versioned:
                        import fsspec.asyn

                        fsspec.asyn.sync(fs.loop, fs._call_s3, "put_bucket_versioning",
                                         Bucket=bucket,
                                         VersioningConfiguration={"Status": "Enabled"})
                    yield (f"S3{' versioned' if versioned else ''}", s3, fs, bucket,
                           s3.s3fs_storage_options())
            if "gcs" in names:
                from toolfs.testing import fakegcs
                from toolfs.testing.emulators import GCSEmulator

                gcs = stack.enter_context(GCSEmulator())
                for versioned in (False, True):
                    bucket = f"undo-{'v' if versioned else 'u'}"
                    fakegcs._http(
                        "POST", f"{gcs._backend()}/storage/v1/b?project={gcs.project}",
                        body=json.dumps({"name": bucket,
                                         "versioning": {"enabled": versioned}}).encode(),
                        headers={"Content-Type": "application/json"})
                    yield (f"GCS{' versioned' if versioned else ''}", gcs,
                           gcs.gcsfs_filesystem(), bucket, gcs.gcsfs_storage_options())
            if "azure" in names:
                from toolfs.testing.azurite import AzuriteEmulator

                az = stack.enter_context(AzuriteEmulator())
                bucket = az.new_container("undo")
                yield ("Azure (Azurite: no versioning)", az, az.adlfs_filesystem(), bucket,
                       az.adlfs_storage_options())
        yield made()


def measure(label: str, emu: Any, fs: Any, bucket: str, options: Any, n: int,
            size: int) -> dict[str, Any]:
    protocol = {"S3": "s3", "GC": "gs", "Az": "az"}[label[:2]]
    rows: dict[str, Any] = {"store": label}
    for persisted in (False, True):
        root = f"{bucket}/{'p' if persisted else 'm'}"
        journal = f"{protocol}://{bucket}/.toolfs/journal" if persisted else None
        ws = toolfs.Workspace(fs, root=root, context_id=f"bench-{persisted}",
                              journal=journal, journal_options=options)
        ws.check_root()
        names = [f"f{i}.py" for i in range(n)]
        for i, name in enumerate(names):
            fs.pipe_file(f"{root}/{name}", body(i, size))
            ws.read(name)
        cp = ws.checkpoint()
        edits = [counted(emu, lambda nm=name, w=ws: w.edit(nm, "line", "LINE", True))[0]
                 for name in names]
        if not persisted:
            # The same edits without a journal, on files of their own.
            bare = toolfs.Workspace(fs, root=f"{bucket}/b")
            bare.fs.journal = None
            for i, name in enumerate(names):
                fs.pipe_file(f"{bucket}/b/{name}", body(i, size))
                bare.read(name)
            plain = [counted(emu, lambda nm=name, b=bare: b.edit(nm, "line", "LINE", True))[0]
                     for name in names]
            rows["edit"] = sum(plain) / n
            rows["journal (memory)"] = sum(edits) / n - sum(plain) / n
            rows["held/change"] = ws.journal.held_bytes / n
        else:
            rows["journal (persisted)"] = sum(edits) / n - rows["edit"]
        if not persisted:
            outcome: list[Any] = []
            reqs, writes = counted(emu, lambda c=cp, w=ws, o=outcome: o.append(w.rewind(c)))
            assert len(outcome[0].restored) == n, outcome[0].refused
            rows["rewind req/file"] = reqs / n
            rows["rewind writes/file"] = writes / n
            plans = []
            for name in names:
                f = ws.fs.open(name, "rb")
                data = f.read()
                plans.append(Planned(name, f.version, data + b"# committed\n", data))
            done: list[Any] = []
            reqs, writes = counted(emu, lambda p=plans, w=ws, d=done: d.append(
                commit_all(w.fs, p)))
            assert done[0].ok, done[0].refused
            rows["commit req/file"] = reqs / n
            rows["bound 2N+1"] = f"{reqs} <= {2 * n + 1}: {reqs <= 2 * n + 1}"
            fork = ws.fork()  # a fork's commit of N updates (its overlay in memory)
            for name in names:
                fork.edit(name, "# committed\n", "# forked\n")
            reqs, writes = counted(emu, fork.commit)
            rows["fork commit req/file"] = reqs / n
            rows["fork commit writes/file"] = writes / n
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a quick run (3 files, S3)")
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--size", type=int, default=4096, help="bytes per file")
    parser.add_argument("--stores", default="s3,gcs,azure")
    args = parser.parse_args()
    n = 3 if args.tiny else args.files
    names = ["s3"] if args.tiny else args.stores.split(",")
    results = []
    with stores(names) as each:
        for label, emu, fs, bucket, options in each:
            results.append(measure(label, emu, fs, bucket, options, n, args.size))
    headers = ["store", "edit", "journal (memory)", "journal (persisted)", "held/change",
               "rewind req/file", "rewind writes/file", "commit req/file", "bound 2N+1",
               "fork commit req/file", "fork commit writes/file"]
    print(f"### Undo, {n} files of {args.size} bytes (requests counted at the emulator)\n")
    print(_common.markdown_table(headers, [[
        r["store"], f"{r['edit']:.2f}", f"+{r['journal (memory)']:.2f}",
        f"+{r['journal (persisted)']:.2f}", f"{r['held/change']:.0f} B",
        f"{r['rewind req/file']:.2f}", f"{r['rewind writes/file']:.2f}",
        f"{r['commit req/file']:.2f}", r["bound 2N+1"], f"{r['fork commit req/file']:.2f}",
        f"{r['fork commit writes/file']:.2f}"] for r in results]))
    print("\nedit: requests per edit after a read without a journal; journal: requests a "
          "journal adds per change; held/change: bytes the in-memory journal holds per "
          "change (the pre-image and the bytes left, shared with the ledger's cache).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
