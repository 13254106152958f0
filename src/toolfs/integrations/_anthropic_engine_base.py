"""One workspace as Anthropic's text editor or memory tool sees it.

:class:`_EngineBase` is the lowest layer of the commands' engine: the workspace (sync, or
an AsyncWorkspace's), the model's paths mapped to the workspace's (``/memories/...`` for
the memory tool) and back, toolfs's errors told in the reference wording
(:meth:`_EngineBase._translate`), and the few lookups several commands make. The
commands stand on it: the memory tool's own ``delete`` and ``rename``
(:mod:`toolfs.integrations._anthropic_memory_commands`), then the engine with ``view``,
``create``, ``str_replace`` and ``insert`` (:mod:`toolfs.integrations._anthropic_commands`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from toolfs.errors import FsError
from toolfs.integrations._anthropic_input import (
    _ADVICE,
    _MEMORY_ADVICE,
    MAX_SHOWN_PATH,
    MEMORY_ROOT,
    TEXT_EDITOR_NAME,
    _Refusal,
    _refuse,
    _shown,
)
from toolfs.policy.filesystem import PolicyFileSystem
from toolfs.policy.paths import Target
from toolfs.workspace import AsyncWorkspace, Workspace

T = TypeVar("T")


class _EngineBase:
    """A workspace in one tool's terms: its paths and its wording (see the module
    docstring). ``memory`` selects the memory tool's paths (``/memories/...``) and
    wording."""

    def __init__(self, ws: Workspace | AsyncWorkspace, *, memory: bool,
                 max_characters: int | None = None) -> None:
        self.ws = ws.sync if isinstance(ws, AsyncWorkspace) else ws
        # An AsyncWorkspace's commands run on its own (bounded) worker threads.
        self.async_ws = ws if isinstance(ws, AsyncWorkspace) else None
        if not isinstance(self.ws, Workspace):
            raise TypeError("expected a toolfs.Workspace or toolfs.AsyncWorkspace")
        self.memory = memory
        self.tool = "memory" if memory else TEXT_EDITOR_NAME
        self.max_characters = max_characters
        self.advice = _MEMORY_ADVICE if memory else _ADVICE

    @property
    def fs(self) -> PolicyFileSystem:
        return self.ws.fs

    @property
    def budget(self) -> int:
        limit = self.ws.max_output_chars
        return limit if self.max_characters is None else min(limit, self.max_characters)

    # -- paths ---------------------------------------------------------------------

    def path(self, given: str) -> str:
        """The workspace path of a model-given path (memory: below ``/memories``)."""
        if not self.memory:
            return given
        if given != MEMORY_ROOT and not given.startswith(MEMORY_ROOT + "/"):
            # [memory SDK] _validate_path (stricter: "/memoriesX" is refused too)
            raise _refuse("outside_root",
                          f"Path must start with /memories, got: {_shown(given, MAX_SHOWN_PATH)}")
        rel = given[len(MEMORY_ROOT):].lstrip("/")
        if rel and any(part == ".." for part in rel.split("/")):
            raise self._escape(given)
        return rel or "."

    def _source_path(self, given: str) -> tuple[str, bool]:
        """:meth:`path` for a delete or a rename, which take a file or a directory:
        ``dir/`` names the directory ``dir`` (the second value: written as one)."""
        rel = self.path(given)
        if rel != "." and rel.endswith("/"):
            return rel.rstrip("/") or ".", True
        return rel, False

    def _escape(self, given: str) -> _Refusal:
        # [memory SDK] _validate_path
        return _refuse("outside_root",
                       f"Path {_shown(given, MAX_SHOWN_PATH)} would escape /memories directory")

    def _translate(self, err: FsError, shown: str, given: str) -> _Refusal | FsError:
        """toolfs's error in the reference wording where one exists."""
        if err.code == "not_found" and not err.details.get("bucket"):
            # [editor] validate_path and [memory docs] view, then toolfs's near misses
            extra = ""
            near = err.details.get("did_you_mean")
            if near:
                extra = f" Did you mean: {', '.join(self._shown_paths(near))}?"
            return _refuse("not_found", f"The path {shown} does not exist. Please provide a "
                           f"valid path.{extra}", cause=err)
        if err.code == "outside_root" and self.memory:
            return _Refusal(self._escape(given).message, err)
        if err.code == "not_a_file" and "file" not in err.details:
            # The path names a directory (not a path through a file).
            return _Refusal(self._is_a_directory(shown), err)
        if err.code == "not_a_file" and isinstance(err.details.get("file"), str):
            # A path through a file ("notes.md/x"): name the file as the model knows it.
            return _Refusal(f"{self._model_path(err.details['file'])} is a file, not a "
                            f"directory, so {shown} cannot be below it", err)
        if err.code == "not_observed":
            return _Refusal(f"{shown} has not been viewed in this session; view it before "
                            "changing it", err)
        message = err.message
        if err.code == "stale":
            message = message.replace("since you read it", "since you last viewed it")
        if self.memory and err.path and message.startswith(err.path + " "):
            # toolfs names files relative to the root; the model knows /memories/...
            message = self._model_path(err.path) + message[len(err.path):]
        return err if message == err.message else _Refusal(message, err)

    def _is_a_directory(self, shown: str) -> str:
        """A command other than view on a directory."""
        if self.memory:
            return f"The path {shown} is not a file."  # [memory SDK] str_replace, insert
        # [editor] validate_path
        return (f"The path {shown} is a directory and only the `view` command can be used "
                "on directories")

    def _shown_paths(self, paths: list[str]) -> list[str]:
        if not self.memory:
            return list(paths)
        return [f"{MEMORY_ROOT}/{p}" for p in paths]

    def _model_path(self, display: str) -> str:
        """How a workspace display path is shown to the model."""
        if not self.memory:
            return display
        return MEMORY_ROOT if display in ("", ".") else f"{MEMORY_ROOT}/{display}"

    def _call(self, fn: Callable[[], T], shown: str, given: str) -> T:
        try:
            return fn()
        except FsError as err:
            translated = self._translate(err, shown, given)
            if translated is err:
                raise
            raise translated from err


    def _target(self, rel: str, shown: str, raw: str) -> Target:
        """``rel`` confined by the policy filesystem: where it leads, symlinks followed
        (``outside_root`` in the reference wording)."""
        return self._call(lambda: self.fs.resolve(rel), shown, raw)

    def _is_file(self, rel: str, shown: str, raw: str) -> bool:
        return self._call(lambda: self.fs.isfile(rel), shown, raw)

    def _exists(self, rel: str) -> bool:
        """A file, or a directory with a file below it (object stores have no empty
        directories)."""
        if self.fs.isfile(rel):
            return True
        return next(iter(self.fs.list_files(rel)), None) is not None
