"""The memory tool's own commands, ``delete`` and ``rename``, of a file or a directory.

Neither loses an update: a delete removes only files this agent viewed at their current
version (every one checked before any is removed), and a rename moves each file by a
create-only copy of one version, then a delete conditional on that version, undone if
the source changed meanwhile (:meth:`_MemoryCommands._move`). The text editor has
neither command; the engine (:mod:`toolfs.integrations._anthropic_commands`) joins them
to the commands both tools share.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from toolfs.errors import FsError, fs_error
from toolfs.integrations._anthropic_engine_base import _EngineBase
from toolfs.integrations._anthropic_input import (
    MAX_SHOWN_PATH,
    MAX_TREE_FILES,
    _Done,
    _invalid,
    _Refusal,
    _refuse,
    _shown,
)
from toolfs.policy.listings import Found
from toolfs.policy.recorder import move_scope
from toolfs.versions import FileVersion


class _MemoryCommands(_EngineBase):
    """``delete`` and ``rename`` (see the module docstring)."""

    # -- delete (memory) -----------------------------------------------------------

    def _delete(self, given: dict[str, Any]) -> _Done:
        raw = given["path"]
        shown = _shown(raw, MAX_SHOWN_PATH)
        rel, as_dir = self._source_path(raw)
        # [memory SDK] delete. By where the path leads, not how it is spelled: a symlink
        # to the root (`self -> .`, `docs/up -> ..`) names the root as well.
        if rel == "." or self._target(rel, shown, raw).reaches_root:
            raise _refuse("denied", "Cannot delete the /memories directory itself")
        if self._is_file(rel, shown, raw):
            if as_dir:  # `notes.md/`: there is no directory notes.md
                raise _refuse("not_found", f"The path {shown} does not exist")
            try:
                self.fs.rm_file(rel)
            except FsError as err:
                if err.code == "not_observed":
                    raise _refuse("not_observed", f"Cannot delete {shown}: view it first",
                                  cause=err) from err
                if err.code == "stale":
                    raise _refuse("stale", f"{shown} changed since you last viewed it; it "
                                  "was not deleted", cause=err) from err
                raise self._translate(err, shown, raw) from err
            # [memory docs] and [memory SDK] delete
            return _Done(f"Successfully deleted {shown}", None)
        files = self._tree(rel)
        if not files:  # [memory docs] delete: "Error: The path {path} does not exist"
            raise _refuse("not_found", f"The path {shown} does not exist")
        # Every file must have been viewed at its current version: a delete must not
        # remove an update this agent never saw. Checked for all before any is removed.
        unseen = [f.path for f in files
                  if self.fs.policy is not None and (
                      (obs := self.fs.ledger.get(f.backend_path)) is None
                      or obs.version is None)]
        if unseen:
            names = ", ".join(self._shown_paths(unseen[:10]))
            more = f" and {len(unseen) - 10} more" if len(unseen) > 10 else ""
            raise _refuse("not_observed", f"Cannot delete {shown}: view its files first "
                          f"({names}{more} not viewed)")
        done: list[str] = []
        for f in files:
            try:
                self.fs.rm_file(f.path)
            except FsError as err:
                kept = len(files) - len(done)
                msg = (f"Deleted {len(done)} of {len(files)} files in {shown}; stopped at "
                       f"{self._model_path(f.path)}: {err.message}. {kept} files remain.")
                raise _refuse(err.code, msg, cause=err) from err
            done.append(f.path)
        self._remove_empty_dirs(rel)
        return _Done(f"Successfully deleted {shown}", None)

    def _tree(self, rel: str) -> list[Found]:
        files = list(itertools.islice(self.fs.list_files(rel), MAX_TREE_FILES + 1))
        if len(files) > MAX_TREE_FILES:
            raise _refuse("too_large", f"{self._model_path(rel)} holds more than "
                          f"{MAX_TREE_FILES} files, more than one command may change")
        return sorted(files, key=lambda f: f.path)

    def _remove_empty_dirs(self, rel: str) -> None:
        """Local and memory filesystems keep empty directories; remove those left (best
        effort: a directory another agent just wrote into is not empty and stays).
        Through the policy filesystem, never the raw one: denied directories (``.git``
        and everything in it) stay, symlinks are not walked through, nothing outside the
        root is touched. Object stores have no directories: nothing to do there."""
        # A failure leaves directories, never files, behind: the files are gone already.
        with contextlib.suppress(Exception):
            self.fs.remove_empty_dirs(rel)

    # -- rename (memory) -----------------------------------------------------------

    def _rename(self, given: dict[str, Any]) -> _Done:
        old_raw, new_raw = given["old_path"], given["new_path"]
        old_shown, new_shown = _shown(old_raw, MAX_SHOWN_PATH), _shown(new_raw, MAX_SHOWN_PATH)
        (old, old_as_dir), (new, _) = self._source_path(old_raw), self._source_path(new_raw)
        if old == ".":  # [memory SDK] rename
            raise _refuse("denied", "Cannot rename the /memories directory itself")
        if new == ".":
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        if new == old or new.startswith(old + "/"):
            raise _invalid(f"Cannot rename {old_shown} into itself ({new_shown})")
        # The same checks on where the paths lead (symlinks followed): a link to the root
        # is the root, and a destination reached through a link may lie inside the
        # source all the same.
        source = self._target(old, old_shown, old_raw)
        if source.reaches_root:
            raise _refuse("denied", "Cannot rename the /memories directory itself")
        dest = self._target(new, new_shown, new_raw)
        if dest.reaches_root:
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        src_at, dest_at = source.reached, dest.reached
        if self.fs.store.folds_case:
            src_at, dest_at = src_at.casefold(), dest_at.casefold()
        if dest_at == src_at or dest_at.startswith(src_at + "/"):
            raise _invalid(f"Cannot rename {old_shown} into itself ({new_shown})")
        if self._exists(new) or self._empty_dir(new, new_shown, new_raw):
            # [memory docs] rename: "Error: The destination {new_path} already exists"
            raise _refuse("invalid_arguments", f"The destination {new_shown} already exists")
        if self._is_file(old, old_shown, old_raw):
            if old_as_dir:  # `notes.md/`: there is no directory notes.md
                raise _refuse("not_found", f"The path {old_shown} does not exist")
            self._call(lambda: self._move(old, new, new_shown), old_shown, old_raw)
            # [memory docs] and [memory SDK] rename
            return _Done(f"Successfully renamed {old_shown} to {new_shown}", None)
        files = self._tree(old)
        if not files:  # [memory docs] rename: "Error: The path {old_path} does not exist"
            raise _refuse("not_found", f"The path {old_shown} does not exist")
        for moved, f in enumerate(files):
            suffix = f.path[len(old) + 1:] if old != "." else f.path
            try:
                self._move(f.path, f"{new}/{suffix}", self._model_path(f"{new}/{suffix}"))
            except (FsError, _Refusal) as exc:
                err = exc if isinstance(exc, FsError) else exc.error
                why = exc.message if isinstance(exc, _Refusal) else err.message
                msg = (f"Renamed {moved} of {len(files)} files of {old_shown} to {new_shown}; "
                       f"stopped at {self._model_path(f.path)}: {why}")
                raise _refuse(err.code, msg, cause=err) from exc
        self._remove_empty_dirs(old)
        return _Done(f"Successfully renamed {old_shown} to {new_shown}", None)

    def _empty_dir(self, rel: str, shown: str, given: str) -> bool:
        """An empty directory: local disk and memory keep them (a file cannot be created
        over one, and the failure would name the source); object stores have none."""
        if not self.fs.store.capabilities.cheap_listing:
            return False
        return self._call(lambda: self.fs.isdir(rel), shown, given)

    def _move(self, old: str, new: str, new_shown: str) -> None:
        """Move one file without losing an update: the bytes of one version of ``old``
        are created at ``new`` (only if nothing is there), then ``old`` is deleted only if
        it is still at that version; if it is not, the copy is removed again (only if it
        is still the copy), so the file ends up in exactly one place, with every update."""
        with move_scope(self.fs.resolve(old).display, self.fs.resolve(new).display):
            self._move_once(old, new, new_shown)

    def _move_once(self, old: str, new: str, new_shown: str) -> None:
        """:meth:`_move`'s body (one move in the journal)."""
        with self.fs.open(old, "rb") as src:  # an observation: the version of these bytes
            if not src.complete:
                raise fs_error("too_large", f"{src.path} is {src.size} bytes, over the "
                               f"{self.fs.size_cap}-byte cap for whole-file writes; it "
                               "cannot be renamed here", path=src.path)
            data = src.read()
            version = src.version
        try:
            copy = self.fs.pipe_file(new, data, mode="create", operation="write")
        except FsError as err:
            if err.code in ("stale", "not_observed"):  # created meanwhile by someone else
                raise _refuse("invalid_arguments", f"The destination {new_shown} already "
                              "exists", cause=err) from err
            raise
        try:
            self.fs.rm_file(old, version=version)
        except FsError as err:
            if err.code not in ("stale", "not_found"):
                # The delete may have happened all the same (a timeout, say): removing
                # the copy now could lose the file. Keep it, and say so.
                raise _refuse(err.code, f"{self._model_path(old)} was copied to "
                              f"{new_shown} but could not be deleted ({err.message}); both "
                              "may exist now: view them before retrying", cause=err) from err
            left = self._undo(new, copy.version)
            if err.code == "stale":
                raise _refuse("stale", f"{self._model_path(old)} changed while it was being "
                              f"renamed; nothing was renamed{left}", cause=err) from err
            raise _refuse("stale", f"{self._model_path(old)} was deleted while it was "
                          f"being renamed; nothing was renamed{left}", cause=err) from err

    def _undo(self, path: str, version: FileVersion) -> str:
        """Remove the copy a failed move made, only if it is still that copy; what is
        left over, for the answer ("" when nothing is)."""
        try:
            self.fs.rm_file(path, version=version)
        except FsError as err:
            if err.code == "not_found":
                return ""
            shown = self._model_path(path)
            if err.code == "stale":  # someone changed the copy already: theirs now
                return f" (but {shown} was changed meanwhile by someone else and stays)"
            return f" (but the copy at {shown} could not be removed: {err.message})"
        return ""
