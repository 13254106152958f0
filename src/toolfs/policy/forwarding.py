"""fsspec's read-only lookups on the policy filesystem, forwarded to the wrapped one.

``info``, ``ls``, ``exists``, ``isfile``, ``isdir``, ``size``, ``find``, ``walk``,
``modified``, ``created`` and ``ukey`` go to the wrapped filesystem with their paths
confined and named as this filesystem names them; a path a deny rule matches is refused
as a read of it would be, and a listing leaves out what a deny rule hides. Each lookup
drops the wrapped client's cached listings first (``_fresh``): changes are stored through
the store, which those caches never hear of. They record no observation and feed no
commit's condition.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from toolfs.backends import conditions
from toolfs.backends.base import forget_listings
from toolfs.errors import FsError, fs_error
from toolfs.policy.guards import Guards
from toolfs.policy.paths import Target


class Forwarding(Guards):
    """The read-only fsspec lookups (see the module docstring)."""

    protocol: ClassVar[str | tuple[str, ...]]

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        """``toolfs://dir/file.csv`` (or ``toolfs::...``) as this filesystem's path
        ``dir/file.csv``; lists element-wise, ``os.PathLike`` as a string. Nothing else
        changes: the jail judges the rest (``d/`` names a directory, ``..`` is refused)."""
        if isinstance(path, list | tuple):
            return type(path)(cls._strip_protocol(p) for p in path)
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if isinstance(path, str):
            for prefix in (f"{cls.protocol}://", f"{cls.protocol}::"):
                if path.startswith(prefix):
                    return path[len(prefix):]
        return path

    def _listed_name(self, backend_path: str) -> str:
        """The name ``ls``, ``info``, ``find`` and ``walk`` give a backend path: the one
        that opens it again here (``unstrip_protocol`` of it, a ``toolfs://`` URL,
        too)."""
        return backend_path if self.absolute_paths else self.jail.display_of(backend_path)

    def _fresh(self, backend_path: str) -> str:
        """``backend_path``, with the wrapped filesystem's cached listings of it, its
        parents and its subtree dropped: changes are stored through the store, which
        fsspec's listing caches (s3fs, gcsfs, adlfs) never hear of, so a cached listing
        would hide a file just written (pyarrow's ``get_file_info`` after a write)."""
        forget_listings(self.fs, backend_path)
        return backend_path

    def _entry(self, info: dict[str, Any]) -> dict[str, Any]:
        return {**info, "name": self._listed_name(self.fs._strip_protocol(info["name"]))}

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        target = self._readable(path, file=False)
        try:
            return self._entry(self.fs.info(self._fresh(target.backend_path), **kwargs))
        except FileNotFoundError as exc:
            raise fs_error("not_found", f"{target.display} does not exist",
                           path=target.display) from exc

    # A path named here is refused (``denied``) as a read of it would be; a listing
    # leaves out what a deny rule hides, as the discovery tools do.

    def _shown(self, backend_path: str, kind: str) -> bool:
        """Whether a listed entry may be shown: not a symlink leading out of the root
        (local disk), not toolfs's own temporary object, not denied itself, and not a
        directory whose every entry is denied (``secrets/**``)."""
        if conditions.RESERVED_MARK in backend_path and conditions.has_reserved_part(
                self.jail.display_of(backend_path)):
            return False
        if self.jail.resolve_symlinks and not _inside(os.path.realpath(backend_path),
                                                      self.jail.real_root):
            return False
        if not self.deny:
            return True
        display = self.jail.display_of(backend_path)
        if not self.visible(display, backend_path):
            return False
        return kind != "directory" or not self._denied(f"{display}/\uffff")

    def _named(self, path: str) -> Target:
        """Confine a path these methods describe (a file or a directory; ``d/`` is
        ``d``), refusing denied ones, checked for the client (see :meth:`_readable`)."""
        if path.endswith("/") and path.strip("/"):
            path = path.rstrip("/")
        return self._readable(path, file=False)

    def _described(self, target: Target, call: Callable[[str], Any]) -> Any:
        """``call(target's backend path)``, a missing path ``not_found`` by its display
        path (never the backend's own error, which names the backend path)."""
        try:
            return call(self._fresh(target.backend_path))
        except FileNotFoundError as exc:
            raise fs_error("not_found", f"{target.display} does not exist",
                           path=target.display) from exc

    def ls(self, path: str = "", detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        target = self.search_root(path.rstrip("/") if path.strip("/") else path)
        entries = self._described(
            target, lambda p: self.fs.ls(self._fresh(p), detail=True, **kwargs))
        out = [self._entry(e) for e in entries
               if self._shown(self.fs._strip_protocol(e["name"]), e.get("type", ""))]
        return out if detail else [e["name"] for e in out]

    def exists(self, path: str, **kwargs: Any) -> bool:
        try:
            target = self._named(path)
        except FsError as err:
            if err.code in ("outside_root", "denied"):
                raise
            return False
        return bool(self.fs.exists(self._fresh(target.backend_path)))

    def isfile(self, path: str) -> bool:
        return bool(self.fs.isfile(self._fresh(self._named(path).backend_path)))

    def isdir(self, path: str) -> bool:
        if path in ("", ".", "/"):
            return True
        return bool(self.fs.isdir(self._fresh(self._named(path).backend_path)))

    def size(self, path: str) -> int:
        return int(self.info(path)["size"])

    def find(self, path: str = "", maxdepth: int | None = None, withdirs: bool = False,
             detail: bool = False, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        base = self.search_root(path.rstrip("/") if path.strip("/") else path).backend_path
        found = self.fs.find(self._fresh(base), maxdepth=maxdepth, withdirs=withdirs,
                             detail=True)
        if not isinstance(found, dict):  # adlfs answers a file's name, not its details
            found = {name: self.fs.info(name) for name in found}
        own = self.fs._strip_protocol(base).rstrip("/")
        entries = {}
        for key, info in found.items():
            listed = self.fs._strip_protocol(key)
            if maxdepth is not None and listed.startswith(own + "/") and \
                    listed[len(own) + 1:].rstrip("/").count("/") >= maxdepth:
                continue  # adlfs's find ignores maxdepth: every client gets the same answer
            if self._shown(listed, info.get("type", "")):
                entries[self._listed_name(listed)] = self._entry(info)
        return entries if detail else sorted(entries)

    def walk(self, path: str = "", maxdepth: int | None = None, **kwargs: Any
             ) -> Iterator[Any]:
        path = self._strip_protocol(path)
        base = self.search_root(path.rstrip("/") if path.strip("/") else path).backend_path
        kwargs.pop("topdown", None)  # top-down only: denied directories are pruned
        for root, dirs, files in self.fs.walk(self._fresh(base), maxdepth=maxdepth, **kwargs):
            root = self.fs._strip_protocol(root)
            prefix = root.rstrip("/") + "/"
            dirs[:] = [d for d in dirs if self._shown(prefix + d, "directory")]
            files[:] = [f for f in files if self._shown(prefix + f, "file")]
            yield self._listed_name(root), dirs, files

    def modified(self, path: str) -> Any:
        return self._described(self._named(path), self.fs.modified)

    def created(self, path: str) -> Any:
        return self._described(self._named(path), self.fs.created)

    def ukey(self, path: str) -> str:
        return str(self._described(self._named(path), self.fs.ukey))


def _inside(real: str, root: str) -> bool:
    """Whether the real path ``real`` is ``root`` or below it."""
    return real == root or real.startswith(root.rstrip("/") + "/")
