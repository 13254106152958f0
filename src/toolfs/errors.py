"""The one error type of toolfs, and its stable codes.

Every failure a tool call can meet surfaces as :class:`FsError` with one of a fixed
set of codes. Where a Python builtin means the same thing, the raised class also
derives from it, so ordinary ``except FileNotFoundError`` code keeps working::

    FsError                                   code
    ├── InvalidArguments  (ValueError)        invalid_arguments
    ├── NotFound          (FileNotFoundError) not_found
    ├── NotAFile          (IsADirectoryError) not_a_file
    ├── NotText           (ValueError)        not_text
    ├── TooLarge          (ValueError)        too_large
    ├── NotObserved       (PermissionError)   not_observed
    ├── Stale             (PermissionError)   stale
    ├── NoMatch           (ValueError)        no_match
    ├── AmbiguousMatch    (ValueError)        ambiguous_match
    ├── OutsideRoot       (PermissionError)   outside_root
    ├── Denied            (PermissionError)   denied
    ├── BackendError      (OSError)           backend_error
    └── Unsupported       (NotImplementedError) unsupported

Build errors with :func:`fs_error` (or the subclasses directly); foreign exceptions
are translated at the boundary with ``raise fs_error(...) from exc`` so the cause is
kept as ``__cause__``.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

ErrorCode = Literal[
    "invalid_arguments",
    "not_found",
    "not_a_file",
    "not_text",
    "too_large",
    "not_observed",
    "stale",
    "no_match",
    "ambiguous_match",
    "outside_root",
    "denied",
    "backend_error",
    "unsupported",
]

ERROR_CODES: frozenset[str] = frozenset(get_args(ErrorCode))

# What the model should do next, per code; shown by renderers after the message.
ADVICE: dict[str, str] = {
    "invalid_arguments": "Fix the arguments and call the tool again.",
    "not_found": "Check the path; create the file with write if it should exist.",
    "not_a_file": "Give the path of a file, not a directory.",
    "not_text": "Only UTF-8 text files can be read or edited with these tools.",
    "too_large": "Read the file in windows with offset and limit; it cannot be rewritten whole.",
    "not_observed": "Read the file first, then retry the change.",
    "stale": "The file changed since you last read it. Read it again, then redo the change.",
    "no_match": "Read the file and copy old_string exactly, including whitespace.",
    "ambiguous_match": "Add surrounding context to old_string, or set replace_all to true.",
    "outside_root": "Use a path inside the workspace root.",
    "denied": "This path or operation is not allowed in this workspace.",
    "backend_error": "The storage backend failed; retrying later may help.",
    "unsupported": "This operation is not available on this backend.",
}


class FsError(Exception):
    """A tool-level failure with a stable ``code``.

    Attributes:
        code: one of :data:`ERROR_CODES`.
        message: a sentence for the model and the user.
        path: the display path involved (relative to the workspace root), if any.
        details: structured facts (line numbers, caps, suggestions, ...), JSON-safe.
    """

    code: ErrorCode = "backend_error"

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        details: dict[str, Any] | None = None,
        code: ErrorCode | None = None,
    ) -> None:
        if code is not None:
            self.code = code
        if self.code not in ERROR_CODES:  # pragma: no cover - guarded by Literal
            raise ValueError(f"unknown error code {self.code!r}")
        self.message = message
        self.path = path
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(message)

    @property
    def advice(self) -> str:
        """What the model should do next."""
        return ADVICE[self.code]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe view: ``{"code", "message", "path", "details"}``."""
        return {"code": self.code, "message": self.message, "path": self.path,
                "details": self.details}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
                f"path={self.path!r})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.code, self.message, self.path, self.details))


class InvalidArguments(FsError, ValueError):
    code = "invalid_arguments"


class NotFound(FsError, FileNotFoundError):
    code = "not_found"


class NotAFile(FsError, IsADirectoryError):
    code = "not_a_file"


class NotText(FsError, ValueError):
    code = "not_text"


class TooLarge(FsError, ValueError):
    code = "too_large"


class NotObserved(FsError, PermissionError):
    code = "not_observed"


class Stale(FsError, PermissionError):
    code = "stale"


class NoMatch(FsError, ValueError):
    code = "no_match"


class AmbiguousMatch(FsError, ValueError):
    code = "ambiguous_match"


class OutsideRoot(FsError, PermissionError):
    code = "outside_root"


class Denied(FsError, PermissionError):
    code = "denied"


class BackendError(FsError, OSError):
    code = "backend_error"


class Unsupported(FsError, NotImplementedError):
    code = "unsupported"


_BY_CODE: dict[str, type[FsError]] = {
    cls.code: cls
    for cls in (InvalidArguments, NotFound, NotAFile, NotText, TooLarge, NotObserved, Stale,
                NoMatch, AmbiguousMatch, OutsideRoot, Denied, BackendError, Unsupported)
}


def fs_error(
    code: ErrorCode, message: str, *, path: str | None = None,
    details: dict[str, Any] | None = None,
) -> FsError:
    """Build the :class:`FsError` subclass that matches ``code``."""
    return _BY_CODE[code](message, path=path, details=details)


def _rebuild(code: ErrorCode, message: str, path: str | None, details: dict[str, Any]) -> FsError:
    return fs_error(code, message, path=path, details=details)
