"""Confinement: the workspace root is a jail.

:class:`Jail` turns a path the model gave into the wrapped filesystem's path, or raises
``outside_root``. The rules are deliberately strict and identical on every backend:

* NUL bytes, backslashes, empty segments (``a//b``) and ``..`` segments are refused,
  whatever they would resolve to (on object stores ``a/../b`` is a different key, so
  normalising it would change meaning);
* percent-encoded ``.``, ``/``, ``\\`` or NUL, and Unicode look-alikes whose NFKC form
  adds a separator or a ``..`` segment, are refused;
* absolute paths and URLs are accepted only when they name something inside the root
  (same protocol); object-store keys never start with ``/``, so there a leading ``/``
  is always outside;
* on local disk, the target (or, for a new file, its nearest existing parent) is resolved
  through symlinks and must stay inside the real root; the local adapter then walks
  the resolved path with ``O_NOFOLLOW`` so a symlink swapped in later cannot redirect
  the write.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from toolfs.errors import fs_error
from toolfs.escaping import escape_undecodable, has_lone_surrogate

_PCT = re.compile(r"%(2e|2f|5c|00)", re.IGNORECASE)
# Slash look-alikes that NFKC leaves alone; some tools and terminals still treat or
# show them as separators, so a path holding one is refused rather than guessed at.
_SLASHES = frozenset("\u2215\u2044\u29f8\u29f9\u2571\u2572\ufe68\u1735\u2cc6")
_CACHED_PATHS = 1024
"""Distinct paths a jail remembers the string checks of (all forgotten when full)."""
_CACHED_PATH_CHARS = 1024
"""Longest path remembered (longer ones are checked afresh on every call)."""


@dataclass(frozen=True)
class Target:
    """A confined path: where it lives in the wrapped fs, and how the model sees it."""

    backend_path: str
    display: str
    """The path as the model named it, relative to the root (``.`` for the root)."""
    resolved: str = ""
    """The root-relative path of the file actually reached (symlinks followed); deny
    rules and events use this. Empty means the same as ``display``."""

    @property
    def reached(self) -> str:
        """The root-relative path of the file reached (``resolved`` or ``display``)."""
        return self.resolved or self.display

    @property
    def is_root(self) -> bool:
        """Whether the model named the root itself (``.``); see :attr:`reaches_root`
        for a path that only leads there."""
        return self.display == "."

    @property
    def reaches_root(self) -> bool:
        """Whether this reaches the root, by its name or through symlinks (``self ->
        .``, ``docs/up -> ..``): never a file, and never to be deleted or moved."""
        return self.display == "." or self.resolved == "."


class Jail:
    """Maps model paths to backend paths under ``root``.

    Args:
        root: the root in the wrapped filesystem's own path form (no protocol).
        protocols: the wrapped filesystem's protocol names, for URL forms.
        resolve_symlinks: resolve and confine symlinks (local disk).
        own_protocol: the protocol of the filesystem the jail belongs to (``toolfs``):
            ``toolfs://x`` is the path ``x``.
        absolute: paths are the wrapped filesystem's own absolute paths
            (``bucket/prefix/file.csv`` on an object store), not relative to the root.
    """

    def __init__(self, root: str, protocols: tuple[str, ...], *,
                 resolve_symlinks: bool = False, own_protocol: str | None = None,
                 absolute: bool = False) -> None:
        self.resolve_symlinks = resolve_symlinks
        self.own_prefixes = (f"{own_protocol}://", f"{own_protocol}::") if own_protocol \
            else ()
        self.absolute = absolute
        root = root.rstrip("/") if root not in ("", "/") else root
        self.root = root
        self.real_root = os.path.realpath(root) if resolve_symlinks else root
        self._root_id = _identity(self.real_root) if resolve_symlinks else None
        self.protocols = protocols
        # path as given -> (its Target when no symlink is crossed, the paths to lstat).
        # The checks on the string itself (escapes, encodings, look-alikes, NFKC) depend
        # only on the string and this jail's fixed root, so they run once per distinct
        # path; what the filesystem says (symlinks) is still asked on every call.
        self._confined: dict[str, tuple[Target, tuple[str, ...]]] = {}

    def join(self, rel: str) -> str:
        if not rel:
            return self.root
        if self.root in ("", "/"):
            return f"{self.root}{rel}"
        return f"{self.root}/{rel}"

    def resolve(self, path: object, *, root_checked: bool = False) -> Target:
        """Confine ``path``, or raise ``invalid_arguments``/``outside_root``.

        ``root_checked``: the caller reaches the target only through a store that checks
        the root itself on every walk (``Store.checks_root``), so the ``stat`` of the
        root that notices a parent swapped for a symlink is left to it."""
        if type(path) is str:
            hit = self._confined.get(path)
            if hit is not None:
                plain, lstats = hit
                if not self.resolve_symlinks:
                    return plain
                backend = self._resolve_links(plain.backend_path, lstats, path,
                                              root_checked)
                return plain if backend is plain.backend_path else self._linked(plain, backend)
        return self._resolve_new(path, root_checked)

    def _resolve_new(self, path: object, root_checked: bool = False) -> Target:
        """:meth:`resolve` for a path not seen yet: every check on the string, then the
        symlinks; a valid path is remembered (bounded) with what its checks gave."""
        if not isinstance(path, str) or not path:
            raise fs_error("invalid_arguments", "file_path must be a non-empty string")
        shown = _shown(path)
        if has_lone_surrogate(path):
            # Not storable as UTF-8 on any backend, and an escaped name shown back to the
            # model must never round-trip into a different file.
            shown = escape_undecodable(shown)
            raise fs_error("invalid_arguments",
                           f"file_path '{shown}' is not valid Unicode (a lone surrogate)",
                           path=shown)
        if "\x00" in path:
            raise fs_error("outside_root", "file_path contains a NUL byte",
                           path=shown.replace("\x00", "\\0"))
        rel = self._relative(path, shown)
        parts = [p for p in rel.split("/") if p != "."] if rel else []
        rel = "/".join(parts)
        display = rel or "."
        if not self.resolve_symlinks:
            plain = Target(backend_path=self.join(rel), display=display)
            lstats: tuple[str, ...] = ()
        else:
            root = self.real_root
            base = root if root.endswith("/") else root + "/"
            walked = base + rel if rel else root
            # Each component below the root, outermost first: the paths to lstat.
            lstats = tuple(base + "/".join(parts[:i + 1]) for i in range(len(parts)))
            plain = Target(backend_path=walked, display=display)
        if type(path) is str and len(path) <= _CACHED_PATH_CHARS:
            if len(self._confined) >= _CACHED_PATHS:
                self._confined.clear()
            self._confined[path] = (plain, lstats)
        if not self.resolve_symlinks:
            return plain
        backend = self._resolve_links(plain.backend_path, lstats, path, root_checked)
        return plain if backend is plain.backend_path else self._linked(plain, backend)

    def _linked(self, plain: Target, backend: str) -> Target:
        """The target of a path whose resolution crossed a symlink (or a moved root)."""
        reached = self.display_of(backend)
        return Target(backend_path=backend, display=plain.display,
                      resolved=reached if reached != plain.display else "")

    def _relative(self, path: str, shown: str) -> str:
        def outside(why: str) -> Exception:
            return fs_error("outside_root", f"{shown!r} is outside the workspace root: {why}",
                            path=shown)

        if "\\" in path:
            raise outside("backslashes are not path separators here")
        if _PCT.search(path):
            raise outside("percent-encoded separators or dots are not allowed")
        if _SLASHES.intersection(path):
            raise outside("Unicode look-alikes of path separators are not allowed")
        nfkc = unicodedata.normalize("NFKC", path)
        if nfkc != path and (nfkc.count("/") != path.count("/") or ".." in nfkc.split("/")
                             or "\\" in nfkc):
            raise outside("Unicode look-alikes of path separators or dots are not allowed")
        for own in self.own_prefixes:
            if path.startswith(own):
                # This filesystem's own URL (``toolfs://x``, ``toolfs::s3://b/x``): its path.
                path = path[len(own):]
                if not path:
                    return ""
                break
        if "://" in path:
            proto, _, rest = path.partition("://")
            if proto not in self.protocols:
                raise outside(f"the protocol {proto}:// is not this workspace's")
            # Back to the wrapped fs's own absolute form: "/dir/file" or "bucket/key".
            path = self._strip_root("/" + rest.lstrip("/") if self.rooted else rest, outside)
        elif path.startswith("/"):
            if not self.rooted:
                raise outside("object-store keys do not start with '/'")
            path = self._strip_root(path, outside)
        elif self.absolute and not self.rooted:  # "bucket/key": absolute on object stores
            path = self._strip_root(path, outside)
        if not path:
            return ""
        # Escapes first: "../" is outside the root before it is a directory name.
        if any(s == ".." for s in path.split("/")):
            raise outside("'..' segments are not allowed")
        if path.endswith("/"):
            raise fs_error("not_a_file", f"{shown!r} names a directory", path=shown)
        if any(s == "" for s in path.split("/")):
            raise outside("empty path segments ('//') are not allowed")
        return path

    @property
    def rooted(self) -> bool:
        """Whether the wrapped fs's absolute paths start with ``/`` (local, memory)."""
        return self.root.startswith("/")

    def _strip_root(self, path: str, outside: Callable[[str], Exception]) -> str:
        for root in (self.root, self.real_root):
            if path == root:
                return ""
            if root == "":  # the whole of an object store (a filesystem made by protocol)
                return path
            if root == "/":
                return path[1:]
            if path.startswith(root + "/"):
                return path[len(root) + 1:]
        raise outside("it does not lie inside the root")

    def _resolve_links(self, walked: str, lstats: tuple[str, ...], path: str,
                       root_checked: bool = False) -> str:
        """The real path of ``walked`` (``root/rel``; ``lstats``: each component below
        the root, outermost first): ``walked`` itself (the same object) when no symlink
        is crossed. One ``lstat`` per component until a symlink (then ``realpath`` of the
        whole path, checked to stay inside) or a missing component (nothing below it can
        be a link). The root's own real path was resolved once, at construction;
        re-resolving it and its parents on every call (``realpath`` of the whole path) was
        the largest per-call cost of a small local write; one ``stat`` of the root
        (below) still notices a parent swapped for a symlink. The local store then walks
        the result with ``O_NOFOLLOW`` (and, ``root_checked``, makes the root check
        itself)."""
        root = self.real_root
        # One stat of the root by its path (the kernel walks it, in C): if that is no
        # longer the directory resolved at construction (a parent swapped for a
        # symlink, the root re-created), resolve the whole path as realpath does.
        if root_checked:
            same_root = True
        else:
            try:
                st = os.stat(root)
            except OSError:
                st = None
            same_root = st is not None and self._root_id == (st.st_dev, st.st_ino)
        if same_root:
            for part in lstats:
                try:
                    mode = os.lstat(part).st_mode
                except OSError:
                    return walked  # missing (or a file where a directory should be)
                if stat.S_ISLNK(mode):
                    break
            else:
                return walked
        real = os.path.realpath(walked)
        if real != root and not real.startswith(root.rstrip("/") + "/"):
            shown = _shown(path)
            raise fs_error("outside_root",
                           f"{shown!r} resolves through a symlink to outside the root",
                           path=shown)
        return real

    def display_of(self, backend_path: str) -> str:
        """The display path of a backend path inside the root."""
        for root in (self.root, self.real_root):
            if backend_path == root:
                return "."
            prefix = root if root.endswith("/") else root + "/"
            if backend_path.startswith(prefix):
                return backend_path[len(prefix):]
        return backend_path


def _shown(path: str) -> str:
    """``path`` as an error message quotes it (cut at 200 characters)."""
    return path if len(path) <= 200 else path[:200] + "..."


def _identity(path: str) -> tuple[int, int] | None:
    """``(device, inode)`` of what ``path`` names now (links followed), or ``None``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
