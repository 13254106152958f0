"""Data frames under the guard: ``toolfs::`` URLs in pandas, Polars, DuckDB and PyArrow.

A person in a notebook reads and writes data frames through a ``toolfs::`` URL (or a
filesystem made from one); an agent works on the same files through a ``Workspace``.
Each library is driven for real, on memory, local disk and S3 (the moto server): a
read is an observation, a write over a file changed since that read is ``Stale`` (a
``PermissionError``) and stores nothing, a write over a file never read is
``NotObserved``, creating needs nothing.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import duckdb
import fsspec
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from gcsfs.core import GCSFileSystem
from pyarrow.fs import FSSpecHandler, PyFileSystem

import toolfs
from tests.backend_fixtures import (
    AzureBackend,
    Backend,
    GCSBackend,
    GenericBackend,
    LocalBackend,
    MemoryBackend,
    OpaqueDirFileSystem,
    S3Backend,
)
from toolfs.errors import FsError, InvalidArguments, NotObserved, Stale
from toolfs.policy import PolicyFileSystem
from toolfs.testing.emulators import S3Emulator

SALES = b"region,amount\nnorth,10\nsouth,20\n"
SITES = ["memory", "local", "s3"]


class Site:
    """One backend as a notebook reaches it: ``toolfs::`` URLs and storage options for
    the person, a ``Workspace`` for the agent, raw access for checking bytes."""

    def __init__(self, backend: Backend, protocol: str, target_options: dict[str, Any]):
        self.backend = backend
        self.protocol = protocol
        self.target_options = target_options
        self.context_id = f"person-{uuid.uuid4().hex[:8]}"  # a fresh context per test

    def path(self, rel: str) -> str:
        """The wrapped filesystem's own path of ``rel`` (what a chained URL opens)."""
        return f"{self.backend.root}/{rel}"

    def url(self, rel: str) -> str:
        return f"toolfs::{self.protocol}://{self.path(rel)}"

    def options(self, **toolfs_options: Any) -> dict[str, Any]:
        return {self.protocol: self.target_options,
                "toolfs": {"context_id": self.context_id, **toolfs_options}}

    def toolfs_url(self, rel: str) -> str:
        """``toolfs://`` and the wrapped filesystem's path: the unchained form."""
        return f"toolfs://{self.path(rel)}"

    def flat_options(self, **toolfs_options: Any) -> dict[str, Any]:
        """The options of the unchained form: the target named inside toolfs's own."""
        return {"target_protocol": self.protocol, "target_options": self.target_options,
                "context_id": self.context_id, **toolfs_options}

    def fs(self, **toolfs_options: Any) -> PolicyFileSystem:
        """The person's filesystem: the one every URL call with these options uses."""
        fs, _ = fsspec.core.url_to_fs(self.url("x"), **self.options(**toolfs_options))
        assert isinstance(fs, PolicyFileSystem)
        return fs

    def agent(self) -> toolfs.Workspace:
        return self.backend.workspace(context_id="agent")

    def put(self, rel: str, data: bytes) -> None:
        self.backend.put(rel, data)

    def get(self, rel: str) -> bytes:
        return self.backend.get(rel)


@pytest.fixture(params=SITES)
def site(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Site]:
    name = request.param
    backend: Backend
    if name == "memory":
        backend, protocol, options = MemoryBackend(), "memory", {}
    elif name == "local":
        backend, protocol, options = LocalBackend(str(tmp_path)), "file", {}
    else:
        emulator: S3Emulator = request.getfixturevalue("s3_emulator")
        backend, protocol = S3Backend(emulator), "s3"
        options = emulator.s3fs_storage_options()
    backend.setup()
    try:
        yield Site(backend, protocol, options)
    finally:
        PolicyFileSystem.clear_instance_cache()
        backend.teardown()


# -- registration and construction ---------------------------------------------------


def test_registered_with_fsspec_in_a_fresh_interpreter() -> None:
    """fsspec finds ``toolfs`` through the entry point, toolfs not imported first."""
    script = textwrap.dedent("""
        import json, sys
        import fsspec
        before = "toolfs" in sys.modules
        cls = fsspec.get_filesystem_class("toolfs")
        print(json.dumps({"before": before, "listed": "toolfs" in fsspec.available_protocols(),
                          "cls": f"{cls.__module__}.{cls.__qualname__}"}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120, check=True)
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found == {"before": False, "listed": True,
                     "cls": "toolfs.policy.filesystem.PolicyFileSystem"}


def test_every_url_form_reaches_one_context(site: Site) -> None:
    site.put("sales.csv", SALES)
    fs = site.fs()
    by_open = fsspec.open(site.url("sales.csv"), **site.options())
    with by_open as f:
        assert f.read() == SALES
    assert by_open.fs is fs
    by_protocol = fsspec.filesystem("toolfs", target_protocol=site.protocol,
                                    target_options=site.target_options,
                                    context_id=site.context_id)
    assert by_protocol is fs
    assert fs.context_id == site.context_id
    # A URL reads as an observation of that context: its write lands without a re-read.
    fs.pipe_file(site.path("sales.csv"), SALES + b"east,5\n")
    # Another context_id is another context; so is a Workspace on the same target.
    other = site.fs(context_id="someone-else")
    assert other is not fs
    with pytest.raises(NotObserved):
        other.pipe_file(site.path("sales.csv"), b"x")
    agent = site.agent()
    assert agent.fs is not fs
    with pytest.raises(FsError) as refused:
        agent.write("sales.csv", "x")
    assert refused.value.code == "not_observed"
    assert site.get("sales.csv") == SALES + b"east,5\n"


def test_workspace_options_travel_in_storage_options(site: Site) -> None:
    site.put("sales.csv", SALES)
    site.put("secret.env", b"TOKEN=1\n")
    fs = site.fs(read_only=True, deny=["*.env"])
    assert fs.read_only and fs.deny == ("*.env",)
    assert fs.cat_file(site.path("sales.csv")) == SALES
    with pytest.raises(PermissionError) as refused:
        pd.DataFrame({"a": [1]}).to_csv(site.url("sales.csv"),
                                        storage_options=site.options(read_only=True,
                                                                     deny=["*.env"]))
    assert getattr(refused.value, "code", None) == "denied"
    with pytest.raises(PermissionError):
        fs.cat_file(site.path("secret.env"))
    # root confines the context; paths stay the wrapped filesystem's own.
    site.put("inner/a.csv", SALES)
    confined = site.fs(root=site.path("inner"))
    assert confined.jail.root == site.path("inner").rstrip("/")
    with pytest.raises(PermissionError) as outside:
        confined.cat_file(site.path("sales.csv"))
    assert getattr(outside.value, "code", None) == "outside_root"
    assert confined.cat_file(site.path("inner/a.csv")) == SALES


def test_policy_option_takes_a_mapping_and_refuses_nonsense(site: Site) -> None:
    fs = site.fs(policy={"require_observation": False})
    assert fs.policy == toolfs.Policy(require_observation=False)
    assert site.fs(policy={"on_stale": "merge"}).policy == toolfs.Policy(on_stale="merge")
    for bad in ({"require_observation": "no"}, {"overwrite": True}, {"on_stale": "x"},
                "off"):
        with pytest.raises(InvalidArguments):
            site.fs(policy=bad)
    with pytest.raises(InvalidArguments):
        fsspec.filesystem("toolfs")  # nothing to wrap
    with pytest.raises(InvalidArguments, match="'read_onyl'"):
        site.fs(read_onyl=True)


def test_one_context_across_threads(site: Site) -> None:
    """fsspec keys its own cache by thread; a context is one across the threads that
    open the same options at once."""
    with ThreadPoolExecutor(8) as pool:
        made = list(pool.map(lambda _: site.fs(), range(16)))
    assert all(fs is made[0] for fs in made)
    # And by the chained URL given to the filesystem itself.
    site.put("t.csv", SALES)
    assert made[0].cat_file(site.url("t.csv")) == SALES


# -- own-protocol paths ------------------------------------------------------------


def test_own_protocol_paths_round_trip_through_ls_and_info(site: Site) -> None:
    site.put("dir/a.csv", SALES)
    site.put("dir/b.csv", SALES)
    fs = site.fs()
    names = sorted(fs.ls(site.path("dir"), detail=False))
    assert names == [site.path("dir/a.csv"), site.path("dir/b.csv")]
    for name in names:
        url = fs.unstrip_protocol(name)
        assert url.startswith("toolfs://")
        assert fs._strip_protocol(url) == name
        assert fs.info(url)["name"] == name
        assert fs.cat_file(url) == SALES
    assert sorted(fs.glob(fs.unstrip_protocol(site.path("dir/*.csv")))) == names
    assert fs.exists(fs.unstrip_protocol(site.path("dir/a.csv")))
    # A Workspace's filesystem names paths relative to its root, toolfs:// ones too.
    ws = site.agent()
    assert sorted(ws.fs.ls("toolfs://dir", detail=False)) == ["dir/a.csv", "dir/b.csv"]
    assert ws.fs.info("toolfs://dir/a.csv")["name"] == "dir/a.csv"
    with ws.fs.open("toolfs://dir/a.csv") as f:
        assert f.read() == SALES


# -- the notebook story (the proof) ---------------------------------------


class _CoreGCSForURLs(GCSFileSystem):  # type: ignore[misc]
    """gcsfs's core class under a protocol of its own, for URLs in these tests:
    ``gcs://`` resolves to gcsfs's extended class, which asks fake-gcs-server for a
    bucket layout it cannot give (see ``GCSEmulator.gcsfs_filesystem``)."""

    protocol = ("toolfstestgcs",)


class _OpaqueForURLs(OpaqueDirFileSystem):
    """The generic backend's filesystem (no adapter: the generic store) by URL."""

    protocol = ("toolfstestopaque",)


fsspec.register_implementation("toolfstestgcs", _CoreGCSForURLs, clobber=True)
fsspec.register_implementation("toolfstestopaque", _OpaqueForURLs, clobber=True)


def person_site(backend: Backend) -> Site:
    """How a notebook reaches ``backend``'s files by URL."""
    if isinstance(backend, MemoryBackend):
        return Site(backend, "memory", {})
    if isinstance(backend, LocalBackend):
        return Site(backend, "file", {})
    if isinstance(backend, S3Backend):  # moto and SeaweedFS
        return Site(backend, "s3", backend.emulator.s3fs_storage_options())
    if isinstance(backend, GCSBackend):
        return Site(backend, "toolfstestgcs", backend.emulator.gcsfs_storage_options())
    if isinstance(backend, AzureBackend):
        return Site(backend, "abfs", backend.emulator.adlfs_storage_options())
    assert isinstance(backend, GenericBackend)
    return Site(backend, "toolfstestopaque", {"path": backend._base, "fs": backend._mem})


def test_notebook_story_on_every_backend(backend: Backend) -> None:
    """The issue's proof on every backend (the agent's calls sync and async)."""
    site = person_site(backend)
    try:
        story(site)
    finally:
        PolicyFileSystem.clear_instance_cache()


def story(site: Site) -> None:
    """The person reads with pandas, an agent edits a row, the person's stale write is
    refused and the agent's change survives; after a re-read the write lands."""
    site.put("sales.csv", SALES)
    url, options = site.url("sales.csv"), site.options()
    df = pd.read_csv(url, storage_options=options)
    agent = site.agent()
    agent.read("sales.csv")
    agent.edit("sales.csv", "south,20", "south,25")
    df["amount"] = df["amount"] * 2
    with pytest.raises(PermissionError) as refused:
        df.to_csv(url, storage_options=options, index=False)
    assert isinstance(refused.value, Stale)
    assert site.get("sales.csv") == b"region,amount\nnorth,10\nsouth,25\n"
    df = pd.read_csv(url, storage_options=options)
    df["amount"] = df["amount"] * 2
    df.to_csv(url, storage_options=options, index=False)
    assert site.get("sales.csv") == b"region,amount\nnorth,20\nsouth,50\n"


def test_refusals_speak_to_people(site: Site) -> None:
    site.put("sales.csv", SALES)
    url, options = site.url("sales.csv"), site.options()
    df = pd.DataFrame({"region": ["west"], "amount": [1]})
    with pytest.raises(NotObserved) as blind:
        df.to_csv(url, storage_options=options, index=False)
    text = str(blind.value)
    assert site.path("sales.csv") in text and site.context_id in text
    assert "has not read it" in text and "Nothing was written" in text
    assert "require_observation" in text  # the way to accept the risk, named
    assert blind.value.code == "not_observed"
    pd.read_csv(url, storage_options=options)
    site.put("sales.csv", SALES + b"east,7\n")
    with pytest.raises(Stale) as stale:
        df.to_csv(url, storage_options=options, index=False)
    text = str(stale.value)
    assert f"{site.path('sales.csv')} changed since" in text
    assert f"{len(SALES) + 7} bytes" in text  # what it is now
    assert "read the file again" in text and "nothing was written" in text
    assert stale.value.code == "stale" and stale.value.details["read_version"]
    assert site.get("sales.csv") == SALES + b"east,7\n"
    # The whole change is shown, so this context has seen it: writing again replaces it.
    assert "+east,7" in text and "writing again replaces it" in text
    assert stale.value.details["counts_as_read"] is True
    df.to_csv(url, storage_options=options, index=False)
    assert site.get("sales.csv") == b"region,amount\nwest,1\n"


def test_a_refused_binary_write_shows_no_diff_and_needs_a_read(site: Site) -> None:
    """Parquet has no text diff: the refusal does not count as a read, so writing again
    is refused again until the person reads the file."""
    url, options = site.url("t.parquet"), site.options()
    df = pd.DataFrame({"a": [1, 2]})
    df.to_parquet(url, storage_options=options)
    buffer = io.BytesIO()
    df.assign(a=[3, 4]).to_parquet(buffer)
    site.put("t.parquet", buffer.getvalue())
    for _ in range(2):
        with pytest.raises(Stale) as stale, fsspec.open(url, "wb", **options) as f:
            df.to_parquet(f)
        assert "What changed" not in str(stale.value)
        assert "read the file again first, then write" in str(stale.value)
        assert site.get("t.parquet") == buffer.getvalue()
    pd.read_parquet(url, storage_options=options)
    with fsspec.open(url, "wb", **options) as f:
        df.to_parquet(f)
    pd.testing.assert_frame_equal(pd.read_parquet(url, storage_options=options), df)


def test_a_context_that_accepts_the_risk_overwrites_unread_files(site: Site) -> None:
    site.put("sales.csv", SALES)
    options = site.options(policy={"require_observation": False})
    pd.DataFrame({"a": [1]}).to_csv(site.url("sales.csv"), storage_options=options,
                                    index=False)
    assert site.get("sales.csv") == b"a\n1\n"
    # Still no blind overwrite of a change made after its own read.
    pd.read_csv(site.url("sales.csv"), storage_options=options)
    site.put("sales.csv", b"a\n2\n")
    with pytest.raises(Stale):
        pd.DataFrame({"a": [3]}).to_csv(site.url("sales.csv"), storage_options=options,
                                        index=False)
    assert site.get("sales.csv") == b"a\n2\n"


def test_a_merging_context_keeps_both_changes_to_other_rows(site: Site) -> None:
    """``policy={"on_stale": "merge"}``: the person's CSV write made before the agent's
    edit of another row lands with both changes; on the same row it is refused."""
    site.put("sales.csv", b"region,amount\nnorth,10\nsouth,20\neast,1\nwest,2\n")
    url, options = site.url("sales.csv"), site.options(policy={"on_stale": "merge"})
    df = pd.read_csv(url, storage_options=options)
    agent = site.agent()
    agent.read("sales.csv")
    agent.edit("sales.csv", "west,2", "west,3")
    df.loc[0, "amount"] = 11
    df.to_csv(url, storage_options=options, index=False)
    assert site.get("sales.csv") == b"region,amount\nnorth,11\nsouth,20\neast,1\nwest,3\n"
    agent.read("sales.csv")
    agent.edit("sales.csv", "north,11", "north,12")
    df.loc[0, "amount"] = 13
    with pytest.raises(Stale):
        df.to_csv(url, storage_options=options, index=False)
    assert b"north,12" in site.get("sales.csv")


# -- pandas ------------------------------------------------------------------------

FORMATS = {
    "csv": (lambda df, url, so: df.to_csv(url, storage_options=so, index=False),
            lambda url, so: pd.read_csv(url, storage_options=so)),
    "parquet": (lambda df, url, so: df.to_parquet(url, storage_options=so, index=False),
                lambda url, so: pd.read_parquet(url, storage_options=so)),
    "json": (lambda df, url, so: df.to_json(url, storage_options=so, orient="records"),
             lambda url, so: pd.read_json(url, storage_options=so, orient="records")),
    "feather": (lambda df, url, so: df.to_feather(url, storage_options=so),
                lambda url, so: pd.read_feather(url, storage_options=so)),
    "pickle": (lambda df, url, so: df.to_pickle(url, storage_options=so),
               lambda url, so: pd.read_pickle(url, storage_options=so)),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_pandas_round_trip_under_the_guard(site: Site, fmt: str) -> None:
    write, read = FORMATS[fmt]
    url, options = site.url(f"t.{fmt}"), site.options()
    df = pd.DataFrame({"region": ["north", "south"], "amount": [10, 20]})
    write(df, url, options)  # creating needs nothing
    pd.testing.assert_frame_equal(read(url, options), df)
    # Behind the person's back, another writer replaces the file.
    other = site.fs(context_id=f"other-{site.context_id}")
    read(url, site.options(context_id=other.context_id))
    write(df.assign(amount=[11, 21]), url, site.options(context_id=other.context_id))
    theirs = site.get(f"t.{fmt}")
    with pytest.raises(Stale):
        write(df.assign(amount=[0, 0]), url, options)
    assert site.get(f"t.{fmt}") == theirs  # byte-identical: no partial file, not removed
    pd.testing.assert_frame_equal(read(url, options), df.assign(amount=[11, 21]))
    write(df.assign(amount=[12, 22]), url, options)
    pd.testing.assert_frame_equal(read(url, options), df.assign(amount=[12, 22]))


def test_pyarrow_keeps_a_local_path_whose_write_was_refused(tmp_path: Any) -> None:
    """``pq.write_table`` (and so ``DataFrame.to_parquet``) given a path calls
    ``os.remove`` on that path when the write raises, whatever filesystem it was given;
    on local disk that is the file the guard kept. The refusal keeps it: the removal is
    refused while the refusal is handled (toolfs.policy.refused_writes), and pyarrow,
    which ignores that error, raises the guard's. Refused at open (``read_only``), at
    close (``not_observed``, ``stale``), by pandas and by pyarrow itself."""
    kept = tmp_path / "t.parquet"
    kept.write_bytes(b"kept")
    url = f"toolfs::file://{kept}"
    person = {"toolfs": {"context_id": f"person-{uuid.uuid4().hex[:8]}"}}
    reader = {"toolfs": {"context_id": f"reader-{uuid.uuid4().hex[:8]}", "read_only": True}}
    df = pd.DataFrame({"a": [1]})
    try:
        with pytest.raises(NotObserved):
            df.to_parquet(url, storage_options=person)
        assert kept.read_bytes() == b"kept"
        with pytest.raises(PermissionError) as denied:
            df.to_parquet(url, storage_options=reader)
        assert getattr(denied.value, "code", None) == "denied"
        assert kept.read_bytes() == b"kept"
        fs, path = fsspec.core.url_to_fs(url, **person)
        assert path == str(kept)
        with pytest.raises(NotObserved):
            pq.write_table(pa.table({"a": [1]}), path, filesystem=fs)
        with pytest.raises(NotObserved):
            pq.write_table(pa.table({"a": [1]}), path,
                           filesystem=PyFileSystem(FSSpecHandler(fs)))
        assert kept.read_bytes() == b"kept"
        fs.cat_file(path)
        kept.write_bytes(b"theirs")
        with pytest.raises(Stale):
            df.to_parquet(url, storage_options=person)
        assert kept.read_bytes() == b"theirs"
        # Once the refusal is handled, the file is the person's to remove.
        kept.unlink()
        assert not kept.exists()
    finally:
        PolicyFileSystem.clear_instance_cache()


def test_a_kept_path_is_kept_only_while_its_refusal_is_handled(tmp_path: Any) -> None:
    """Removing, truncating, replacing or renaming the file, or removing its directory,
    is refused inside the ``except``/``finally`` that handles the refusal (or an error
    raised from it), in that thread; reading it is not, nor another file, nor anything
    once the refusal is handled."""
    kept = tmp_path / "d" / "t.csv"
    kept.parent.mkdir()
    kept.write_bytes(b"a\n1\n")
    (tmp_path / "d" / "other.csv").write_bytes(b"x")
    fs = fsspec.filesystem("toolfs", target_protocol="file",
                           context_id=f"person-{uuid.uuid4().hex[:8]}")
    attempts = {
        "os.remove": lambda: os.remove(kept),
        "os.unlink": lambda: os.unlink(str(kept)),
        "open wb": lambda: open(kept, "wb").close(),
        "open a": lambda: open(kept, "a").close(),
        "os.open O_TRUNC": lambda: os.close(os.open(kept, os.O_WRONLY | os.O_TRUNC)),
        "os.truncate": lambda: os.truncate(kept, 0),
        "os.replace onto": lambda: os.replace(tmp_path / "d" / "other.csv", kept),
        "os.rename away": lambda: os.rename(kept, tmp_path / "moved.csv"),
        "shutil.rmtree": lambda: shutil.rmtree(tmp_path / "d"),
    }
    try:
        for name, attempt in attempts.items():
            try:
                with fs.open(str(kept), "wb") as f:  # never read: not_observed at close
                    f.write(b"mine")
            except NotObserved:
                with pytest.raises(PermissionError, match="is kept") as refused:
                    attempt()
                assert getattr(refused.value, "code", None) == "denied", name
                with open(kept, "rb") as f:  # reading is fine
                    assert f.read() == b"a\n1\n"
                os.stat(tmp_path / "d" / "other.csv")
            else:
                pytest.fail("the write was not refused")
            try:
                try:
                    fs.pipe_file(str(kept), b"mine")
                except NotObserved as err:
                    raise RuntimeError("wrapped") from err
            except RuntimeError:
                with pytest.raises(PermissionError, match="is kept"):
                    attempt()
            assert kept.read_bytes() == b"a\n1\n", name

        def elsewhere() -> None:  # another thread handles no refusal
            os.remove(tmp_path / "d" / "other.csv")

        try:
            fs.pipe_file(str(kept), b"mine")
        except NotObserved:
            with ThreadPoolExecutor(1) as pool:
                pool.submit(elsewhere).result()
        assert not (tmp_path / "d" / "other.csv").exists()
        os.truncate(kept, 0)  # handled: the person may do what they like
        os.remove(kept)
    finally:
        PolicyFileSystem.clear_instance_cache()


_HOOK_PROBE = """
import sys, tempfile, uuid
import fsspec, toolfs
from toolfs.errors import FsError
from toolfs.policy import refused_writes
where = sys.argv[1]
d = tempfile.mkdtemp()
open(d + "/kept.csv", "w").write("a\\n")
ws = toolfs.Workspace(d, context_id="agent")
assert ws.execute("write", {"file_path": "kept.csv", "content": "b"}).error.code == "not_observed"
fsspec.filesystem("memory").pipe("/hook-probe/kept.csv", b"a\\n")
target = {"memory": ("memory", "/hook-probe/kept.csv"), "local": ("file", d + "/kept.csv")}[where]
fs = fsspec.filesystem("toolfs", target_protocol=target[0], context_id=uuid.uuid4().hex)
try:
    fs.pipe_file(target[1], b"b")
except FsError:
    pass
print(refused_writes._installed)
"""


@pytest.mark.parametrize(("where", "installed"), [("memory", "False"), ("local", "True")])
def test_only_a_refused_local_write_installs_the_hook(where: str, installed: str) -> None:
    """The audit hook costs every audited event of the process (docs/benchmarks.md): an
    agent's refused tool call installs none, nor a refused write whose path is no local
    file; the first refused write of a local file does."""
    done = subprocess.run([sys.executable, "-c", _HOOK_PROBE, where], capture_output=True,
                          text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == installed, done.stdout + done.stderr


# -- a refused write over a changed file, every library, every backend ----------------


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def _duckdb_copy(site: Site, rel: str, frame: pd.DataFrame, fmt: str) -> None:
    fs = site.fs()
    con = duckdb.connect()
    con.register_filesystem(fs)
    con.register("frame", frame)
    options = "(format parquet)" if fmt == "parquet" else "(header)"
    con.sql(f"copy frame to '{fs.unstrip_protocol(site.path(rel))}' {options}")


def _polars_file_object(site: Site, rel: str, frame: pd.DataFrame) -> None:
    with fsspec.open(site.url(rel), "wb", **site.options()) as f:
        pl.from_pandas(frame).write_parquet(f)


WRITERS: dict[str, tuple[str, Any]] = {
    # library-way: (format, write(site, rel, frame)), each as the docs show it
    "pandas-parquet": ("parquet", lambda site, rel, frame: frame.to_parquet(
        site.url(rel), storage_options=site.options(), index=False)),
    "pandas-csv": ("csv", lambda site, rel, frame: frame.to_csv(
        site.url(rel), storage_options=site.options(), index=False)),
    "polars-file-object": ("parquet", _polars_file_object),
    "polars-use-pyarrow": ("parquet", lambda site, rel, frame: pl.from_pandas(
        frame).write_parquet(site.path(rel), use_pyarrow=True,
                             pyarrow_options={"filesystem": site.fs()})),
    "duckdb-parquet": ("parquet", lambda site, rel, frame: _duckdb_copy(
        site, rel, frame, "parquet")),
    "duckdb-csv": ("csv", lambda site, rel, frame: _duckdb_copy(site, rel, frame, "csv")),
    "pyarrow-fsspec": ("parquet", lambda site, rel, frame: pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), site.path(rel),
        filesystem=site.fs())),
    "pyarrow-fsspec-handler": ("parquet", lambda site, rel, frame: pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), site.path(rel),
        filesystem=PyFileSystem(FSSpecHandler(site.fs())))),
}


@pytest.mark.parametrize("library", sorted(WRITERS))
def test_a_refused_write_keeps_the_other_writers_bytes(sync_backend: Backend,
                                                       library: str) -> None:
    """The person's write over a file another writer changed since the person's read is
    refused, and the other writer's bytes stay, byte for byte: not removed (pyarrow's
    ``os.remove`` of the path it was writing), not truncated, not replaced. A delete of
    the file right after (a library cleaning up through the filesystem) is refused too;
    after a read, the write lands."""
    site = person_site(sync_backend)
    fmt, write = WRITERS[library]
    rel = f"kept/{library}.{fmt}"
    mine = pd.DataFrame({"region": ["north", "south"], "amount": [10, 20]})
    theirs_frame = mine.assign(amount=[11, 21])
    theirs = (_parquet_bytes(theirs_frame) if fmt == "parquet"
              else theirs_frame.to_csv(index=False).encode())
    try:
        write(site, rel, mine)  # a create: this context knows the version it wrote
        site.put(rel, theirs)  # another writer replaces it
        with pytest.raises((Stale, duckdb.Error)) as refused:
            write(site, rel, mine.assign(amount=[0, 0]))
        assert "changed since" in str(refused.value)
        assert site.get(rel) == theirs
        if isinstance(sync_backend, LocalBackend):
            with open(site.path(rel), "rb") as f:
                assert f.read() == theirs
        fs = site.fs()
        with pytest.raises(Stale) as delete:
            fs.rm(site.path(rel))
        assert delete.value.details.get("refused_write") is True
        assert site.get(rel) == theirs
        fs.cat_file(site.path(rel))  # a read: now the person replaces it knowingly
        write(site, rel, mine.assign(amount=[12, 22]))
        assert site.get(rel) != theirs
        fs.rm(site.path(rel))  # and may delete it
        assert not fs.exists(site.path(rel))
    finally:
        PolicyFileSystem.clear_instance_cache()


# -- Polars ----------------------------------------------------------------------------


def test_polars_through_fsspec_and_file_objects(site: Site) -> None:
    """Polars hands a ``toolfs://`` URL and its storage options to fsspec when reading
    through pyarrow (``use_pyarrow``; it takes ``toolfs::`` for a local path); its own
    readers and writers take the file objects fsspec opens. Both are one context."""
    options = site.options()
    flat = site.flat_options()
    frame = pl.DataFrame({"region": ["north", "south"], "amount": [10, 20]})
    with fsspec.open(site.url("p.parquet"), "wb", **options) as f:
        frame.write_parquet(f)
    with fsspec.open(site.url("p.csv"), "wb", **options) as f:
        frame.write_csv(f)
    got = pl.read_parquet(site.toolfs_url("p.parquet"), storage_options=flat,
                          use_pyarrow=True)
    assert got.equals(frame)
    assert pl.read_csv(site.toolfs_url("p.csv"), storage_options=flat,
                       use_pyarrow=True).equals(frame)
    assert fsspec.core.url_to_fs(site.toolfs_url("p.csv"), **flat)[0] is site.fs()
    with fsspec.open(site.url("p.csv"), "rb", **options) as f:
        assert pl.read_csv(f).equals(frame)
    with fsspec.open(site.url("p.parquet"), "rb", **options) as f:
        assert pl.read_parquet(f).equals(frame)
    site.put("p.parquet", site.get("p.parquet") + b"")  # identical bytes: not a change
    agent = site.agent()
    agent.read("p.csv")
    agent.edit("p.csv", "south,20", "south,21")
    with pytest.raises(Stale), fsspec.open(site.url("p.csv"), "wb", **options) as f:
        frame.write_csv(f)
    assert site.get("p.csv") == b"region,amount\nnorth,10\nsouth,21\n"


# -- DuckDB ----------------------------------------------------------------------------


def test_duckdb_queries_and_copies_through_toolfs_paths(site: Site) -> None:
    site.put("d/sales.csv", SALES)
    site.put("d/more.csv", b"region,amount\neast,5\n")
    fs = site.fs()
    con = duckdb.connect()
    con.register_filesystem(fs)
    url = fs.unstrip_protocol(site.path("d/sales.csv"))
    assert con.sql(f"select region, amount from read_csv('{url}') order by region"
                   ).fetchall() == [("north", 10), ("south", 20)]
    pattern = fs.unstrip_protocol(site.path("d/*.csv"))
    assert con.sql(f"select sum(amount) from read_csv('{pattern}')").fetchall() == [(35,)]
    out = fs.unstrip_protocol(site.path("d/out.parquet"))
    con.sql(f"copy (select * from read_csv('{url}')) to '{out}' (format parquet)")
    assert con.sql(f"select count(*) from read_parquet('{out}')").fetchall() == [(2,)]
    # The agent changes the file DuckDB read; COPY over it is refused, nothing stored.
    agent = site.agent()
    agent.read("d/sales.csv")
    agent.edit("d/sales.csv", "north,10", "north,11")
    with pytest.raises(duckdb.Error, match="changed since"):
        con.sql(f"copy (select 'x' as region, 0 as amount) to '{url}' (header)")
    assert site.get("d/sales.csv") == b"region,amount\nnorth,11\nsouth,20\n"


def test_duckdb_over_a_workspace_filesystem(site: Site) -> None:
    """``register_filesystem(ws.fs)``: ``toolfs://`` paths relative to the root."""
    site.put("duck/sales.csv", SALES)
    ws = site.agent()
    con = duckdb.connect()
    con.register_filesystem(ws.fs)
    assert con.sql("select count(*) from read_csv('toolfs://duck/sales.csv')"
                   ).fetchall() == [(2,)]
    assert con.sql("select count(*) from read_csv('toolfs://duck/*.csv')"
                   ).fetchall() == [(2,)]


# -- PyArrow -------------------------------------------------------------------------


def test_pyarrow_parquet_and_datasets(site: Site) -> None:
    fs = site.fs()
    arrow = PyFileSystem(FSSpecHandler(fs))
    table = pa.table({"region": ["north", "south"], "amount": [10, 20]})
    pq.write_table(table, site.path("pa/a.parquet"), filesystem=arrow)
    pq.write_table(table, site.path("pa/b.parquet"), filesystem=arrow)
    assert pq.read_table(site.path("pa/a.parquet"), filesystem=arrow).equals(table)
    dataset = pads.dataset(site.path("pa"), filesystem=arrow, format="parquet")
    assert dataset.to_table().num_rows == 4
    before = site.get("pa/a.parquet")
    site.put("pa/a.parquet", before + b"")  # the same bytes: no change to refuse
    other = site.fs(context_id=f"other-{site.context_id}")
    other_arrow = PyFileSystem(FSSpecHandler(other))
    pq.read_table(site.path("pa/a.parquet"), filesystem=other_arrow)
    pq.write_table(table.slice(0, 1), site.path("pa/a.parquet"), filesystem=other_arrow)
    theirs = site.get("pa/a.parquet")
    with pytest.raises(Stale), arrow.open_output_stream(site.path("pa/a.parquet")) as out:
        pq.write_table(table, out)
    assert site.get("pa/a.parquet") == theirs
    assert theirs != before


def test_a_write_that_fails_inside_the_library_commits_nothing(site: Site) -> None:
    """A refused write is one conditional commit at close: pyarrow's output stream
    with nothing committed before it."""
    site.put("w.parquet", b"old")
    fs = site.fs()
    fs.cat_file(site.path("w.parquet"))
    with fs.open(site.path("w.parquet"), "wb") as f:
        f.write(b"PAR1")
        assert site.get("w.parquet") == b"old"  # nothing reaches storage before close
    assert site.get("w.parquet") == b"PAR1"


def test_csv_bytes_read_by_pandas_are_the_bytes_stored(site: Site) -> None:
    site.put("raw.csv", SALES)
    with fsspec.open(site.url("raw.csv"), "rb", **site.options()) as f:
        data = f.read()
    assert data == SALES
    assert pd.read_csv(io.BytesIO(data)).shape == (2, 2)


# -- cost ----------------------------------------------------------------------------


def test_a_pandas_read_costs_no_more_requests_than_s3fs(s3_emulator: S3Emulator) -> None:
    """Counted at the server: ``pd.read_csv`` through ``toolfs::s3://`` is one GET (the
    read and its version in one request); through s3fs alone a HEAD and a GET. A parquet
    read makes no more requests than s3fs's either (docs/benchmarks.md, section 8)."""
    backend = S3Backend(s3_emulator)
    backend.setup()
    site = Site(backend, "s3", s3_emulator.s3fs_storage_options())
    frame = pd.DataFrame({"region": ["north", "south"] * 50, "amount": range(100)})
    site.put("sales.csv", frame.to_csv(index=False).encode())
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    site.put("sales.parquet", buffer.getvalue())
    plain = f"s3://{site.path('sales.csv')}"

    def requests(call: Any) -> list[str]:
        fsspec.filesystem("s3", **site.target_options).invalidate_cache()
        s3_emulator.clear_requests()
        call()
        return [r.method for r in s3_emulator.requests() if not r.path.startswith("/_toolfs")]

    try:
        through_toolfs = requests(lambda: pd.read_csv(site.url("sales.csv"),
                                                      storage_options=site.options()))
        through_s3fs = requests(lambda: pd.read_csv(plain,
                                                    storage_options=site.target_options))
        assert through_toolfs == ["GET"]
        assert sorted(through_s3fs) == ["GET", "HEAD"]
        parquet_toolfs = requests(lambda: pd.read_parquet(site.url("sales.parquet"),
                                                          storage_options=site.options()))
        parquet_s3fs = requests(lambda: pd.read_parquet(
            f"s3://{site.path('sales.parquet')}", storage_options=site.target_options))
        assert len(parquet_toolfs) <= len(parquet_s3fs)
    finally:
        PolicyFileSystem.clear_instance_cache()
        backend.teardown()
